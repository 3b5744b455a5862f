/**
 * Clear step: removes the job's staging objects, then its manifest; the job is done.
 * Thin: validate the job, call one core function, return a small result.
 */

import { clearManifestStep } from './core/protocol.ts';
import { envDeps, envObservability } from './lambda/env-deps.ts';
import { jobStepHandler } from './lambda/handler-kit.ts';

export const { run, createHandler } = jobStepHandler(clearManifestStep);

export const handler = createHandler(envDeps(), envObservability());
