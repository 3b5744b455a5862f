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
import { type CompactorConfig, type ConfigInput, parseConfig } from '../../functions/core/config.ts';
import type { Clock } from '../../functions/core/engine.ts';
import {
  type Manifest,
  manifestKey,
  newJobId,
  serializeManifest,
} from '../../functions/core/manifest/manifest.ts';
import { planTier } from '../../functions/core/planner/planner.ts';
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
