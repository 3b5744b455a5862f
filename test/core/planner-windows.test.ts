/**
 * Windowed planning (functions/core/list-windows.ts): which folders a narrow cycle lists per tier
 * and template, that its plan is exactly the full plan restricted to those folders (so a skipped
 * folder is only compacted later, never lost or planned twice), that a sweep plans what the full
 * listing plans, and when a cycle sweeps.
 */

import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { lambdaConfigInput, parseStackConfig } from '../../cdk/config.ts';
import type { LocalFolderStore } from '../../functions/adapters/local-store/local-store.ts';
import { S3Store } from '../../functions/adapters/s3-store/s3-store.ts';
import {
  type CompactorConfig,
  type ConfigInput,
  parseConfig,
  type TierName,
} from '../../functions/core/config.ts';
import type { Clock } from '../../functions/core/engine.ts';
import { Layout } from '../../functions/core/layout.ts';
import { tierFolderAt, windowRefusal, windowStart } from '../../functions/core/list-windows.ts';
import {
  manifestKey,
  newJobId,
  quarantinedInputKey,
  serializeManifest,
} from '../../functions/core/manifest/manifest.ts';
import {
  ForwardingStore,
  type ListOptions,
  type ObjectStore,
  type ObjectSummary,
} from '../../functions/core/object-store.ts';
import { parseInFolder, planTier, sweepsRoot } from '../../functions/core/planner/planner.ts';
import type { HandlerDeps } from '../../functions/lambda/handler-kit.ts';
import { localObservability } from '../../functions/local-runner/lambdas.ts';
import { planStep } from '../../functions/plan.ts';
import { type FauxqsS3, startFauxqsS3 } from '../support/fauxqs-server.ts';
import { mulberry32 } from '../support/sim-scheduler.ts';
import { testStore } from '../support/test-store.ts';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

let root: string;
let store: LocalFolderStore;

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'planner-windows-'));
  store = testStore(root);
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

async function keysOf(iterable: AsyncIterable<{ key: string } | string>): Promise<string[]> {
  const out: string[] = [];
  for await (const item of iterable) out.push(typeof item === 'string' ? item : item.key);
  return out;
}

describe('the windows chosen for each tier', () => {
  // 2026-03-10 12:10 UTC, the defaults: lookback 48 h, minAge 1 h / 3 h / 24 h.
  const now = Date.UTC(2026, 2, 10, 12, 10);
  const iso = (ms: number) => new Date(ms).toISOString();

  it('hourly: from the first hour of the day that became old enough for the daily tier 48 h ago', () => {
    // The hour that ended 48 h + 1 h ago starts 2026-03-08 11:00, but stragglers of 03-08 are
    // flushed once that day is 3 h old (03-09 03:00), which happened within the last 48 h.
    expect(iso(windowStart(parseConfig({}), 'hourly', now))).toBe('2026-03-08T00:00:00.000Z');
    // A short lookback: the day whose stragglers became due within 2 h (none: 03-10 is not yet),
    // so the day that holds now - 2 h - 3 h.
    const short = parseConfig({ planning: { lookbackHours: 2 } });
    expect(iso(windowStart(short, 'hourly', now))).toBe('2026-03-10T00:00:00.000Z');
    // With the hourly minAge longer than the daily one, the hour that became due 2 h ago (ended
    // 10 h before that, 03-09 20:00) is the earlier one.
    const slow = parseConfig({
      planning: { lookbackHours: 2 },
      tiers: { hourly: { minAgeSeconds: 10 * 3600 } },
    });
    expect(iso(windowStart(slow, 'hourly', Date.UTC(2026, 2, 10, 8, 10)))).toBe('2026-03-09T20:00:00.000Z');
  });

  it('daily: from the day that became due (ended 3 h ago) 48 h ago; with the monthly tier, from the month whose days it flushes', () => {
    expect(iso(windowStart(parseConfig({}), 'daily', now))).toBe('2026-03-08T00:00:00.000Z');
    const monthly = parseConfig({ tiers: { monthly: { enabled: true } } });
    // Days of February are flushed for the monthly tier from 2026-03-02 00:00 on: before now - 48 h
    // - 24 h (03-07 12:10), so March's first day is where the window starts.
    expect(iso(windowStart(monthly, 'daily', now))).toBe('2026-03-01T00:00:00.000Z');
    // On 2 March, February's flush (due 03-02 00:00) is within the lookback: all of February.
    expect(iso(windowStart(monthly, 'daily', Date.UTC(2026, 2, 2, 4, 45)))).toBe('2026-02-01T00:00:00.000Z');
  });

  it('monthly: from the month that became due (ended a day ago) within the lookback', () => {
    const monthly = parseConfig({ tiers: { monthly: { enabled: true } } });
    expect(iso(windowStart(monthly, 'monthly', now))).toBe('2026-03-01T00:00:00.000Z');
    expect(iso(windowStart(monthly, 'monthly', Date.UTC(2026, 2, 3, 4, 45)))).toBe(
      '2026-02-01T00:00:00.000Z',
    );
  });

  it.each([
    ['arc', 'mydb/cpu/', ['mydb/cpu/2026/03/08/05/', 'mydb/cpu/2026/03/08/', 'mydb/cpu/2026/03/']],
    ['hive', 'events/', ['events/dt=2026-03-08/hour=05/', 'events/dt=2026-03-08/', undefined]],
    ['firehose', 'stream/', ['stream/2026/03/08/05/', 'stream/2026/03/08/', 'stream/2026/03/']],
    [
      '{org}/{team}/{table}/y={YYYY}/m={MM}/d={DD}/h={HH}/',
      'acme/ops/logs/',
      [
        'acme/ops/logs/y=2026/m=03/d=08/h=05/',
        'acme/ops/logs/y=2026/m=03/d=08/',
        'acme/ops/logs/y=2026/m=03/',
      ],
    ],
    ['{table}/{YYYY}{MM}{DD}/{HH}/', 't/', ['t/20260308/05/', 't/20260308/', undefined]],
  ] as const)(
    '%s: the folder a window starts at is the tier folder of that period',
    (name, table, folders) => {
      const layout = Layout.create(name, 'lake/');
      expect(windowRefusal(layout)).toBeUndefined();
      const at = Date.UTC(2026, 2, 8, 5);
      const tiers: TierName[] = ['hourly', 'daily', 'monthly'];
      tiers.forEach((tier, i) => {
        const expected = folders[i];
        if (expected === undefined) return;
        const folder = tierFolderAt(
          layout,
          tier,
          `lake/${table}`,
          tier === 'hourly' ? at : Date.UTC(2026, 2, tier === 'daily' ? 8 : 1),
        );
        expect(folder).toBe(`lake/${expected}`);
        // The layout reads a file in that folder back as that folder of that tier.
        const suffix =
          tier === 'hourly' ? 'x.parquet' : tier === 'daily' ? 'x_daily.parquet' : 'x_monthly.parquet';
        const file = layout.parse(`${folder}${suffix}`);
        expect(
          tier === 'hourly' ? file?.hourFolder : tier === 'daily' ? file?.dayFolder : file?.monthFolder,
        ).toBe(folder);
      });
    },
  );

  it.each([
    ['{table}/{YYYY}/{region}/{MM}/{DD}/{HH}/', 'holds {region}, which no time names'],
    ['{table}/{DD}-{MM}-{YYYY}/{HH}/', 'not {YYYY}, {MM}, {DD}, {HH}, so keys do not sort by time'],
  ])('%s cannot be listed by windows: %s', (template, why) => {
    expect(windowRefusal(Layout.create(template))).toContain(why);
  });
});

// ---------------------------------------------------------------------------------------------
// Plans over a lake: the narrow plan is the full plan restricted to the windows.

/** Deterministic pseudo-random numbers. */
const rng = mulberry32;

/**
 * Noon on the first 2nd of a month at least 6 h after `ms`. Files get their real mtime, so a clock
 * that far ahead finds every folder quiet; and on the 2nd the last month's monthly flush (due a day
 * after the month ended) is within a 30 h lookback, so every tier's window holds jobs whatever
 * today's date is.
 */
function noonOnASecondAfter(ms: number): number {
  const from = new Date(ms + 6 * HOUR);
  const thisMonth = Date.UTC(from.getUTCFullYear(), from.getUTCMonth(), 2, 12);
  return thisMonth >= from.getTime()
    ? thisMonth
    : Date.UTC(from.getUTCFullYear(), from.getUTCMonth() + 1, 2, 12);
}

const LATER = noonOnASecondAfter(Date.now());
const later: Clock = { now: () => new Date(LATER) };

interface LakeCase {
  readonly name: string;
  readonly input: ConfigInput;
  readonly tables: readonly string[];
  readonly tiers: readonly TierName[];
}

const CASES: readonly LakeCase[] = [
  {
    name: 'arc',
    input: { layout: 'arc', tiers: { monthly: { enabled: true } } },
    tables: ['db/cpu/', 'db/mem/', 'other/disk/'],
    tiers: ['hourly', 'daily', 'monthly'],
  },
  { name: 'hive', input: { layout: 'hive' }, tables: ['events/', 'clicks/'], tiers: ['hourly'] },
  {
    name: 'firehose',
    input: { layout: 'firehose', dataSuffix: '.parquet' },
    tables: ['stream-a/', 'stream-b/'],
    tiers: ['hourly'],
  },
  {
    name: 'custom, table over three folders',
    input: { layout: '{org}/{team}/{table}/y={YYYY}/m={MM}/d={DD}/h={HH}/', partitionSegments: [] },
    tables: ['acme/ops/logs/', 'acme/web/hits/'],
    tiers: ['hourly', 'daily'],
  },
];

/** The test's local folder store (buildLake shadows `store` with its batching writer). */
function realStore(): LocalFolderStore {
  return store;
}

/** A store that ignores StartAfter: a windowed plan must still plan only its windows. */
class IgnoresStartAfter extends ForwardingStore {
  override list(prefix: string, options?: ListOptions): AsyncIterable<ObjectSummary> {
    return super.list(prefix, options?.signal ? { signal: options.signal } : {});
  }
}

/** The folder of a tier a partition key names, and its period start. */
function partitionStart(cfg: CompactorConfig, tier: TierName, partition: string): number {
  const suffix = tier === 'hourly' ? 'p.parquet' : tier === 'daily' ? 'p_daily.parquet' : 'p_monthly.parquet';
  const file = cfg.layout.parse(`${partition}${suffix}`);
  const start = tier === 'hourly' ? file?.hour : tier === 'daily' ? file?.day : file?.month;
  if (!start) throw new Error(`partition ${partition} does not parse`);
  return start.getTime();
}

/** Hour folder key of `table` at `ms` for `cfg`'s layout (via the window module's renderer). */
function hourFolderOf(cfg: CompactorConfig, table: string, ms: number): string {
  return tierFolderAt(cfg.layout, 'hourly', `${cfg.layout.dataPrefix}${table}`, ms);
}

/**
 * A lake over the 40 days before the clock: raw files (some hours below minFiles), hourly outputs,
 * small and big daily outputs, a monthly output, a live manifest and a quarantined input.
 */
async function buildLake(cfg: CompactorConfig, c: LakeCase, seed: number): Promise<void> {
  const random = rng(seed);
  const first = Math.floor((LATER - 40 * DAY) / HOUR) * HOUR;
  let n = 0;
  const name = (folder: string, suffix: string) => `${folder}f${String(n++).padStart(6, '0')}${suffix}`;
  const claimed: { partition: string; key: string }[] = [];
  // Writes are batched: each put of the local store syncs to disk.
  const pending: { key: string; size: number }[] = [];
  const store = { put: async (key: string, body: Buffer) => void pending.push({ key, size: body.length }) };
  for (const table of c.tables) {
    for (let hour = first; hour < LATER; hour += HOUR) {
      // Sparse: about one hour in six holds anything, more of them near the clock.
      const recent = LATER - hour < 4 * DAY;
      if (random() > (recent ? 0.4 : 0.06)) continue;
      const folder = hourFolderOf(cfg, table, hour);
      const raw = Math.floor(random() * 5);
      for (let i = 0; i < raw; i++) await store.put(name(folder, '.parquet'), Buffer.alloc(10));
      if (random() < 0.4)
        await store.put(name(folder, '_compacted.parquet'), Buffer.alloc(random() < 0.5 ? 10 : 900));
      if (random() < 0.1)
        claimed.push({ partition: folder, key: `${folder}f${String(n - 1).padStart(6, '0')}.parquet` });
      if (c.tiers.includes('daily') && random() < 0.3) {
        const day = tierFolderAt(
          cfg.layout,
          'daily',
          `${cfg.layout.dataPrefix}${table}`,
          Math.floor(hour / DAY) * DAY,
        );
        await store.put(name(day, '_daily.parquet'), Buffer.alloc(random() < 0.5 ? 10 : 900));
      }
    }
  }
  for (let i = 0; i < pending.length; i += 32) {
    await Promise.all(pending.slice(i, i + 32).map((p) => realStore().put(p.key, Buffer.alloc(p.size))));
  }
  // A live hourly manifest on one folder, and a quarantined input elsewhere: both still exclude.
  const held = claimed[0];
  if (held) {
    const jobId = newJobId(new Date(LATER), () => '0a1b2c3d');
    const at = new Date(LATER).toISOString();
    await realStore().put(
      manifestKey(cfg.layout, 'hourly', held.partition),
      serializeManifest({
        version: 1,
        jobId,
        executionId: 'exec',
        tier: 'hourly',
        partition: held.partition,
        location: realStore().location,
        state: 'claimed',
        inputs: [],
        createdAt: at,
        updatedAt: at,
        leaseExpiresAt: new Date(LATER + 20 * 60_000).toISOString(),
      }),
    );
  }
  const quarantined = claimed[1];
  if (quarantined) await realStore().put(quarantinedInputKey(cfg.layout, quarantined.key), Buffer.from('{}'));
}

describe.each(CASES)('a narrow cycle plans exactly the windows of the full plan: $name', (c) => {
  it.each([1, 2])(
    'seed %i: narrow = full restricted to the window; sweep = full; nothing planned twice',
    async (seed) => {
      const base = {
        ...c.input,
        dataPrefix: 'lake/',
        targetFileBytes: 1000,
        tiers: { ...c.input.tiers, hourly: { minFiles: 3 } },
      };
      const full = parseConfig({ ...base, planning: { listing: 'full' } });
      const windowed = parseConfig({ ...base, planning: { sweepEveryHours: 0, lookbackHours: 30 } });
      await buildLake(full, c, seed);
      for (const tier of c.tiers) {
        const fullPlan = await planTier(store, full, later, tier);
        const sweep = await planTier(store, windowed, later, tier, { sweep: true });
        const narrow = await planTier(store, windowed, later, tier);
        // A store that lists more than asked changes nothing: folders before the window are dropped.
        const ignoring = await planTier(new IgnoresStartAfter(store), windowed, later, tier);
        expect(ignoring.jobs).toEqual(narrow.jobs);
        expect(ignoring.skipped).toEqual(narrow.skipped);
        expect(fullPlan.listing?.mode).toBe('full');
        expect(sweep.listing).toMatchObject({ mode: 'sweep', tables: c.tables.length });
        expect(narrow.listing?.mode).toBe('windows');
        // A sweep (every table whole, in parallel) decides exactly what the one listing decides.
        expect(sweep.jobs).toEqual(fullPlan.jobs);
        expect(sweep.skipped).toEqual(fullPlan.skipped);
        const since = Date.parse(narrow.listing?.since ?? '');
        expect(since).toBe(windowStart(windowed, tier, LATER));
        const inWindow = (p: { partition: string }) => partitionStart(full, tier, p.partition) >= since;
        expect(narrow.jobs).toEqual(fullPlan.jobs.filter(inWindow));
        expect(narrow.skipped).toEqual(fullPlan.skipped.filter(inWindow));
        // The case is not vacuous: the full plan has jobs on both sides of the window.
        expect(fullPlan.jobs.some(inWindow)).toBe(true);
        expect(fullPlan.jobs.some((j) => !inWindow(j))).toBe(true);
        expect(narrow.objectsListed).toBeLessThan(fullPlan.objectsListed);
        for (const plan of [fullPlan, narrow]) {
          const partitions = plan.jobs.map((j) => j.partition);
          const inputs = plan.jobs.flatMap((j) => j.inputs.map((i) => i.key));
          expect(new Set(partitions).size).toBe(partitions.length);
          expect(new Set(inputs).size).toBe(inputs.length);
        }
      }
    },
  );
});

describe('late data in an old window', () => {
  it('is planned by the sweep and not by the narrow cycle; the narrow cycle still plans the recent hour', async () => {
    const cfg = parseConfig({ tiers: { hourly: { minFiles: 3 } }, planning: { sweepEveryHours: 0 } });
    const recent = hourFolderOf(cfg, 'db/cpu/', Math.floor(LATER / HOUR) * HOUR - 3 * HOUR);
    const old = hourFolderOf(cfg, 'db/cpu/', Math.floor(LATER / DAY) * DAY - 10 * DAY + 7 * HOUR);
    for (const i of [1, 2, 3]) await store.put(`${recent}cpu_${i}.parquet`, Buffer.alloc(10));
    // The old day was compacted long ago; then one raw file of it arrived late.
    await store.put(`${old.slice(0, -3)}cpu_x_daily.parquet`, Buffer.alloc(10));
    const late = `${old}cpu_late.parquet`;
    await store.put(late, Buffer.alloc(10));

    const narrow = await planTier(store, cfg, later, 'hourly');
    expect(narrow.listing?.mode).toBe('windows');
    expect(narrow.jobs.map((j) => j.partition)).toEqual([recent]);
    expect(narrow.skipped.find((s) => s.partition === old)).toBeUndefined();

    const sweep = await planTier(store, cfg, later, 'hourly', { sweep: true });
    expect(sweep.listing?.mode).toBe('sweep');
    expect(sweep.jobs.map((j) => j.partition)).toEqual([old, recent]);
    // A lone late file is flushed (its day is old enough for the daily tier), whole.
    expect(sweep.jobs[0]?.inputs.map((i) => i.key)).toEqual([late]);
    expect(sweep.jobs[1]).toEqual(narrow.jobs[0]);
  });
});

describe('when a cycle sweeps', () => {
  function deps(config: CompactorConfig, now: number): HandlerDeps {
    return {
      store,
      bucket: 'local-data-bucket',
      config,
      clock: { now: () => new Date(now) },
      engine: async () => {
        throw new Error('Plan needs no engine');
      },
      workDir: join(root, 'work'),
      isOwnerAlive: async () => false,
      randomHex: () => 'abcdef01',
    };
  }
  const tools = () => ({ ...localObservability(), signal: new AbortController().signal });

  it('the plan step sweeps when no sweep is recorded, records it, lists windows until sweepEveryHours passed, and sweeps when asked', async () => {
    const cfg = parseConfig({ planning: { sweepEveryHours: 24 } });
    await store.put('db/cpu/2020/01/01/00/cpu_1.parquet', Buffer.alloc(10));
    const t0 = Date.UTC(2026, 0, 5, 10, 10);
    const event = (name: string, extra: Record<string, unknown> = {}) => ({
      tier: 'hourly' as const,
      executionId: `arn:${name}`,
      executionName: name,
      ...extra,
    });
    const first = await planStep(event('first'), deps(cfg, t0), tools());
    expect(first.listing).toBe('sweep');
    expect(first.listingReason).toBe('no sweep of the hourly tier recorded');
    expect(await keysOf(store.list(sweepsRoot(cfg, 'hourly')))).toEqual([
      `${sweepsRoot(cfg, 'hourly')}${new Date(t0).toISOString()}.json`,
    ]);
    const second = await planStep(event('second'), deps(cfg, t0 + HOUR), tools());
    expect(second.listing).toBe('windows');
    // The 2020 hour lies before every window since: only a sweep finds it, and the plans between
    // list it again (alone) because the sweep's backlog record carries it, eligible.
    expect(first.objectsListed).toBe(1);
    expect(second.objectsListed).toBe(1);
    expect(second.listingReason).toContain(
      "; 1 partition(s) of the last plan's backlog record before the window listed again",
    );
    const asked = await planStep(event('asked', { sweep: true }), deps(cfg, t0 + 2 * HOUR), tools());
    expect(asked.listing).toBe('sweep');
    expect(asked.listingReason).toBe('asked for (execution input "sweep")');
    const stillNarrow = await planStep(event('narrow'), deps(cfg, t0 + 25 * HOUR), tools());
    expect(stillNarrow.listing).toBe('windows');
    const due = await planStep(event('due'), deps(cfg, t0 + 26 * HOUR + 1), tools());
    expect(due.listing).toBe('sweep');
    expect(due.listingReason).toContain('is at least planning.sweepEveryHours (24) old');
    // Each tier keeps its own record.
    const daily = await planStep({ ...event('daily'), tier: 'daily' }, deps(cfg, t0 + 2 * HOUR), tools());
    expect(daily.listing).toBe('sweep');
  });

  it('falls back to one full listing for a store that cannot list folders, and says so', async () => {
    const cfg = parseConfig({});
    const noFolders = new (class extends ForwardingStore {
      override get listFolders(): ObjectStore['listFolders'] {
        return undefined;
      }
    })(store);
    const plan = await planTier(noFolders, cfg, later, 'hourly');
    expect(plan.listing).toEqual({
      mode: 'full',
      reason: 'the store cannot list folders (no listFolders)',
      listings: 1,
      backlogCovered: true,
    });
  });

  it('lists every table whole for a template whose folders do not sort by time, and says why', async () => {
    const cfg = parseConfig({
      layout: '{table}/{DD}-{MM}-{YYYY}/{HH}/',
      partitionSegments: [],
      planning: { sweepEveryHours: 0 },
    });
    const hour = new Date(Math.floor(LATER / HOUR) * HOUR - 30 * DAY);
    const dd = String(hour.getUTCDate()).padStart(2, '0');
    const mm = String(hour.getUTCMonth() + 1).padStart(2, '0');
    const hh = String(hour.getUTCHours()).padStart(2, '0');
    const folder = `t/${dd}-${mm}-${hour.getUTCFullYear()}/${hh}/`;
    for (const i of [1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
      await store.put(`${folder}f${i}.parquet`, Buffer.alloc(10));
    const plan = await planTier(store, cfg, later, 'hourly');
    expect(plan.listing?.mode).toBe('sweep');
    expect(plan.listing?.reason).toContain('keys do not sort by time');
    expect(plan.listing?.reason).toContain('every table is listed whole');
    expect(plan.jobs.map((j) => j.partition)).toEqual([folder]);
  });

  it('a scoped plan lists its table whole', async () => {
    const cfg = parseConfig({});
    const plan = await planTier(store, cfg, later, 'hourly', { only: 'db/cpu/' });
    expect(plan.listing?.mode).toBe('full');
    expect(plan.listing?.reason).toBe('scoped to the table db/cpu/, listed whole');
  });
});

describe('folder listing and StartAfter on the local folder store', () => {
  it('lists the folders holding an object, in key order, never the reserved folder or an empty folder', async () => {
    await store.put('b/x/1.parquet', Buffer.alloc(1));
    await store.put('a/y/z/2.parquet', Buffer.alloc(1));
    await store.put('a/1.parquet', Buffer.alloc(1));
    await store.put('a-b/3.parquet', Buffer.alloc(1));
    await mkdir(join(root, 'empty', 'deeper'), { recursive: true });
    expect(await keysOf(store.listFolders(''))).toEqual(['a-b/', 'a/', 'b/']);
    expect(await keysOf(store.listFolders('a/'))).toEqual(['a/y/']);
    expect(await keysOf(store.listFolders('missing/'))).toEqual([]);
  });

  it('lists only keys after startAfter', async () => {
    for (const key of [
      't/2026/01/01/00/a.parquet',
      't/2026/01/01/05/b.parquet',
      't/2026/01/01/c_daily.parquet',
      't/2026/01/02/00/d.parquet',
    ]) {
      await store.put(key, Buffer.alloc(1));
    }
    expect(await keysOf(store.list('t/', { startAfter: 't/2026/01/01/05/' }))).toEqual([
      't/2026/01/01/05/b.parquet',
      't/2026/01/01/c_daily.parquet',
      't/2026/01/02/00/d.parquet',
    ]);
  });
});

describe('S3Store folder listing and StartAfter on fauxqs (in-process S3 server, real SDK)', () => {
  let s3: FauxqsS3;
  let s3store: S3Store;
  beforeAll(async () => {
    s3 = await startFauxqsS3('windows');
    s3store = new S3Store({ client: s3.client, bucket: s3.bucket });
  });
  afterAll(async () => {
    await s3?.stop();
  });

  it('lists CommonPrefixes past 1,000 (paged) and keys after StartAfter; a windowed plan lists fewer objects and plans the same recent jobs', async () => {
    const keys = Array.from(
      { length: 1005 },
      (_, i) => `lake/db/m${String(i).padStart(4, '0')}/2020/01/01/00/x.parquet`,
    );
    await Promise.all(keys.map((key) => s3store.put(key, Buffer.alloc(1))));
    expect(await keysOf(s3store.listFolders('lake/'))).toEqual(['lake/db/']);
    const tables = await keysOf(s3store.listFolders('lake/db/'));
    expect(tables).toHaveLength(1005);
    expect(tables[1004]).toBe('lake/db/m1004/');
    expect(
      await keysOf(s3store.list('lake/db/m0000/', { startAfter: 'lake/db/m0000/2020/01/01/00/' })),
    ).toEqual(['lake/db/m0000/2020/01/01/00/x.parquet']);
    expect(
      await keysOf(s3store.list('lake/db/m0000/', { startAfter: 'lake/db/m0000/2020/01/01/00/x.parquet' })),
    ).toEqual([]);

    const cfg = parseConfig({
      dataPrefix: 'lake/',
      tiers: { hourly: { minFiles: 1 } },
      planning: { sweepEveryHours: 0 },
    });
    const recent = hourFolderOf(cfg, 'db/m0001/', Math.floor(LATER / HOUR) * HOUR - 3 * HOUR);
    await s3store.put(`${recent}y.parquet`, Buffer.alloc(1));
    const narrow = await planTier(s3store, cfg, later, 'hourly');
    const sweep = await planTier(s3store, cfg, later, 'hourly', { sweep: true });
    expect(narrow.listing).toMatchObject({ mode: 'windows', tables: 1005 });
    expect(narrow.objectsListed).toBe(1);
    expect(sweep.objectsListed).toBe(1006);
    expect(narrow.jobs).toEqual(sweep.jobs.filter((j) => j.partition === recent));
    expect(sweep.jobs).toHaveLength(1006);
  });
});

describe('planning settings', () => {
  it('default to windows over 48 h, a sweep a day (hourly), a week (daily), two weeks (monthly), 32 listings at once', () => {
    expect(parseConfig({}).planning).toEqual({
      listing: 'windowed',
      lookbackHours: 48,
      sweepEveryHours: { hourly: 24, daily: 168, monthly: 336 },
      listConcurrency: 32,
    });
    expect(parseConfig({ planning: { sweepEveryHours: 12 } }).planning.sweepEveryHours).toEqual({
      hourly: 12,
      daily: 12,
      monthly: 12,
    });
    expect(parseConfig({ planning: { sweepEveryHours: { daily: 0 } } }).planning.sweepEveryHours).toEqual({
      hourly: 24,
      daily: 0,
      monthly: 336,
    });
  });

  it.each([
    [{ listing: 'some' }, 'planning.listing must be "windowed" or "full"'],
    [{ lookbackHours: 0 }, 'planning.lookbackHours must be a whole number'],
    [{ sweepEveryHours: -1 }, 'planning.sweepEveryHours must be a number of hours from 0'],
    [{ sweepEveryHours: 337 }, 'sweep records expire with the plans after 15'],
    [{ listConcurrency: 0 }, 'planning.listConcurrency must be a whole number'],
    [{ lookback: 3 }, 'planning.lookback is not a setting'],
    [
      { sweepEveryHours: { weekly: 3 } },
      'planning.sweepEveryHours.weekly is not a setting (known: hourly, daily, monthly)',
    ],
    [{ sweepEveryHours: { daily: 400 } }, 'planning.sweepEveryHours.daily must be a number of hours from 0'],
  ])('refuses %j, naming the key', (planning, message) => {
    expect(() => parseConfig({ planning: planning as ConfigInput['planning'] })).toThrow(message);
  });
});

describe('parseInFolder: a folder parsed once serves the keys listed after it in the same folder', () => {
  it.each([
    ['arc', ''],
    ['hive', 'lake/'],
    ['firehose', ''],
    ['{org}/{team}/{table}/y={YYYY}/m={MM}/d={DD}/h={HH}/', 'x/'],
  ])('%s: equals layout.parse on every key, whatever came before it', (name, prefix) => {
    const layout = Layout.create(name, prefix);
    const table = `${prefix}${name === 'arc' ? 'db/cpu/' : name.startsWith('{') ? 'a/b/c/' : 't/'}`;
    const month = tierFolderAt(layout, 'monthly', table, Date.UTC(2026, 0, 1));
    const day = tierFolderAt(layout, 'daily', table, Date.UTC(2026, 0, 2));
    const hour = tierFolderAt(layout, 'hourly', table, Date.UTC(2026, 0, 2, 5));
    const names = [
      'a.parquet',
      'b_compacted.parquet',
      'c_daily.parquet',
      'd_monthly.parquet',
      '_SUCCESS',
      '.hidden.parquet',
      '.parquet',
      'part-0001',
      'x.crc',
      'y.tmp',
      '',
    ];
    const keys = [month, day, hour, `${day}99/`, `${table}2026/13/`].flatMap((folder) =>
      names.map((n) => `${folder}${n}`),
    );
    // Every order of two keys: the first one primes the folder, the second is served from it.
    for (const first of keys) {
      for (const second of keys) {
        const stream = {};
        expect(parseInFolder(layout, first, stream)).toEqual(layout.parse(first));
        expect(parseInFolder(layout, second, stream)).toEqual(layout.parse(second));
      }
    }
  });
});

describe('a listing out of key order', () => {
  it('fails the plan rather than plan a folder from part of its keys', async () => {
    await store.put('db/cpu/2026/01/01/00/a.parquet', Buffer.alloc(1));
    await store.put('db/cpu/2026/01/01/01/b.parquet', Buffer.alloc(1));
    const reversed = new (class extends ForwardingStore {
      override async *list(prefix: string, options?: ListOptions): AsyncIterable<ObjectSummary> {
        const all: ObjectSummary[] = [];
        for await (const o of super.list(prefix, options)) all.push(o);
        yield* all.reverse();
      }
    })(store);
    await expect(planTier(reversed, parseConfig({}), later, 'hourly', { sweep: true })).rejects.toThrow(
      'not in key order',
    );
  });
});

describe('planning in the stack context (cdk.json compactor.planning)', () => {
  it('reaches the Lambdas as COMPACTOR_CONFIG, and is left out when unset', () => {
    expect(lambdaConfigInput(parseStackConfig({})).planning).toBeUndefined();
    const config = parseStackConfig({ planning: { lookbackHours: 72, sweepEveryHours: { daily: 48 } } });
    expect(parseConfig(lambdaConfigInput(config)).planning).toEqual({
      listing: 'windowed',
      lookbackHours: 72,
      sweepEveryHours: { hourly: 24, daily: 48, monthly: 336 },
      listConcurrency: 32,
    });
  });

  it('a bad setting fails at synth, naming it', () => {
    expect(() => parseStackConfig({ planning: { listing: 'all' } })).toThrow(
      'context compactor.planning.listing must be "windowed" or "full", got "all"',
    );
  });
});

describe('the execution input "sweep" in the synthesized definition', () => {
  it('defaults to null and reaches Plan, which validates it', async () => {
    const { synthesizeWorkflow } = await import('../../functions/local-runner/run.ts');
    const { STATES } = await import('../../cdk/constructs/compaction-workflow.ts');
    const workflow = await synthesizeWorkflow({});
    const states = (workflow.definition as unknown as { States: Record<string, Record<string, unknown>> })
      .States;
    expect(states[STATES.defaults]?.Result).toMatchObject({ sweep: null });
    const payload = (states[STATES.plan]?.Parameters as { Payload: Record<string, unknown> } | undefined)
      ?.Payload;
    if (payload === undefined) throw new Error('Plan has no Payload');
    expect(payload['sweep.$']).toBe('$.args.sweep');
    const { parseExecutionEvent } = await import('../../functions/lambda/events.ts');
    const base = { tier: 'hourly', executionId: 'arn:x', executionName: 'x' };
    expect(parseExecutionEvent({ ...base, sweep: null })).toEqual(base);
    expect(parseExecutionEvent({ ...base, sweep: true })).toEqual({ ...base, sweep: true });
    expect(() => parseExecutionEvent({ ...base, sweep: 'yes' })).toThrow('"sweep" must be true or false');
  }, 120_000);
});
