/**
 * Planner scale: planTier over a synthetic listing of `partitions x filesPerPartition` objects,
 * through the ObjectStore interface, in its own process (bench/planner-worker.ts) so its peak
 * RSS is the planner's alone.
 */

import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { PRICES } from '../functions/core/cost/index.ts';
import { runChild } from './child.ts';
import { LIST_LATENCY_MS, lakeObjectCount } from './planner-lake.ts';

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

/** One plan of the lake-scale case (bench/planner-lake.ts), in its own process. */
export interface PlannerLakeTask {
  readonly kind: 'lake';
  readonly tables: number;
  readonly years: number;
  readonly now: number;
  readonly latencyMs: number;
  readonly tier: 'hourly' | 'daily';
  readonly listing: 'windows' | 'sweep';
}

export interface PlannerLakeRun extends PlannerLakeTask {
  readonly lakeObjects: number;
  readonly objects: number;
  readonly jobs: number;
  readonly plannedInputs: number;
  readonly wallMs: number;
  readonly maxRssBytes: number;
  readonly baselineRssBytes: number;
  /** LIST requests (pages of at most 1,000 keys or folders), every listing counted. */
  readonly listRequests: number;
  /** CPU of the plan process while planning (user + system). */
  readonly cpuMs: number;
  /** CPU the synthetic store spends generating those listings' keys (replayed without latency). */
  readonly storeCpuMs: number;
  /** LIST requests the planner keeps in flight at most (planning.listConcurrency). */
  readonly listConcurrency: number;
  readonly since?: string;
}

/** The plan step's targets on the lake (issue 14 item 6). */
export const LAKE_TARGETS = { wallSeconds: 60, peakRssMb: 512 } as const;

/** Cycles a month (30 days) on the stack's default schedules and sweep intervals. */
export const CYCLES_PER_MONTH = {
  hourly: { cycles: 720, sweeps: 30 },
  daily: { cycles: 30, sweeps: 30 / 7 },
} as const;

export interface PlannerLakeResult {
  readonly tables: number;
  readonly years: number;
  readonly lakeObjects: number;
  readonly latencyMs: number;
  readonly heapMb: number;
  readonly runs: readonly PlannerLakeRun[];
  /** S3 Standard LIST price per 1,000 requests (https://aws.amazon.com/s3/pricing/). */
  readonly listPricePer1000: number;
  /** Today's planner: the data root in one listing, pages in sequence (computed, not run). */
  readonly before: { readonly listRequests: number; readonly listWaitSeconds: number };
  readonly perMonth: Readonly<Record<'hourly' | 'daily', { listRequests: number; listUsd: number }>>;
}

/**
 * Plans the lake's hourly and daily tiers as a narrow cycle and as a sweep, each in its own
 * process with V8's old space capped as on the 512 MB plan Lambda.
 */
export async function runPlannerLake(
  dir: string,
  shape: { readonly tables: number; readonly years: number },
): Promise<PlannerLakeResult> {
  await mkdir(dir, { recursive: true });
  // 12:10 UTC, the hourly schedule's minute: the hour that ended at 11:00 is due.
  const now = Date.UTC(2026, 0, 15, 12, 10);
  const runs: PlannerLakeRun[] = [];
  for (const tier of ['hourly', 'daily'] as const) {
    for (const listing of ['windows', 'sweep'] as const) {
      const task: PlannerLakeTask = {
        kind: 'lake',
        ...shape,
        now,
        latencyMs: LIST_LATENCY_MS,
        tier,
        listing,
      };
      runs.push(
        await runChild<PlannerLakeRun>(
          'planner-worker.ts',
          task,
          join(dir, `lake-${tier}-${listing}.json`),
          {},
          [`--max-old-space-size=${PLAN_LAMBDA_HEAP_MB}`],
        ),
      );
    }
  }
  const lakeObjects = lakeObjectCount({ ...shape, now, latencyMs: LIST_LATENCY_MS });
  const price = PRICES.s3PutCopyListPer1000;
  const requests = (tier: 'hourly' | 'daily', listing: 'windows' | 'sweep') =>
    runs.find((r) => r.tier === tier && r.listing === listing)?.listRequests ?? 0;
  const month = (tier: 'hourly' | 'daily') => {
    const { cycles, sweeps } = CYCLES_PER_MONTH[tier];
    const listRequests = (cycles - sweeps) * requests(tier, 'windows') + sweeps * requests(tier, 'sweep');
    return { listRequests, listUsd: (listRequests * price) / 1000 };
  };
  const beforeRequests = Math.ceil(lakeObjects / 1000);
  return {
    ...shape,
    lakeObjects,
    latencyMs: LIST_LATENCY_MS,
    heapMb: PLAN_LAMBDA_HEAP_MB,
    runs,
    listPricePer1000: price,
    before: { listRequests: beforeRequests, listWaitSeconds: (beforeRequests * LIST_LATENCY_MS) / 1000 },
    perMonth: { hourly: month('hourly'), daily: month('daily') },
  };
}

/** Rows of the lake case: wall s, peak MB, LIST requests, LIST $ per cycle and per month, met or not. */
export function plannerLakeRows(r: PlannerLakeResult): string[] {
  const MIB = 2 ** 20;
  const lines = [
    `planner at lake scale: ${r.lakeObjects.toLocaleString('en-US')} objects, ${r.tables} tables, ${r.years} years (Arc, mostly compacted), LIST ${r.latencyMs} ms per request of 1,000 keys, heap capped at ${r.heapMb} MB`,
    'cycle             | wall s | peak MB | LIST req | LIST $/cycle | LIST $/month | target <= 60 s, <= 512 MB',
  ];
  for (const run of r.runs) {
    const met =
      run.wallMs / 1000 <= LAKE_TARGETS.wallSeconds && run.maxRssBytes / MIB <= LAKE_TARGETS.peakRssMb;
    const { cycles, sweeps } = CYCLES_PER_MONTH[run.tier];
    const perMonth =
      ((run.listing === 'sweep' ? sweeps : cycles - sweeps) * run.listRequests * r.listPricePer1000) / 1000;
    lines.push(
      `${`${run.tier} ${run.listing === 'windows' ? 'narrow' : 'sweep'}`.padEnd(17)} | ${(run.wallMs / 1000).toFixed(1).padStart(6)} | ${(run.maxRssBytes / MIB).toFixed(0).padStart(7)} | ${String(run.listRequests).padStart(8)} | ${`$${((run.listRequests * r.listPricePer1000) / 1000).toFixed(5)}`.padStart(12)} | ${`$${perMonth.toFixed(2)}`.padStart(12)} | ${met ? 'met' : 'not met'}`,
    );
  }
  lines.push(
    `before (one listing of the data root every cycle, computed): ${r.before.listRequests.toLocaleString('en-US')} LIST requests in sequence = ${r.before.listWaitSeconds.toFixed(0)} s of LIST wait alone, $${((r.before.listRequests * r.listPricePer1000) / 1000).toFixed(4)} per cycle, $${((r.before.listRequests * r.listPricePer1000 * (CYCLES_PER_MONTH.hourly.cycles + CYCLES_PER_MONTH.daily.cycles)) / 1000).toFixed(2)} per month (hourly + daily)`,
    `per month with windows (hourly: ${CYCLES_PER_MONTH.hourly.cycles} cycles, a sweep a day; daily: ${CYCLES_PER_MONTH.daily.cycles}, a sweep a week): $${(r.perMonth.hourly.listUsd + r.perMonth.daily.listUsd).toFixed(2)} of LIST ($${r.listPricePer1000} per 1,000, https://aws.amazon.com/s3/pricing/)`,
  );
  return lines;
}

function cycleName(run: PlannerLakeRun): string {
  return `${run.tier} ${run.listing === 'windows' ? 'narrow cycle' : 'sweep'}`;
}

function lakeMet(run: PlannerLakeRun): boolean {
  return run.wallMs / 1000 <= LAKE_TARGETS.wallSeconds && run.maxRssBytes / 2 ** 20 <= LAKE_TARGETS.peakRssMb;
}

/** Target rows (bench/report.ts): each cycle's plan step within 60 s and 512 MB. */
export function plannerLakeTargets(
  r: PlannerLakeResult,
): { name: string; value: string; met: boolean; cause?: string }[] {
  return r.runs.map((run) => ({
    name: `planner, ${(r.lakeObjects / 1e6).toFixed(1)}M-object lake, ${cycleName(run)}: <= ${LAKE_TARGETS.wallSeconds} s and <= ${LAKE_TARGETS.peakRssMb} MB`,
    value: `${(run.wallMs / 1000).toFixed(1)} s, ${(run.maxRssBytes / 2 ** 20).toFixed(0)} MB, ${run.listRequests.toLocaleString('en-US')} LIST ($${((run.listRequests * r.listPricePer1000) / 1000).toFixed(4)})`,
    met: lakeMet(run),
    ...(lakeMet(run) ? {} : { cause: plannerLakeCause(r, run) }),
  }));
}

/** Where a plan's wall time went: LIST waits, the synthetic store's key generation, the planner's CPU. */
export function plannerLakeCause(r: PlannerLakeResult, run: PlannerLakeRun): string {
  const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  const waitFloorMs = (run.listRequests * r.latencyMs) / run.listConcurrency;
  const plannerCpuMs = Math.max(0, run.cpuMs - run.storeCpuMs);
  return (
    `of ${s(run.wallMs)}: CPU ${s(run.cpuMs)} (the synthetic store generating ${run.objects.toLocaleString('en-US')} keys ${s(run.storeCpuMs)}, ` +
    `the planner ${s(plannerCpuMs)}, ${Math.round((run.objects / Math.max(plannerCpuMs, 1)) * 1000).toLocaleString('en-US')} keys per CPU s); ` +
    `LIST wait at least ${s(waitFloorMs)} (${run.listRequests.toLocaleString('en-US')} requests x ${r.latencyMs} ms / ${run.listConcurrency} in flight)` +
    (run.maxRssBytes / 2 ** 20 > LAKE_TARGETS.peakRssMb
      ? `; peak RSS ${(run.maxRssBytes / 2 ** 20).toFixed(0)} MB`
      : '')
  );
}

/** The bench/results.md section of the lake case. */
export function plannerLakeMarkdown(r: PlannerLakeResult): string[] {
  const rows = r.runs.map((run) => {
    const { cycles, sweeps } = CYCLES_PER_MONTH[run.tier];
    const count = run.listing === 'sweep' ? sweeps : cycles - sweeps;
    return `| ${cycleName(run)} | ${run.objects.toLocaleString('en-US')} | ${(run.wallMs / 1000).toFixed(1)} | ${(run.maxRssBytes / 2 ** 20).toFixed(0)} | ${run.listRequests.toLocaleString('en-US')} | $${((run.listRequests * r.listPricePer1000) / 1000).toFixed(4)} | ${count.toFixed(1)} | $${((count * run.listRequests * r.listPricePer1000) / 1000).toFixed(2)} | ${lakeMet(run) ? 'met' : 'not met'} |`;
  });
  const beforeMonth =
    (r.before.listRequests *
      r.listPricePer1000 *
      (CYCLES_PER_MONTH.hourly.cycles + CYCLES_PER_MONTH.daily.cycles)) /
    1000;
  return [
    '## Planner at lake scale',
    '',
    `${r.lakeObjects.toLocaleString('en-US')} objects: ${r.tables} Arc tables over ${r.years} years, mostly compacted (bench/planner-lake.ts), generated on the fly behind the ObjectStore interface; ` +
      `each LIST request (a page of at most 1,000 keys or folders) waits ${r.latencyMs} ms and is counted. Each plan runs in its own process with V8's old space at ${r.heapMb} MB (the 512 MB plan Lambda). ` +
      `Target per plan step: <= ${LAKE_TARGETS.wallSeconds} s and <= ${LAKE_TARGETS.peakRssMb} MB. LIST at $${r.listPricePer1000} per 1,000 (S3 Standard, https://aws.amazon.com/s3/pricing/).`,
    '',
    '| cycle | objects listed | wall s | peak RSS MB | LIST requests | LIST $ per cycle | cycles a month | LIST $ a month | target |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |',
    ...rows,
    '',
    `A month (30 days) on the default schedules: hourly ${CYCLES_PER_MONTH.hourly.cycles} cycles with a sweep a day, daily ${CYCLES_PER_MONTH.daily.cycles} with a sweep a week: ` +
      `$${(r.perMonth.hourly.listUsd + r.perMonth.daily.listUsd).toFixed(2)} of LIST. Before (the data root listed whole, in sequence, every cycle): ` +
      `${r.before.listRequests.toLocaleString('en-US')} LIST requests a cycle, ${r.before.listWaitSeconds.toFixed(0)} s of LIST wait alone (computed, not run), $${beforeMonth.toFixed(2)} a month.`,
    '',
  ];
}
