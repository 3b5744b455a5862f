/**
 * Child process of the planner-scale case: a synthetic store that lists N objects in Arc layout
 * (generated on the fly, in key order, never held in memory by the store) and holds no
 * manifests; planTier plans the hourly tier over it. Or (task kind 'lake') one cycle of the
 * lake-scale case over planner-lake.ts's LakeStore. Prints one JSON line.
 */

import { readFile } from 'node:fs/promises';
import { parseConfig } from '../functions/core/config.ts';
import type { ListOptions, ObjectSummary } from '../functions/core/object-store.ts';
import { planTier } from '../functions/core/planner/planner.ts';
import { peakRssBytes } from './peak-rss.ts';
import { LakeStore, lakeObjectCount, RAW_PER_HOUR } from './planner-lake.ts';
import type { PlannerLakeRun, PlannerLakeTask, PlannerScaleRun, PlannerScaleTask } from './planner-scale.ts';
import { ReadOnlyListingStore } from './read-only-store.ts';

const HOUR_MS = 3_600_000;
const MEASUREMENTS = 50;
const FIRST_HOUR = Date.UTC(2025, 0, 1);

/** Lists `partitions` hour folders (spread over MEASUREMENTS measurements) of `files` objects each. */
class SyntheticListingStore extends ReadOnlyListingStore {
  readonly location = 'synthetic://bench';
  readonly #partitions: number;
  readonly #files: number;

  constructor(partitions: number, files: number) {
    super();
    this.#partitions = partitions;
    this.#files = files;
  }

  async *list(prefix: string): AsyncIterable<ObjectSummary> {
    // Only the data listing holds objects; manifests and quarantine are empty.
    if (prefix.startsWith('_compaction/')) return;
    const hoursPerMeasurement = Math.ceil(this.#partitions / MEASUREMENTS);
    const modified = new Date(FIRST_HOUR);
    let emitted = 0;
    for (let m = 0; m < MEASUREMENTS; m++) {
      const name = `m${String(m).padStart(2, '0')}`;
      for (let h = 0; h < hoursPerMeasurement && emitted < this.#partitions; h++, emitted++) {
        const hour = new Date(FIRST_HOUR + h * HOUR_MS);
        const iso = hour.toISOString();
        const ymd = `${iso.slice(0, 4)}${iso.slice(5, 7)}${iso.slice(8, 10)}`;
        const hh = iso.slice(11, 13);
        const folder = `db/${name}/${iso.slice(0, 4)}/${iso.slice(5, 7)}/${iso.slice(8, 10)}/${hh}/`;
        for (let f = 0; f < this.#files; f++) {
          const key = `${folder}${name}_${ymd}_${hh}${String(f).padStart(4, '0')}_${String(f).padStart(9, '0')}.parquet`;
          yield {
            key,
            size: 100_000 + f,
            etag: `"${(emitted * this.#files + f).toString(16)}"`,
            lastModified: modified,
          };
        }
      }
    }
  }
}

/**
 * One plan of the synthetic lake (planner-lake.ts): a narrow cycle ('windows') or a sweep, and
 * checks that it planned what the lake holds for that tier (else the run fails).
 */
async function planLake(task: PlannerLakeTask): Promise<PlannerLakeRun> {
  const shape = { tables: task.tables, years: task.years, now: task.now, latencyMs: task.latencyMs };
  const store = new LakeStore(shape);
  // Every listing the planner asks for, so the synthetic store's own cost can be measured apart.
  const calls: { readonly folders: boolean; readonly prefix: string; readonly options: ListOptions }[] = [];
  const recording = Object.assign(Object.create(store) as LakeStore, {
    list: (prefix: string, options: ListOptions = {}) => {
      calls.push({ folders: false, prefix, options });
      return store.list(prefix, options);
    },
    listFolders: (prefix: string) => {
      calls.push({ folders: true, prefix, options: {} });
      return store.listFolders(prefix);
    },
  });
  // Sweeps by the execution input only: each run is the cycle it names.
  const config = parseConfig({ planning: { sweepEveryHours: 0 } });
  const clock = { now: () => new Date(task.now) };
  const baselineRssBytes = process.memoryUsage().rss;
  const cpuStart = process.cpuUsage();
  const start = performance.now();
  const plan = await planTier(
    recording,
    config,
    clock,
    task.tier,
    task.listing === 'sweep' ? { sweep: true } : {},
  );
  const wallMs = performance.now() - start;
  const cpu = process.cpuUsage(cpuStart);
  const cpuMs = (cpu.user + cpu.system) / 1000;
  // The same listings again without the planner and without LIST latency: the CPU the synthetic
  // store spends generating keys, which an S3 LIST costs the plan Lambda nothing of.
  const bare = new LakeStore({ ...shape, latencyMs: 0 });
  const replayStart = process.cpuUsage();
  for (const call of calls) {
    const listing = call.folders ? bare.listFolders(call.prefix) : bare.list(call.prefix, call.options);
    for await (const _ of listing);
  }
  const replay = process.cpuUsage(replayStart);
  const storeCpuMs = (replay.user + replay.system) / 1000;
  const plannedInputs = plan.jobs.reduce((total, job) => total + job.inputs.length, 0);
  if (plan.listing?.mode !== task.listing)
    throw new Error(`planned with ${plan.listing?.mode}, not ${task.listing}`);
  // hourly: the due hour of every table (RAW_PER_HOUR files), and in a sweep also the late file;
  // daily: yesterday's 24 hourly outputs of every table.
  const late = task.tier === 'hourly' && task.listing === 'sweep' ? task.tables : 0;
  const expectedJobs = task.tables + late;
  const expectedInputs = task.tier === 'hourly' ? task.tables * RAW_PER_HOUR + late : task.tables * 24;
  if (plan.jobs.length !== expectedJobs || plannedInputs !== expectedInputs) {
    throw new Error(
      `${task.tier} ${task.listing}: planned ${plan.jobs.length} jobs / ${plannedInputs} inputs, expected ${expectedJobs} / ${expectedInputs}`,
    );
  }
  const lakeObjects = lakeObjectCount(shape);
  if (task.listing === 'sweep' && plan.objectsListed !== lakeObjects) {
    throw new Error(`the sweep listed ${plan.objectsListed} objects of ${lakeObjects}`);
  }
  return {
    ...task,
    lakeObjects,
    objects: plan.objectsListed,
    jobs: plan.jobs.length,
    plannedInputs,
    wallMs,
    maxRssBytes: peakRssBytes(),
    baselineRssBytes,
    listRequests: store.listRequests,
    cpuMs,
    storeCpuMs,
    listConcurrency: config.planning.listConcurrency,
    ...(plan.listing.since !== undefined ? { since: plan.listing.since } : {}),
  };
}

async function main(): Promise<void> {
  const taskFile = process.argv[2];
  if (!taskFile) throw new Error('usage: node bench/planner-worker.ts <task.json>');
  const parsed = JSON.parse(await readFile(taskFile, 'utf8')) as PlannerScaleTask | PlannerLakeTask;
  if ('kind' in parsed && parsed.kind === 'lake') {
    process.stdout.write(`${JSON.stringify(await planLake(parsed))}\n`);
    return;
  }
  const task = parsed as PlannerScaleTask;
  const store = new SyntheticListingStore(task.partitions, task.filesPerPartition);
  const config = parseConfig({ quietSeconds: 0 });
  const clock = { now: () => new Date(Date.UTC(2026, 0, 1)) };
  const baselineRssBytes = process.memoryUsage().rss;
  const start = performance.now();
  const plan = await planTier(store, config, clock, 'hourly');
  const wallMs = performance.now() - start;
  const plannedInputs = plan.jobs.reduce((total, job) => total + job.inputs.length, 0);
  const result: PlannerScaleRun & { liveHeapBytes?: number } = {
    ...task,
    objects: plan.objectsListed,
    jobs: plan.jobs.length,
    plannedInputs,
    wallMs,
    maxRssBytes: peakRssBytes(),
    baselineRssBytes,
    heapUsedAfterBytes: process.memoryUsage().heapUsed,
  };
  // After the peak is read: what the plan itself keeps alive (run with --expose-gc).
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc) {
    gc();
    Object.assign(result, { liveHeapBytes: process.memoryUsage().heapUsed });
  }
  if (plan.jobs.length === 0) throw new Error('no plan');
  if (plan.jobs.length !== task.partitions || plannedInputs !== task.partitions * task.filesPerPartition) {
    throw new Error(
      `planned ${plan.jobs.length} jobs / ${plannedInputs} inputs, expected every partition whole`,
    );
  }
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

await main();
