/**
 * Delete-inputs step: DeleteObjects in batches of 1,000, each key conditioned on the ETag
 * that was compacted; a replaced input is kept as new data.
 * Thin: validate the input, build deps, call one core function, return a small result.
 */

import { deleteInputsStep, type JobRef } from './core/protocol.ts';
import { envDeps, envObservability } from './lambda/env-deps.ts';
import { parseJobRef, type StepOutput, stepOutput } from './lambda/events.ts';
import {
  createLambdaHandler,
  type DepsFactory,
  type HandlerDeps,
  type HandlerTools,
  type Observability,
} from './lambda/handler-kit.ts';
import { onJobEvent } from './lambda/telemetry.ts';

export async function deleteInputs(job: JobRef, deps: HandlerDeps, tools: HandlerTools): Promise<StepOutput> {
  const result = await deleteInputsStep({ ...deps, signal: tools.signal, onEvent: onJobEvent(tools) }, job);
  return stepOutput(result);
}

export function createHandler(getDeps: DepsFactory, observability: Observability) {
  return createLambdaHandler(parseJobRef, deleteInputs, getDeps, observability);
}

export const handler = createHandler(envDeps(), envObservability());
