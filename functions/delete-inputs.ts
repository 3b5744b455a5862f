/**
 * Delete-inputs step: DeleteObjects in batches of 1,000, each key conditioned on the ETag
 * that was compacted; a replaced input is kept as new data.
 * Thin: validate the job, call one core function, return a small result.
 */

import { deleteInputsStep } from './core/protocol.ts';
import { envDeps, envObservability } from './lambda/env-deps.ts';
import { jobStepHandler } from './lambda/handler-kit.ts';

export const { run, createHandler } = jobStepHandler(deleteInputsStep);

export const handler = createHandler(envDeps(), envObservability());
