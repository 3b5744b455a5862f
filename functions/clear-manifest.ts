/**
 * Clear step: removes the job's staging objects, then its manifest; the job is done.
 * Thin: validate the input, build deps, call one core function, return a small result.
 */

import { clearStep, type JobRef } from './core/protocol.ts';
import { envDeps, envObservability } from './lambda/env-deps.ts';
import { parseJobRef, type StepOutput, stepOutput } from './lambda/events.ts';
import {
  createLambdaHandler,
  type DepsFactory,
  type HandlerDeps,
  type HandlerTools,
  type Observability,
} from './lambda/handler-kit.ts';
import { onJobEvent, recordJobDone } from './lambda/telemetry.ts';

export async function clearManifest(
  job: JobRef,
  deps: HandlerDeps,
  tools: HandlerTools,
): Promise<StepOutput> {
  const result = await clearStep({ ...deps, signal: tools.signal, onEvent: onJobEvent(tools) }, job);
  recordJobDone(tools, result);
  return stepOutput(result);
}

export function createHandler(getDeps: DepsFactory, observability: Observability) {
  return createLambdaHandler(parseJobRef, clearManifest, getDeps, observability);
}

export const handler = createHandler(envDeps(), envObservability());
