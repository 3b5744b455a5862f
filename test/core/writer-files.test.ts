/**
 * Files as other writers really produce them (issue 13), through the real engine and runCycle over
 * a LocalFolderStore: Arc's footer key-value metadata (`arc:tags`) and TIMESTAMPTZ time, kept
 * through the hourly and the daily tier.
 */

import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DuckDbEngine, parquetPath, quoteString } from '../../functions/adapters/duckdb-engine.ts';
import { LocalFolderStore } from '../../functions/adapters/local-store.ts';
import { type CompactorConfig, parseConfig, type TierName } from '../../functions/core/config.ts';
import { type CycleReport, runCycle } from '../../functions/core/cycle.ts';
import type { ObjectStore } from '../../functions/core/object-store.ts';
import { SWEEP_CONFIG, sweepDeps } from '../support/lake-harness.ts';

let engine: DuckDbEngine;
let root: string;

beforeAll(async () => {
  engine = await DuckDbEngine.create({ threads: 1 });
  root = await mkdtemp(join(tmpdir(), 'writer-files-'));
});

afterAll(async () => {
  await engine?.close();
  if (root) await rm(root, { recursive: true, force: true });
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
    store: new LocalFolderStore(dir),
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
