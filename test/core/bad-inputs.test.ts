/**
 * Bad inputs through the real engine and the local runner (runCycle over a real LocalFolderStore
 * and DuckDB), for what the step-level tests (protocol.test.ts) and the CLI test do not cover:
 * corrupt files of four kinds in several partitions of one cycle (each quarantined with a reason
 * naming file and partition, counted by the `Quarantined` metric and listed by `compactor
 * status`), objects that are never data, a schema conflict next to a safe widening, keys with
 * unusual characters and a key near 1,024 bytes, an input overwritten between plan and delete, a
 * file landing during a compaction, and a partition larger than one job's bound.
 *
 * Already covered elsewhere (not repeated here): the step-level quarantine of a truncated file,
 * a zero-byte object and text named `.parquet` (protocol.test.ts), a page-damaged file, an
 * all-corrupt partition, a schema conflict and a widening each on its own, an input changed
 * before staging or replaced before its delete (deleteInputsStep), the planner's job bounds and
 * its ignoring non-Parquet objects (planner.test.ts), `compactor run`/`status` with one corrupt
 * input (cli/compactor.test.ts).
 */

import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { describe, expect, it, vi } from 'vitest';
import {
  type DuckDbEngine,
  parquetPath,
  quoteString,
} from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import type { LocalFolderStore } from '../../functions/adapters/local-store/local-store.ts';
import { readIds, writeSampleParquet } from '../../functions/adapters/sample-data.ts';
import {
  type CompactorConfig,
  type ConfigInput,
  parseConfig,
  type TierName,
} from '../../functions/core/config.ts';
import { type CycleReport, runCycle } from '../../functions/core/cycle.ts';
import { SchemaConflictError } from '../../functions/core/errors.ts';
import { quarantineRoot } from '../../functions/core/manifest/manifest.ts';
import type { ObjectStore } from '../../functions/core/object-store.ts';
import type { JobEvent } from '../../functions/core/protocol.ts';
import { duckdbStatement } from '../../functions/core/reader-views.ts';
import { visibleFiles } from '../../functions/core/visible.ts';
import { onJobEvent } from '../../functions/lambda/telemetry.ts';
import { cli } from '../support/cli-lake.ts';
import { metricTotal } from '../support/emf.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { type CallRecord, FaultStore } from '../support/fault-store.ts';
import { LakeChecker, type LakeFile, SWEEP_CONFIG, sweepDeps, writeLake } from '../support/lake-harness.ts';
import { testStore } from '../support/test-store.ts';

const HOUR = 3_600_000;

let engine: DuckDbEngine;
let root: string;
let workDir: string;

useEngineAndDir('bad-inputs-', (e, dir) => {
  engine = e;
  root = dir;
  workDir = join(root, 'work');
});

// ---- helpers ----

interface Lake {
  readonly dir: string;
  readonly store: LocalFolderStore;
  readonly config: CompactorConfig;
  readonly total: number;
}

/** The sweep's settings, with outputs that are never split (one file per job). */
const CONFIG: ConfigInput = { ...SWEEP_CONFIG, targetFileBytes: 64 * 1024 * 1024 };

async function lake(files: readonly LakeFile[], config: ConfigInput = CONFIG): Promise<Lake> {
  const dir = await mkdtemp(join(root, 'lake-'));
  const total = await writeLake(engine, dir, files);
  return { dir, store: testStore(dir), config: parseConfig(config), total };
}

/** `n` raw files of `rows` rows in the Arc hour folder `hh` of 2025-01-15 (table db/cpu). */
function rawFiles(hh: string, n: number, rows = 10, folder = `db/cpu/2025/01/15/${hh}/`): LakeFile[] {
  return Array.from({ length: n }, (_, i) => ({
    key: `${folder}cpu_20250115_${hh}${String(i).padStart(2, '0')}00_${i + 1}.parquet`,
    rows,
  }));
}

function range(from: number, to: number): bigint[] {
  return Array.from({ length: to - from + 1 }, (_, i) => BigInt(from + i));
}

async function keys(store: ObjectStore, prefix = ''): Promise<string[]> {
  const out: string[] = [];
  for await (const object of store.list(prefix)) out.push(object.key);
  return out;
}

async function etagOf(store: ObjectStore, key: string): Promise<string | undefined> {
  return (await store.head(key))?.etag;
}

/** Ids of every data file (what a plain glob reader sees), ascending, duplicates kept. */
async function dataIds(l: Lake, except: readonly string[] = []): Promise<bigint[]> {
  const data = (await keys(l.store)).filter((k) => l.config.layout.isDataKey(k) && !except.includes(k));
  return readIds(
    engine,
    data.map((k) => join(l.dir, k)),
  );
}

async function visibleIds(l: Lake, except: readonly string[] = []): Promise<bigint[]> {
  const view = await visibleFiles(l.store, l.config);
  return readIds(
    engine,
    view.files.filter((f) => !except.includes(f.key)).map((f) => join(l.dir, f.key)),
  );
}

function sorted(ids: readonly bigint[]): bigint[] {
  return [...ids].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

/** Deletes of data keys in the calls a FaultStore saw. */
function dataDeletes(store: FaultStore, config: CompactorConfig): string[] {
  return store.calls.flatMap((c) =>
    (c.deletes ?? []).map((d) => d.key).filter((k) => config.layout.isDataKey(k)),
  );
}

interface Telemetry {
  readonly metrics: Metrics;
  readonly logger: Logger;
  readonly errors: ReturnType<typeof vi.spyOn>;
  readonly events: JobEvent[];
  readonly onEvent: (event: JobEvent) => void;
}

/** The Lambdas' telemetry (onJobEvent) on a Metrics instance whose EMF output we read. */
function telemetry(): Telemetry {
  const metrics = new Metrics({ namespace: 'Test', serviceName: 'bad-inputs' });
  const logger = new Logger({ serviceName: 'bad-inputs', logLevel: 'SILENT' });
  const errors = vi.spyOn(logger, 'error');
  const forward = onJobEvent({ logger, metrics });
  const events: JobEvent[] = [];
  return {
    metrics,
    logger,
    errors,
    events,
    onEvent: (event) => {
      events.push(event);
      forward(event);
    },
  };
}

async function cycle(
  l: Lake,
  tier: TierName,
  options: { readonly store?: ObjectStore; readonly onEvent?: (event: JobEvent) => void } = {},
): Promise<CycleReport> {
  const deps = sweepDeps(
    options.store ?? l.store,
    l.config,
    engine,
    workDir,
    `exec-${randomBytes(4).toString('hex')}`,
    new Set(),
  );
  return runCycle({ ...deps, ...(options.onEvent ? { onEvent: options.onEvent } : {}) }, tier);
}

function outcomes(report: CycleReport): Record<string, string> {
  return Object.fromEntries(
    report.jobs.map((j) => [
      j.job.partition,
      j.outcome.status === 'failed' ? `failed: ${j.outcome.error.name}` : j.outcome.status,
    ]),
  );
}

async function writeRaw(store: ObjectStore, key: string, rows: number, firstId: number): Promise<string> {
  const local = join(root, `${randomBytes(6).toString('hex')}.parquet`);
  await writeSampleParquet(engine, local, {
    rows,
    firstId,
    startTimeMs: Date.UTC(2025, 0, 15, 10),
    spanMs: HOUR,
  });
  return (await store.put(key, { file: local })).etag;
}

// ---- corrupt inputs ----

/** A Parquet file whose footer metadata is scrambled; its magic bytes and length are intact. */
function corruptFooter(good: Buffer): Buffer {
  const bytes = Buffer.from(good);
  const footerLength = bytes.readUInt32LE(bytes.length - 8);
  const start = bytes.length - 8 - footerLength;
  for (let i = start + 10; i < start + 40; i++) bytes[i] = (bytes[i] ?? 0) ^ 0x5a;
  return bytes;
}

describe('corrupt inputs in one cycle', () => {
  const CORRUPT: readonly [string, string, (good: Buffer) => Buffer][] = [
    ['10', 'a truncated file', (good) => good.subarray(0, good.length - 20)],
    ['11', 'a corrupt footer', corruptFooter],
    ['12', 'a zero-byte object', () => Buffer.alloc(0)],
    ['13', 'a CSV named .parquet', () => Buffer.from('time,host,value\n2025-01-15T13:00:00Z,web-01,1\n')],
  ];

  it('each is quarantined with a reason naming file and partition, never deleted; the rest compacts; status and the Quarantined metric count them', async () => {
    // Hours 10..13 hold two good files and one corrupt one each; hour 14 only good files.
    const l = await lake(['10', '11', '12', '13', '14'].flatMap((hh) => rawFiles(hh, 2)));
    expect(l.total).toBe(100);
    const good = await readFile(join(l.dir, 'db/cpu/2025/01/15/10/cpu_20250115_100000_1.parquet'));
    const corrupt = new Map<string, { partition: string; etag: string }>();
    for (const [hh, , make] of CORRUPT) {
      const key = `db/cpu/2025/01/15/${hh}/cpu_20250115_${hh}5900_9.parquet`;
      const { etag } = await l.store.put(key, make(good));
      corrupt.set(key, { partition: `db/cpu/2025/01/15/${hh}/`, etag });
    }

    const tools = telemetry();
    const observed = new FaultStore(l.store);
    const report = await cycle(l, 'hourly', { store: observed, onEvent: tools.onEvent });
    // Every partition compacted its good files; none failed because of its corrupt one.
    expect(outcomes(report)).toEqual(
      Object.fromEntries(
        ['10', '11', '12', '13', '14'].map((hh) => [`db/cpu/2025/01/15/${hh}/`, 'compacted']),
      ),
    );

    // Each corrupt file: a quarantine record with key, partition and a reason; an event naming
    // file and partition; an error log; left in place byte for byte; never in a delete request.
    const records = await keys(l.store, `${quarantineRoot(l.config.layout)}inputs/`);
    expect(records.sort()).toEqual(
      [...corrupt.keys()].map((k) => `${quarantineRoot(l.config.layout)}inputs/${k}.json`).sort(),
    );
    for (const [key, { partition, etag }] of corrupt) {
      const record = JSON.parse(
        (await l.store.getBytes(`${quarantineRoot(l.config.layout)}inputs/${key}.json`)).body.toString(
          'utf8',
        ),
      ) as Record<string, unknown>;
      expect(record).toMatchObject({ key, partition, etag, readable: false });
      expect(String(record.reason).length).toBeGreaterThan(5);
      expect(String(record.reason), 'the reason names the object, not a temp file').not.toContain(workDir);
      expect(tools.events).toContainEqual(
        expect.objectContaining({ type: 'input-quarantined', key, partition }),
      );
      expect(tools.errors).toHaveBeenCalledWith(
        'quarantined',
        expect.objectContaining({ type: 'input-quarantined', key, partition }),
      );
      expect(await etagOf(l.store, key)).toBe(etag);
    }
    expect(dataDeletes(observed, l.config).filter((k) => corrupt.has(k))).toEqual([]);
    // The alarm's metric counts every quarantined input.
    expect(metricTotal(tools.metrics, 'Quarantined')).toBe(corrupt.size);

    // No row lost: every good row once, in the outputs; good inputs gone.
    await expect(dataIds(l, [...corrupt.keys()])).resolves.toEqual(range(1, 100));
    await expect(visibleIds(l, [...corrupt.keys()])).resolves.toEqual(range(1, 100));
    // The visible view hides no data file (the contract's view), but names those no reader can
    // read, and `visible` warns of them and exits 1.
    expect([...(await visibleFiles(l.store, l.config)).unreadableQuarantined].sort()).toEqual(
      [...corrupt.keys()].sort(),
    );
    const visible = await cli('visible', '--store', l.dir, '--sql');
    expect(visible.code).toBe(1);
    expect(visible.err.join('\n')).toContain(
      `the view holds ${corrupt.size} quarantined file(s) that are not Parquet, and reading it fails on them`,
    );
    // verify names them, and does not take them for what a non-atomic compactor leaves behind.
    const verify = await cli('verify', '--store', l.dir);
    expect(verify.code).toBe(1);
    expect(verify.text).not.toContain('SUSPECT');
    const day = verify.text.split('\n').find((line) => line.startsWith('db/cpu/2025/01/15/')) ?? '';
    expect(day).toContain('4 unreadable file(s): db/cpu/2025/01/15/10/cpu_20250115_105900_9.parquet');
    expect(day).toContain('and 1 more (4 quarantined: `compactor status`)');
    expect(verify.text).toContain('4 quarantined input(s)');
    // Athena cannot declare a table holding one: skipped with why (here the only table).
    const athena = await cli('visible', '--store', l.dir, '--format', 'athena');
    expect(athena.code).toBe(2);
    expect(athena.err.join('\n')).toContain(
      'skips table db/cpu/: it holds a quarantined file that is not Parquet',
    );
    // A record that does not say (written before it was kept): the object is looked at instead.
    const zeroByte = 'db/cpu/2025/01/15/12/cpu_20250115_125900_9.parquet';
    const recordKey = `${quarantineRoot(l.config.layout)}inputs/${zeroByte}.json`;
    const { readable: _, ...older } = JSON.parse((await l.store.getBytes(recordKey)).body.toString('utf8'));
    await l.store.put(recordKey, Buffer.from(JSON.stringify(older)));
    expect((await visibleFiles(l.store, l.config)).unreadableQuarantined).toContain(zeroByte);

    for (const key of await keys(l.store, 'db/')) {
      if (!corrupt.has(key) && l.config.layout.isDataKey(key)) expect(key).toMatch(/_compacted\.parquet$/);
    }

    // `compactor status` lists each quarantine with its reason (exit 1: attention needed).
    const status = await cli('status', '--store', l.dir, '--json');
    expect(status.code).toBe(1);
    const listed = (JSON.parse(status.text) as { quarantined: { key: string; reason: string }[] })
      .quarantined;
    expect(listed.map((q) => q.key).sort()).toEqual(records.sort());
    for (const q of listed) expect(q.reason.length).toBeGreaterThan(5);
    const text = await cli('status', '--store', l.dir);
    for (const key of corrupt.keys()) expect(text.text).toContain(key);

    // A second cycle plans none of them again, and still deletes nothing of theirs.
    const again = new FaultStore(l.store);
    const second = await cycle(l, 'hourly', { store: again });
    expect(second.jobs).toEqual([]);
    expect(dataDeletes(again, l.config)).toEqual([]);
    for (const [key, { etag }] of corrupt) expect(await etagOf(l.store, key)).toBe(etag);

    // Replaced (the fix's first step): the record's verdict was for the old version.
    await l.store.put(zeroByte, good);
    expect((await visibleFiles(l.store, l.config)).unreadableQuarantined).not.toContain(zeroByte);
  });
});

describe('a readable input foreign to its partition (issue 13 item 7)', () => {
  it('one without the time column is quarantined, kept byte for byte and never deleted, in the hourly and the daily tier; the rest compacts with exact ids', async () => {
    const l = await lake([...rawFiles('10', 2), ...rawFiles('11', 2)]);
    // Readable Parquet, but nothing in common with db/cpu: no time, no shared column.
    const foreign = 'db/cpu/2025/01/15/10/cpu_20250115_105900_9.parquet';
    const local = join(root, `${randomBytes(6).toString('hex')}.parquet`);
    await engine.query(
      `COPY (SELECT range::INTEGER AS a, 'x' || range::VARCHAR AS b FROM range(7)) TO ${quoteString(local)} (FORMAT parquet)`,
    );
    const { etag } = await l.store.put(foreign, { file: local });

    const tools = telemetry();
    const observed = new FaultStore(l.store);
    const report = await cycle(l, 'hourly', { store: observed, onEvent: tools.onEvent });
    expect(outcomes(report)).toEqual({
      'db/cpu/2025/01/15/10/': 'compacted',
      'db/cpu/2025/01/15/11/': 'compacted',
    });
    const recordKey = `${quarantineRoot(l.config.layout)}inputs/${foreign}.json`;
    const record = JSON.parse((await l.store.getBytes(recordKey)).body.toString('utf8')) as Record<
      string,
      unknown
    >;
    expect(record).toMatchObject({ key: foreign, partition: 'db/cpu/2025/01/15/10/', etag, readable: true });
    expect(String(record.reason)).toMatch(/no time column "time" \(columns: a, b\)/);
    expect(tools.events).toContainEqual(
      expect.objectContaining({
        type: 'input-quarantined',
        key: foreign,
        partition: 'db/cpu/2025/01/15/10/',
      }),
    );
    expect(dataDeletes(observed, l.config)).not.toContain(foreign);
    expect(await etagOf(l.store, foreign)).toBe(etag);
    // Its 7 rows are in no output (no NULL times were merged in); every other row once.
    const outputs = (await keys(l.store, 'db/')).filter((k) => k.endsWith('_compacted.parquet'));
    const [nulls] = await engine.query(
      `SELECT count(*) AS n, count(*) FILTER (WHERE time IS NULL) AS untimed FROM read_parquet([${outputs
        .map((k) => parquetPath(join(l.dir, k)))
        .join(', ')}], union_by_name = true)`,
    );
    expect(nulls).toEqual({ n: 40n, untimed: 0n });
    await expect(dataIds(l, [foreign])).resolves.toEqual(range(1, 40));

    // Neither the next hourly cycle nor the daily tier takes it; it is still there, unchanged.
    const again = new FaultStore(l.store);
    expect((await cycle(l, 'hourly', { store: again })).jobs).toEqual([]);
    const daily = await cycle(l, 'daily', { store: again });
    expect(outcomes(daily)).toEqual({ 'db/cpu/2025/01/15/': 'compacted' });
    expect(dataDeletes(again, l.config)).not.toContain(foreign);
    expect(await etagOf(l.store, foreign)).toBe(etag);
    await expect(dataIds(l, [foreign])).resolves.toEqual(range(1, 40));
  });
});

describe('a table whose time column is named otherwise', () => {
  /** `n` files of `rows` rows in db/mem/.../10/ whose time column is "ts", ids from `firstId`. */
  async function writeTs(l: Lake, n: number, rows: number, firstId: number): Promise<string[]> {
    const written: string[] = [];
    for (let i = 0; i < n; i++) {
      const key = `db/mem/2025/01/15/10/mem_20250115_10${String(i).padStart(2, '0')}00_${i + 1}.parquet`;
      const local = join(root, `${randomBytes(6).toString('hex')}.parquet`);
      const first = firstId + i * rows;
      // Times run backwards across files, so the output's order shows it was sorted by ts.
      await engine.query(
        `COPY (SELECT (${first} + range)::BIGINT AS id, TIMESTAMPTZ '2025-01-15 10:59:00+00' - to_seconds(${first} + range) AS ts FROM range(${rows})) TO ${quoteString(local)} (FORMAT parquet)`,
      );
      await l.store.put(key, { file: local });
      written.push(key);
    }
    return written;
  }

  it('is skipped with the fix named, nothing quarantined; with timeColumns set it compacts beside a table on the global time column', async () => {
    const l = await lake(rawFiles('10', 2));
    const mem = await writeTs(l, 3, 5, 100);
    const tools = telemetry();
    const report = await cycle(l, 'hourly', { onEvent: tools.onEvent });
    expect(outcomes(report)).toEqual({
      'db/cpu/2025/01/15/10/': 'compacted',
      'db/mem/2025/01/15/10/': 'skipped',
    });
    const skip = report.jobs.find((j) => j.job.partition === 'db/mem/2025/01/15/10/');
    expect(skip?.outcome.steps.at(-1)?.reason).toBe(
      'no input has the time column "time" (3 readable, columns: id, ts): set timeColumns["db/mem/"] to the table\'s time column, or timeColumn for every table; nothing was quarantined',
    );
    expect(await keys(l.store, quarantineRoot(l.config.layout))).toEqual([]);
    expect(tools.events.filter((e) => e.type === 'input-quarantined')).toEqual([]);
    for (const key of mem) expect(await etagOf(l.store, key)).toBeDefined();

    const fixed: Lake = { ...l, config: parseConfig({ ...CONFIG, timeColumns: { 'db/mem/': 'ts' } }) };
    expect(outcomes(await cycle(fixed, 'hourly'))).toEqual({ 'db/mem/2025/01/15/10/': 'compacted' });
    const [output] = (await keys(l.store, 'db/mem/')).filter((k) => k.endsWith('_compacted.parquet'));
    expect(output).toBeDefined();
    const rows = await engine.query(`SELECT id FROM read_parquet(${parquetPath(join(l.dir, output ?? ''))})`);
    // Sorted by ts, which runs against id: the highest id first.
    expect(rows.map((r) => r.id)).toEqual(range(100, 114).reverse());
  });

  it('a file without the time column beside files that have it is still set aside', async () => {
    const l = await lake([]);
    await writeTs(l, 2, 5, 1);
    const odd = 'db/mem/2025/01/15/10/mem_20250115_105900_9.parquet';
    const local = join(root, `${randomBytes(6).toString('hex')}.parquet`);
    await engine.query(
      `COPY (SELECT range::BIGINT AS id, now() AS time FROM range(3)) TO ${quoteString(local)} (FORMAT parquet)`,
    );
    await l.store.put(odd, { file: local });
    const config = parseConfig({ ...CONFIG, timeColumns: { 'db/mem/': 'ts' } });
    expect(outcomes(await cycle({ ...l, config }, 'hourly'))).toEqual({
      'db/mem/2025/01/15/10/': 'compacted',
    });
    const record = JSON.parse(
      (await l.store.getBytes(`${quarantineRoot(config.layout)}inputs/${odd}.json`)).body.toString('utf8'),
    ) as { reason: string };
    expect(record.reason).toMatch(/no time column "ts" \(columns: id, time\)/);
  });

  it('dedup "last" keys on the table\'s own time column, and may not name it', async () => {
    expect(() =>
      parseConfig({
        ...CONFIG,
        timeColumns: { 'db/mem/': 'ts' },
        dedup: { 'db/mem/': { mode: 'last', keys: ['TS'] } },
      }),
    ).toThrow(/dedup\["db\/mem\/"\]\.keys must not name the time column "ts"/);
    expect(() => parseConfig({ ...CONFIG, timeColumns: { 'db/mem': 'ts' } })).toThrow(
      /timeColumns\["db\/mem"\]: "db\/mem" is not a table of layout/,
    );
  });
});

// ---- what is never data ----

describe('objects that are not data', () => {
  it('are never read, moved or deleted by an hourly and a daily cycle', async () => {
    const l = await lake([...rawFiles('10', 3), ...rawFiles('11', 2)]);
    const notData = [
      'db/cpu/2025/01/15/10/_SUCCESS',
      'db/cpu/2025/01/15/10/.cpu_20250115_100000_1.parquet.crc',
      'db/cpu/2025/01/15/10/part-00000.parquet.crc',
      'db/cpu/2025/01/15/10_$folder$',
      'db/cpu/2025/01/15/_$folder$',
      'db/cpu/2025/01/15/10/.hidden-upload.parquet',
      'db/cpu/2025/01/15/10/cpu_20250115_100000_9.parquet.tmp',
      'db/cpu/2025/01/15/10/_temporary/0/part-00000.parquet',
      'db/cpu/2025/01/15/10/notes.txt',
      'db/cpu/2025/01/15/extra/cpu_20250115_100000_8.parquet',
    ];
    const tags = new Map<string, string>();
    for (const key of notData) tags.set(key, (await l.store.put(key, Buffer.from(`not data: ${key}`))).etag);

    const observed = new FaultStore(l.store);
    const hourly = await cycle(l, 'hourly', { store: observed });
    expect(Object.values(outcomes(hourly))).toEqual(['compacted', 'compacted']);
    const daily = await cycle(l, 'daily', { store: observed });
    expect(Object.values(outcomes(daily))).toEqual(['compacted']);
    const touched = observed.calls.filter(
      (c) =>
        c.op !== 'list' &&
        c.op !== 'listIncompleteUploads' &&
        (notData.includes(c.key) || (c.deletes ?? []).some((d) => notData.includes(d.key))),
    );
    expect(touched).toEqual([]);
    for (const [key, etag] of tags) expect(await etagOf(l.store, key), key).toBe(etag);
    await expect(dataIds(l, notData)).resolves.toEqual(range(1, 50));
    // One daily file holds the day.
    expect(
      (await keys(l.store, 'db/')).filter((k) => l.config.layout.isDataKey(k) && !notData.includes(k)),
    ).toEqual([expect.stringMatching(/^db\/cpu\/2025\/01\/15\/cpu_20250115_.*_daily\.parquet$/)]);
  });
});

// ---- schema ----

describe('schemas', () => {
  it('a conflict fails only its partition, naming partition, column and files; a widening next to it compacts', async () => {
    const l = await lake([...rawFiles('10', 3), ...rawFiles('11', 2), ...rawFiles('12', 2)]);
    // Hour 10: the third file's count is VARCHAR (a conflict). Hour 11: the second file's count
    // is BIGINT (a safe widening). Hour 12: plain.
    const odd = 'db/cpu/2025/01/15/10/cpu_20250115_100200_3.parquet';
    const local = join(root, `${randomBytes(6).toString('hex')}.parquet`);
    await engine.query(
      `COPY (SELECT * REPLACE ('x' || id::VARCHAR AS "count") FROM read_parquet(${parquetPath(join(l.dir, odd))})) TO ${quoteString(local)} (FORMAT parquet)`,
    );
    await l.store.put(odd, { file: local });
    const wide = 'db/cpu/2025/01/15/11/cpu_20250115_110100_2.parquet';
    const wideLocal = join(root, `${randomBytes(6).toString('hex')}.parquet`);
    await writeSampleParquet(engine, wideLocal, {
      rows: 10,
      firstId: 41,
      startTimeMs: Date.UTC(2025, 0, 15, 11),
      spanMs: HOUR,
      countType: 'BIGINT',
    });
    await l.store.put(wide, { file: wideLocal });
    const hour10 = (await keys(l.store, 'db/cpu/2025/01/15/10/')).filter((k) => k.endsWith('.parquet'));
    const tags10 = await Promise.all(hour10.map((k) => etagOf(l.store, k)));

    const observed = new FaultStore(l.store);
    const report = await cycle(l, 'hourly', { store: observed });
    expect(outcomes(report)).toEqual({
      'db/cpu/2025/01/15/10/': 'failed: SchemaConflictError',
      'db/cpu/2025/01/15/11/': 'compacted',
      'db/cpu/2025/01/15/12/': 'compacted',
    });
    const failed = report.jobs.find((j) => j.job.partition === 'db/cpu/2025/01/15/10/')?.outcome;
    if (failed?.status !== 'failed') throw new Error('hour 10 must fail');
    expect(failed.error).toBeInstanceOf(SchemaConflictError);
    expect(failed.error).toMatchObject({ partition: 'db/cpu/2025/01/15/10/', column: 'count' });
    expect(failed.error.message).toContain(odd);
    expect(failed.error.message).toMatch(/VARCHAR/);
    // Nothing of hour 10 was deleted or changed; no manifest or staging is left.
    expect(dataDeletes(observed, l.config).filter((k) => k.includes('/10/'))).toEqual([]);
    expect(await Promise.all(hour10.map((k) => etagOf(l.store, k)))).toEqual(tags10);
    expect(await keys(l.store, `${l.config.layout.stateRoot}manifests/`)).toEqual([]);
    expect(await keys(l.store, `${l.config.layout.stateRoot}staging/`)).toEqual([]);
    // Hour 11 merged INTEGER and BIGINT into BIGINT; every row of 11 and 12 once.
    const out11 = (await keys(l.store, 'db/cpu/2025/01/15/11/')).filter((k) =>
      k.endsWith('_compacted.parquet'),
    );
    expect(out11.length).toBeGreaterThan(0);
    for (const key of out11) {
      const described = await engine.query(
        `DESCRIBE SELECT * FROM read_parquet(${parquetPath(join(l.dir, key))})`,
      );
      expect(described.find((c) => c.column_name === 'count')?.column_type).toBe('BIGINT');
    }
    await expect(dataIds(l)).resolves.toEqual(range(1, 70));
    // `compactor status` names the failing partition and why.
    const status = JSON.parse((await cli('status', '--store', l.dir, '--json')).text) as {
      failing: { partition: string; lastError: string }[];
    };
    expect(status.failing).toEqual([
      expect.objectContaining({
        partition: 'db/cpu/2025/01/15/10/',
        lastError: expect.stringContaining('count'),
      }),
    ]);
  });
});

// ---- keys ----

const ODD_TABLE = 'my db+%20#?[x]=ü 名前';
const ODD_FILES = ['cpu 1+2%3#4?5[6]=7 ü.parquet', 'cpu_%2F_#_?_[_=_+_ _é_雪_😀.parquet', 'plain.parquet'];

describe('keys', () => {
  it('with space, +, %, #, ?, [, =, unicode compact hourly then daily with exact ids, and the visible view reads them', async () => {
    const files: LakeFile[] = [];
    for (const hh of ['10', '11'])
      for (const name of ODD_FILES)
        files.push({ key: `${ODD_TABLE}/dt=2025-01-15/hour=${hh}/${hh}-${name}`, rows: 7 });
    // Globbing readers only (partitionSegments []): hive's own partitions would refuse the daily tier.
    const l = await lake(files, { ...CONFIG, layout: 'hive', partitionSegments: [] });
    const hourly = await cycle(l, 'hourly');
    expect(Object.values(outcomes(hourly))).toEqual(['compacted', 'compacted']);
    await expect(dataIds(l)).resolves.toEqual(range(1, 42));
    for (const key of await keys(l.store, `${ODD_TABLE}/`)) expect(key).toMatch(/_compacted\.parquet$/);
    const daily = await cycle(l, 'daily');
    expect(Object.values(outcomes(daily))).toEqual(['compacted']);
    const left = (await keys(l.store)).filter((k) => l.config.layout.isDataKey(k));
    expect(left).toEqual([
      expect.stringMatching(/^my db\+%20#\?\[x\]=ü 名前\/dt=2025-01-15\/[^/]+_daily\.parquet$/),
    ]);
    await expect(dataIds(l)).resolves.toEqual(range(1, 42));
    await new LakeChecker(engine, l.dir, l.store, l.config, l.total).assertQuiescent({
      levels: new Set([2]),
    });
    // The DuckDB view `compactor visible --sql` prints reads every row once (glob characters escaped).
    const view = await visibleFiles(l.store, l.config);
    await engine.query(
      duckdbStatement(
        view.files.map((f) => join(l.dir, f.key)),
        'odd_lake',
      ),
    );
    const [row] = await engine.query('SELECT count(*) AS n, count(DISTINCT id) AS d FROM odd_lake');
    expect(row).toEqual({ n: 42n, d: 42n });
  });

  it('near 1,024 bytes (segments up to 250 bytes) compacts with exact ids', async () => {
    // A data prefix of three long folders, then the Arc layout, then a long file name.
    const segment = (c: string, n: number) => `${c.repeat(n)}`;
    const prefix = `${segment('p', 240)}/${segment('q', 240)}/${segment('ü', 120)}/${segment('r', 25)}/`;
    const config: ConfigInput = { ...CONFIG, dataPrefix: prefix };
    const name = (hh: string, i: number) =>
      `cpu_20250115_${hh}0${i}00_${i}_${segment('n', 250 - 30)}.parquet`;
    const files: LakeFile[] = [];
    for (const hh of ['10', '11'])
      for (const i of [1, 2, 3])
        files.push({ key: `${prefix}db/cpu/2025/01/15/${hh}/${name(hh, i)}`, rows: 5 });
    const longest = Math.max(...files.map((f) => Buffer.byteLength(f.key)));
    expect(longest).toBeGreaterThan(1000);
    expect(longest).toBeLessThanOrEqual(1024);
    const l = await lake(files, config);
    const hourly = await cycle(l, 'hourly');
    expect(Object.values(outcomes(hourly))).toEqual(['compacted', 'compacted']);
    await expect(dataIds(l)).resolves.toEqual(range(1, 30));
    const daily = await cycle(l, 'daily');
    expect(Object.values(outcomes(daily))).toEqual(['compacted']);
    await new LakeChecker(engine, l.dir, l.store, l.config, l.total).assertQuiescent({
      levels: new Set([2]),
    });
  });
});

describe('keys near the limits (found)', () => {
  // A readable record (`quarantine/inputs/<its key>.json`) would be 5 bytes longer in its last
  // segment and ~35 in total than the input's key: past the limits, the record is named by a hash.
  it('a corrupt input with a 250-byte file name is quarantined and the rest of its partition compacts', async () => {
    const l = await lake(rawFiles('10', 2));
    const corrupt = `db/cpu/2025/01/15/10/cpu_20250115_105900_9_${'x'.repeat(250 - 30)}.parquet`;
    expect(Buffer.byteLength(corrupt.split('/').at(-1) ?? '')).toBe(250);
    const { etag } = await l.store.put(corrupt, Buffer.from('not parquet'));
    const report = await cycle(l, 'hourly');
    expect(await etagOf(l.store, corrupt)).toBe(etag);
    expect(outcomes(report)).toEqual({ 'db/cpu/2025/01/15/10/': 'compacted' });
    const records = await keys(l.store, `${quarantineRoot(l.config.layout)}inputs-hashed/`);
    expect(records).toHaveLength(1);
    const record = JSON.parse((await l.store.getBytes(records[0] as string)).body.toString('utf8'));
    expect(record).toMatchObject({ key: corrupt, etag, partition: 'db/cpu/2025/01/15/10/' });
    await expect(dataIds(l, [corrupt])).resolves.toEqual(range(1, 20));
    // Held on the next cycles too: never merged, never deleted.
    const again = await cycle(l, 'hourly');
    expect(outcomes(again)).toEqual({});
    expect(await etagOf(l.store, corrupt)).toBe(etag);
  });

  // Output names repeat the table name (`{table}_{date}_{HH}_{jobId}_{part}_compacted.parquet`), so
  // with a long table name the output key outgrows its inputs' keys: it drops the table and date.
  it('near 1,024 bytes with a long table name compacts with exact ids', async () => {
    const prefix = `${'p'.repeat(240)}/${'q'.repeat(240)}/${'r'.repeat(200)}/`;
    const measurement = 'm'.repeat(180);
    const files = [1, 2].map((i) => ({
      key: `${prefix}db/${measurement}/2025/01/15/10/m_20250115_100${i}00_${i}.parquet`,
      rows: 5,
    }));
    expect(Buffer.byteLength(files[0]?.key ?? '')).toBeGreaterThan(900);
    const l = await lake(files, { ...CONFIG, dataPrefix: prefix });
    const report = await cycle(l, 'hourly');
    expect(Object.values(outcomes(report))).toEqual(['compacted']);
    await expect(dataIds(l)).resolves.toEqual(range(1, 10));
    const outputs = await keys(l.store, `${prefix}db/${measurement}/2025/01/15/10/`);
    expect(outputs).toHaveLength(1);
    expect(Buffer.byteLength(outputs[0] ?? '')).toBeLessThanOrEqual(1024);
    expect(outputs[0]).toMatch(/\/10\/\d{8}T\d{6}Z-[0-9a-f]+_000_compacted\.parquet$/);
  });

  it('a folder whose outputs cannot fit the key limit is reported by the planner, not failed each cycle', async () => {
    const prefix = `${'p'.repeat(240)}/${'q'.repeat(240)}/${'r'.repeat(240)}/${'s'.repeat(240)}/`;
    const files = [1, 2].map((i) => ({ key: `${prefix}db/cpu/2025/01/15/10/c${i}.parquet`, rows: 5 }));
    expect(Buffer.byteLength(files[0]?.key ?? '')).toBeLessThanOrEqual(1024);
    const l = await lake(files, { ...CONFIG, dataPrefix: prefix });
    const { plan, jobs } = await cycle(l, 'hourly');
    expect(jobs).toEqual([]);
    expect(plan.skipped).toEqual([
      {
        tier: 'hourly',
        partition: `${prefix}db/cpu/2025/01/15/10/`,
        reason: expect.stringMatching(
          /^cannot be compacted: its output key would be 10\d\d bytes \(limit 1024, 250 a name\): shorten the data prefix or table path$/,
        ),
        candidates: files.length,
      },
    ]);
    await expect(dataIds(l)).resolves.toEqual(range(1, 10));
  });
});

// ---- races with writers ----

describe('writers racing a cycle', () => {
  it('an input overwritten between plan and delete is kept as new data and compacted next cycle', async () => {
    const l = await lake([...rawFiles('10', 3), ...rawFiles('11', 2)]);
    const victim = 'db/cpu/2025/01/15/10/cpu_20250115_100100_2.parquet';
    let overwritten: string | undefined;
    const racing = new FaultStore(l.store, {
      gate: async (call: CallRecord) => {
        // The writer replaces the file right before the job deletes its inputs.
        if (!overwritten && call.op === 'deleteMany' && call.key.includes(victim))
          overwritten = await writeRaw(l.store, victim, 10, 1001);
      },
    });
    const first = await cycle(l, 'hourly', { store: racing });
    expect(outcomes(first)).toEqual({
      'db/cpu/2025/01/15/10/': 'compacted',
      'db/cpu/2025/01/15/11/': 'compacted',
    });
    const job10 = first.jobs.find((j) => j.job.partition === 'db/cpu/2025/01/15/10/');
    expect(job10?.outcome.steps.find((s) => s.state === 'inputs-deleted')).toMatchObject({ keptInputs: 1 });
    // The new version is still there; the old rows (11..20) are in the output once.
    expect(await etagOf(l.store, victim)).toBe(overwritten);
    const expected = sorted([...range(1, 50), ...range(1001, 1010)]);
    await expect(dataIds(l)).resolves.toEqual(expected);
    await expect(visibleIds(l)).resolves.toEqual(expected);
    // The next cycle compacts the new version (a straggler: its day is old enough).
    const second = await cycle(l, 'hourly');
    expect(outcomes(second)).toEqual({ 'db/cpu/2025/01/15/10/': 'compacted' });
    expect(await etagOf(l.store, victim)).toBeUndefined();
    await expect(dataIds(l)).resolves.toEqual(expected);
  });

  it('a file landing in the hour during its compaction is not deleted and is compacted next cycle', async () => {
    const l = await lake([...rawFiles('10', 3), ...rawFiles('11', 2)]);
    const late = 'db/cpu/2025/01/15/10/cpu_20250115_105900_99.parquet';
    let landed: string | undefined;
    const racing = new FaultStore(l.store, {
      gate: async (call: CallRecord) => {
        // A writer lands a file while hour 10's output (the first job's) is being staged.
        if (!landed && call.op === 'put' && call.key.includes('/staging/'))
          landed = await writeRaw(l.store, late, 6, 5001);
      },
    });
    const first = await cycle(l, 'hourly', { store: racing });
    expect(landed).toBeDefined();
    expect(outcomes(first)).toEqual({
      'db/cpu/2025/01/15/10/': 'compacted',
      'db/cpu/2025/01/15/11/': 'compacted',
    });
    expect(dataDeletes(racing, l.config)).not.toContain(late);
    expect(await etagOf(l.store, late)).toBe(landed);
    const expected = sorted([...range(1, 50), ...range(5001, 5006)]);
    await expect(dataIds(l)).resolves.toEqual(expected);
    await expect(visibleIds(l)).resolves.toEqual(expected);
    const second = await cycle(l, 'hourly');
    expect(outcomes(second)).toEqual({ 'db/cpu/2025/01/15/10/': 'compacted' });
    expect(await etagOf(l.store, late)).toBeUndefined();
    await expect(dataIds(l)).resolves.toEqual(expected);
  });
});

// ---- bounds ----

describe('a partition larger than one job', () => {
  it('drains in one cycle, its jobs one wave after another (maxJobFiles 3), exact ids, then the daily tier too', async () => {
    const l = await lake([...rawFiles('10', 8, 5), ...rawFiles('11', 2, 5)], { ...CONFIG, maxJobFiles: 3 });
    const report = await cycle(l, 'hourly');
    // Hour 10's eight files: three jobs of 3, 3 and 2; hour 11's two: one job.
    expect(report.plan.jobs.map((j) => [j.partition.slice(-3), j.wave, j.inputs.length])).toEqual([
      ['10/', 0, 3],
      ['10/', 1, 3],
      ['10/', 2, 2],
      ['11/', 0, 2],
    ]);
    expect(report.jobs.every((j) => j.outcome.status === 'compacted')).toBe(true);
    await expect(dataIds(l)).resolves.toEqual(range(1, 50));
    await expect(visibleIds(l)).resolves.toEqual(range(1, 50));
    const raw = (await keys(l.store, 'db/')).filter(
      (k) => l.config.layout.isDataKey(k) && !/_(compacted|daily)\.parquet$/.test(k),
    );
    expect(raw).toEqual([]);
    // Four hourly outputs: a daily job of three, and the fourth alone waits for the next run,
    // which merges it with that daily output.
    const daily = await cycle(l, 'daily');
    expect(daily.plan.jobs.map((j) => j.inputs.length)).toEqual([3]);
    const again = await cycle(l, 'daily');
    expect(again.plan.jobs.map((j) => j.inputs.length)).toEqual([2]);
    expect([...daily.jobs, ...again.jobs].every((j) => j.outcome.status === 'compacted')).toBe(true);
    await new LakeChecker(engine, l.dir, l.store, l.config, l.total).assertQuiescent({
      levels: new Set([2]),
    });
  });

  it('with one job a partition a run (maxJobsPerPartition 1), converges over several cycles, exact ids after every cycle, then the daily tier too', async () => {
    const l = await lake([...rawFiles('10', 8, 5), ...rawFiles('11', 2, 5)], {
      ...CONFIG,
      maxJobFiles: 3,
      maxJobsPerPartition: 1,
    });
    const rawLeft = async () =>
      (await keys(l.store, 'db/')).filter(
        (k) => l.config.layout.isDataKey(k) && !/_(compacted|daily)\.parquet$/.test(k),
      );
    const history: number[] = [];
    for (let n = 1; n <= 6 && (await rawLeft()).length > 0; n++) {
      const report = await cycle(l, 'hourly');
      expect(
        report.jobs.every((j) => j.outcome.status === 'compacted'),
        JSON.stringify(outcomes(report)),
      ).toBe(true);
      for (const j of report.jobs) expect(j.job.inputs.length).toBeLessThanOrEqual(3);
      history.push((await rawLeft()).length);
      await expect(dataIds(l)).resolves.toEqual(range(1, 50));
      await expect(visibleIds(l)).resolves.toEqual(range(1, 50));
    }
    // 10 raw files: 3 + 2 (both hours) -> 5 left, 3 -> 2 left, then the last 2.
    expect(history).toEqual([5, 2, 0]);
    // The daily tier is bounded too: 5 hourly outputs take two daily jobs over two cycles.
    for (let n = 1; n <= 4; n++) {
      const report = await cycle(l, 'daily');
      if (report.jobs.length === 0) break;
      expect(report.jobs.every((j) => j.outcome.status === 'compacted')).toBe(true);
      await expect(dataIds(l)).resolves.toEqual(range(1, 50));
    }
    await new LakeChecker(engine, l.dir, l.store, l.config, l.total).assertQuiescent({
      levels: new Set([2]),
    });
  });
});
