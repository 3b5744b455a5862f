/**
 * Walking a state machine definition as JSON: its Task states (to bind each to a handler), a
 * state by name at any depth, and the edits the local runner makes to the graph (a transition
 * redirected, the states a redrive can no longer reach removed).
 */

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };
export type StateDef = JsonObject;

/** A Task that starts a state machine's execution (the Step Functions integration, any pattern). */
export function startsExecution(state: StateDef): boolean {
  return typeof state.Resource === 'string' && /:states:::states:startExecution(\.|$)/.test(state.Resource);
}

/**
 * Every Task state, keyed by state name (names must be unique to bind them), with its Lambda
 * function name, or undefined for the emulation's own states and for a state machine it starts.
 */
export function taskFunctions(
  states: Record<string, StateDef>,
  out = new Map<string, string | undefined>(),
): Map<string, string | undefined> {
  for (const [name, state] of Object.entries(states)) {
    if (state.Type === 'Task') {
      const params = state.Parameters as JsonObject | undefined;
      const fn = params?.FunctionName;
      if (typeof fn !== 'string' && params?.__local === undefined && !startsExecution(state)) {
        throw new Error(`task state "${name}" has no FunctionName to bind locally`);
      }
      if (out.has(name))
        throw new Error(`state name "${name}" is used twice; local binding needs unique names`);
      out.set(name, typeof fn === 'string' ? fn : undefined);
    }
    const processor = (state.ItemProcessor ?? state.Iterator) as JsonObject | undefined;
    if (processor) taskFunctions(processor.States as Record<string, StateDef>, out);
    for (const branch of (state.Branches as JsonObject[] | undefined) ?? []) {
      taskFunctions(branch.States as Record<string, StateDef>, out);
    }
  }
  return out;
}

export function redirect(states: Record<string, StateDef>, from: string, to: string): void {
  for (const state of Object.values(states)) {
    if (state.Next === from) state.Next = to;
    if (state.Default === from) state.Default = to;
    for (const choice of (state.Choices as JsonObject[] | undefined) ?? [])
      if (choice.Next === from) choice.Next = to;
    for (const catcher of (state.Catch as JsonObject[] | undefined) ?? [])
      if (catcher.Next === from) catcher.Next = to;
  }
}

/** A redrive starts mid-graph; the states before it are never entered, and ASL forbids unreachable states. */
export function pruneUnreachable(def: JsonObject): void {
  const states = def.States as Record<string, StateDef>;
  const reachable = new Set<string>();
  const visit = (name: unknown) => {
    if (typeof name !== 'string' || reachable.has(name) || !states[name]) return;
    reachable.add(name);
    const state = states[name];
    visit(state.Next);
    visit(state.Default);
    for (const choice of (state.Choices as JsonObject[] | undefined) ?? []) visit(choice.Next);
    for (const catcher of (state.Catch as JsonObject[] | undefined) ?? []) visit(catcher.Next);
  };
  visit(def.StartAt);
  for (const name of Object.keys(states)) if (!reachable.has(name)) delete states[name];
}

export function findState(states: Record<string, StateDef>, name: string): StateDef | undefined {
  if (states[name]) return states[name];
  for (const state of Object.values(states)) {
    const processor = (state.ItemProcessor ?? state.Iterator) as JsonObject | undefined;
    const found = processor ? findState(processor.States as Record<string, StateDef>, name) : undefined;
    if (found) return found;
    for (const branch of (state.Branches as JsonObject[] | undefined) ?? []) {
      const inBranch = findState(branch.States as Record<string, StateDef>, name);
      if (inBranch) return inBranch;
    }
  }
  return undefined;
}
