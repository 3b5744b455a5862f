/**
 * Plans as the state machine sees them. The plan step writes the input lists of each Map item's
 * jobs to one object (a record), which each job's compact step reads, and one small item per
 * Map item: a Map item carries one job, or several small jobs of one table (`mapItems`), well
 * below Step Functions' 256 KiB payload limit. The Map items of each wave (every partition's k-th
 * job, planner-jobs.ts) are one file, which one Map run reads. All of it lives
 * under `_compaction/plans/` (expired by a lifecycle rule) and stays in place so a redrive sees
 * the same jobs.
 */

import type { JobKind } from './config.ts';
import { ConfigError, NotFoundError } from './errors.ts';
import type { Job, JobRef } from './job.ts';
import { type CompactSize, compactSizeOf } from './lambda-sizing.ts';
import type { Layout } from './layout.ts';
import { forEachLimit } from './limit.ts';
import type { ObjectStore } from './object-store.ts';
import { RUN_RECORD_DAYS, stateFolder } from './state-root.ts';

/** One Map item: the job and where its inputs are. */
export interface JobItem extends JobRef {
  readonly jobKey: string;
  readonly inputFiles: number;
  readonly inputBytes: number;
  /** The job's wave: the Map run that carries it (0 for a partition's first job). */
  readonly wave: number;
  /**
   * The compact function the state machine invokes for it (lambda-sizing.ts). An item without one,
   * planned before sizes existed, runs on the large function.
   */
  readonly compactSize: CompactSize;
}

/**
 * What the Map's items are: 'jobs', a MapItem (the definition runs each item's jobs in its inline
 * Map); 'job', the JobItem itself, for a definition deployed before items carried jobs. An
 * execution runs the definition it started with, and CloudFormation updates the functions before
 * the state machine that names them ("Resource B is updated before resource A" when A refers to
 * B, https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-attribute-dependson.html),
 * so a Plan Lambda may serve an older definition: that definition's Plan task does not ask for
 * 'jobs'.
 */
export const ITEM_SHAPES = ['jobs', 'job'] as const;
export type ItemShape = (typeof ITEM_SHAPES)[number];

/**
 * What one Map item carries: one job, or up to `smallJobsPerItem` small jobs of one table, which
 * one child workflow runs at once, each its own chain with its own manifest (the jobs of a wave
 * are of distinct partitions, so never two of one partition).
 */
export interface MapItem {
  /** The jobs' table, as `DataFile.table` names it. */
  readonly table: string;
  readonly jobs: readonly JobItem[];
}

/**
 * The field a job's chain finds its item under: the definition's ItemSelector puts it there, so
 * each step's payload is one path (cdk/constructs/compaction-workflow.ts), and a one-job item's
 * child input is `{ [JOB_FIELD]: item }`, which Summary reads (run-summary.ts).
 */
export const JOB_FIELD = 'job';

/**
 * Groups one wave's jobs into Map items, in plan order: each small job (lambda-sizing.ts) joins
 * the open item of its table until that item holds `smallJobsPerItem`; a large job is an item
 * alone. Small partitions share a child's start and its fixed states; a large job keeps a child
 * to itself, as its runtime is its own.
 */
export function mapItems<T extends Pick<JobItem, 'partition' | 'compactSize'>>(
  jobs: readonly T[],
  layout: Layout,
  smallJobsPerItem: number,
): { readonly table: string; readonly jobs: readonly T[] }[] {
  const items: { table: string; jobs: T[] }[] = [];
  const open = new Map<string, { table: string; jobs: T[] }>();
  for (const job of jobs) {
    const table = layout.tableOfFolder(job.partition);
    if (job.compactSize !== 'small' || smallJobsPerItem <= 1) {
      items.push({ table, jobs: [job] });
      continue;
    }
    let item = open.get(table);
    if (item === undefined) {
      item = { table, jobs: [] };
      items.push(item);
      open.set(table, item);
    }
    item.jobs.push(job);
    if (item.jobs.length >= smallJobsPerItem) open.delete(table);
  }
  return items;
}

/** A job's input bytes and the compact function they call for, as its Map item carries them. */
export function jobSize(job: Pick<Job, 'tier' | 'inputs'>): {
  readonly inputBytes: number;
  readonly compactSize: CompactSize;
} {
  const inputBytes = job.inputs.reduce((sum, input) => sum + input.size, 0);
  return { inputBytes, compactSize: compactSizeOf({ tier: job.tier, inputBytes }) };
}

/**
 * Each wave's Map items, in wave order: the plan's jobs as writePlan writes them, the in-process
 * cycle runs them and the cost model shares an item among its jobs.
 */
export function itemsByWave<T extends Pick<JobItem, 'partition' | 'compactSize' | 'wave'>>(
  jobs: readonly T[],
  layout: Layout,
  smallJobsPerItem: number,
): { readonly table: string; readonly jobs: readonly T[] }[][] {
  return byWave(jobs).map((inWave) => mapItems(inWave, layout, smallJobsPerItem));
}

/**
 * Each job's Map item, numbered within its wave, as writePlan groups them: what the cost model
 * needs to share an item's child among its jobs.
 */
export function mapItemIndexes(
  jobs: readonly {
    readonly partition: string;
    readonly tier: string;
    readonly inputBytes: number;
    readonly wave: number;
  }[],
  layout: Layout,
  smallJobsPerItem: number,
): number[] {
  const indexes = new Array<number>(jobs.length).fill(0);
  const sized = jobs.map((job, index) => ({ ...job, index, compactSize: compactSizeOf(job) }));
  for (const inWave of itemsByWave(sized, layout, smallJobsPerItem)) {
    for (const [n, item] of inWave.entries()) {
      for (const job of item.jobs) indexes[job.index] = n;
    }
  }
  return indexes;
}

/** A job and its wave, as the plan assigns them. */
export type WaveJob = Job & { readonly wave: number };

/**
 * Jobs grouped by wave, in wave order, each group in plan order: what one Map run (or one pass of
 * the in-process cycle) takes. One pass, whatever the plan's size.
 */
export function byWave<T extends { readonly wave: number }>(jobs: readonly T[]): T[][] {
  const waves: T[][] = [];
  for (const job of jobs) {
    for (let w = waves.length; w <= job.wave; w++) waves.push([]);
    (waves[job.wave] as T[]).push(job);
  }
  return waves;
}

/**
 * Job records the plan step writes at once: one put at a time made a plan of thousands of small
 * partitions wait for as many sequential writes (an fsync pair each on the local store, a round
 * trip each on S3) before the first partition could start.
 */
export const PLAN_WRITE_CONCURRENCY = 16;

export function plansPrefix(layout: Layout, executionName: string): string {
  if (!/^[A-Za-z0-9_.:-]{1,80}$/.test(executionName)) {
    throw new ConfigError(`execution name "${executionName}" is not usable in a key`);
  }
  return `${stateFolder(layout.stateRoot, 'plans')}${executionName.replaceAll(':', '-')}/`;
}

export async function writePlan(
  store: ObjectStore,
  layout: Layout,
  executionName: string,
  jobs: readonly WaveJob[],
  shape: { readonly itemShape: ItemShape; readonly smallJobsPerItem: number },
): Promise<{
  readonly itemsKeys: readonly string[];
  readonly items: readonly JobItem[];
  /** The Map items of each wave, in wave order. */
  readonly mapItems: readonly (readonly (MapItem | JobItem)[])[];
}> {
  const prefix = plansPrefix(layout, executionName);
  const sized = jobs.map((job, index) => ({
    job,
    index,
    ...jobSize(job),
    partition: job.partition,
    wave: job.wave,
  }));
  type Sized = (typeof sized)[number];
  // Each wave's Map items: several small jobs of one table, or, for a definition that runs one
  // job an item, one job each.
  const batched = shape.itemShape === 'jobs';
  const groups = itemsByWave(sized, layout, batched ? shape.smallJobsPerItem : 1);
  // The jobs of one Map item share one record, named after its first job: a put an item, not a
  // put a job (a PUT request each on S3, an fsync pair each on the local store).
  const items = new Array<JobItem>(jobs.length);
  const records: { readonly key: string; readonly jobs: readonly Job[] }[] = [];
  for (const group of groups.flat()) {
    const key = `${prefix}jobs/${group.jobs[0]?.job.jobId}.json`;
    records.push({ key, jobs: group.jobs.map(({ job: { wave: _, ...job } }) => job) });
    for (const { job, index, inputBytes, compactSize } of group.jobs) {
      items[index] = {
        tier: job.tier,
        partition: job.partition,
        jobId: job.jobId,
        executionId: job.executionId,
        jobKey: key,
        inputFiles: job.inputs.length,
        inputBytes,
        wave: job.wave,
        compactSize,
      };
    }
  }
  // The records are independent: written a few at a time, each durable when its put returns,
  // all of them before the items the Map reads (a reader of an item always finds its job). A
  // record of one job is the job itself, as every record was before items held several jobs.
  await forEachLimit(records, PLAN_WRITE_CONCURRENCY, async (record) => {
    const body = record.jobs.length === 1 ? record.jobs[0] : { jobs: record.jobs };
    await store.put(record.key, Buffer.from(JSON.stringify(body)), { contentType: 'application/json' });
  });
  const itemOf = (one: Sized) => items[one.index] as JobItem;
  // Every plan has a first wave's file, empty or not: a definition reads it by its key.
  const waves: (MapItem | JobItem)[][] = groups.map((inWave) =>
    inWave.map((group) =>
      batched ? { table: group.table, jobs: group.jobs.map(itemOf) } : itemOf(group.jobs[0] as Sized),
    ),
  );
  if (waves.length === 0) waves.push([]);
  const itemsKeys: string[] = [];
  for (const [wave, inWave] of waves.entries()) {
    const key = itemsKeyOf(prefix, wave);
    await store.put(key, Buffer.from(JSON.stringify(inWave)), { contentType: 'application/json' });
    itemsKeys.push(key);
  }
  return { itemsKeys, items, mapItems: waves };
}

/** The first wave keeps the name a plan's only items file always had. */
function itemsKeyOf(prefix: string, wave: number): string {
  return wave === 0 ? `${prefix}items.json` : `${prefix}items-${wave}.json`;
}

/** Reads a job's inputs back; the item must name the same job the file holds. */
export async function readJob(store: ObjectStore, layout: Layout, item: JobItem): Promise<Job> {
  if (!item.jobKey.startsWith(stateFolder(layout.stateRoot, 'plans'))) {
    throw new ConfigError(`job file ${item.jobKey} is outside ${stateFolder(layout.stateRoot, 'plans')}`);
  }
  let body: Buffer;
  try {
    ({ body } = await store.getBytes(item.jobKey));
  } catch (error) {
    if (error instanceof NotFoundError) {
      throw new ConfigError(
        `job file ${item.jobKey} is gone (plans expire after ${RUN_RECORD_DAYS} days): start a new execution`,
        {
          cause: error,
        },
      );
    }
    throw error;
  }
  // A record holds the job, or the jobs of its Map item (writePlan).
  const record = JSON.parse(body.toString('utf8')) as Job | { jobs: readonly Job[] };
  const job = 'jobs' in record ? record.jobs.find((j) => j.jobId === item.jobId) : record;
  if (
    job === undefined ||
    job.jobId !== item.jobId ||
    job.partition !== item.partition ||
    job.tier !== item.tier
  ) {
    throw new ConfigError(`job file ${item.jobKey} does not describe job ${item.jobId}`);
  }
  return {
    tier: item.tier as JobKind,
    partition: item.partition,
    jobId: item.jobId,
    executionId: item.executionId,
    inputs: job.inputs,
  };
}
