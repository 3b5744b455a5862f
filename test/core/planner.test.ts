import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { LocalFolderStore } from '../../functions/adapters/local-store/local-store.ts';
import {
  type CompactorConfig,
  type ConfigInput,
  parseConfig,
  type TierName,
} from '../../functions/core/config.ts';
import { planCycle } from '../../functions/core/cycle.ts';
import type { Clock } from '../../functions/core/engine.ts';
import { ConfigError } from '../../functions/core/errors.ts';
import { readExclusions } from '../../functions/core/exclusions.ts';
import { compactDate, type DataFile } from '../../functions/core/layout.ts';
import {
  type InputRef,
  type Manifest,
  type ManifestState,
  manifestKey,
  manifestsRoot,
  newJobId,
  outputKey,
  quarantinedInputKey,
  quarantinedManifestKey,
  serializeManifest,
  stagingPrefix,
} from '../../functions/core/manifest/manifest.ts';
import { ForwardingStore, type ObjectStore, type ObjectSummary } from '../../functions/core/object-store.ts';
import { type Plan, planTier } from '../../functions/core/planner/planner.ts';
import { testStore } from '../support/test-store.ts';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

// Files get their real mtime (now). A clock three hours ahead sees every folder as quiet;
// partitions are placed relative to that clock so minAge and straggler checks are deterministic.
const LATER = Date.now() + 3 * HOUR;
const LATER_HOUR = Math.floor(LATER / HOUR) * HOUR;
const LATER_DAY = Math.floor(LATER / DAY) * DAY;
const later: Clock = { now: () => new Date(LATER) };
const realTime: Clock = { now: () => new Date() };

/** An hour two hours before the clock: old enough (minAge 1h), and its day is never old enough for stragglers. */
const RECENT_HOUR = LATER_HOUR - 2 * HOUR;
/** 10:00 two days before the clock: older than the daily tier's minAge (3h). */
const OLD_HOUR = LATER_DAY - 2 * DAY + 10 * HOUR;

let root: string;
let store: LocalFolderStore;

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'planner-'));
  store = testStore(root);
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

function config(input: ConfigInput = {}): CompactorConfig {
  return parseConfig({ ...input, tiers: { hourly: { minFiles: 3 }, ...input.tiers } });
}

function hourFolder(ms: number, table = 'mydb/cpu', prefix = ''): string {
  const iso = new Date(ms).toISOString();
  return `${prefix}${table}/${iso.slice(0, 4)}/${iso.slice(5, 7)}/${iso.slice(8, 10)}/${iso.slice(11, 13)}/`;
}

function dayFolder(ms: number, table = 'mydb/cpu', prefix = ''): string {
  return hourFolder(ms, table, prefix).split('/').slice(0, -2).join('/').concat('/');
}

/** An Arc-style raw file name in the hour folder of `ms`. */
function l0(folder: string, i: number): string {
  const parts = folder.split('/').filter(Boolean);
  const date = parts.slice(-4, -1).join('');
  return `${folder}cpu_${date}_${parts.at(-1)}0000_${String(i).padStart(9, '0')}.parquet`;
}

async function put(key: string, size = 10): Promise<void> {
  await store.put(key, Buffer.alloc(size, 1));
}

async function putL0(folder: string, count: number, size = 10): Promise<string[]> {
  const keys = Array.from({ length: count }, (_, i) => l0(folder, i + 1));
  for (const key of keys) await put(key, size);
  return keys;
}

const JOB_ID = newJobId(new Date(LATER), () => '0a1b2c3d');

function manifest(
  tier: TierName,
  partition: string,
  inputKeys: readonly string[],
  state: ManifestState = 'claimed',
  outputs: Manifest['outputs'] = undefined,
): Manifest {
  const inputs: InputRef[] = inputKeys.map((key) => ({ key, size: 10, etag: 'etag' }));
  return {
    version: 1,
    jobId: JOB_ID,
    executionId: 'exec-1',
    tier,
    partition,
    location: store.location,
    state,
    inputs,
    ...(outputs === undefined ? {} : { outputs }),
    createdAt: new Date(LATER).toISOString(),
    updatedAt: new Date(LATER).toISOString(),
    leaseExpiresAt: new Date(LATER + 20 * 60_000).toISOString(),
  };
}

async function putManifest(cfg: CompactorConfig, m: Manifest): Promise<string> {
  const key = manifestKey(cfg.layout, m.tier, m.partition);
  await store.put(key, serializeManifest(m), { ifNoneMatch: '*' });
  return key;
}

function jobFor(plan: Plan, partition: string) {
  return plan.jobs.find((j) => j.partition === partition);
}

function skipFor(plan: Plan, partition: string) {
  return plan.skipped.find((s) => s.partition === partition);
}

function plannedKeys(plan: Plan): string[] {
  return plan.jobs.flatMap((j) => j.inputs.map((i) => i.key));
}

function parsed(cfg: CompactorConfig, key: string): DataFile {
  const file = cfg.layout.parse(key);
  if (!file) throw new Error(`test key ${key} does not parse`);
  return file;
}

describe('hourly candidates', () => {
  it('compacts an hour with at least minFiles files and skips one with fewer', async () => {
    const cfg = config();
    const full = hourFolder(RECENT_HOUR);
    const thin = hourFolder(RECENT_HOUR - HOUR);
    const fullKeys = await putL0(full, 3, 100);
    await putL0(thin, 2);
    const plan = await planTier(store, cfg, later, 'hourly');
    expect(plan.tier).toBe('hourly');
    expect(plan.now).toBe(new Date(LATER).toISOString());
    expect(plan.objectsListed).toBe(5);
    // Objects under the state root (an Athena view, a failure record) are not the lake's.
    await store.put(`${cfg.layout.stateRoot}views/athena/db_cpu/manifest`, Buffer.from('x\n'));
    await store.put(`${cfg.layout.stateRoot}failures/hourly/x.json`, Buffer.from('{}'));
    expect((await planTier(store, cfg, later, 'hourly')).objectsListed).toBe(5);
    const listAll = config({ planning: { listing: 'full' } });
    expect((await planTier(store, listAll, later, 'hourly')).objectsListed).toBe(5);
    expect(plan.jobs).toHaveLength(1);
    const job = jobFor(plan, full);
    expect(job).toMatchObject({ tier: 'hourly', partition: full, inputBytes: 300, candidates: 3 });
    expect(job?.reason).toBe('3 candidate file(s)');
    expect(job?.inputs.map((i) => i.key)).toEqual(fullKeys);
    const heads = await Promise.all(fullKeys.map((k) => store.head(k)));
    expect(job?.inputs).toEqual(heads.map((h) => ({ key: h?.key, size: h?.size, etag: h?.etag })));
    expect(skipFor(plan, thin)?.reason).toBe('2 file(s), fewer than minFiles 3');
  });

  it('skips an hour that has not ended minAge ago', async () => {
    const cfg = config();
    const lastHour = hourFolder(LATER_HOUR - HOUR); // ended less than an hour before the clock
    const currentHour = hourFolder(LATER_HOUR); // not ended at all
    await putL0(lastHour, 5);
    await putL0(currentHour, 5);
    const plan = await planTier(store, cfg, later, 'hourly');
    expect(plan.jobs).toEqual([]);
    expect(skipFor(plan, lastHour)?.reason).toBe('period not older than minAge (3600s)');
    expect(skipFor(plan, currentHour)?.reason).toBe('period not older than minAge (3600s)');
    // With minAge 0 the ended hour is eligible, the current one still is not.
    const eager = await planTier(
      store,
      config({ tiers: { hourly: { minFiles: 3, minAgeSeconds: 0 } } }),
      later,
      'hourly',
    );
    expect(eager.jobs.map((j) => j.partition)).toEqual([lastHour]);
    expect(skipFor(eager, currentHour)?.reason).toMatch(/minAge/);
  });

  it('skips an hour holding a file written within the quiet period', async () => {
    const cfg = config();
    const folder = hourFolder(Math.floor(Date.now() / HOUR) * HOUR - 2 * HOUR);
    await putL0(folder, 5);
    const plan = await planTier(store, cfg, realTime, 'hourly');
    expect(plan.jobs).toEqual([]);
    expect(skipFor(plan, folder)?.reason).toBe('a file was written less than quietSeconds (300s) ago');
    // A few hours later the same folder is quiet.
    const quiet = await planTier(store, cfg, later, 'hourly');
    expect(jobFor(quiet, folder)?.candidates).toBe(5);
  });

  it('names a file written after the time planned for, rather than "less than 0s ago"', async () => {
    const cfg = config({ quietSeconds: 0 });
    const folder = hourFolder(Math.floor(Date.now() / HOUR) * HOUR - 2 * HOUR);
    await putL0(folder, 5);
    // Planning as of an hour ago, before the files were written (a replay, --now).
    const earlier = { now: () => new Date(Date.now() - HOUR) };
    const plan = await planTier(
      store,
      { ...cfg, tiers: { ...cfg.tiers, hourly: { ...cfg.tiers.hourly, minAgeSeconds: 0 } } },
      earlier,
      'hourly',
    );
    expect(skipFor(plan, folder)?.reason).toMatch(
      /^a file was written at \S+Z, after the time planned for \(\S+Z\)$/,
    );
  });

  it('counts a fresh L1 file of the hour in the quiet check', async () => {
    const cfg = config();
    const folder = hourFolder(Math.floor(Date.now() / HOUR) * HOUR - 2 * HOUR);
    await putL0(folder, 5);
    const plan1 = await planTier(store, cfg, { now: () => new Date(Date.now() + 10 * 60_000) }, 'hourly');
    expect(plan1.jobs).toHaveLength(1);
    // Ten minutes later, a just-written hourly output makes the folder busy again.
    await put(`${folder}cpu_compacted.parquet`);
    const now2 = Date.now() + 60_000;
    const plan2 = await planTier(store, cfg, { now: () => new Date(now2) }, 'hourly');
    expect(plan2.jobs).toEqual([]);
    expect(skipFor(plan2, folder)?.reason).toMatch(/written less than/);
  });

  it('flushes a single straggler once its day is old enough for the daily tier', async () => {
    const cfg = config();
    const old = hourFolder(OLD_HOUR);
    const recent = hourFolder(RECENT_HOUR);
    const [straggler] = await putL0(old, 1);
    await putL0(recent, 1);
    const plan = await planTier(store, cfg, later, 'hourly');
    expect(plan.jobs).toHaveLength(1);
    const job = jobFor(plan, old);
    expect(job?.inputs.map((i) => i.key)).toEqual([straggler]);
    expect(job?.candidates).toBe(1);
    expect(job?.reason).toBe('straggler flush: the day is old enough for the daily tier');
    expect(skipFor(plan, recent)?.reason).toBe('1 file(s), fewer than minFiles 3');
  });

  it('takes only L0 files', async () => {
    const cfg = config();
    const folder = hourFolder(RECENT_HOUR);
    const raw = await putL0(folder, 3);
    await put(`${folder}cpu_20250115_compacted.parquet`);
    await put(`${folder}cpu_${JOB_ID}_000_compacted.parquet`);
    await put(`${folder}cpu_x_daily.parquet`);
    await put(`${dayFolder(RECENT_HOUR)}cpu_daily.parquet`);
    const plan = await planTier(store, cfg, later, 'hourly');
    expect(plannedKeys(plan)).toEqual(raw);
    expect(jobFor(plan, folder)?.candidates).toBe(3);
  });

  it('ignores an hour whose files are all compacted already', async () => {
    const cfg = config({ tiers: { hourly: { minFiles: 1 } } });
    const folder = hourFolder(OLD_HOUR);
    await put(`${folder}cpu_a_compacted.parquet`);
    await put(`${folder}cpu_b_compacted.parquet`);
    const plan = await planTier(store, cfg, later, 'hourly');
    expect(plan.jobs).toEqual([]);
    expect(plan.skipped).toEqual([]);
  });
});

describe('daily candidates', () => {
  it('takes L1 files and small L2 files, never L0 or a big L2', async () => {
    const cfg = config({ targetFileBytes: 1000 });
    const day = dayFolder(OLD_HOUR);
    const h10 = hourFolder(OLD_HOUR);
    const h11 = hourFolder(OLD_HOUR + HOUR);
    const expected = [
      `${day}cpu_small_daily.parquet`,
      `${h10}cpu_20250115_compacted.parquet`,
      `${h10}cpu_${JOB_ID}_000_compacted.parquet`,
      `${h11}cpu_late_compacted.parquet`,
    ];
    await put(expected[0] as string, 499);
    for (const key of expected.slice(1)) await put(key, 100);
    await put(`${day}cpu_big_daily.parquet`, 500); // >= targetFileBytes / 2
    await putL0(h10, 2);
    const plan = await planTier(store, cfg, later, 'daily');
    expect(plan.jobs).toHaveLength(1);
    const job = jobFor(plan, day);
    expect(job?.tier).toBe('daily');
    expect(job?.inputs.map((i) => i.key)).toEqual([...expected].sort());
    expect(job?.inputBytes).toBe(499 + 300);
    expect(job?.candidates).toBe(4);
  });

  it('skips a day that has not ended minAge ago and a day with fewer than minFiles', async () => {
    const cfg = config();
    const today = LATER_DAY; // the clock's own day: not even ended
    await put(`${hourFolder(today)}a_compacted.parquet`);
    await put(`${hourFolder(today)}b_compacted.parquet`);
    await put(`${hourFolder(OLD_HOUR)}a_compacted.parquet`);
    const plan = await planTier(store, cfg, later, 'daily');
    expect(plan.jobs).toEqual([]);
    expect(skipFor(plan, dayFolder(today))?.reason).toBe('period not older than minAge (10800s)');
    expect(skipFor(plan, dayFolder(OLD_HOUR))?.reason).toBe('1 file(s), fewer than minFiles 2');
  });

  it('skips a day whose hours hold a file written within the quiet period, whatever its level', async () => {
    const cfg = config();
    const oldDay = Math.floor(Date.now() / DAY) * DAY - 2 * DAY;
    await put(`${hourFolder(oldDay + HOUR)}a_compacted.parquet`);
    await put(`${hourFolder(oldDay + 2 * HOUR)}b_compacted.parquet`);
    await putL0(hourFolder(oldDay + 3 * HOUR), 1);
    const plan = await planTier(store, cfg, realTime, 'daily');
    expect(plan.jobs).toEqual([]);
    expect(skipFor(plan, dayFolder(oldDay))?.reason).toMatch(/written less than quietSeconds \(300s\) ago/);
  });
});

describe('tiers are disjoint (I8)', () => {
  it('never offers one key to both tiers', async () => {
    const cfg = config({ targetFileBytes: 1000, tiers: { hourly: { minFiles: 1 }, daily: { minFiles: 1 } } });
    const keys: string[] = [];
    for (const table of ['mydb/cpu', 'mydb/mem']) {
      for (const hour of [OLD_HOUR, OLD_HOUR + HOUR, OLD_HOUR - DAY, RECENT_HOUR - HOUR]) {
        const folder = hourFolder(hour, table);
        keys.push(
          l0(folder, 1),
          l0(folder, 2),
          `${folder}x_compacted.parquet`,
          `${folder}y_compacted.parquet`,
        );
        keys.push(`${folder}z_daily.parquet`);
        keys.push(`${dayFolder(hour, table)}${compactDate(new Date(hour))}_daily.parquet`);
      }
    }
    for (const key of keys) await put(key);
    const hourly = await planTier(store, cfg, later, 'hourly');
    const daily = await planTier(store, cfg, later, 'daily');
    const hourlyKeys = plannedKeys(hourly);
    const dailyKeys = plannedKeys(daily);
    expect(hourlyKeys.length).toBeGreaterThan(0);
    expect(dailyKeys.length).toBeGreaterThan(0);
    expect(hourlyKeys.filter((k) => dailyKeys.includes(k))).toEqual([]);
    expect(hourlyKeys.every((k) => parsed(cfg, k).level === 0)).toBe(true);
    expect(dailyKeys.every((k) => parsed(cfg, k).level !== 0)).toBe(true);
    // Between them they plan every raw file, and every L1/L2 file of a day old enough for the daily tier.
    const expected = [...new Set(keys)].filter((k) => {
      const file = parsed(cfg, k);
      return file.level === 0 || (file.day?.getTime() ?? 0) < LATER_DAY - DAY;
    });
    expect([...hourlyKeys, ...dailyKeys].sort()).toEqual(expected.sort());
  });
});

describe('manifests and quarantine exclude files', () => {
  it('skips a partition held by a live manifest and excludes the files it names', async () => {
    const cfg = config();
    const held = hourFolder(RECENT_HOUR);
    const free = hourFolder(RECENT_HOUR - HOUR);
    const heldKeys = await putL0(held, 5);
    await putL0(free, 3);
    const key = await putManifest(cfg, manifest('hourly', held, heldKeys.slice(0, 2)));
    const exclusions = await readExclusions(store, cfg);
    expect([...exclusions.leasedManifests]).toEqual([key]);
    expect(exclusions.liveManifests.map((m) => m.partition)).toEqual([held]);
    expect([...exclusions.keys].sort()).toEqual(heldKeys.slice(0, 2));
    const plan = await planTier(store, cfg, later, 'hourly');
    expect(plan.jobs.map((j) => j.partition)).toEqual([free]);
    expect(skipFor(plan, held)?.reason).toMatch(
      /^held by job \S+ \(claimed since \S+Z, owner exec-1, lease until \S+Z\): the next run leaves it to its owner while that runs and the lease lasts, else its recovery rolls it back \(its inputs are planned again\)$/,
    );
    expect(plannedKeys(plan).some((k) => heldKeys.includes(k))).toBe(false);
  });

  it('excludes the inputs of a live daily manifest', async () => {
    const cfg = config();
    const day = dayFolder(OLD_HOUR);
    const inputs = [
      `${hourFolder(OLD_HOUR)}a_compacted.parquet`,
      `${hourFolder(OLD_HOUR + HOUR)}b_compacted.parquet`,
    ];
    for (const key of [...inputs, `${hourFolder(OLD_HOUR + 2 * HOUR)}late_compacted.parquet`]) await put(key);
    await putManifest(cfg, manifest('daily', day, inputs));
    const exclusions = await readExclusions(store, cfg);
    expect(exclusions.liveManifests.map((m) => m.tier)).toEqual(['daily']);
    expect([...exclusions.keys].sort()).toEqual(inputs);
    const plan = await planTier(store, cfg, later, 'daily');
    expect(plan.jobs).toEqual([]);
    expect(skipFor(plan, day)?.reason).toMatch(/^held by job /);
  });

  it('lets a manifest of one tier lease only that tier', async () => {
    const cfg = config({ tiers: { hourly: { minFiles: 1 } } });
    const folder = hourFolder(OLD_HOUR);
    const raw = await putL0(folder, 2);
    const outputs = [`${folder}a_compacted.parquet`, `${folder}b_compacted.parquet`];
    for (const key of outputs) await put(key);
    await putManifest(cfg, manifest('daily', dayFolder(OLD_HOUR), outputs));
    const hourly = await planTier(store, cfg, later, 'hourly');
    expect(plannedKeys(hourly)).toEqual(raw);
    const daily = await planTier(store, cfg, later, 'daily');
    expect(daily.jobs).toEqual([]);
  });

  it('lets an unreadable or invalid live manifest still block its partition', async () => {
    const cfg = config();
    const garbled = hourFolder(RECENT_HOUR);
    const foreign = hourFolder(RECENT_HOUR - HOUR);
    const free = hourFolder(RECENT_HOUR - 2 * HOUR);
    await putL0(garbled, 3);
    const foreignKeys = await putL0(foreign, 3);
    await putL0(free, 3);
    const garbledKey = manifestKey(cfg.layout, 'hourly', garbled);
    await store.put(garbledKey, Buffer.from('{"version": 1, "jobId": '));
    const foreignManifest = { ...manifest('hourly', foreign, foreignKeys), location: 's3://other-bucket' };
    const foreignKey = await putManifest(cfg, foreignManifest);
    const exclusions = await readExclusions(store, cfg);
    expect([...exclusions.leasedManifests].sort()).toEqual([garbledKey, foreignKey].sort());
    expect(exclusions.liveManifests).toEqual([]);
    // What they still seem to name is excluded from every tier too.
    expect([...exclusions.keys].sort()).toEqual([...foreignKeys].sort());
    expect(exclusions.unreadable.map((u) => u.manifestKey).sort()).toEqual([garbledKey, foreignKey].sort());
    const plan = await planTier(store, cfg, later, 'hourly');
    expect(plan.jobs.map((j) => j.partition)).toEqual([free]);
    expect(skipFor(plan, garbled)?.reason).toMatch(/live manifest/);
    // Its every file is excluded, yet the plan says what holds the folder, as the next run will.
    expect(skipFor(plan, foreign)?.reason).toBe(
      'held by a live manifest that does not validate: the next run quarantines it',
    );
  });

  it('excludes files named by a quarantined-manifest record, inputs and outputs', async () => {
    const cfg = config();
    const folder = hourFolder(OLD_HOUR);
    const raw = await putL0(folder, 5);
    const finalKey = outputKey(cfg.layout, 'hourly', parsed(cfg, raw[0] as string), JOB_ID, 0);
    const others = [
      `${folder}cpu_a_compacted.parquet`,
      `${hourFolder(OLD_HOUR + HOUR)}cpu_b_compacted.parquet`,
    ];
    for (const key of [finalKey, ...others]) await put(key);
    const quarantined = manifest('hourly', folder, raw.slice(0, 2), 'published', [
      {
        stagingKey: `${stagingPrefix(cfg.layout, JOB_ID)}000.parquet`,
        finalKey,
        size: 10,
        rows: 1,
        checksum: { algorithm: 'CRC32', value: 'AAAAAA==' },
      },
    ]);
    const liveKey = manifestKey(cfg.layout, 'hourly', folder);
    const recordKey = quarantinedManifestKey(cfg.layout, liveKey, `${JOB_ID}-verify`);
    expect(recordKey).toBe(
      `_compaction/quarantine/manifests/hourly/${folder.slice(0, -1)}/${JOB_ID}-verify.json`,
    );
    await store.put(
      recordKey,
      Buffer.from(
        JSON.stringify({
          manifestKey: liveKey,
          manifest: serializeManifest(quarantined).toString(),
          jobId: JOB_ID,
        }),
      ),
    );
    const exclusions = await readExclusions(store, cfg);
    expect(exclusions.quarantinedManifests.map((m) => m.jobId)).toEqual([JOB_ID]);
    expect(exclusions.leasedManifests.size).toBe(0);
    expect([...exclusions.keys].sort()).toEqual([...raw.slice(0, 2), finalKey].sort());
    // The quarantined manifest does not lease the partition: the other files are still compacted.
    const hourly = await planTier(store, cfg, later, 'hourly');
    expect(plannedKeys(hourly)).toEqual(raw.slice(2));
    expect(jobFor(hourly, folder)?.candidates).toBe(3);
    const daily = await planTier(store, cfg, later, 'daily');
    expect(plannedKeys(daily)).toEqual(others);
    expect(jobFor(daily, dayFolder(OLD_HOUR))?.candidates).toBe(2);
  });

  it('excludes quarantined inputs', async () => {
    const cfg = config({ dataPrefix: 'lake' });
    const folder = hourFolder(RECENT_HOUR, 'mydb/cpu', 'lake/');
    const raw = await putL0(folder, 4);
    const recordKey = quarantinedInputKey(cfg.layout, raw[1] as string);
    expect(recordKey).toBe(
      `lake/_compaction/quarantine/inputs/${(raw[1] as string).slice('lake/'.length)}.json`,
    );
    await store.put(recordKey, Buffer.from(JSON.stringify({ key: raw[1], reason: 'bad footer' })));
    const exclusions = await readExclusions(store, cfg);
    expect([...exclusions.keys]).toEqual([raw[1]]);
    const plan = await planTier(store, cfg, later, 'hourly');
    expect(plannedKeys(plan)).toEqual([raw[0], raw[2], raw[3]]);
    expect(jobFor(plan, folder)?.candidates).toBe(3);
  });

  it('ignores unreadable quarantine records', async () => {
    const cfg = config();
    const folder = hourFolder(RECENT_HOUR);
    const raw = await putL0(folder, 3);
    await store.put('_compaction/quarantine/manifests/hourly/x/1.json', Buffer.from('not json'));
    await store.put('_compaction/quarantine/manifests/hourly/x/2.json', Buffer.from('{"manifest": 1}'));
    await store.put(
      '_compaction/quarantine/manifests/hourly/x/3.json',
      Buffer.from(JSON.stringify({ manifestKey: 'nope.json', manifest: '{}' })),
    );
    const exclusions = await readExclusions(store, cfg);
    expect(exclusions.quarantinedManifests).toEqual([]);
    expect(exclusions.keys.size).toBe(0);
    expect(plannedKeys(await planTier(store, cfg, later, 'hourly'))).toEqual(raw);
  });
});

describe('job bounds', () => {
  it('splits a partition at maxJobFiles, taking the first keys in order', async () => {
    const cfg = config({ maxJobFiles: 5 });
    const folder = hourFolder(RECENT_HOUR);
    // Written out of key order.
    const keys = Array.from({ length: 12 }, (_, i) => l0(folder, 12 - i));
    for (const key of keys) await put(key);
    const plan = await planTier(store, cfg, later, 'hourly');
    const job = jobFor(plan, folder);
    expect(job?.inputs.map((i) => i.key)).toEqual([...keys].sort().slice(0, 5));
    expect(job?.candidates).toBe(12);
    expect(job?.inputBytes).toBe(50);
  });

  it('a partition of many job bounds becomes successive jobs in key order, one per wave, with disjoint inputs', async () => {
    const cfg = config({ maxJobFiles: 5 });
    const folder = hourFolder(RECENT_HOUR);
    const keys = Array.from({ length: 12 }, (_, i) => l0(folder, 12 - i));
    for (const key of keys) await put(key);
    const jobs = (await planTier(store, cfg, later, 'hourly')).jobs.filter((j) => j.partition === folder);
    expect(jobs.map((j) => j.wave)).toEqual([0, 1, 2]);
    expect(jobs.map((j) => j.inputs.length)).toEqual([5, 5, 2]);
    expect(jobs.flatMap((j) => j.inputs.map((i) => i.key))).toEqual([...keys].sort());
    expect(jobs.map((j) => j.reason)).toEqual([
      '12 candidate file(s): job 1 of 3, one after another',
      '12 candidate file(s): job 2 of 3, one after another',
      '12 candidate file(s): job 3 of 3, one after another',
    ]);
  });

  it('maxJobsPerPartition bounds the jobs: the rest waits for the next run', async () => {
    const cfg = config({ maxJobFiles: 5, maxJobsPerPartition: 2 });
    const folder = hourFolder(RECENT_HOUR);
    const keys = await putL0(folder, 12, 10);
    const jobs = (await planTier(store, cfg, later, 'hourly')).jobs.filter((j) => j.partition === folder);
    expect(jobs.map((j) => j.inputs.length)).toEqual([5, 5]);
    expect(jobs.flatMap((j) => j.inputs.map((i) => i.key))).toEqual(keys.slice(0, 10));
  });

  it('above the hourly tier, a last job of one input alone is left for the next run', async () => {
    const cfg = config({ maxJobFiles: 2 });
    const folder = hourFolder(OLD_HOUR);
    for (const name of ['a', 'b', 'c', 'd', 'e']) await put(`${folder}${name}_compacted.parquet`, 10);
    const jobs = (await planTier(store, cfg, later, 'daily')).jobs;
    expect(jobs.map((j) => [j.wave, j.inputs.length])).toEqual([
      [0, 2],
      [1, 2],
    ]);
  });

  it('splits a partition at maxJobBytes', async () => {
    const cfg = config({ maxJobBytes: 350 });
    const folder = hourFolder(RECENT_HOUR);
    const keys = await putL0(folder, 6, 100);
    const job = jobFor(await planTier(store, cfg, later, 'hourly'), folder);
    expect(job?.inputs.map((i) => i.key)).toEqual(keys.slice(0, 3));
    expect(job?.inputBytes).toBe(300);
    expect(job?.candidates).toBe(6);
  });

  it('takes a single oversized raw file alone so the hour still converges', async () => {
    const cfg = config({ maxJobBytes: 50 });
    const folder = hourFolder(RECENT_HOUR);
    const keys = await putL0(folder, 3, 100);
    const job = jobFor(await planTier(store, cfg, later, 'hourly'), folder);
    expect(job?.inputs.map((i) => i.key)).toEqual(keys.slice(0, 1));
  });

  it('skips a daily partition whose first input alone exceeds the bound', async () => {
    const cfg = config({ maxJobBytes: 150 });
    const folder = hourFolder(OLD_HOUR);
    await put(`${folder}a_compacted.parquet`, 200);
    await put(`${folder}b_compacted.parquet`, 10);
    const plan = await planTier(store, cfg, later, 'daily');
    expect(plan.jobs).toEqual([]);
    expect(skipFor(plan, dayFolder(OLD_HOUR))?.reason).toBe(
      'the next daily input alone exceeds the job bound',
    );
  });
});

describe('what is never data', () => {
  it('ignores non-parquet objects and everything under the state root', async () => {
    const cfg = config();
    const folder = hourFolder(RECENT_HOUR);
    const raw = await putL0(folder, 2);
    for (const key of [
      `${folder}_SUCCESS`,
      `${folder}.${raw[0]?.split('/').at(-1)}.crc`,
      `${folder}x.parquet.tmp`,
      `${folder}.hidden.parquet`,
      `${folder}notes.json`,
    ]) {
      await put(key);
    }
    // `_compaction/staging/...` fits the arc template (db=_compaction, measurement=staging).
    const stateFolder = `_compaction/staging/${folder.split('/').slice(2).join('/')}`;
    await putL0(stateFolder, 5);
    await putL0(`${stagingPrefix(cfg.layout, JOB_ID)}${folder}`, 5);
    const plan = await planTier(store, cfg, later, 'hourly');
    expect(plan.jobs).toEqual([]);
    expect(plan.skipped).toEqual([
      { tier: 'hourly', partition: folder, reason: '2 file(s), fewer than minFiles 3', candidates: 2 },
    ]);
    // One more real file makes the hour eligible, with only the real files.
    const third = l0(folder, 3);
    await put(third);
    const again = await planTier(store, cfg, later, 'hourly');
    expect(plannedKeys(again)).toEqual([...raw, third]);
  });

  it('only reads data under the data prefix', async () => {
    const cfg = config({ dataPrefix: 'lake' });
    const inside = hourFolder(RECENT_HOUR, 'mydb/cpu', 'lake/');
    const raw = await putL0(inside, 3);
    await putL0(hourFolder(RECENT_HOUR, 'mydb/cpu'), 3);
    await putL0(hourFolder(RECENT_HOUR, 'mydb/cpu', 'other/'), 3);
    await putL0(`lake/_compaction/staging/${hourFolder(RECENT_HOUR).split('/').slice(2).join('/')}`, 3);
    const plan = await planTier(store, cfg, later, 'hourly');
    expect(plan.jobs.map((j) => j.partition)).toEqual([inside]);
    expect(plannedKeys(plan)).toEqual(raw);
    expect(plan.skipped).toEqual([]);
  });
});

/** Delegates to a real store; runs `afterList` once a listing of `hookPrefix` has been fully consumed. */
class HookedStore extends ForwardingStore {
  readonly lists: string[] = [];
  readonly #hookPrefix: string;
  #afterList: (() => Promise<void>) | undefined;

  constructor(inner: ObjectStore, hookPrefix: string, afterList: () => Promise<void>) {
    super(inner);
    this.#hookPrefix = hookPrefix;
    this.#afterList = afterList;
  }

  override async *list(
    prefix: string,
    options?: { readonly signal?: AbortSignal },
  ): AsyncIterable<ObjectSummary> {
    this.lists.push(prefix);
    yield* super.list(prefix, options);
    const hook = this.#afterList;
    if (prefix === this.#hookPrefix && hook) {
      this.#afterList = undefined;
      await hook();
    }
  }
}

// Both listings: one listing of the data root, and a sweep's listing per table (in parallel).
describe.each([
  { listing: 'full', dataList: '' },
  { listing: 'windowed', dataList: 'mydb/cpu/' },
] as const)('data is listed before manifests ($listing)', ({ listing, dataList }) => {
  it('excludes a file whose manifest appeared after the data listing', async () => {
    const cfg = config({ tiers: { hourly: { minFiles: 1 } }, planning: { listing } });
    const raced = hourFolder(RECENT_HOUR);
    const other = hourFolder(RECENT_HOUR - HOUR);
    const racedKeys = await putL0(raced, 3);
    const otherKeys = await putL0(other, 3);
    let created = false;
    const hooked = new HookedStore(store, dataList, async () => {
      // Another planner claims the first file of `raced` between our two listings.
      await putManifest(cfg, manifest('hourly', raced, racedKeys.slice(0, 1)));
      created = true;
    });
    const plan = await planTier(hooked, cfg, later, 'hourly');
    expect(created).toBe(true);
    // The data listing saw the file (it counted), the manifest listing still excluded it.
    expect(plan.objectsListed).toBe(6);
    const dataListed = hooked.lists.indexOf(dataList);
    const manifestList = hooked.lists.indexOf(manifestsRoot(cfg.layout));
    expect(dataListed).toBeGreaterThanOrEqual(0);
    expect(manifestList).toBeGreaterThan(dataListed);
    expect(plannedKeys(plan)).not.toContain(racedKeys[0]);
    expect(plannedKeys(plan)).toEqual(otherKeys);
    expect(skipFor(plan, raced)?.reason).toMatch(/^held by job /);
  });

  it('excludes a file quarantined after the data listing', async () => {
    const cfg = config({ tiers: { hourly: { minFiles: 1 } }, planning: { listing } });
    const folder = hourFolder(RECENT_HOUR);
    const keys = await putL0(folder, 3);
    const hooked = new HookedStore(store, dataList, async () => {
      await store.put(quarantinedInputKey(cfg.layout, keys[0] as string), Buffer.from('{}'));
    });
    const plan = await planTier(hooked, cfg, later, 'hourly');
    expect(plan.listing?.mode).toBe(listing === 'full' ? 'full' : 'sweep');
    expect(plannedKeys(plan)).toEqual(keys.slice(1));
  });
});

describe('a plan scoped to one table (execution input "only")', () => {
  it('plans only that table, listing only under it, while manifests still lease', async () => {
    const cfg = config({ dataPrefix: 'lake' });
    const canary = hourFolder(RECENT_HOUR, '_compactor_doctor/canary-1', 'lake/');
    const canaryKeys = await putL0(canary, 3);
    // Eligible partitions of other tables, and of a table whose path extends the scoped one.
    await putL0(hourFolder(RECENT_HOUR, 'mydb/cpu', 'lake/'), 3);
    await putL0(hourFolder(RECENT_HOUR, '_compactor_doctor/canary-10', 'lake/'), 3);
    const hooked = new HookedStore(store, '', async () => {});
    const plan = await planTier(hooked, cfg, later, 'hourly', { only: '_compactor_doctor/canary-1/' });
    expect(plan.jobs.map((j) => j.partition)).toEqual([canary]);
    expect(plannedKeys(plan)).toEqual(canaryKeys);
    expect(plan.objectsListed).toBe(3);
    expect(hooked.lists).toContain('lake/_compactor_doctor/canary-1/');
    expect(hooked.lists).not.toContain('lake/');
    // A live manifest of the scoped partition still leases it.
    await putManifest(cfg, manifest('hourly', canary, canaryKeys.slice(0, 1)));
    const leased = await planTier(store, cfg, later, 'hourly', { only: '_compactor_doctor/canary-1/' });
    expect(leased.jobs).toEqual([]);
    expect(skipFor(leased, canary)?.reason).toMatch(/^held by job /);
    // No scope: the whole lake, as before.
    const whole = await planTier(store, cfg, later, 'hourly');
    expect(whole.jobs.map((j) => j.partition).sort()).toEqual(
      [
        hourFolder(RECENT_HOUR, '_compactor_doctor/canary-10', 'lake/'),
        hourFolder(RECENT_HOUR, 'mydb/cpu', 'lake/'),
      ].sort(),
    );
  });

  it('refuses, before listing anything, a scope that is not a table path under the data root', async () => {
    const cfg = config({ dataPrefix: 'lake' });
    await putL0(hourFolder(RECENT_HOUR, 'mydb/cpu', 'lake/'), 3);
    for (const only of [
      'mydb/',
      'mydb/cpu',
      'lake/mydb/cpu/',
      'mydb/cpu/2025/',
      '../mydb/cpu/',
      'mydb/../cpu/',
      '',
      '/mydb/cpu/',
      '_compaction/staging/',
    ]) {
      const hooked = new HookedStore(store, '', async () => {});
      await expect(planTier(hooked, cfg, later, 'hourly', { only }), only).rejects.toThrow(ConfigError);
      expect(hooked.lists, only).toEqual([]);
    }
    await expect(planTier(store, cfg, later, 'hourly', { only: 'mydb' })).rejects.toThrow(
      /"only" must be a table path under the data root: 2 segment\(s\) matching \{db\}\/\{measurement\}\//,
    );
    await expect(planTier(store, cfg, later, 'hourly', { only: '_compaction/staging/' })).rejects.toThrow(
      /is the state root, not a table/,
    );
  });

  it('follows the layout: one table segment for hive', async () => {
    const cfg = config({ layout: 'hive' });
    const folder = `events/dt=${new Date(RECENT_HOUR).toISOString().slice(0, 10)}/hour=${new Date(RECENT_HOUR).toISOString().slice(11, 13)}/`;
    const keys = await putL0(folder, 3);
    await putL0(folder.replace('events/', 'other/'), 3);
    const plan = await planTier(store, cfg, later, 'hourly', { only: 'events/' });
    expect(plan.jobs.map((j) => j.partition)).toEqual([folder]);
    expect(plannedKeys(plan)).toEqual(keys);
    await expect(planTier(store, cfg, later, 'hourly', { only: 'mydb/cpu/' })).rejects.toThrow(ConfigError);
  });

  it('is refused for retention, whose rules already name tables', async () => {
    const cfg = config({ retention: { rules: { '*': 30 } } });
    await expect(planCycle(store, cfg, later, 'retention', { only: 'mydb/cpu/' })).rejects.toThrow(
      /"only" scopes a compaction tier, not retention/,
    );
    await expect(planCycle(store, cfg, later, 'retention')).resolves.toMatchObject({ jobs: [] });
  });
});
