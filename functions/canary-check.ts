/**
 * The scheduled canary's check after its compaction execution: the canary's rows exactly, once
 * each, through the visible view, and no manifest, staging, quarantine or failure record of it
 * left (core/canary.ts); anything else throws CanaryFailedError, which fails the canary's
 * execution after its removal. Thin: validate the input, build deps, call one core function.
 */

import { canaryOf, verifyCanary } from './core/canary.ts';
import { ConfigError } from './core/errors.ts';
import { envDeps, envObservability } from './lambda/env-deps.ts';
import { type CanaryEvent, parseCanaryEvent } from './lambda/events.ts';
import { createLambdaHandler, type DepsFactory, type HandlerDeps } from './lambda/handler-kit.ts';
import { engineSql, lambdaEngine } from './lambda/lambda-engine.ts';
import type { Observability } from './lambda/telemetry.ts';

export async function check(
  event: CanaryEvent,
  deps: HandlerDeps,
): Promise<{ readonly rows: string; readonly state: string }> {
  if (event.hourStart === undefined) throw new ConfigError('canary input: "hourStart" is required');
  const canary = canaryOf(deps.config, event.id, event.hourStart);
  return verifyCanary(deps.store, deps.config, await engineSql(deps), canary);
}

export function createHandler(getDeps: DepsFactory, observability: Observability) {
  return createLambdaHandler(parseCanaryEvent, check, getDeps, observability);
}

export const handler = createHandler(envDeps(lambdaEngine), envObservability());
