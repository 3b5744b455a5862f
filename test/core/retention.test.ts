/**
 * Retention over a real folder store and real Parquet files (DuckDB): only expired files go
 * (boundaries, rules, other tables, non-data objects, files a job or the quarantine holds), a file
 * replaced meanwhile is kept, expiry never waits for a failing merge, manifests are validated,
 * and every step of a retention job survives a fault at any store call.
 */

import { cp, mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import type { LocalFolderStore } from '../../functions/adapters/local-store/local-store.ts';
import { readIds, writeSampleParquet } from '../../functions/adapters/sample-data.ts';
import { type CompactorConfig, parseConfig } from '../../functions/core/config.ts';
import { assignJobs, planCycle, runCycle } from '../../functions/core/cycle.ts';
import { systemClock } from '../../functions/core/engine.ts';
import { ConfigError, InvalidManifestError } from '../../functions/core/errors.ts';
import {
  hashedQuarantineRoot,
  type Manifest,
  manifestKey,
  manifestsRoot,
  parseManifest,
  quarantinedInputKey,
  receiptKey,
  serializeManifest,
} from '../../functions/core/manifest/manifest.ts';
import type { ObjectStore } from '../../functions/core/object-store.ts';
import { clearManifestStep, compactStep, deleteInputsStep, type Job } from '../../functions/core/protocol.ts';
import { quarantineManifest } from '../../functions/core/quarantine.ts';
import { recover } from '../../functions/core/recovery.ts';
import { expireStep, planRetention } from '../../functions/core/retention.ts';
import { arcRawKey, hourFolderOf } from '../support/cli-lake.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { type CallRecord, FAULT_KINDS, FaultStore, type FaultStoreOptions } from '../support/fault-store.ts';
import { HANG_GUARD_MS } from '../support/hang-guard.ts';
import { LakeChecker, recoverUntilQuiet, sweepDeps, writeLake } from '../support/lake-harness.ts';
import { testStore } from '../support/test-store.ts';

const NOW = new Date('2025-03-01T12:00:00Z');
const clock = { now: () => NOW };
/** db/cpu/: 30 days + 24 h buffer -> files ending at or before 2025-01-29T12:00Z go. db/: 90 days. */
const RULES = { 'db/cpu/': 30, 'db/': 90 };
const config: CompactorConfig = parseConfig({
  quietSeconds: 0,
  tiers: { hourly: { minFiles: 2 } },
  retention: { rules: RULES, bufferHours: 24 },
});

interface F {
  readonly key: string;
  readonly rows: number;
  readonly expired: boolean;
}

const LAKE: readonly F[] = [
  // Its hour ends exactly at the cutoff: expired.
  { key: 'db/cpu/2025/01/29/11/cpu_20250129_110500_1.parquet', rows: 10, expired: true },
  // One hour later: kept.
  { key: 'db/cpu/2025/01/29/12/cpu_20250129_120500_2.parquet', rows: 10, expired: false },
  { key: 'db/cpu/2025/01/28/05/cpu_20250128_050500_3.parquet', rows: 10, expired: true },
  { key: 'db/cpu/2025/01/28/05/cpu_20250128_051500_4.parquet', rows: 10, expired: true },
  // Every level expires: an hourly output and a daily output of an expired day.
  { key: 'db/cpu/2025/01/28/06/cpu_20250128_06_compacted.parquet', rows: 10, expired: true },
  { key: 'db/cpu/2025/01/28/cpu_20250128_daily.parquet', rows: 10, expired: true },
  // A daily output's period is its day: 2025-01-29 ends after the cutoff, so it stays.
  { key: 'db/cpu/2025/01/29/cpu_20250129_daily.parquet', rows: 10, expired: false },
  // Another table under the database-level rule (90 days): kept, then an older one expired.
  { key: 'db/mem/2025/01/10/03/mem_20250110_030500_5.parquet', rows: 10, expired: false },
  { key: 'db/mem/2024/11/29/03/mem_20241129_030500_6.parquet', rows: 10, expired: true },
  // A table no rule covers: never expires.
  { key: 'other/disk/2024/01/01/00/disk_20240101_000500_7.parquet', rows: 10, expired: false },
];
const NOT_DATA = [
  'db/cpu/2025/01/28/05/_SUCCESS',
  'db/cpu/2025/01/28/05/.cpu_20250128_050500_3.parquet.crc',
  'db/cpu/2025/01/28/05/notes.txt',
];

let engine: DuckDbEngine;
let root: string;
let template: string;
let total: number;
/** Row ids of the expired files of LAKE. */
let expiredIds: Set<number>;

function idsOf(files: readonly F[], firstId = 1): { expired: Set<number>; total: number } {
  const expired = new Set<number>();
  let id = firstId;
  for (const f of files) {
    for (let i = 0; i < f.rows; i++, id++) if (f.expired) expired.add(id);
  }
  return { expired, total: id - firstId };
}

async function makeLake(dir: string, files: readonly F[]): Promise<void> {
  await writeLake(engine, dir, files);
  const store = testStore(dir);
  for (const key of NOT_DATA) await store.put(key, Buffer.from('x'));
}

async function fresh(name: string): Promise<{ dir: string; store: LocalFolderStore }> {
  const dir = join(root, `${name}-${Math.random().toString(36).slice(2)}`);
  await cp(template, dir, { recursive: true });
  return { dir, store: testStore(dir) };
}

async function keysUnder(store: ObjectStore, prefix = ''): Promise<string[]> {
  const out: string[] = [];
  for await (const o of store.list(prefix)) out.push(o.key);
  return out.sort();
}

async function dataKeys(store: ObjectStore): Promise<string[]> {
  return (await keysUnder(store)).filter((k) => config.layout.isDataKey(k));
}

async function lakeIds(dir: string, store: ObjectStore): Promise<number[]> {
  const keys = await dataKeys(store);
  return (
    await readIds(
      engine,
      keys.map((k) => join(dir, k)),
    )
  ).map(Number);
}

function deps(store: ObjectStore, executionId: string, alive: ReadonlySet<string> = new Set()) {
  return { ...sweepDeps(store, config, engine, join(root, 'work'), executionId, alive), clock };
}

useEngineAndDir('retention-', async (e, dir) => {
  engine = e;
  root = dir;
  template = join(root, 'template');
  await makeLake(template, LAKE);
  ({ expired: expiredIds, total } = idsOf(LAKE));
});

describe('retention configuration', () => {
  it('is off by default, and the most specific rule wins', () => {
    expect(parseConfig({}).retention).toEqual({ rules: [], bufferHours: 24 });
    expect(
      parseConfig({ retention: { rules: { '*': 400, 'db/': 90, 'db/cpu/': 30 } } }).retention.rules,
    ).toEqual([
      { table: 'db/cpu/', days: 30 },
      { table: 'db/', days: 90 },
      { table: '*', days: 400 },
    ]);
  });

  it.each([
    [{ rules: { 'db/cpu/': 0 } }, /retention\.rules\["db\/cpu\/"\] must be a whole number of days/],
    [{ rules: { 'db/cpu/': 1.5 } }, /retention\.rules\["db\/cpu\/"\] must be a whole number of days/],
    [{ rules: { 'db/cpu': 30 } }, /retention\.rules\["db\/cpu"\]: .*ending in "\/" \(e\.g\. "mydb\/cpu\/"/],
    [{ rules: { '/db/': 30 } }, /retention\.rules\["\/db\/"\]: a rule names a table path/],
    [{ rules: { 'db/../x/': 30 } }, /retention\.rules\["db\/\.\.\/x\/"\]/],
    [{ rules: { 'db/cpu/2025/': 30 } }, /names a table with 2 segment\(s\); use a table path .*"t1\/t2\/"/],
    [{ bufferHours: -1 }, /retention\.bufferHours must be a whole number of hours from 0 to 876000, got -1/],
  ])('rejects %j naming the setting and the fix', (retention, message) => {
    expect(() => parseConfig({ retention } as never)).toThrow(ConfigError);
    expect(() => parseConfig({ retention } as never)).toThrow(message);
  });

  it('checks a rule against the layout: hive tables have one segment', () => {
    expect(() => parseConfig({ layout: 'hive', retention: { rules: { 'db/cpu/': 7 } } })).toThrow(
      /layout "\{table\}\/dt=\{YYYY\}-\{MM\}-\{DD\}\/hour=\{HH\}\/" names a table with 1 segment/,
    );
    expect(
      parseConfig({ layout: 'hive', retention: { rules: { 'events/': 7 } } }).retention.rules,
    ).toHaveLength(1);
  });
});

describe('retention plan and run', () => {
  it('removes exactly the expired files (boundaries, levels, rules), and nothing else', async () => {
    const { dir, store } = await fresh('exact');
    const plan = await planRetention(store, config, clock);
    expect(plan.jobs.map((j) => [j.partition, j.rule, j.cutoff, j.inputs.map((i) => i.key)])).toEqual([
      [
        'db/cpu/2025/01/28/',
        'db/cpu/',
        '2025-01-29T12:00:00.000Z',
        [
          'db/cpu/2025/01/28/05/cpu_20250128_050500_3.parquet',
          'db/cpu/2025/01/28/05/cpu_20250128_051500_4.parquet',
          'db/cpu/2025/01/28/06/cpu_20250128_06_compacted.parquet',
          'db/cpu/2025/01/28/cpu_20250128_daily.parquet',
        ],
      ],
      [
        'db/cpu/2025/01/29/',
        'db/cpu/',
        '2025-01-29T12:00:00.000Z',
        ['db/cpu/2025/01/29/11/cpu_20250129_110500_1.parquet'],
      ],
      [
        'db/mem/2024/11/29/',
        'db/',
        '2024-11-30T12:00:00.000Z',
        ['db/mem/2024/11/29/03/mem_20241129_030500_6.parquet'],
      ],
    ]);
    const before = await keysUnder(store);
    const report = await runCycle(deps(store, 'exec-exact'), 'retention');
    expect(report.jobs.map((j) => j.outcome.status)).toEqual(['expired', 'expired', 'expired']);
    expect(await dataKeys(store)).toEqual(
      LAKE.filter((f) => !f.expired)
        .map((f) => f.key)
        .sort(),
    );
    // Non-data objects are never read, moved or deleted; no manifest or record is left, only
    // each job's receipt.
    const receipts = report.jobs.map(({ job }) =>
      receiptKey(config.layout, job.tier, job.partition, job.jobId),
    );
    expect(await keysUnder(store)).toEqual(
      [...before.filter((k) => !LAKE.some((f) => f.expired && f.key === k)), ...receipts].sort(),
    );
    expect(await keysUnder(store, '_compaction/')).toEqual([...receipts].sort());
    const ids = await lakeIds(dir, store);
    expect(ids).toEqual(Array.from({ length: total }, (_, i) => i + 1).filter((id) => !expiredIds.has(id)));
    // A second run finds nothing.
    expect((await planRetention(store, config, clock)).jobs).toEqual([]);
  });

  it('with no rule, plans nothing and lists nothing', async () => {
    const { store } = await fresh('off');
    const plan = await planRetention(store, parseConfig({}), clock);
    expect(plan).toMatchObject({ enabled: false, jobs: [], objectsListed: 0 });
  });

  it('a default rule (*) covers the tables no other rule names', async () => {
    const { store } = await fresh('default');
    const withDefault = parseConfig({ quietSeconds: 0, retention: { rules: { ...RULES, '*': 365 } } });
    const plan = await planRetention(store, withDefault, clock);
    expect(plan.jobs.map((j) => [j.partition, j.rule])).toContainEqual(['other/disk/2024/01/01/', '*']);
  });

  it('never removes files a quarantined manifest names or a quarantined input, and skips a day a live job holds', async () => {
    const { dir, store } = await fresh('held');
    const extra: F[] = [
      { key: 'db/cpu/2025/01/27/03/cpu_20250127_030500_q.parquet', rows: 5, expired: false },
      { key: 'db/cpu/2025/01/27/04/cpu_20250127_040500_m.parquet', rows: 5, expired: false },
      { key: 'db/cpu/2025/01/27/05/cpu_20250127_050500_x.parquet', rows: 5, expired: true },
      { key: 'db/cpu/2025/01/26/07/cpu_20250126_070500_l.parquet', rows: 5, expired: false },
      { key: 'db/cpu/2025/01/26/08/cpu_20250126_080500_o.parquet', rows: 5, expired: false },
    ];
    await writeLake(engine, dir, extra, 1000);
    const etag = async (key: string) => (await store.head(key))?.etag as string;
    // A corrupt input was quarantined.
    await store.put(
      quarantinedInputKey(config.layout, extra[0]?.key as string),
      Buffer.from('{"reason":"test"}'),
    );
    // A job of hour 04 was quarantined: nothing it names is touched.
    const quarantined = hourlyClaim(store.location, 'db/cpu/2025/01/27/04/', [
      { key: extra[1]?.key as string, size: 1, etag: await etag(extra[1]?.key as string) },
    ]);
    const qKey = manifestKey(config.layout, 'hourly', quarantined.partition);
    const put = await store.put(qKey, serializeManifest(quarantined));
    await quarantineManifest(deps(store, 'q'), { key: qKey, etag: put.etag, manifest: quarantined }, 'test');
    // A live hourly job (its owner still running) holds hour 07 of the 26th: the whole day waits.
    const live = hourlyClaim(store.location, 'db/cpu/2025/01/26/07/', [
      { key: extra[3]?.key as string, size: 1, etag: await etag(extra[3]?.key as string) },
    ]);
    await store.put(manifestKey(config.layout, 'hourly', live.partition), serializeManifest(live));

    const report = await runCycle(deps(store, 'exec-held', new Set([live.executionId])), 'retention');
    expect(report.plan.skipped).toEqual([
      {
        tier: 'retention',
        partition: 'db/cpu/2025/01/26/',
        reason: 'an hourly job holds this day (live manifest): expired on a later run',
      },
    ]);
    const keys = await dataKeys(store);
    expect(keys).toContain(extra[0]?.key);
    expect(keys).toContain(extra[1]?.key);
    expect(keys).not.toContain(extra[2]?.key);
    expect(keys).toContain(extra[3]?.key);
    expect(keys).toContain(extra[4]?.key);
    expect(keys.filter((k) => LAKE.some((f) => f.expired && f.key === k))).toEqual([]);
  });

  it('says so when every expired file of a day is held, instead of leaving the day out unsaid', async () => {
    const { dir, store } = await fresh('all-held');
    const key = 'db/cpu/2025/01/25/03/cpu_20250125_030500_h.parquet';
    await writeLake(engine, dir, [{ key, rows: 5 }], 2000);
    await store.put(quarantinedInputKey(config.layout, key), Buffer.from('{"reason":"test"}'));
    const plan = await planRetention(store, config, clock);
    expect(plan.jobs.map((j) => j.partition)).not.toContain('db/cpu/2025/01/25/');
    expect(plan.skipped).toContainEqual({
      tier: 'retention',
      partition: 'db/cpu/2025/01/25/',
      reason: '1 quarantined input(s) (kept until released): nothing expired now; see compactor status',
    });
  });

  it('keeps an input replaced between plan and commit, and one replaced between commit and delete', async () => {
    const { store } = await fresh('replaced');
    const plan = await planRetention(store, config, clock);
    const d = deps(store, 'exec-replaced');
    const [day28] = assignJobs(plan, d);
    if (!day28) throw new Error('planned nothing');
    const early = 'db/cpu/2025/01/28/05/cpu_20250128_050500_3.parquet';
    const late = 'db/cpu/2025/01/28/05/cpu_20250128_051500_4.parquet';
    await store.put(early, Buffer.from('new data written after planning'));
    const committed = await expireStep(d, day28);
    expect(committed).toMatchObject({ status: 'done', state: 'verified', inputs: 3, keptInputs: 1 });
    await store.put(late, Buffer.from('new data written after the commit'));
    const deleted = await deleteInputsStep(d, day28);
    expect(deleted).toMatchObject({ state: 'inputs-deleted', keptInputs: 2 });
    await clearManifestStep(d, day28);
    const keys = await dataKeys(store);
    expect(keys).toContain(early);
    expect(keys).toContain(late);
    expect(keys.filter((k) => k.startsWith('db/cpu/2025/01/28/'))).toEqual([early, late]);
  });

  it('expires a monthly output by its month, leased per month folder', async () => {
    const dir = join(root, `monthly-${Math.random().toString(36).slice(2)}`);
    // December ends before the cutoff (2025-01-29T12:00Z); January ends after it.
    const december = 'db/cpu/2024/12/cpu_202412_20250102T000000Z-0a0a0a0a_000_monthly.parquet';
    const january = 'db/cpu/2025/01/cpu_202501_20250202T000000Z-0b0b0b0b_000_monthly.parquet';
    await makeLake(dir, [
      { key: december, rows: 10, expired: true },
      { key: january, rows: 10, expired: false },
    ]);
    const store = testStore(dir);
    const report = await runCycle(deps(store, 'exec-monthly'), 'retention');
    expect(report.plan.jobs.map((j) => j.partition)).toEqual(['db/cpu/2024/12/']);
    expect(report.jobs.map((j) => j.outcome.status)).toEqual(['expired']);
    expect(await dataKeys(store)).toEqual([january]);
    expect(await keysUnder(store, manifestsRoot(config.layout))).toEqual([]);
  });

  it('keeps an input quarantined after planning, whatever its quarantine record is named', async () => {
    const { store } = await fresh('quarantined-later');
    const plan = await planRetention(store, config, clock);
    const d = deps(store, 'exec-q-later');
    const [day28] = assignJobs(plan, d);
    if (!day28) throw new Error('planned nothing');
    const held = 'db/cpu/2025/01/28/05/cpu_20250128_050500_3.parquet';
    // A record named by a hash, as a corrupt input with a key near the limits gets.
    await store.put(
      `${hashedQuarantineRoot(config.layout)}${'0'.repeat(64)}.json`,
      Buffer.from(JSON.stringify({ key: held, reason: 'corrupt footer' })),
    );
    const committed = await expireStep(d, day28);
    expect(committed).toMatchObject({ state: 'verified', keptInputs: 1 });
    await deleteInputsStep(d, day28);
    await clearManifestStep(d, day28);
    expect(await dataKeys(store)).toContain(held);
  });

  it('re-checks expiry with its own clock and rules: a plan made as if later deletes nothing not expired now', async () => {
    const { store } = await fresh('later');
    const future = { now: () => new Date('2025-06-01T00:00:00Z') };
    const plan = await planRetention(store, config, future);
    const d = deps(store, 'exec-later');
    const results = [];
    for (const job of assignJobs(plan, d)) results.push(await expireStep(d, job));
    // The day of the 29th (hour 11 expired now, hour 12 not) keeps hour 12 out of its claim.
    const day29 = results.find((r) => r.partition === 'db/cpu/2025/01/29/');
    expect(day29).toMatchObject({ state: 'verified', inputs: 1 });
    const mem = results.find((r) => r.partition === 'db/mem/2025/01/10/');
    expect(mem).toMatchObject({
      status: 'skipped',
      reason: expect.stringMatching(/^no input is expired at/),
    });
  });

  it('expiry does not wait for a merge: an hour whose compaction keeps failing still expires', async () => {
    const { dir, store } = await fresh('failing');
    // Hour 05 of the 28th has a schema conflict (count as VARCHAR): its hourly job always fails.
    const odd = 'db/cpu/2025/01/28/05/cpu_20250128_052500_9.parquet';
    const local = join(root, `odd-${Math.random().toString(36).slice(2)}.parquet`);
    await writeSampleParquet(engine, local, {
      rows: 5,
      firstId: 5000,
      startTimeMs: Date.UTC(2025, 0, 28, 5),
      spanMs: 3_600_000,
    });
    await engine.query(
      `COPY (SELECT * REPLACE ('x' || id::VARCHAR AS "count") FROM read_parquet('${local}')) TO '${local}.odd.parquet' (FORMAT parquet)`,
    );
    await store.put(odd, { file: `${local}.odd.parquet` });
    for (let i = 0; i < 3; i++) {
      // Real time: the files were written now, so a clock in the past would find them all too new.
      const hourly = await runCycle(
        sweepDeps(store, config, engine, join(root, 'work'), `exec-hourly-${i}`, new Set()),
        'hourly',
      );
      const failed = hourly.jobs.find((j) => j.job.partition === 'db/cpu/2025/01/28/05/');
      expect(failed?.outcome.status).toBe('failed');
    }
    expect((await planRetention(store, config, clock)).skipped).toEqual([]);
    await runCycle(deps(store, 'exec-retention'), 'retention');
    expect((await dataKeys(store)).filter((k) => k.startsWith('db/cpu/2025/01/28/'))).toEqual([]);
    expect(await lakeIds(dir, store)).not.toContain(5000);
  });
});

function hourlyClaim(location: string, partition: string, inputs: Manifest['inputs']): Manifest {
  return {
    version: 1,
    jobId: `20250301T110000Z-${Math.floor(Math.random() * 0xffffffff)
      .toString(16)
      .padStart(8, '0')}`,
    executionId: `exec-hold-${partition}`,
    tier: 'hourly',
    partition,
    location,
    state: 'claimed',
    inputs,
    createdAt: NOW.toISOString(),
    updatedAt: NOW.toISOString(),
    leaseExpiresAt: new Date(NOW.getTime() + 3_600_000).toISOString(),
  };
}

describe('retention manifests', () => {
  const DAY = 'db/cpu/2025/01/28/';
  const key = manifestKey(config.layout, 'retention', DAY);
  const valid = (overrides: Record<string, unknown> = {}) => ({
    version: 1,
    jobId: '20250301T120000Z-0a1b2c3d',
    executionId: 'exec-1',
    tier: 'retention',
    partition: DAY,
    location: 'file:///lake',
    state: 'claimed',
    inputs: [
      { key: `${DAY}05/cpu_20250128_050500_3.parquet`, size: 10, etag: 'a' },
      { key: `${DAY}06/cpu_20250128_06_compacted.parquet`, size: 10, etag: 'b' },
      { key: `${DAY}cpu_20250128_daily.parquet`, size: 10, etag: 'c' },
    ],
    expiry: { rule: 'db/cpu/', days: 30, bufferHours: 24, cutoff: '2025-01-29T12:00:00.000Z' },
    createdAt: '2025-03-01T12:00:00.000Z',
    updatedAt: '2025-03-01T12:00:00.000Z',
    leaseExpiresAt: '2025-03-01T12:20:00.000Z',
    ...overrides,
  });
  const parse = (m: unknown, at = key) =>
    parseManifest(config, 'file:///lake', at, Buffer.from(JSON.stringify(m)));
  const reason = (m: unknown, at = key): string => {
    try {
      parse(m, at);
    } catch (error) {
      expect(error).toBeInstanceOf(InvalidManifestError);
      return (error as InvalidManifestError).reason;
    }
    throw new Error('expected an InvalidManifestError');
  };

  it('has its own lease beside the day folder’s daily lease, and parses with its expiry', () => {
    expect(key).toBe('_compaction/manifests/retention/db/cpu/2025/01/28.json');
    expect(manifestKey(config.layout, 'daily', DAY)).toBe(
      '_compaction/manifests/daily/db/cpu/2025/01/28.json',
    );
    expect(parse(valid()).expiry).toEqual(valid().expiry);
    expect(parse(valid({ state: 'verified' })).state).toBe('verified');
  });

  it.each([
    [
      'an input newer than the cutoff',
      { expiry: { ...valid().expiry, cutoff: '2025-01-28T23:00:00.000Z' } },
      /is not expired at 2025-01-28T23:00:00.000Z/,
    ],
    [
      'a cutoff later than its rule allows',
      { expiry: { ...valid().expiry, days: 40 } },
      /later than its rule allows/,
    ],
    ['no expiry', { expiry: undefined }, /needs its expiry/],
    [
      'outputs',
      {
        outputs: [
          {
            stagingKey: '_compaction/staging/20250301T120000Z-0a1b2c3d/x.parquet',
            finalKey: 'db/cpu/2025/01/28/cpu_20250128_20250301T120000Z-0a1b2c3d_000_daily.parquet',
            size: 1,
            rows: 1,
            checksum: { algorithm: 'CRC32', value: 'AAAAAA==' },
          },
        ],
      },
      /a retention job has no outputs/,
    ],
    [
      'evidence',
      { repairOf: [{ key: 'db/cpu/2025/01/28/cpu_20250128_daily.parquet', size: 1, etag: 'e' }] },
      /a retention job repairs nothing: it has no repairOf/,
    ],
    ['state staged', { state: 'staged' }, /never staged/],
    ['state published', { state: 'published' }, /never published/],
    [
      'an input of another day',
      { inputs: [{ key: 'db/cpu/2025/01/27/05/cpu_x.parquet', size: 1, etag: 'a' }] },
      /outside partition/,
    ],
    [
      'an input of another table',
      { inputs: [{ key: 'db/mem/2025/01/28/05/mem_x.parquet', size: 1, etag: 'a' }] },
      /outside partition/,
    ],
  ])('rejects %s', (_name, overrides, message) => {
    expect(reason(valid(overrides))).toMatch(message);
  });

  it('rejects an hour folder as its partition, and an expiry on a compaction job', () => {
    const hour = 'db/cpu/2025/01/28/05/';
    expect(reason(valid({ partition: hour }), manifestKey(config.layout, 'retention', hour))).toMatch(
      /is not a retention folder/,
    );
    const daily = valid({ tier: 'daily', inputs: [valid().inputs[1]], state: 'claimed' });
    expect(reason(daily, manifestKey(config.layout, 'daily', DAY))).toMatch(
      /only a retention job has an expiry/,
    );
  });
});

describe('retention recovery', () => {
  it('rolls a claimed job back and finishes a committed one', async () => {
    // Where, in a clean expireStep, the commit (the second write of the manifest) is.
    const { store: probeStore } = await fresh('probe');
    const probe = new FaultStore(probeStore);
    const [probeJob] = assignJobs(await planRetention(probeStore, config, clock), deps(probe, 'probe'));
    await expireStep(deps(probe, 'probe'), probeJob as Job);
    const commit = probe.calls.filter((c) => c.op === 'put' && c.key.includes('/manifests/retention/'))[1];
    expect(commit).toBeDefined();

    for (const [at, action] of [
      [commit?.n as number, 'rolled-back'],
      [(commit?.n as number) + 1, 'rolled-forward'],
    ] as const) {
      const { store } = await fresh(`recover-${action}`);
      const faulty = new FaultStore(store, { fault: { at, kind: 'crash' } });
      const [job] = assignJobs(await planRetention(store, config, clock), deps(faulty, 'dead'));
      await expect(
        expireStep(deps(faulty, 'dead'), job as Job).then(() =>
          deleteInputsStep(deps(faulty, 'dead'), job as Job),
        ),
      ).rejects.toThrow(/crash/);
      const report = await recover(deps(store, 'recovery'));
      expect(report.entries.map((e) => [e.state, e.action])).toEqual([
        [action === 'rolled-back' ? 'claimed' : 'verified', action],
      ]);
      const left = (await dataKeys(store)).filter((k) => k.startsWith('db/cpu/2025/01/28/'));
      expect(left).toHaveLength(action === 'rolled-back' ? 4 : 0);
      // A committed job leaves its receipt; a rolled-back one nothing.
      expect((await keysUnder(store, '_compaction/')).filter((k) => !k.includes('/failures/'))).toEqual(
        action === 'rolled-back'
          ? []
          : [receiptKey(config.layout, 'retention', (job as Job).partition, (job as Job).jobId)],
      );
    }
  });
});

/** A smaller lake for the sweeps: two expired days of every level, an unexpired hour and table. */
const SWEEP_LAKE: readonly F[] = [
  { key: 'db/cpu/2025/01/28/05/cpu_20250128_050500_1.parquet', rows: 8, expired: true },
  { key: 'db/cpu/2025/01/28/05/cpu_20250128_051500_2.parquet', rows: 8, expired: true },
  { key: 'db/cpu/2025/01/28/cpu_20250128_daily.parquet', rows: 8, expired: true },
  { key: 'db/cpu/2025/01/29/11/cpu_20250129_110500_3.parquet', rows: 8, expired: true },
  { key: 'db/cpu/2025/01/29/12/cpu_20250129_120500_4.parquet', rows: 8, expired: false },
  { key: 'db/mem/2025/01/10/03/mem_20250110_030500_5.parquet', rows: 8, expired: false },
];

describe('retention under faults', () => {
  it(
    'a fault at every store call of a retention cycle, then recovery, then a new run: exactly the expired files go',
    async () => {
      const sweepTemplate = join(root, 'sweep-template');
      await makeLake(sweepTemplate, SWEEP_LAKE);
      const { expired, total: rows } = idsOf(SWEEP_LAKE);
      const copy = async () => {
        const dir = await mkdtemp(join(root, 'sweep-'));
        await cp(sweepTemplate, dir, { recursive: true });
        return dir;
      };
      const probeDir = await copy();
      const probe = new FaultStore(testStore(probeDir));
      const clean = await runCycle(deps(probe, 'probe-sweep'), 'retention');
      expect(clean.jobs.map((j) => j.outcome.status)).toEqual(['expired', 'expired']);
      const calls = probe.calls.length;

      let scenarios = 0;
      for (let at = 1; at <= calls; at++) {
        for (const kind of FAULT_KINDS) {
          const dir = await copy();
          const inner = testStore(dir);
          const checker = new LakeChecker(engine, dir, inner, config, rows);
          checker.expired = expired;
          await checker.observe();
          const faulty = new FaultStore(inner, {
            fault: { at, kind },
            beforeCall: checker.audit,
            afterCall: checker.observeWrites,
          });
          const first = `exec-ret-${kind}-${at}`;
          const alive = new Set([first]);
          await runCycle(deps(faulty, first, alive), 'retention').catch((error: Error) => {
            expect(['TransientStoreError', 'CrashedError', 'RecoveryIncompleteError']).toContain(error.name);
          });
          alive.delete(first);
          const observed = new FaultStore(inner, {
            beforeCall: checker.audit,
            afterCall: checker.observeWrites,
          });
          await recoverUntilQuiet(deps(observed, 'unused', alive), `exec-ret-recover-${kind}-${at}`);
          const again = await runCycle(deps(observed, `exec-ret-again-${kind}-${at}`, alive), 'retention');
          expect(again.jobs.filter((j) => j.outcome.status === 'failed')).toEqual([]);
          expect(checker.violations, `fault ${kind} at call ${at}`).toEqual([]);
          await checker.assertQuiescent({ untouched: NOT_DATA });
          expect(checker.auditedDeletes).toBeGreaterThan(0);
          await rm(dir, { recursive: true, force: true });
          scenarios++;
        }
      }
      expect(scenarios).toBe(calls * FAULT_KINDS.length);
      console.log(
        `retention sweep: ${calls} calls x ${FAULT_KINDS.length} fault kinds = ${scenarios} crash points`,
      );
    },
    HANG_GUARD_MS,
  );
});

describe('retention overlapping an hourly cycle on the same folders', () => {
  const HOUR = 3_600_000;
  const DAY_MS = 24 * HOUR;
  // Real time: the hourly tier's quiet check compares the files' real write times with its clock.
  const oldDay = Math.floor((Date.now() - 60 * DAY_MS) / DAY_MS) * DAY_MS;
  const recentHour = Math.floor((Date.now() - 30 * HOUR) / HOUR) * HOUR;
  const OVERLAP_LAKE: readonly F[] = [
    { key: arcRawKey(oldDay + 5 * HOUR, 1), rows: 6, expired: true },
    { key: arcRawKey(oldDay + 5 * HOUR, 2), rows: 6, expired: true },
    { key: arcRawKey(oldDay + 6 * HOUR, 3), rows: 6, expired: true },
    { key: arcRawKey(oldDay + 6 * HOUR, 4), rows: 6, expired: true },
    { key: arcRawKey(recentHour, 5), rows: 6, expired: false },
    { key: arcRawKey(recentHour, 6), rows: 6, expired: false },
  ];
  const { expired, total: rows } = idsOf(OVERLAP_LAKE);
  let overlapTemplate: string;
  const realDeps = (store: ObjectStore, executionId: string, alive: ReadonlySet<string>) =>
    sweepDeps(store, config, engine, join(root, 'work'), executionId, alive);
  /** Which interleavings the sweeps met: a sweep that never met a conflict proves little. */
  const seen = new Set<string>();

  beforeAll(async () => {
    overlapTemplate = join(root, 'overlap-template');
    await writeLake(engine, overlapTemplate, OVERLAP_LAKE);
  });

  /** Fails when a retention delete names a data file that a live job of another tier holds. */
  function holdAudit(checker: LakeChecker) {
    return async (call: CallRecord): Promise<void> => {
      await checker.audit(call);
      if (call.op !== 'deleteMany' || !call.deletes) return;
      const held = new Map<string, string>();
      for (const m of await checker.liveManifests()) {
        if (m.tier === 'retention') continue;
        for (const i of m.inputs) held.set(i.key, m.jobId);
        for (const o of m.outputs ?? []) held.set(o.finalKey, m.jobId);
      }
      for (const d of call.deletes) {
        if (held.has(d.key))
          checker.violations.push(`retention deleted ${d.key}, held by job ${held.get(d.key)}`);
      }
    };
  }

  async function scenario(outer: 'hourly' | 'retention', at: number | undefined): Promise<number> {
    const dir = await mkdtemp(join(root, 'overlap-'));
    await cp(overlapTemplate, dir, { recursive: true });
    const inner = testStore(dir);
    const checker = new LakeChecker(engine, dir, inner, config, rows);
    checker.expired = expired;
    const observe = checker.observeWrites;
    const alive = new Set([`outer-${outer}`, `inner-${outer}`]);
    const retentionStore = (gate?: FaultStoreOptions['gate']) =>
      new FaultStore(inner, {
        beforeCall: holdAudit(checker),
        afterCall: observe,
        ...(gate ? { gate } : {}),
      });
    const hourlyStore = (gate?: FaultStoreOptions['gate']) =>
      new FaultStore(inner, { beforeCall: checker.audit, afterCall: observe, ...(gate ? { gate } : {}) });
    const other = outer === 'hourly' ? 'retention' : 'hourly';
    const runOther = async () => {
      const store = other === 'retention' ? retentionStore() : hourlyStore();
      const report = await runCycle(realDeps(store, `inner-${outer}`, alive), other);
      expect(report.jobs.filter((j) => j.outcome.status === 'failed')).toEqual([]);
      if (report.plan.skipped.some((s) => s.reason.includes('holds this day')))
        seen.add('day skipped: a merge holds it');
      if (report.jobs.some((j) => j.outcome.status === 'skipped')) seen.add(`${other} job skipped`);
    };
    const gate: FaultStoreOptions['gate'] = async (call) => {
      if (call.n === at) await runOther();
    };
    const store = outer === 'retention' ? retentionStore(gate) : hourlyStore(gate);
    const report = await runCycle(realDeps(store, `outer-${outer}`, alive), outer);
    expect(report.jobs.filter((j) => j.outcome.status === 'failed')).toEqual([]);
    if (report.jobs.some((j) => j.outcome.status === 'skipped')) seen.add(`${outer} job skipped`);
    const kept = report.jobs.flatMap((j) => j.outcome.steps).some((r) => (r.keptInputs ?? 0) > 0);
    if (kept) seen.add(`${outer} kept inputs`);
    alive.clear();
    const clean = retentionStore();
    await recoverUntilQuiet(realDeps(clean, 'unused', alive), `overlap-recover-${outer}-${at}`);
    // What the overlap left (an hourly output of an expired hour) goes on the next run.
    await runCycle(realDeps(clean, `overlap-final-${outer}-${at}`, alive), 'retention');
    expect(checker.violations, `${other} inside ${outer} before call ${at}`).toEqual([]);
    await checker.assertQuiescent();
    await rm(dir, { recursive: true, force: true });
    return store.calls.length;
  }

  it.each(['hourly', 'retention'] as const)(
    'a whole cycle of the other kind before every store call of a %s cycle: no unexpired row lost, none twice, no held file deleted',
    async (outer) => {
      const calls = await scenario(outer, undefined);
      seen.clear();
      for (let at = 1; at <= calls; at++) await scenario(outer, at);
      console.log(
        `overlap: the other cycle before each of ${calls} calls of a ${outer} cycle; met: ${[...seen].join(', ')}`,
      );
      expect([...seen]).toEqual(
        expect.arrayContaining(
          outer === 'hourly'
            ? ['day skipped: a merge holds it', 'hourly job skipped']
            : ['retention job skipped'],
        ),
      );
    },
    600_000,
  );

  it('a merge that claims after the retention job re-checked sees its lease and backs off: nothing expired comes back', async () => {
    const dir = await mkdtemp(join(root, 'race-'));
    await cp(overlapTemplate, dir, { recursive: true });
    const inner = testStore(dir);
    const checker = new LakeChecker(engine, dir, inner, config, rows);
    checker.expired = expired;
    const alive = new Set(['ret', 'hr']);
    // The hourly tier plans before the retention job claims.
    const hourlyDeps = realDeps(
      new FaultStore(inner, { beforeCall: checker.audit, afterCall: checker.observe }),
      'hr',
      alive,
    );
    const hourlyJobs = assignJobs(await planCycle(inner, config, systemClock, 'hourly'), hourlyDeps);
    const hour5 = hourlyJobs.find((j) => j.partition === hourFolderOf(OVERLAP_LAKE[0]?.key as string)) as Job;
    // The retention job claims and re-checks, and is held just before its commit.
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let reachedCommit = () => {};
    const atCommit = new Promise<void>((resolve) => {
      reachedCommit = resolve;
    });
    let manifestWrites = 0;
    const retentionDeps = realDeps(
      new FaultStore(inner, {
        beforeCall: checker.audit,
        afterCall: checker.observe,
        gate: async (call) => {
          if (call.op === 'put' && call.key.includes('/manifests/retention/') && ++manifestWrites === 2) {
            reachedCommit();
            await held;
          }
        },
      }),
      'ret',
      alive,
    );
    const [day] = assignJobs(await planRetention(inner, config, systemClock), retentionDeps);
    const expiring = expireStep(retentionDeps, day as Job);
    await atCommit;
    // Now the merge claims hour 05: it finds the retention lease after its claim and gives the hour back.
    expect(await compactStep(hourlyDeps, hour5)).toMatchObject({
      status: 'skipped',
      reason: expect.stringMatching(/^retention job holds this period/),
    });
    release();
    expect(await expiring).toMatchObject({ state: 'verified' });
    await deleteInputsStep(retentionDeps, day as Job);
    await clearManifestStep(retentionDeps, day as Job);
    expect(checker.violations).toEqual([]);
    // The hour's expired rows are gone for good: no merge output brought them back.
    expect((await dataKeys(inner)).filter((k) => k.startsWith(hour5.partition))).toEqual([]);
    await checker.assertQuiescent();
  });
});
