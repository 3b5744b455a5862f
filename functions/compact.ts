/**
 * Compact step: claims the partition (the manifest is the lease), fetches the inputs with
 * If-Match, validates every footer, merges and sorts with DuckDB (or polars for wide tables), checks rows, stages the
 * output. For a retention item: claims the day, re-checks the expired files, commits. Thin: validate the input, build deps, call one core function, return a small result.
 */

import { compactOrExpire } from './core/pipeline.ts';
import { type JobItem, readJob } from './core/plan-store.ts';
import type { StepResult } from './core/protocol.ts';
import { isCompactionJob } from './core/protocol.ts';
import { compactEngine } from './lambda/compact-engine.ts';
import { envDeps, envObservability } from './lambda/env-deps.ts';
import { parseJobItem } from './lambda/events.ts';
import {
  createLambdaHandler,
  type DepsFactory,
  type HandlerDeps,
  type HandlerTools,
} from './lambda/handler-kit.ts';
import type { Observability } from './lambda/telemetry.ts';
import { onJobEvent } from './lambda/telemetry.ts';

export async function compact(item: JobItem, deps: HandlerDeps, tools: HandlerTools): Promise<StepResult> {
  await deps.resetWorkDir?.();
  const job = await readJob(deps.store, deps.config.layout, item);
  const { engine, ...rest } = deps;
  const stepDeps = { ...rest, signal: tools.signal, onEvent: onJobEvent(tools) };
  // A retention item needs no engine: it claims, re-checks and commits its expired files.
  const result = await compactOrExpire(
    isCompactionJob(job) ? { ...stepDeps, engine: await engine() } : stepDeps,
    job,
  );
  return result;
}

export function createHandler(getDeps: DepsFactory, observability: Observability) {
  return createLambdaHandler(parseJobItem, compact, getDeps, observability);
}

export const handler = createHandler(envDeps(compactEngine), envObservability());
