/**
 * aws-local-stepfunctions as the local runner uses it, for the parent execution and each child
 * alike: a definition compiled (validated unless the same text passed before), an execution
 * started with the Task handlers bound and its Context object set, and a failed execution's
 * error and cause as Step Functions reports them.
 */

import { type ExecutionError, StateMachine, type StateMachineDefinition } from 'aws-local-stepfunctions';
import type { Json, JsonObject } from './asl-graph.ts';
import { markValidated, validatedKey, wasValidated } from './definition-cache.ts';

/** Where definitions the validator accepted are marked (definition-cache.ts validatedKey). */
export interface ValidatedCache {
  readonly dir: string;
  readonly root: string;
}

/** Each Task state's handler, by state name. */
export type TaskHandlers = Record<string, (input: Json) => Promise<Json>>;

const VALIDATION = { checkArn: false, checkPaths: true } as const;

/** The interpreter for a definition, validated unless the same text passed before. */
export async function compileDefinition(
  definition: JsonObject,
  cache: ValidatedCache | undefined,
): Promise<StateMachine> {
  const build = (noValidate: boolean) =>
    new StateMachine(definition as unknown as StateMachineDefinition, {
      validationOptions: noValidate ? { ...VALIDATION, noValidate } : VALIDATION,
    });
  if (!cache) return build(false);
  const key = validatedKey(cache.root, definition, VALIDATION);
  if (await wasValidated(cache.dir, key)) return build(true);
  const machine = build(false);
  await markValidated(cache.dir, key);
  return machine;
}

export interface StartedExecution {
  readonly id: string;
  readonly name: string;
  /** The Context object's Execution.Input: a redrive's is its first execution's input. */
  readonly executionInput: JsonObject;
  readonly handlers: TaskHandlers;
  readonly retryOverrides: Record<string, number>;
}

/** Starts one execution of `machine` with `input`, its Tasks bound to `handlers`. */
export function startExecution(machine: StateMachine, input: Json, execution: StartedExecution) {
  return machine.run(input as JsonObject, {
    overrides: {
      taskResourceLocalHandlers: execution.handlers,
      retryIntervalOverrides: execution.retryOverrides,
    },
    context: {
      Execution: {
        Id: execution.id,
        Name: execution.name,
        Input: execution.executionInput,
        StartTime: new Date().toISOString(),
      },
    },
  });
}

/** A failed execution's error name and cause: the error its failing state raised, if it names one. */
export function failureOf(error: ExecutionError): { readonly error: string; readonly cause: string } {
  const cause = error.cause as { name?: string; message?: string } | undefined;
  return { error: cause?.name ?? error.name, cause: cause?.message ?? error.message };
}
