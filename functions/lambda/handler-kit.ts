/**
 * What every Lambda shares: middy with an early-timeout abort signal, Powertools logging and
 * EMF metrics, and dependencies built once per container by a factory. The deployed handlers
 * use the factory that reads the environment; the local runner binds the same handlers with a
 * factory for a local store, so a local run goes through the same middleware and code.
 */

import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import { logMetrics } from '@aws-lambda-powertools/metrics/middleware';
import middy from '@middy/core';
import type { Context } from 'aws-lambda';
import type { CompactorConfig } from '../core/config.ts';
import type { Clock, Engine } from '../core/engine.ts';
import type { ObjectStore } from '../core/object-store.ts';
import type { JobRef, StepDeps, StepResult } from '../core/protocol.ts';
import { parseJobRef } from './events.ts';
import { type Observability, onJobEvent } from './telemetry.ts';

export interface HandlerDeps {
  readonly store: ObjectStore;
  /** The bucket name the state machine's ItemReader and ResultWriter address. */
  readonly bucket: string;
  readonly config: CompactorConfig;
  readonly clock: Clock;
  /** Created on first use and kept for warm invocations (only the compact step needs it). */
  readonly engine: () => Promise<Engine>;
  readonly workDir: string;
  /**
   * Empties the work dir of what an earlier invocation left (a Lambda sandbox runs one invocation
   * at a time). Absent where several jobs share one work dir at once (the local runner).
   */
  readonly resetWorkDir?: () => Promise<void>;
  readonly isOwnerAlive: (executionId: string) => Promise<boolean>;
  readonly randomHex: () => string;
  /**
   * The ResultWriter manifests of an execution's Map Runs, oldest first: how the Summary of an
   * execution that failed finds its results. Absent where no step needs it.
   */
  readonly mapRunManifests?: (execution: {
    readonly id: string;
    readonly name: string;
  }) => Promise<readonly string[]>;
}

export interface HandlerTools extends Observability {
  readonly signal: AbortSignal;
}

export type DepsFactory = () => Promise<HandlerDeps>;

/** Stops a step this long before the Lambda timeout, so it ends cleanly between side effects. */
export const EARLY_TIMEOUT_MS = 15_000;

export function createLambdaHandler<Event, Result>(
  parse: (event: unknown) => Event,
  run: (event: Event, deps: HandlerDeps, tools: HandlerTools) => Promise<Result>,
  getDeps: DepsFactory,
  observability: Observability,
) {
  const handler = middy<unknown, Result, Error, Context>({ timeoutEarlyInMillis: EARLY_TIMEOUT_MS }).use(
    injectLambdaContext(observability.logger, { resetKeys: true }),
  );
  if (observability.metrics) handler.use(logMetrics(observability.metrics, { captureColdStartMetric: true }));
  return handler.handler(async (event, _context, { signal }) =>
    run(parse(event), await getDeps(), { ...observability, signal }),
  );
}

/** Caches the first successful result of an async factory (one per container). */
export function once<T>(factory: () => Promise<T>): () => Promise<T> {
  let value: Promise<T> | undefined;
  return () => {
    value ??= factory().catch((error: unknown) => {
      value = undefined;
      throw error;
    });
    return value;
  };
}

/**
 * A Lambda for one protocol step over a job: validate the job, run the step with the deps and
 * the abort signal, return its small result. Publish, verify, delete-inputs and clear-manifest
 * are each exactly this.
 */
export function jobStepHandler(
  step: (deps: StepDeps, job: JobRef) => Promise<StepResult>,
  after?: (tools: HandlerTools, result: StepResult) => void,
) {
  const run = async (job: JobRef, deps: HandlerDeps, tools: HandlerTools): Promise<StepResult> => {
    const result = await step({ ...deps, signal: tools.signal, onEvent: onJobEvent(tools) }, job);
    after?.(tools, result);
    return result;
  };
  return {
    run,
    createHandler: (getDeps: DepsFactory, observability: Observability) =>
      createLambdaHandler(parseJobRef, run, getDeps, observability),
  };
}
