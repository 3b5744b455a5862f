/**
 * The deployed Lambda handlers, bound in-process for local runs: the same middy stack and code,
 * with dependencies for a local folder (or any S3-compatible endpoint) instead of the environment.
 */

import { Logger } from '@aws-lambda-powertools/logger';
import type { LogItemExtraInput, LogItemMessage } from '@aws-lambda-powertools/logger/types';
import type { Context } from 'aws-lambda';
import { createHandler as canaryCheck } from '../canary-check.ts';
import { createHandler as canaryRemove } from '../canary-remove.ts';
import { createHandler as canarySeed } from '../canary-seed.ts';
import { createHandler as clearManifest } from '../clear-manifest.ts';
import { createHandler as compact } from '../compact.ts';
import { type CanaryStepName, SERVICE_NAME, type StepName } from '../contract.ts';
import { createHandler as deleteInputs } from '../delete-inputs.ts';
import type { DepsFactory } from '../lambda/handler-kit.ts';
import type { Observability } from '../lambda/telemetry.ts';
import { createHandler as plan } from '../plan.ts';
import { createHandler as publish } from '../publish.ts';
import { createHandler as recover } from '../recover.ts';
import { createHandler as summary } from '../summary.ts';
import { createHandler as verify } from '../verify.ts';
import { timed } from './timing-spans.ts';
import type { LambdaInvoker } from './workflow.ts';

/** Each step's handler by the name the stack tags its function with (COMPACTOR_STEP): the contract's steps. */
export const STEP_HANDLERS = {
  recover,
  plan,
  compact,
  publish,
  verify,
  'delete-inputs': deleteInputs,
  'clear-manifest': clearManifest,
  summary,
} as const satisfies Record<StepName, unknown>;

/** The scheduled canary's handlers by the name its functions are tagged with. */
export const CANARY_HANDLERS = {
  'canary-seed': canarySeed,
  'canary-check': canaryCheck,
  'canary-remove': canaryRemove,
} as const satisfies Record<CanaryStepName, unknown>;

export type { StepName };

export function isStepName(name: string): name is StepName {
  return Object.hasOwn(STEP_HANDLERS, name);
}

/** Where a local run's handler logs go: warnings (a retention rule that matches nothing) and errors. */
export type LogSink = (level: 'warn' | 'error', message: string, details: Record<string, unknown>) => void;

/**
 * Local runs print no Powertools JSON (the CLI prints progress) and emit no EMF; warnings and
 * errors (a quarantine, a failed partition) reach the given sink so the CLI can show them.
 */
class LocalLogger extends Logger {
  readonly #onLog: LogSink | undefined;

  constructor(onLog?: LogSink) {
    super({ serviceName: SERVICE_NAME, logLevel: 'SILENT' });
    this.#onLog = onLog;
  }

  override warn(input: LogItemMessage, ...extra: LogItemExtraInput): void {
    this.#forward('warn', input, extra);
  }

  override error(input: LogItemMessage, ...extra: LogItemExtraInput): void {
    this.#forward('error', input, extra);
  }

  #forward(level: 'warn' | 'error', input: LogItemMessage, extra: LogItemExtraInput): void {
    const message = typeof input === 'string' ? input : input.message;
    const details = Object.assign({}, ...extra.filter((e) => typeof e === 'object' && e !== null)) as Record<
      string,
      unknown
    >;
    this.#onLog?.(level, message, details);
  }
}

export function localObservability(onLog?: LogSink): Observability {
  return { logger: new LocalLogger(onLog) };
}

/** Told of each step that returned: its payload, its result and how long the handler ran (ms). */
export type StepObserver = (step: StepName, payload: unknown, result: unknown, elapsedMs: number) => void;

/**
 * An invoker that calls, for each function name the definition uses, the handler of the step
 * that function runs. An unknown function name is an error, never a silent no-op.
 */
export function localInvoker<S extends string = StepName>(
  functionSteps: ReadonlyMap<string, S>,
  getDeps: DepsFactory,
  onResult?: (step: S, payload: unknown, result: unknown, elapsedMs: number) => void,
  onLog?: LogSink,
  table: Record<S, (getDeps: DepsFactory, observability: Observability) => unknown> = STEP_HANDLERS as never,
): LambdaInvoker {
  const observability = localObservability(onLog);
  const handlers = new Map(
    [...new Set(functionSteps.values())].map((step) => [
      step,
      table[step](getDeps, observability) as (payload: unknown, context: Context) => Promise<unknown>,
    ]),
  );
  let request = 0;
  return async (functionName, payload) => {
    const step = functionSteps.get(functionName);
    const handler = step ? handlers.get(step) : undefined;
    if (!step || !handler) throw new Error(`no local handler is bound to function ${functionName}`);
    const context = {
      functionName: `local-${step}`,
      functionVersion: '$LATEST',
      awsRequestId: `local-${++request}`,
      memoryLimitInMB: '0',
      invokedFunctionArn: functionName,
      callbackWaitsForEmptyEventLoop: false,
    } as unknown as Context;
    const started = performance.now();
    const result = (await timed(`step: ${step}`, () => handler(payload, context))) as never;
    onResult?.(step, payload, result, performance.now() - started);
    return result;
  };
}
