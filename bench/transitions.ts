/**
 * Step Functions state transitions per partition and per execution, counted on the state
 * machine `cdk deploy` deploys (synthesized locally, as `compactor run` does): the states a
 * partition passes on the happy path inside the Distributed Map's item processor, and the
 * states of the execution around it. Standard workflows bill each state entered; retries add one
 * per retry (none assumed).
 */

import { synthesizeWorkflow } from '../functions/local-runner/run.ts';

interface StateDef {
  readonly Type: string;
  readonly Next?: string;
  readonly End?: boolean;
  readonly Default?: string;
  readonly Choices?: readonly { readonly Next: string }[];
  readonly ItemProcessor?: { readonly StartAt: string; readonly States: Record<string, StateDef> };
}

export interface TransitionCount {
  /** States one partition enters (its child execution of the Distributed Map). */
  readonly perPartition: number;
  readonly partitionStates: readonly string[];
  /** States the parent execution enters (the Map counted once). */
  readonly perExecution: number;
  readonly executionStates: readonly string[];
}

/** Follows Next from startAt; a Choice takes `pick`'s branch. */
function walk(
  states: Record<string, StateDef>,
  startAt: string,
  pick: (state: StateDef, states: Record<string, StateDef>) => string | undefined,
): string[] {
  const path: string[] = [];
  let name: string | undefined = startAt;
  while (name !== undefined) {
    const state: StateDef | undefined = states[name];
    if (!state) throw new Error(`state ${name} is not in the definition`);
    if (path.includes(name)) throw new Error(`the happy path loops at ${name}`);
    path.push(name);
    if (state.End || state.Type === 'Succeed' || state.Type === 'Fail') break;
    name = state.Type === 'Choice' ? pick(state, states) : state.Next;
  }
  return path;
}

export async function countTransitions(): Promise<TransitionCount> {
  const { definition } = await synthesizeWorkflow();
  const top = definition as unknown as { StartAt: string; States: Record<string, StateDef> };
  const map = Object.values(top.States).find((s) => s.Type === 'Map' && s.ItemProcessor);
  if (!map?.ItemProcessor) throw new Error('no Distributed Map in the state machine');
  // A partition that compacts: every Choice takes its Default (the "staged" branch).
  const partitionStates = walk(map.ItemProcessor.States, map.ItemProcessor.StartAt, (s) => s.Default);
  // The execution: every Choice takes the branch that reaches the Map.
  const executionStates = walk(top.States, top.StartAt, (s, states) => {
    const toMap = s.Choices?.find((c) => states[c.Next]?.Type === 'Map');
    return toMap?.Next ?? s.Default;
  });
  return {
    perPartition: partitionStates.length,
    partitionStates,
    perExecution: executionStates.length,
    executionStates,
  };
}
