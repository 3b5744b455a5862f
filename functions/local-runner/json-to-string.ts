/**
 * States.JsonToString, evaluated as AWS does. aws-local-stepfunctions strips every backslash
 * from an intrinsic function's string result (BaseIntrinsicFunction.call), so the JSON text of a
 * value holding a quote or a backslash comes out invalid; AWS returns "a string representation
 * of the JSON" (https://docs.aws.amazon.com/step-functions/latest/dg/intrinsic-functions.html#asl-intrsc-func-json-manipulate).
 * A Pass state whose Parameters call it on a path becomes a Task (bound by workflow.ts) that
 * gets the path's value through the same Parameters and returns it as JSON text; Task and Pass
 * place their result by the same ResultPath, so the state's output is the same.
 */

import type { Json, JsonObject, StateDef } from './asl-graph.ts';

export const JSON_TO_STRING = 'JsonToString';
const CALL = /^States\.JsonToString\((\$[^()]*)\)$/;

/** Rewrites, in place and at any depth, the Pass states that call States.JsonToString on a path. */
export function emulateJsonToString(states: Record<string, StateDef>): void {
  for (const state of Object.values(states)) {
    const processor = (state.ItemProcessor ?? state.Iterator) as JsonObject | undefined;
    if (processor) emulateJsonToString(processor.States as Record<string, StateDef>);
    for (const branch of (state.Branches as JsonObject[] | undefined) ?? []) {
      emulateJsonToString(branch.States as Record<string, StateDef>);
    }
    const parameters = state.Parameters as JsonObject | undefined;
    if (state.Type !== 'Pass' || parameters === undefined) continue;
    const stringified = Object.entries(parameters).filter(
      ([key, value]) => key.endsWith('.$') && typeof value === 'string' && CALL.test(value),
    );
    if (stringified.length === 0) continue;
    const rewritten: JsonObject = { ...parameters, __local: JSON_TO_STRING };
    for (const [key, value] of stringified)
      rewritten[key] = (CALL.exec(value as string) as RegExpExecArray)[1] as string;
    rewritten.__stringify = stringified.map(([key]) => key.slice(0, -2));
    state.Type = 'Task';
    state.Resource = 'arn:aws:states:::lambda:invoke';
    state.Parameters = rewritten;
  }
}

/** The rewritten state's result: its Parameters' values, the named ones as JSON text. */
export function jsonToStringResult(taskInput: JsonObject): JsonObject {
  const { __local: _, __stringify: keys, ...values } = taskInput;
  for (const key of (keys as string[] | undefined) ?? []) values[key] = JSON.stringify(values[key] as Json);
  return values;
}
