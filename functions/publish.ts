/**
 * Publish step: copies the staged outputs (already in S3) to their final keys; the manifest's
 * switch to `published` is the commit point.
 * Thin: validate the job, call one core function, return a small result.
 */

import { publishStep } from './core/protocol.ts';
import { envDeps, envObservability } from './lambda/env-deps.ts';
import { jobStepHandler } from './lambda/handler-kit.ts';

export const { run, createHandler } = jobStepHandler(publishStep);

export const handler = createHandler(envDeps(), envObservability());
