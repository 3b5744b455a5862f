/**
 * Planner scale: planTier over a synthetic listing of `partitions x filesPerPartition` objects,
 * through the ObjectStore interface, in its own process (bench/planner-worker.ts) so its peak
 * RSS is the planner's alone.
 */

import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { runChild } from './child.ts';

export interface PlannerScaleTask {
  readonly partitions: number;
  readonly filesPerPartition: number;
}

export interface PlannerScaleRun extends PlannerScaleTask {
  readonly objects: number;
  readonly jobs: number;
  readonly plannedInputs: number;
  readonly wallMs: number;
  readonly maxRssBytes: number;
  /** RSS of the worker before planning (Node + modules). */
  readonly baselineRssBytes: number;
  readonly heapUsedAfterBytes: number;
  /** Live heap once the plan is made (after a full GC, when the worker may force one). */
  readonly liveHeapBytes?: number;
}

export interface PlannerScaleResult extends PlannerScaleRun {
  /** The same plan with V8's old space capped as on the 512 MB plan Lambda (half its memory). */
  readonly capped: PlannerScaleRun;
  readonly cappedHeapMb: number;
}

/** Half of the plan Lambda's 512 MB: V8 sizes its old space from the machine's memory, not the live set. */
export const PLAN_LAMBDA_HEAP_MB = 256;

export async function runPlannerScale(dir: string, task: PlannerScaleTask): Promise<PlannerScaleResult> {
  await mkdir(dir, { recursive: true });
  const free = await runChild<PlannerScaleRun>('planner-worker.ts', task, join(dir, 'task.json'), {}, [
    '--expose-gc',
  ]);
  const capped = await runChild<PlannerScaleRun>('planner-worker.ts', task, join(dir, 'task.json'), {}, [
    '--expose-gc',
    `--max-old-space-size=${PLAN_LAMBDA_HEAP_MB}`,
  ]);
  return { ...free, capped, cappedHeapMb: PLAN_LAMBDA_HEAP_MB };
}
