/**
 * The scheduled canary's last step, after a success and after any failure alike: deletes every
 * object under the canary's table, unless a live manifest still names it (core/canary.ts
 * releaseCanary). A canary it could not remove throws CanaryFailedError. Thin: validate the
 * input, build deps, call one core function.
 */

import { canaryOf, type Removal, releaseCanary } from './core/canary.ts';
import { CanaryFailedError } from './core/errors.ts';
import { envDeps, envObservability } from './lambda/env-deps.ts';
import { type CanaryEvent, parseCanaryEvent } from './lambda/events.ts';
import { createLambdaHandler, type DepsFactory, type HandlerDeps } from './lambda/handler-kit.ts';
import type { Observability } from './lambda/telemetry.ts';

export async function remove(event: CanaryEvent, deps: HandlerDeps): Promise<Removal> {
  // The table's prefix does not depend on the hour.
  const canary = canaryOf(deps.config, event.id, event.hourStart ?? 0);
  const removal = await releaseCanary(deps.store, deps.config, canary);
  if (!removal.ok) throw new CanaryFailedError(removal.detail);
  return removal;
}

export function createHandler(getDeps: DepsFactory, observability: Observability) {
  return createLambdaHandler(parseCanaryEvent, remove, getDeps, observability);
}

export const handler = createHandler(envDeps(), envObservability());
