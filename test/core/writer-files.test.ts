/**
 * Files as other writers really produce them (issue 13), through the real engine and runCycle over
 * a LocalFolderStore: Arc's footer key-value metadata (`arc:tags`) and TIMESTAMPTZ time, kept
 * through the hourly and the daily tier; a number field written as BIGINT and as DOUBLE, merged
 * only when footer statistics prove every integer exact as a DOUBLE.
 */

import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import {
  type DuckDbEngine,
  parquetPath,
  quoteString,
} from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import type { LocalFolderStore } from '../../functions/adapters/local-store/local-store.ts';
import { type CompactorConfig, parseConfig, type TierName } from '../../functions/core/config.ts';
import { type CycleReport, runCycle } from '../../functions/core/cycle.ts';
import { quarantineRoot } from '../../functions/core/manifest/manifest.ts';
import type { ObjectStore } from '../../functions/core/object-store.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { SWEEP_CONFIG, sweepDeps } from '../support/lake-harness.ts';
import { forgeInt64Statistics, stripStatistics } from '../support/strip-statistics.ts';
import { testStore } from '../support/test-store.ts';

let engine: DuckDbEngine;
let root: string;

useEngineAndDir('writer-files-', (e, dir) => {
  engine = e;
  root = dir;
});

interface Lake {
  readonly dir: string;
  readonly store: LocalFolderStore;
  readonly config: CompactorConfig;
}

async function emptyLake(): Promise<Lake> {
  const dir = await mkdtemp(join(root, 'lake-'));
  return {
    dir,
    store: testStore(dir),
    config: parseConfig({ ...SWEEP_CONFIG, targetFileBytes: 64 * 1024 * 1024 }),
  };
}

async function cycle(l: Lake, tier: TierName): Promise<CycleReport> {
  const deps = sweepDeps(
    l.store,
    l.config,
    engine,
    join(root, 'work'),
    `exec-${randomBytes(4).toString('hex')}`,
    new Set(),
  );
  return runCycle(deps, tier);
}

function outcomes(report: CycleReport): Record<string, string> {
  return Object.fromEntries(
    report.jobs.map((j) => [
      j.job.partition,
      j.outcome.status === 'failed'
        ? `failed: ${j.outcome.error.name}: ${j.outcome.error.message}`
        : j.outcome.status,
    ]),
  );
}

async function keys(store: ObjectStore, prefix = ''): Promise<string[]> {
  const out: string[] = [];
  for await (const object of store.list(prefix)) out.push(object.key);
  return out;
}

/** Writes `select` to `key` with the given footer key-value metadata. */
async function put(
  l: Lake,
  key: string,
  select: string,
  metadata: Record<string, string> = {},
): Promise<void> {
  const local = join(root, `${randomBytes(6).toString('hex')}.parquet`);
  const entries = Object.entries(metadata);
  const kv =
    entries.length === 0
      ? ''
      : `, KV_METADATA {${entries.map(([k, v]) => `"${k}": ${quoteString(v)}`).join(', ')}}`;
  await engine.query(`COPY (${select}) TO ${quoteString(local)} (FORMAT parquet${kv})`);
  await l.store.put(key, { file: local });
}

async function kvOf(path: string): Promise<Record<string, string>> {
  const rows = await engine.query(
    `SELECT decode(key) AS k, decode(value) AS v FROM parquet_kv_metadata(${parquetPath(path)})`,
  );
  return Object.fromEntries(rows.map((r) => [String(r.k), String(r.v)]));
}

async function timeType(path: string): Promise<string | undefined> {
  const described = await engine.query(`DESCRIBE SELECT * FROM read_parquet(${parquetPath(path)})`);
  return described.find((c) => c.column_name === 'time')?.column_type as string | undefined;
}

/** Rows as Arc's ingest writes them: TIMESTAMPTZ time (UTC), tags as strings, one field. */
function arcRows(hh: string, firstId: number, rows: number, tags: readonly string[]): string {
  const tagColumns = tags.map((t) => `'${t}-' || (range % 3)::VARCHAR AS "${t}"`).join(', ');
  return (
    `SELECT (TIMESTAMPTZ '2025-01-15 ${hh}:00:00+00' + to_microseconds(range * 1000)) AS time, ${tagColumns}, ` +
    `(${firstId} + range)::BIGINT AS id, range::DOUBLE / 4 AS usage FROM range(${rows})`
  );
}

describe("Arc's footer metadata (issue 13 item 3)", () => {
  it('TIMESTAMPTZ time and arc:tags survive hourly then daily compaction; arc:tags is the sorted union; keys all inputs agree on are kept, others (ARROW:schema always) dropped and reported', async () => {
    const l = await emptyLake();
    const arrow = 'c29tZSBhcnJvdyBzY2hlbWE=';
    const hour = (hh: string) => `db/cpu/2025/01/15/${hh}/`;
    const file = (hh: string, n: number) => `${hour(hh)}cpu_20250115_${hh}0${n}00_${n}.parquet`;
    // Hour 10: a later file adds the tag "region" (its tag list differs); hour 11: only "host".
    await put(l, file('10', 1), arcRows('10', 1, 10, ['host']), {
      'arc:tags': 'host',
      writer: 'arc 25.1',
      batch: 'a',
      'ARROW:schema': arrow,
    });
    await put(l, file('10', 2), arcRows('10', 11, 10, ['host', 'region']), {
      'arc:tags': 'host,region',
      writer: 'arc 25.1',
      batch: 'b',
      'ARROW:schema': arrow,
    });
    await put(l, file('11', 1), arcRows('11', 21, 10, ['host']), { 'arc:tags': 'host', writer: 'arc 25.1' });
    await put(l, file('11', 2), arcRows('11', 31, 10, ['host']), { 'arc:tags': 'host', writer: 'arc 25.2' });

    const hourly = await cycle(l, 'hourly');
    expect(outcomes(hourly)).toEqual({ [hour('10')]: 'compacted', [hour('11')]: 'compacted' });
    const dropped = (partition: string, report: CycleReport) =>
      report.jobs.find((j) => j.job.partition === partition)?.outcome.steps.at(-1)?.droppedMetadataKeys;
    // What each job dropped is in its result (every step's, from the manifest): the last step's.
    expect(dropped(hour('10'), hourly)).toEqual(['ARROW:schema', 'batch']);
    expect(dropped(hour('11'), hourly)).toEqual(['writer']);

    const output = async (prefix: string, suffix: string) => {
      const found = (await keys(l.store, prefix)).filter(
        (k) => k.endsWith(suffix) && !k.slice(prefix.length).includes('/'),
      );
      expect(found).toHaveLength(1);
      return join(l.dir, found[0] as string);
    };
    const out10 = await output(hour('10'), '_compacted.parquet');
    const out11 = await output(hour('11'), '_compacted.parquet');
    expect(await kvOf(out10)).toEqual({ 'arc:tags': 'host,region', writer: 'arc 25.1' });
    expect(await kvOf(out11)).toEqual({ 'arc:tags': 'host' });
    expect(await timeType(out10)).toBe('TIMESTAMP WITH TIME ZONE');
    expect(await timeType(out11)).toBe('TIMESTAMP WITH TIME ZONE');

    const daily = await cycle(l, 'daily');
    expect(outcomes(daily)).toEqual({ 'db/cpu/2025/01/15/': 'compacted' });
    expect(dropped('db/cpu/2025/01/15/', daily)).toEqual(['writer']);
    const day = await output('db/cpu/2025/01/15/', '_daily.parquet');
    expect(await kvOf(day)).toEqual({ 'arc:tags': 'host,region' });
    expect(await timeType(day)).toBe('TIMESTAMP WITH TIME ZONE');
    // Every row once, with its instant unchanged.
    const rows = await engine.query(
      `SELECT count(*) AS n, count(DISTINCT id) AS ids, min(epoch_us(time)) AS first, max(epoch_us(time)) AS last FROM read_parquet(${parquetPath(day)})`,
    );
    expect(rows).toEqual([
      {
        n: 40n,
        ids: 40n,
        first: BigInt(Date.UTC(2025, 0, 15, 10)) * 1000n,
        last: BigInt(Date.UTC(2025, 0, 15, 11)) * 1000n + 9000n,
      },
    ]);
  });
});

describe('Influx-style number fields: BIGINT in some files, DOUBLE in others (issue 13 item 4)', () => {
  const hour = 'db/cpu/2025/01/15/10/';
  const file = (n: number) => `${hour}cpu_20250115_100${n}00_${n}.parquet`;
  const LIMIT = 2n ** 53n;
  /** Rows with `v` of `type`, from a list of SQL literals. */
  const rows = (firstId: number, type: string, values: readonly string[]) =>
    `SELECT TIMESTAMP '2025-01-15 10:00:00' + to_microseconds(${firstId} + i) AS time, (${firstId} + i)::BIGINT AS id, v::${type} AS v FROM (SELECT unnest(range(${values.length})) AS i, unnest([${values.join(', ')}]) AS v)`;

  async function mixed(bigints: readonly string[]): Promise<{ l: Lake; etags: (string | undefined)[] }> {
    const l = await emptyLake();
    await put(l, file(1), rows(1, 'BIGINT', bigints));
    await put(l, file(2), rows(100, 'DOUBLE', ['1.5', '-0.25', '3']));
    return {
      l,
      etags: await Promise.all([file(1), file(2)].map(async (k) => (await l.store.head(k))?.etag)),
    };
  }

  async function expectFailsClosed(l: Lake, etags: (string | undefined)[], why: RegExp): Promise<void> {
    const report = await cycle(l, 'hourly');
    const outcome = report.jobs[0]?.outcome;
    if (outcome?.status !== 'failed')
      throw new Error(`expected a failure, got ${JSON.stringify(outcomes(report))}`);
    expect(outcome.error.name).toBe('SchemaConflictError');
    expect(outcome.error.message).toContain(`BIGINT in "${file(1)}" vs DOUBLE in "${file(2)}"`);
    expect(outcome.error.message).toMatch(why);
    // Nothing changed: both inputs in place, no output, no manifest left.
    expect(await Promise.all([file(1), file(2)].map(async (k) => (await l.store.head(k))?.etag))).toEqual(
      etags,
    );
    expect((await keys(l.store, hour)).filter((k) => k.endsWith('_compacted.parquet'))).toEqual([]);
    expect(await keys(l.store, `${l.config.layout.stateRoot}manifests/`)).toEqual([]);
  }

  it('merges into DOUBLE when the statistics prove every value within ±2^53, with every value exact', async () => {
    const { l } = await mixed([String(LIMIT), String(-LIMIT), '7', 'NULL', String(LIMIT - 1n)]);
    const report = await cycle(l, 'hourly');
    expect(outcomes(report)).toEqual({ [hour]: 'compacted' });
    const [out] = (await keys(l.store, hour)).filter((k) => k.endsWith('_compacted.parquet'));
    const path = join(l.dir, out as string);
    const described = await engine.query(`DESCRIBE SELECT * FROM read_parquet(${parquetPath(path)})`);
    expect(described.find((c) => c.column_name === 'v')?.column_type).toBe('DOUBLE');
    // Exact: each DOUBLE converts back to the very integer written (HUGEINT: no overflow in the check).
    const values = await engine.query(
      `SELECT id, v::HUGEINT AS whole, v FROM read_parquet(${parquetPath(path)}) ORDER BY id`,
    );
    expect(values.map((r) => [Number(r.id), r.v === null ? null : r.v])).toEqual([
      [1, Number(LIMIT)],
      [2, -Number(LIMIT)],
      [3, 7],
      [4, null],
      [5, Number(LIMIT - 1n)],
      [100, 1.5],
      [101, -0.25],
      [102, 3],
    ]);
    expect(values.slice(0, 5).map((r) => (r.whole === null ? null : BigInt(r.whole as bigint)))).toEqual([
      LIMIT,
      -LIMIT,
      7n,
      null,
      LIMIT - 1n,
    ]);
  });

  it('fails closed, as before, when a value is 2^53 + 1: the message names the file, the value and why', async () => {
    const { l, etags } = await mixed(['5', String(LIMIT + 1n)]);
    await expectFailsClosed(
      l,
      etags,
      new RegExp(
        `not merged into DOUBLE: the BIGINT column "v" of "${file(1)}" holds ${LIMIT + 1n}, beyond ±2\\^53`,
      ),
    );
  });

  it('fails closed when the statistics lie: the values themselves are checked against them', async () => {
    const { l } = await mixed(['5', String(LIMIT + 1n)]);
    // Statistics claiming [5, 6] over a file that holds 2^53 + 1 (a writer's statistics bug).
    const local = join(root, `${randomBytes(6).toString('hex')}.parquet`);
    await l.store.getToFile(file(1), local, {});
    expect(await forgeInt64Statistics(local, 'v', 5n, 6n)).toBe(1);
    expect(await engine.integerBounds(local, 'v')).toEqual({ min: 5n, max: 6n });
    await l.store.put(file(1), { file: local });
    const etags = await Promise.all([file(1), file(2)].map(async (k) => (await l.store.head(k))?.etag));
    await expectFailsClosed(
      l,
      etags,
      new RegExp(
        `not merged into DOUBLE: the statistics of the BIGINT column "v" of "${file(1)}" say every value is within ±2\\^53, but 1 of its values are not exact as DOUBLE`,
      ),
    );
  });

  it('fails closed when the BIGINT file has no statistics: a missing proof is no proof', async () => {
    const { l } = await mixed(['5', '6']);
    // Rewrite the BIGINT input without footer statistics (its pages are unchanged).
    const local = join(root, `${randomBytes(6).toString('hex')}.parquet`);
    await l.store.getToFile(file(1), local, {});
    expect(await stripStatistics(local)).toBeGreaterThan(0);
    await l.store.put(file(1), { file: local });
    const etags = await Promise.all([file(1), file(2)].map(async (k) => (await l.store.head(k))?.etag));
    await expectFailsClosed(
      l,
      etags,
      new RegExp(
        `not merged into DOUBLE: the BIGINT column "v" of "${file(1)}": row group 0 has no min/max statistics`,
      ),
    );
  });
});

describe('naive TIMESTAMP beside TIMESTAMPTZ (issue 13 item 5)', () => {
  const hour = 'db/cpu/2025/01/15/10/';
  const file = (n: number) => `${hour}cpu_20250115_100${n}00_${n}.parquet`;

  async function lakeOf(extra: Record<string, unknown> = {}): Promise<Lake> {
    const dir = await mkdtemp(join(root, 'lake-'));
    const l = {
      dir,
      store: testStore(dir),
      config: parseConfig({ ...SWEEP_CONFIG, targetFileBytes: 64 * 1024 * 1024, ...extra }),
    };
    // An older writer's naive times (UTC wall clock) beside Arc's TIMESTAMPTZ.
    await put(
      l,
      file(1),
      `SELECT TIMESTAMP '2025-01-15 10:00:00' + to_microseconds(range) AS time, range::BIGINT AS id FROM range(3)`,
    );
    await put(
      l,
      file(2),
      `SELECT TIMESTAMPTZ '2025-01-15 10:30:00+00' + to_microseconds(range) AS time, (10 + range)::BIGINT AS id FROM range(3)`,
    );
    return l;
  }

  it('without the option fails as before, the message naming naiveTimestampsUtc', async () => {
    const l = await lakeOf();
    const report = await cycle(l, 'hourly');
    const outcome = report.jobs[0]?.outcome;
    if (outcome?.status !== 'failed')
      throw new Error(`expected a failure, got ${JSON.stringify(outcomes(report))}`);
    expect(outcome.error.name).toBe('SchemaConflictError');
    expect(outcome.error.message).toContain(
      `TIMESTAMP in "${file(1)}" vs TIMESTAMP WITH TIME ZONE in "${file(2)}"`,
    );
    expect(outcome.error.message).toContain('naiveTimestampsUtc');
    expect(await keys(l.store, hour)).toEqual([file(1), file(2)]);
  });

  it('with the table listed under naiveTimestampsUtc merges as TIMESTAMPTZ, each naive value read as UTC', async () => {
    const l = await lakeOf({ naiveTimestampsUtc: ['db/cpu/'] });
    expect(outcomes(await cycle(l, 'hourly'))).toEqual({ [hour]: 'compacted' });
    const [out] = (await keys(l.store, hour)).filter((k) => k.endsWith('_compacted.parquet'));
    const path = join(l.dir, out as string);
    expect(await timeType(path)).toBe('TIMESTAMP WITH TIME ZONE');
    const rows = await engine.query(
      `SELECT id, epoch_us(time) AS us FROM read_parquet(${parquetPath(path)}) ORDER BY id`,
    );
    const at = (minute: number, us: number) => BigInt(Date.UTC(2025, 0, 15, 10, minute)) * 1000n + BigInt(us);
    expect(rows).toEqual([
      { id: 0n, us: at(0, 0) },
      { id: 1n, us: at(0, 1) },
      { id: 2n, us: at(0, 2) },
      { id: 10n, us: at(30, 0) },
      { id: 11n, us: at(30, 1) },
      { id: 12n, us: at(30, 2) },
    ]);
  });

  it('the engine reads naive timestamps as UTC whatever the host time zone (a child process in Asia/Tokyo)', async () => {
    const engineModule = new URL('../../functions/adapters/duckdb-engine/duckdb-engine.ts', import.meta.url)
      .href;
    const script = `
      const { DuckDbEngine } = await import(${JSON.stringify(engineModule)});
      const engine = await DuckDbEngine.create({ threads: 1 });
      const [row] = await engine.query("SELECT epoch_us(CAST(TIMESTAMP '2025-01-15 10:00:00' AS TIMESTAMPTZ))::VARCHAR AS us");
      process.stdout.write(row.us);
      await engine.close();`;
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], {
      env: { ...process.env, TZ: 'Asia/Tokyo' },
    });
    expect(stdout).toBe(String(BigInt(Date.UTC(2025, 0, 15, 10)) * 1000n));
  });

  it('a table path that is not one of the layout is refused by the config', () => {
    expect(() => parseConfig({ ...SWEEP_CONFIG, naiveTimestampsUtc: ['cpu'] })).toThrow(
      /naiveTimestampsUtc: "cpu" is not a table/,
    );
  });
});

describe('time stored as an integer epoch (issue 13 item 6)', () => {
  const hour10 = 'db/cpu/2025/01/15/10/';
  const hour11 = 'db/cpu/2025/01/15/11/';
  const at = (hh: number, mm: number) => BigInt(Date.UTC(2025, 0, 15, hh, mm));
  /** `rows` times `step` ms apart from hh:mm, as `type` in `unit` ticks, with ids from `firstId`. */
  const epochRows = (hh: number, mm: number, rows: number, firstId: number, type = 'BIGINT', perMs = 1n) =>
    `SELECT ((${at(hh, mm)} + range * 997) * ${perMs})::${type} AS time, (${firstId} + range)::BIGINT AS id FROM range(${rows})`;
  const secondsRows = (hh: number, mm: number, rows: number, firstId: number) =>
    `SELECT (${at(hh, mm) / 1000n} + range)::INTEGER AS time, (${firstId} + range)::BIGINT AS id FROM range(${rows})`;

  async function emptyEpochLake(extra: Record<string, unknown>): Promise<Lake> {
    const dir = await mkdtemp(join(root, 'lake-'));
    return {
      dir,
      store: testStore(dir),
      config: parseConfig({ ...SWEEP_CONFIG, targetFileBytes: 64 * 1024 * 1024, ...extra }),
    };
  }

  async function lakeOf(extra: Record<string, unknown> = {}): Promise<Lake> {
    const l = await emptyEpochLake(extra);
    // Written out of time order across files, as several writers do: the merge must sort them.
    await put(l, `${hour10}cpu_20250115_103000_1.parquet`, epochRows(10, 30, 50, 0));
    await put(l, `${hour10}cpu_20250115_100000_2.parquet`, epochRows(10, 0, 50, 100));
    await put(l, `${hour11}cpu_20250115_110000_3.parquet`, epochRows(11, 0, 40, 200));
    await put(l, `${hour11}cpu_20250115_112000_4.parquet`, epochRows(11, 20, 40, 300));
    return l;
  }

  const outputsOf = async (l: Lake, suffix: string) =>
    (await keys(l.store, 'db/')).filter((k) => k.endsWith(suffix)).map((k) => join(l.dir, k));

  async function timesOf(
    paths: readonly string[],
  ): Promise<{ ids: number[]; sorted: boolean; type: string }> {
    const rows = await engine.query(
      `SELECT time, id FROM read_parquet([${paths.map(parquetPath).join(', ')}]) `,
    );
    const times = rows.map((r) => r.time as bigint);
    return {
      ids: rows.map((r) => Number(r.id)).sort((a, b) => a - b),
      sorted: times.every((t, i) => i === 0 || (times[i - 1] as bigint) <= t),
      type: (await timeType(paths[0] as string)) as string,
    };
  }

  const ids = (...spans: [number, number][]) =>
    spans.flatMap(([from, count]) => Array.from({ length: count }, (_, i) => from + i));

  it('with timeUnits "ms" the hourly and the daily tier keep BIGINT time, sort it, and every row is there once', async () => {
    const l = await lakeOf({ timeUnits: { 'db/cpu/': 'ms' } });
    expect(outcomes(await cycle(l, 'hourly'))).toEqual({ [hour10]: 'compacted', [hour11]: 'compacted' });
    for (const out of await outputsOf(l, '_compacted.parquet')) {
      const { sorted, type } = await timesOf([out]);
      expect({ sorted, type }).toEqual({ sorted: true, type: 'BIGINT' });
    }
    expect(outcomes(await cycle(l, 'daily'))).toEqual({ 'db/cpu/2025/01/15/': 'compacted' });
    const daily = await outputsOf(l, '_daily.parquet');
    expect(daily).toHaveLength(1);
    expect(await timesOf(daily)).toEqual({
      ids: ids([0, 50], [100, 50], [200, 40], [300, 40]),
      sorted: true,
      type: 'BIGINT',
    });
  });

  it('an input written in seconds in a milliseconds table is set aside, kept and never deleted; the message names the unit that fits; the rest compacts', async () => {
    const l = await lakeOf({ timeUnits: { 'db/cpu/': 'ms' } });
    const odd = `${hour10}cpu_20250115_104000_5.parquet`;
    await put(l, odd, secondsRows(10, 40, 20, 500));
    const etag = (await l.store.head(odd))?.etag;
    expect(outcomes(await cycle(l, 'hourly'))).toEqual({ [hour10]: 'compacted', [hour11]: 'compacted' });
    const recordKey = `${quarantineRoot(l.config.layout)}inputs/${odd}.json`;
    const record = JSON.parse((await l.store.getBytes(recordKey)).body.toString('utf8')) as {
      reason: string;
    };
    expect(record.reason).toContain(`20 row(s) of "time" (an epoch in milliseconds, timeUnits)`);
    expect(record.reason).toContain(`${at(10, 40) / 1000n} = 1970-01-21T`);
    expect(record.reason).toContain('read as seconds it would fit');
    expect((await l.store.head(odd))?.etag).toBe(etag);
    const hourly = await outputsOf(l, '_compacted.parquet');
    expect((await timesOf(hourly)).ids).toEqual(ids([0, 50], [100, 50], [200, 40], [300, 40]));
    // Neither the daily tier takes it nor deletes it.
    expect(outcomes(await cycle(l, 'daily'))).toEqual({ 'db/cpu/2025/01/15/': 'compacted' });
    expect((await l.store.head(odd))?.etag).toBe(etag);
  });

  it('without timeUnits an integer time merges as before, unchecked (INTEGER and BIGINT widen to BIGINT)', async () => {
    const l = await lakeOf();
    await put(l, `${hour10}cpu_20250115_104000_5.parquet`, secondsRows(10, 40, 20, 500));
    expect(outcomes(await cycle(l, 'hourly'))).toEqual({ [hour10]: 'compacted', [hour11]: 'compacted' });
    const hourly = await outputsOf(l, '_compacted.parquet');
    const merged = await timesOf(hourly);
    expect(merged.ids).toEqual(ids([0, 50], [100, 50], [200, 40], [300, 40], [500, 20]));
    expect(merged.type).toBe('BIGINT');
  });

  it('microseconds: rows a little past the hour pass within retention.bufferHours, farther ones are set aside', async () => {
    const l = await emptyEpochLake({ timeUnits: { 'db/cpu/': 'us' }, retention: { bufferHours: 1 } });
    await put(l, `${hour10}cpu_20250115_100000_1.parquet`, epochRows(10, 0, 30, 0, 'BIGINT', 1000n));
    // 30 minutes past the hour: inside the 1 h slack.
    await put(l, `${hour10}cpu_20250115_105900_2.parquet`, epochRows(11, 30, 30, 100, 'BIGINT', 1000n));
    // Two hours past: outside it (retention, judging by path, would expire these rows early).
    const late = `${hour10}cpu_20250115_105900_3.parquet`;
    await put(l, late, epochRows(13, 0, 30, 200, 'BIGINT', 1000n));
    expect(outcomes(await cycle(l, 'hourly'))).toEqual({ [hour10]: 'compacted' });
    const merged = await timesOf(await outputsOf(l, '_compacted.parquet'));
    expect(merged).toEqual({ ids: ids([0, 30], [100, 30]), sorted: true, type: 'BIGINT' });
    const record = JSON.parse(
      (await l.store.getBytes(`${quarantineRoot(l.config.layout)}inputs/${late}.json`)).body.toString('utf8'),
    ) as { reason: string };
    expect(record.reason).toMatch(
      /30 row\(s\) of "time" \(an epoch in microseconds, timeUnits\) lie outside 2025-01-15T10:00:00.000Z \.\. 2025-01-15T11:00:00.000Z \(±1 h, retention.bufferHours\)/,
    );
    expect(record.reason).toContain('2025-01-15T13:00:');
  });

  it('a TIMESTAMPTZ time in a table declared an integer epoch fails the partition, naming timeUnits; every input stays', async () => {
    const l = await lakeOf({ timeUnits: { 'db/cpu/': 'ms' } });
    const stamped = `${hour10}cpu_20250115_104000_5.parquet`;
    await put(l, stamped, `SELECT TIMESTAMPTZ '2025-01-15 10:40:00+00' AS time, 9::BIGINT AS id`);
    const report = await cycle(l, 'hourly');
    const outcome = report.jobs.find((j) => j.job.partition === hour10)?.outcome;
    if (outcome?.status !== 'failed')
      throw new Error(`expected a failure, got ${JSON.stringify(outcomes(report))}`);
    expect(outcome.error.name).toBe('SchemaConflictError');
    expect(outcome.error.message).toContain(
      `TIMESTAMP WITH TIME ZONE in "${stamped}", but timeUnits["db/cpu/"] declares it an integer epoch in "ms"; the stored type is never converted`,
    );
    expect((await keys(l.store, hour10)).sort()).toEqual(
      [`${hour10}cpu_20250115_100000_2.parquet`, `${hour10}cpu_20250115_103000_1.parquet`, stamped].sort(),
    );
  });

  it('the config refuses an unknown unit and a path that is not a table', () => {
    expect(() => parseConfig({ ...SWEEP_CONFIG, timeUnits: JSON.parse('{"db/cpu/": "sec"}') })).toThrow(
      /timeUnits\["db\/cpu\/"\] must be one of "s", "ms", "us", "ns"/,
    );
    expect(() => parseConfig({ ...SWEEP_CONFIG, timeUnits: { cpu: 'ms' } })).toThrow(
      /timeUnits\["cpu"\]: "cpu" is not a table/,
    );
  });
});
