/**
 * Verify step: HEADs every published output (size, checksum, job id); a mismatch
 * quarantines the job and deletes nothing.
 * Thin: validate the input, build deps, call one core function, return a small result.
 */

import { type JobRef, verifyStep } from './core/protocol.ts';
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

export async function verify(job: JobRef, deps: HandlerDeps, tools: HandlerTools): Promise<StepOutput> {
  const result = await verifyStep({ ...deps, signal: tools.signal, onEvent: onJobEvent(tools) }, job);
  return stepOutput(result);
}

export function createHandler(getDeps: DepsFactory, observability: Observability) {
  return createLambdaHandler(parseJobRef, verify, getDeps, observability);
}

export const handler = createHandler(envDeps(), envObservability());
