/**
 * Verify step: HEADs every published output (size, checksum, job id); a mismatch
 * quarantines the job and deletes nothing.
 * Thin: validate the job, call one core function, return a small result.
 */

import { verifyStep } from './core/protocol.ts';
import { envDeps, envObservability } from './lambda/env-deps.ts';
import { jobStepHandler } from './lambda/handler-kit.ts';

export const { run, createHandler } = jobStepHandler(verifyStep);

export const handler = createHandler(envDeps(), envObservability());
