/**
 * The scheduled canary's first step: writes the canary table of the id the state machine drew
 * (core/canary.ts) and returns what the next steps need: the table to scope the compaction
 * execution to (`only`), the time it should plan at, and the hour the canary was written in.
 * Thin: validate the input, build deps, call one core function, return a small result.
 */

import { seedCanary } from './core/canary.ts';
import { envDeps, envObservability } from './lambda/env-deps.ts';
import { type CanaryEvent, parseCanaryEvent } from './lambda/events.ts';
import { createLambdaHandler, type DepsFactory, type HandlerDeps } from './lambda/handler-kit.ts';
import { engineSql, lambdaEngine } from './lambda/lambda-engine.ts';
import type { Observability } from './lambda/telemetry.ts';

export interface CanarySeedOutput {
  readonly id: string;
  /** The canary's table path: the compaction execution's `only`. */
  readonly table: string;
  /** The compaction execution's `now` (ISO). */
  readonly planAt: string;
  readonly hourStart: number;
  readonly files: number;
  readonly rows: number;
}

export async function seed(event: CanaryEvent, deps: HandlerDeps): Promise<CanarySeedOutput> {
  const canary = await seedCanary(
    deps.store,
    deps.config,
    await engineSql(deps),
    event.id,
    deps.clock.now().getTime(),
  );
  return {
    id: event.id,
    table: canary.table,
    planAt: canary.planAt,
    hourStart: canary.hourStart,
    files: canary.keys.length,
    rows: canary.rows,
  };
}

export function createHandler(getDeps: DepsFactory, observability: Observability) {
  return createLambdaHandler(parseCanaryEvent, seed, getDeps, observability);
}

export const handler = createHandler(envDeps(lambdaEngine), envObservability());
