/**
 * Step Functions state transitions, counted on a state machine definition (the one `cdk deploy`
 * deploys, synthesized): the states one Map item's child enters around its jobs, the states each
 * job's chain enters on the happy path, and the states of the execution around the Distributed
 * Map, split into those entered once and those entered once per wave (the loop that runs one Map
 * Run per wave). Standard workflows bill each state entered; retries add one per retry (none
 * assumed).
 */

interface StateDef {
  readonly Type: string;
  readonly Next?: string;
  readonly End?: boolean;
  readonly Default?: string;
  readonly Choices?: readonly { readonly Next: string }[];
  readonly ItemProcessor?: { readonly StartAt: string; readonly States: Record<string, StateDef> };
}

export interface StateMachineStates {
  readonly StartAt: string;
  readonly States: Record<string, StateDef>;
}

export interface TransitionCount {
  /** States one Map item's child enters besides its jobs' chains (its inline Map among them). */
  readonly perItem: number;
  readonly itemStates: readonly string[];
  /** States one partition's job enters (its chain, inside its item's child). */
  readonly perPartition: number;
  readonly partitionStates: readonly string[];
  /** States the parent execution enters once, whatever the number of waves. */
  readonly perExecution: number;
  readonly executionStates: readonly string[];
  /** States the parent enters once per wave (the Map among them). */
  readonly perWave: number;
  readonly waveStates: readonly string[];
}

const nextOf = (state: StateDef): string[] =>
  [...(state.Choices ?? []).map((c) => c.Next), state.Default, state.Next].filter(
    (n): n is string => n !== undefined,
  );

/** Whether a Map state is reachable from `from`. */
function reachesMap(states: Record<string, StateDef>, from: string, seen = new Set<string>()): boolean {
  if (seen.has(from)) return false;
  seen.add(from);
  const state = states[from];
  if (!state) return false;
  return state.Type === 'Map' || nextOf(state).some((n) => reachesMap(states, n, seen));
}

/**
 * Follows the path from StartAt: a Choice takes the first branch that still reaches a Map, once
 * past the Map the branch that does not go back (a branch back to a state already entered is the
 * loop, its states counted per wave).
 */
function executionPath(top: StateMachineStates): { once: string[]; loop: string[] } {
  const path: string[] = [];
  let loop: string[] = [];
  let pastMap = false;
  let name: string | undefined = top.StartAt;
  while (name !== undefined) {
    const state: StateDef | undefined = top.States[name];
    if (!state) throw new Error(`state ${name} is not in the definition`);
    if (path.includes(name)) throw new Error(`the execution's path loops at ${name}`);
    path.push(name);
    if (state.Type === 'Map') pastMap = true;
    if (state.End || state.Type === 'Succeed' || state.Type === 'Fail') break;
    if (state.Type !== 'Choice') {
      name = state.Next;
      continue;
    }
    const branches = nextOf(state);
    if (!pastMap) {
      name = branches.find((b) => reachesMap(top.States, b));
      continue;
    }
    const back = branches.find((b) => path.includes(b));
    if (back !== undefined) loop = path.slice(path.indexOf(back));
    name = branches.find((b) => !path.includes(b));
  }
  return { once: path.filter((s) => !loop.includes(s)), loop };
}

/** A partition that compacts: every Choice takes its Default (the "staged" branch). */
function partitionPath(states: Record<string, StateDef>, startAt: string): string[] {
  const path: string[] = [];
  let name: string | undefined = startAt;
  while (name !== undefined) {
    const state: StateDef | undefined = states[name];
    if (!state) throw new Error(`state ${name} is not in the definition`);
    if (path.includes(name)) throw new Error(`the partition's path loops at ${name}`);
    path.push(name);
    if (state.End || state.Type === 'Succeed' || state.Type === 'Fail') break;
    name = state.Type === 'Choice' ? state.Default : state.Next;
  }
  return path;
}

export function countTransitions(definition: StateMachineStates): TransitionCount {
  const map = Object.values(definition.States).find((s) => s.Type === 'Map' && s.ItemProcessor);
  if (!map?.ItemProcessor) throw new Error('no Distributed Map in the state machine');
  const child = map.ItemProcessor;
  const childStates = partitionPath(child.States, child.StartAt);
  // The jobs' inline Map inside the child; a child without one is one job's chain.
  const jobs = childStates.map((name) => child.States[name]).find((s) => s?.Type === 'Map')?.ItemProcessor;
  const itemStates = jobs ? childStates : [];
  const partitionStates = jobs ? partitionPath(jobs.States, jobs.StartAt) : childStates;
  const { once, loop } = executionPath(definition);
  return {
    perItem: itemStates.length,
    itemStates,
    perPartition: partitionStates.length,
    partitionStates,
    perExecution: once.length,
    executionStates: once,
    perWave: loop.length,
    waveStates: loop,
  };
}
