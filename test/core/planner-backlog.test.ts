/**
 * The plan's backlog (functions/core/backlog.ts) over a real local-folder lake: which partitions
 * are eligible, the age of the oldest (since it became due, not since its period ended), those a
 * plan leaves for later by its bounds or holds, and the verdict "behind" against the tier's
 * behindAfterSeconds.
 */

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { LocalFolderStore } from '../../functions/adapters/local-store/local-store.ts';
import { ageStands } from '../../functions/core/backlog.ts';
import { type CompactorConfig, type ConfigInput, parseConfig } from '../../functions/core/config.ts';
import type { Clock } from '../../functions/core/engine.ts';
import {
  type Manifest,
  manifestKey,
  newJobId,
  serializeManifest,
} from '../../functions/core/manifest/manifest.ts';
import {
  BACKLOG_RECORD_LIMIT,
  backlogRecordKey,
  type PlanScope,
  planTier,
  readBacklogRecord,
  recordSweep,
  writeBacklogRecord,
} from '../../functions/core/planner/planner.ts';
import { backlogRecordOf } from '../../functions/core/planner/planner-backlog-record.ts';
import { testStore } from '../support/test-store.ts';

const HOUR = 3_600_000;
// Planned as of a fixed time after every file's write, so no folder waits for quiet time.
const NOW = Date.parse('2030-01-15T20:30:00Z');
const clock: Clock = { now: () => new Date(NOW) };

let root: string;
let store: LocalFolderStore;

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'planner-backlog-'));
  store = testStore(root);
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

function config(input: ConfigInput = {}) {
  return parseConfig({ ...input, tiers: { hourly: { minFiles: 3 }, ...input.tiers } });
}

/** `n` raw files in the hour folder starting at `hourIso` (e.g. '2030-01-15T10'). */
async function hour(hourIso: string, n: number): Promise<string> {
  const [date = '', hh = ''] = hourIso.split('T');
  const [y, m, d] = date.split('-');
  const folder = `mydb/cpu/${y}/${m}/${d}/${hh}/`;
  for (let i = 1; i <= n; i++) {
    await store.put(
      `${folder}cpu_${y}${m}${d}_${hh}0000_${String(i).padStart(9, '0')}.parquet`,
      Buffer.alloc(10, 1),
    );
  }
  return folder;
}

async function keysUnder(prefix: string): Promise<string[]> {
  const keys: string[] = [];
  for await (const o of store.list(prefix)) keys.push(o.key);
  return keys;
}

/** A live manifest of the hourly tier on `partition` naming `keys`, its owner still running. */
async function lease(cfg: CompactorConfig, partition: string, keys: readonly string[]): Promise<void> {
  const at = new Date(NOW).toISOString();
  const manifest: Manifest = {
    version: 1,
    jobId: newJobId(new Date(NOW), () => '0a1b2c3d'),
    executionId: 'exec-1',
    tier: 'hourly',
    partition,
    location: store.location,
    state: 'claimed',
    inputs: keys.map((key) => ({ key, size: 10, etag: 'etag' })),
    createdAt: at,
    updatedAt: at,
    leaseExpiresAt: new Date(NOW + 20 * 60_000).toISOString(),
  };
  await store.put(manifestKey(cfg.layout, 'hourly', partition), serializeManifest(manifest), {
    ifNoneMatch: '*',
  });
}

/** Seconds from when an hour starting at `hourIso` became due (its end + minAge) to NOW. */
function ageOf(hourIso: string, minAgeSeconds = 3600): number {
  return (NOW - (Date.parse(`${hourIso}:00:00Z`) + HOUR + minAgeSeconds * 1000)) / 1000;
}

describe('the plan’s backlog', () => {
  it('counts the partitions due and ages the oldest from when it became due', async () => {
    const oldest = await hour('2030-01-15T10', 3);
    await hour('2030-01-15T17', 4);
    // Fewer than minFiles on a day not yet old enough for the straggler flush: not eligible.
    const thin = await hour('2030-01-15T09', 2);
    // Ended 30 minutes ago: minAge (1 h) not passed yet.
    await hour('2030-01-15T19', 5);
    const plan = await planTier(store, config(), clock, 'hourly');
    expect(plan.skipped.map((s) => s.partition)).toContain(thin);
    expect(plan.backlog).toEqual({
      eligiblePartitions: 2,
      leftForLater: 0,
      oldestEligiblePartition: oldest,
      // 10:00-11:00, due at 12:00, planned at 20:30: eight and a half hours, not nine and a half.
      oldestEligibleAgeSeconds: ageOf('2030-01-15T10'),
      behindAfterSeconds: 3 * 3600,
      behind: true,
    });
    expect(plan.backlog?.oldestEligibleAgeSeconds).toBe(8.5 * 3600);
  });

  it('measures the age past minAge, whatever minAge is', async () => {
    await hour('2030-01-15T10', 3);
    const patient = config({ tiers: { hourly: { minFiles: 3, minAgeSeconds: 6 * 3600 } } });
    const plan = await planTier(store, patient, clock, 'hourly');
    expect(plan.backlog?.oldestEligibleAgeSeconds).toBe(ageOf('2030-01-15T10', 6 * 3600));
    expect(plan.backlog?.oldestEligibleAgeSeconds).toBe(3.5 * 3600);
  });

  it('is behind only past behindAfterSeconds, strictly', async () => {
    await hour('2030-01-15T10', 3);
    const age = ageOf('2030-01-15T10');
    const at = (behindAfterSeconds: number) =>
      config({ tiers: { hourly: { minFiles: 3, behindAfterSeconds } } });
    expect((await planTier(store, at(age), clock, 'hourly')).backlog?.behind).toBe(false);
    expect((await planTier(store, at(age - 1), clock, 'hourly')).backlog).toMatchObject({
      behind: true,
      behindAfterSeconds: age - 1,
    });
  });

  it('counts a partition the job bounds leave partly for a later run, and one a lease holds', async () => {
    const bounded = await hour('2030-01-15T12', 5);
    const leased = await hour('2030-01-15T13', 5);
    const cfg = config({ maxJobFiles: 2, maxJobsPerPartition: 1 });
    // A live manifest (its owner still running) names two of the leased hour's files: three remain.
    await lease(cfg, leased, (await keysUnder(leased)).slice(0, 2));
    const plan = await planTier(store, cfg, clock, 'hourly');
    expect(plan.jobs.map((j) => [j.partition, j.inputs.length])).toEqual([[bounded, 2]]);
    expect(plan.skipped.map((s) => s.partition)).toEqual([leased]);
    expect(plan.backlog).toMatchObject({
      eligiblePartitions: 2,
      leftForLater: 2,
      oldestEligiblePartition: bounded,
      oldestEligibleAgeSeconds: ageOf('2030-01-15T12'),
    });
  });

  it('does not count a partition whose files a live manifest names, all of them', async () => {
    const leased = await hour('2030-01-15T13', 3);
    const cfg = config();
    await lease(cfg, leased, await keysUnder(leased));
    const plan = await planTier(store, cfg, clock, 'hourly');
    expect(plan.skipped.map((s) => s.partition)).toEqual([leased]);
    expect(plan.backlog).toMatchObject({ eligiblePartitions: 0, oldestEligibleAgeSeconds: 0, behind: false });
    expect(plan.backlog?.oldestEligiblePartition).toBeUndefined();
  });

  it('dates a straggler from its flush: its day old enough for the daily tier', async () => {
    // One file (below minFiles) in an hour of the day before: flushed once that day ended 3 h ago.
    const straggler = await hour('2030-01-14T05', 1);
    const plan = await planTier(store, config(), clock, 'hourly');
    expect(plan.jobs.map((j) => j.partition)).toEqual([straggler]);
    const flushAt = Date.parse('2030-01-15T00:00:00Z') + 3 * HOUR;
    expect(plan.backlog).toMatchObject({
      eligiblePartitions: 1,
      oldestEligiblePartition: straggler,
      oldestEligibleAgeSeconds: (NOW - flushAt) / 1000,
    });
  });

  it('counts a daily partition that cannot be compacted as it is: its first input alone exceeds the bound', async () => {
    const cfg = config({ maxJobBytes: 150 });
    await store.put('mydb/cpu/2030/01/14/05/a_compacted.parquet', Buffer.alloc(200, 1));
    await store.put('mydb/cpu/2030/01/14/05/b_compacted.parquet', Buffer.alloc(10, 1));
    const plan = await planTier(store, cfg, clock, 'daily');
    expect(plan.skipped.map((s) => s.reason)).toEqual(['the next daily input alone exceeds the job bound']);
    // The day ended at midnight and became due 3 h later (the daily tier's minAge).
    expect(plan.backlog).toMatchObject({
      eligiblePartitions: 1,
      leftForLater: 1,
      oldestEligiblePartition: 'mydb/cpu/2030/01/14/',
      oldestEligibleAgeSeconds: (NOW - Date.parse('2030-01-15T03:00:00Z')) / 1000,
      behindAfterSeconds: 3 * 86_400,
      behind: false,
    });
  });

  it('reports none eligible as age 0, not behind', async () => {
    await hour('2030-01-15T19', 5);
    const plan = await planTier(store, config(), clock, 'hourly');
    expect(plan.backlog).toEqual({
      eligiblePartitions: 0,
      leftForLater: 0,
      oldestEligibleAgeSeconds: 0,
      behindAfterSeconds: 3 * 3600,
      behind: false,
    });
  });
});

describe('the backlog between sweeps: the backlog record', () => {
  const DAY = 24 * HOUR;

  /** Two hourly outputs in the day `dayIso` (e.g. '2030-01-10'): a daily partition, due at 03:00 the day after. */
  async function day(dayIso: string): Promise<string> {
    const [y, m, d] = dayIso.split('-');
    const folder = `mydb/cpu/${y}/${m}/${d}/`;
    for (const hh of ['05', '06']) await store.put(`${folder}${hh}/a_compacted.parquet`, Buffer.alloc(10, 1));
    return folder;
  }

  /** What compacting the day leaves: one daily output, nothing to merge. */
  async function compactDay(folder: string): Promise<void> {
    for (const key of await keysUnder(folder)) await store.deleteMany([{ key }]);
    await store.put(`${folder}a_daily.parquet`, Buffer.alloc(10, 1));
  }

  /** A daily plan at `at` (ms) and what the plan step records after it: a sweep, the backlog record. */
  async function planAt(cfg: CompactorConfig, at: number, scope: PlanScope = {}) {
    const plan = await planTier(store, cfg, { now: () => new Date(at) }, 'daily', scope);
    await recordSweep(store, cfg, plan);
    await writeBacklogRecord(store, cfg, plan);
    return { plan, published: ageStands(plan.backlog ?? assert(), plan.listing?.backlogCovered === true) };
  }

  function assert(): never {
    throw new Error('a daily plan has a backlog');
  }

  it('an in-between plan reports a stuck daily partition older than its window, and drops it once compacted', async () => {
    const cfg = config();
    const stuck = await day('2030-01-10');
    const sweep = await planAt(cfg, NOW);
    expect(sweep.plan.listing?.mode).toBe('sweep');
    expect(sweep.plan.backlog).toMatchObject({
      eligiblePartitions: 1,
      oldestEligiblePartition: stuck,
      behind: true,
    });
    // An hour later the plan lists windows (from 2030-01-13 on): the day lies before them, and its
    // folder is listed again because the sweep's record carries it.
    const next = await planAt(cfg, NOW + HOUR);
    expect(next.plan.listing).toMatchObject({
      mode: 'windows',
      since: '2030-01-13T00:00:00.000Z',
      relisted: 1,
    });
    expect(next.plan.backlog).toMatchObject({
      eligiblePartitions: 1,
      oldestEligiblePartition: stuck,
      oldestEligibleAgeSeconds: (NOW + HOUR - Date.parse('2030-01-11T03:00:00Z')) / 1000,
      behind: true,
    });
    expect(next.plan.jobs.map((j) => j.partition)).toEqual([stuck]);
    expect(next.published).toBe(true);
    // Compacted since: the next in-between plan finds nothing eligible, and its age (0) stands,
    // which returns the alarm to OK without waiting for the sweep.
    await compactDay(stuck);
    const drained = await planAt(cfg, NOW + 2 * HOUR);
    expect(drained.plan.listing).toMatchObject({ mode: 'windows', relisted: 1, backlogCovered: true });
    expect(drained.plan.backlog).toMatchObject({
      eligiblePartitions: 0,
      oldestEligibleAgeSeconds: 0,
      behind: false,
    });
    expect(drained.published).toBe(true);
    // Nothing is carried further: the plan after lists no old folder again.
    const read = await readBacklogRecord(store, cfg, 'daily', NOW + 3 * HOUR);
    expect(read).toEqual({
      record: { plannedAt: new Date(NOW + 2 * HOUR).toISOString(), covers: true, partitions: [] },
    });
    expect((await planAt(cfg, NOW + 3 * HOUR)).plan.listing?.relisted).toBe(0);
  });

  it('carries a partition that became due inside the window and stays stuck after it left it', async () => {
    const cfg = config();
    // Due 2030-01-15 03:00, inside the sweep's window, and never compacted (its jobs fail, say).
    const stuck = await day('2030-01-14');
    await planAt(cfg, NOW);
    // A daily plan each day, never a sweep (the next is 168 h away): four days on, the day lies
    // before every window, still eligible, and past the threshold (three days).
    let last: Awaited<ReturnType<typeof planAt>> | undefined;
    for (let days = 1; days <= 4; days++) last = await planAt(cfg, NOW + days * DAY);
    expect(last?.plan.listing).toMatchObject({
      mode: 'windows',
      since: '2030-01-17T00:00:00.000Z',
      relisted: 1,
    });
    expect(last?.plan.backlog).toMatchObject({
      eligiblePartitions: 1,
      oldestEligiblePartition: stuck,
      behind: true,
    });
  });

  it('does not vouch for the tier without a covering record: none, cut at the limit, or older than the lookback', async () => {
    const cfg = config();
    await day('2030-01-10');
    await planAt(cfg, NOW);
    // Planned after a gap longer than planning.lookbackHours (48): a day may have become due and
    // left the window unseen in between.
    const late = await planAt(cfg, NOW + 49 * HOUR);
    expect(late.plan.listing).toMatchObject({ mode: 'windows', relisted: 1, backlogCovered: false });
    expect(late.plan.listing?.backlogGap).toMatch(/more than planning\.lookbackHours \(48\) old/);
    // Its record does not cover either, so the one after may raise the alarm, never clear it.
    await compactDay('mydb/cpu/2030/01/10/');
    const after = await planAt(cfg, NOW + 50 * HOUR);
    expect(after.plan.listing).toMatchObject({ mode: 'windows', backlogCovered: false });
    expect(after.published).toBe(false);
    // No record at all (expired, or a stack from before it): the same.
    await store.deleteMany([{ key: backlogRecordKey(cfg, 'daily') }]);
    const none = await planTier(store, cfg, { now: () => new Date(NOW + 51 * HOUR) }, 'daily');
    expect(none.listing?.backlogGap).toBe(`no backlog record (${backlogRecordKey(cfg, 'daily')})`);
    // A record cut at its limit keeps the oldest partitions and no longer covers.
    const many = Array.from({ length: BACKLOG_RECORD_LIMIT + 1 }, (_, i) => ({
      partition: `mydb/t${i}/2030/01/01/`,
      periodStart: Date.parse('2030-01-01T00:00:00Z'),
      dueAt: NOW - i * 1000,
    }));
    const cut = backlogRecordOf(new Date(NOW).toISOString(), true, many);
    expect(cut.covers).toBe(false);
    expect(cut.partitions).toHaveLength(BACKLOG_RECORD_LIMIT);
    expect(cut.partitions[0]?.partition).toBe(`mydb/t${BACKLOG_RECORD_LIMIT}/2030/01/01/`);
    expect(backlogRecordOf(new Date(NOW).toISOString(), true, many.slice(1)).covers).toBe(true);
  });

  it('a plan scoped to one table or listing the data root whole leaves no record; one from a later plan time is not read', async () => {
    const cfg = config();
    await day('2030-01-10');
    const scoped = await planAt(cfg, NOW, { only: 'mydb/cpu/' });
    expect(scoped.plan.listing).toMatchObject({ mode: 'full', backlogCovered: false });
    const full = await planAt(config({ planning: { listing: 'full' } }), NOW);
    expect([scoped.plan.backlogRecord, full.plan.backlogRecord]).toEqual([undefined, undefined]);
    expect(await keysUnder(backlogRecordKey(cfg, 'daily'))).toEqual([]);
    await planAt(cfg, NOW);
    expect(await readBacklogRecord(store, cfg, 'daily', NOW - HOUR)).toEqual({
      unusable: `the backlog record ${backlogRecordKey(cfg, 'daily')} is from a later plan (${new Date(NOW).toISOString()})`,
    });
  });
});
