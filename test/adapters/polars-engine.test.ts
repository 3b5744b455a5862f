/**
 * The polars merge behind the DuckDB engine, on real Parquet: it writes what DuckDB's merge
 * writes (the same rows in the same order, types, row groups, ZSTD, statistics and footer
 * metadata), splits as DuckDB splits, and fails the way DuckDB's merge fails.
 */

import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  type DuckDbEngine,
  parquetPath,
  quoteString,
} from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import {
  loadPolarsWriter,
  MEMORY_PER_INPUT_BYTE,
} from '../../functions/adapters/polars-engine/polars-engine.ts';
import { withKeyValueMetadata } from '../../functions/adapters/polars-engine/polars-engine-footer.ts';
import type { Column, CompactRequest, MergeWriter } from '../../functions/core/engine.ts';
import { InputUnreadableError } from '../../functions/core/errors.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';

const reasons: string[] = [];
const polars = (await loadPolarsWriter({ onUnavailable: (reason) => reasons.push(reason) })) as MergeWriter;

let dir: string;
let engine: DuckDbEngine;
let counter = 0;

useEngineAndDir(
  'polars-engine-test-',
  (e, d) => {
    engine = e;
    dir = d;
  },
  { engine: () => ({ threads: 2, mergeWriters: [polars] }) },
);

/** Every type the polars writer takes, NULLs and NaN included; times repeat across files. */
function rows(first: number, count: number, opts: { intAs?: string; hostName?: string } = {}): string {
  return `SELECT (${first} + range)::BIGINT AS id,
      TIMESTAMP '2025-01-14 10:00:00' + to_seconds((range * 7) % ${count}) AS time,
      CASE WHEN range % 11 = 0 THEN NULL ELSE 'h' || (range % 3) END AS ${opts.hostName ?? 'host'},
      (range % 100)::${opts.intAs ?? 'INTEGER'} AS n,
      CASE WHEN range % 13 = 0 THEN 'NaN'::DOUBLE ELSE range / 3 END AS value,
      (range / 7)::FLOAT AS f,
      range % 2 = 0 AS b,
      DATE '2025-01-14' + (range % 5)::INTEGER AS d,
      (range % 100)::SMALLINT AS s,
      (range % 100)::TINYINT AS t,
      TIMESTAMPTZ '2025-01-14 10:00:00+00' + to_seconds(range) AS tz,
      TIMESTAMP_NS '2025-01-14 10:00:00' + to_seconds(range) AS ns
    FROM range(${count})`;
}

async function write(select: string): Promise<string> {
  const path = join(dir, `in-${counter++}.parquet`);
  await engine.query(`COPY (${select}) TO ${quoteString(path)} (FORMAT parquet, COMPRESSION snappy)`);
  return path;
}

const COLUMNS: Column[] = [
  { name: 'id', type: 'BIGINT' },
  { name: 'time', type: 'TIMESTAMP' },
  { name: 'host', type: 'VARCHAR' },
  { name: 'n', type: 'BIGINT' },
  { name: 'value', type: 'DOUBLE' },
  { name: 'f', type: 'FLOAT' },
  { name: 'b', type: 'BOOLEAN' },
  { name: 'd', type: 'DATE' },
  { name: 's', type: 'SMALLINT' },
  { name: 't', type: 'TINYINT' },
  { name: 'tz', type: 'TIMESTAMP WITH TIME ZONE' },
  { name: 'ns', type: 'TIMESTAMP_NS' },
];

function request(
  inputs: readonly string[],
  engineName: 'duckdb' | 'polars',
  extra: Partial<CompactRequest> = {},
) {
  return {
    inputs,
    columns: COLUMNS,
    sortBy: ['time', 'host'],
    outputDir: join(dir, `out-${counter++}-${engineName}`),
    targetFileBytes: 512 * 1024 * 1024,
    rowGroupSize: 2048,
    mergeEngine: engineName,
    ...extra,
  } satisfies CompactRequest;
}

async function rowsOf(paths: readonly string[]): Promise<unknown[]> {
  const list = paths.map(parquetPath).join(', ');
  return (await engine.query(`SELECT * FROM read_parquet([${list}])`)).map((row) =>
    JSON.stringify(row, (_key, value) => (typeof value === 'bigint' ? String(value) : value)),
  );
}

async function describeOf(path: string) {
  return (await engine.query(`DESCRIBE SELECT * FROM read_parquet(${parquetPath(path)})`)).map(
    (r) => `${r.column_name} ${r.column_type}`,
  );
}

describe('the polars merge', () => {
  it('loads here', () => {
    expect(reasons).toEqual([]);
    expect(polars.name).toBe('polars');
  });

  it('writes the rows DuckDB writes, in the same order, with the same types, row groups, codec, statistics and footer metadata', async () => {
    // A narrower integer, a column in another case and one missing: the unified schema's casts.
    const inputs = [
      await write(rows(1, 3000)),
      await write(rows(10_001, 2500, { intAs: 'INTEGER', hostName: 'HOST' })),
      await write(`SELECT * EXCLUDE (f) FROM (${rows(20_001, 1500, { intAs: 'BIGINT' })})`),
    ];
    const metadata = { 'arc:tags': 'host', writer: 'test ✓' };
    const [duck] = [await engine.compact(request(inputs, 'duckdb', { metadata }))];
    const [pol] = [await engine.compact(request(inputs, 'polars', { metadata }))];
    expect(pol?.map((o) => o.rows)).toEqual([7000]);
    expect(duck?.map((o) => o.rows)).toEqual([7000]);
    const d = (duck?.[0]?.path ?? '') as string;
    const p = (pol?.[0]?.path ?? '') as string;
    expect(await describeOf(p)).toEqual(await describeOf(d));
    expect(await rowsOf([p])).toEqual(await rowsOf([d]));

    const kv = async (path: string) =>
      await engine.query(
        `SELECT decode(key) AS k, decode(value) AS v FROM parquet_kv_metadata(${parquetPath(path)}) ORDER BY k`,
      );
    expect(await kv(p)).toEqual([
      { k: 'arc:tags', v: 'host' },
      { k: 'writer', v: 'test ✓' },
    ]);
    expect(await kv(p)).toEqual(await kv(d));

    const groups = async (path: string) =>
      (
        await engine.query(
          `SELECT row_group_num_rows AS num_rows FROM parquet_metadata(${parquetPath(path)}) WHERE column_id = 0 ORDER BY row_group_id`,
        )
      ).map((r) => Number(r.num_rows));
    expect(await groups(p)).toEqual([2048, 2048, 2048, 856]);
    expect(await groups(p)).toEqual(await groups(d));
    const codecs = await engine.query(`SELECT DISTINCT compression FROM parquet_metadata(${parquetPath(p)})`);
    expect(codecs).toEqual([{ compression: 'ZSTD' }]);
    // The same statistics, but for a float min of zero: polars writes -0.0, as the Parquet
    // format asks of writers (parquet.thrift, ColumnOrder: a min of +0 is written as -0), DuckDB 0.0.
    const stats = async (path: string) =>
      (await engine.columnStats(path)).map((c) => (c.min === '-0.0' ? { ...c, min: '0.0' } : c));
    expect(await stats(p)).toEqual(await stats(d));
  });

  it('ties on every sort key keep the inputs order, as DuckDB does', async () => {
    const same = `SELECT (x + range)::BIGINT AS id, TIMESTAMP '2025-01-14 10:00:00' AS time, 'h' AS host FROM range(50)`;
    const inputs = [await write(same.replace('x', '1')), await write(same.replace('x', '100'))];
    const columns = [
      { name: 'id', type: 'BIGINT' },
      { name: 'time', type: 'TIMESTAMP' },
      { name: 'host', type: 'VARCHAR' },
    ];
    const [out] = await engine.compact({ ...request(inputs, 'polars'), columns });
    const ids = await engine.query(`SELECT id FROM read_parquet(${parquetPath(out?.path ?? '')})`);
    expect(ids.map((r) => Number(r.id))).toEqual([
      ...Array.from({ length: 50 }, (_, i) => 1 + i),
      ...Array.from({ length: 50 }, (_, i) => 100 + i),
    ]);
  });

  it('splits a job over the target size as DuckDB does: sorted across files, on row-group boundaries', async () => {
    const inputs = [await write(rows(1, 6000)), await write(rows(10_001, 6000))];
    const [bytes] = await engine.query(
      `SELECT sum(total_compressed_size)::BIGINT AS b FROM parquet_metadata([${inputs.map(parquetPath).join(', ')}])`,
    );
    const target = Math.floor(Number(bytes?.b) / 3);
    const duck = await engine.compact(request(inputs, 'duckdb', { targetFileBytes: target }));
    const pol = await engine.compact(request(inputs, 'polars', { targetFileBytes: target }));
    expect(pol.length).toBeGreaterThan(1);
    // The split follows each engine's own output sizes (polars' are smaller): the rows and their
    // order are the same, and every file but the last ends on a row-group boundary.
    expect(await rowsOf(pol.map((o) => o.path))).toEqual(await rowsOf(duck.map((o) => o.path)));
    expect(pol.slice(0, -1).every((o) => o.rows % 2048 === 0)).toBe(true);
  });

  it('names the input whose data pages are damaged, as DuckDB merge does', async () => {
    const inputs = [await write(rows(1, 20_000)), await write(rows(30_001, 20_000))];
    const victim = inputs[1] as string;
    const [chunk] = await engine.query(
      `SELECT data_page_offset FROM parquet_metadata(${parquetPath(victim)}) WHERE path_in_schema = 'time'`,
    );
    const bytes = await readFile(victim);
    const offset = Number(chunk?.data_page_offset);
    for (let i = offset; i < offset + 32; i++) bytes[i] = 0xff;
    await writeFile(victim, bytes);
    const error = await engine.compact(request(inputs, 'polars')).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(InputUnreadableError);
    expect((error as InputUnreadableError).file).toBe(victim);
  });

  it('is offered only for the types and casts it writes as DuckDB does', async () => {
    const inputColumns = [COLUMNS, COLUMNS.map((c) => (c.name === 'n' ? { ...c, type: 'INTEGER' } : c))];
    expect(engine.mergeEngines({ columns: COLUMNS, inputColumns, inputBytes: 1000 })).toEqual([
      'duckdb',
      'polars',
    ]);
    const decimal = [...COLUMNS, { name: 'price', type: 'DECIMAL(18,3)' }];
    expect(engine.mergeEngines({ columns: decimal, inputColumns: [decimal], inputBytes: 1000 })).toEqual([
      'duckdb',
    ]);
    // HUGEINT to BIGINT narrows, VARCHAR to DOUBLE parses: not casts the writer makes.
    const narrowing = [COLUMNS.map((c) => (c.name === 'n' ? { ...c, type: 'HUGEINT' } : c))];
    expect(engine.mergeEngines({ columns: COLUMNS, inputColumns: narrowing, inputBytes: 1000 })).toEqual([
      'duckdb',
    ]);
    const parsed = [COLUMNS.map((c) => (c.name === 'value' ? { ...c, type: 'VARCHAR' } : c))];
    expect(engine.mergeEngines({ columns: COLUMNS, inputColumns: parsed, inputBytes: 1000 })).toEqual([
      'duckdb',
    ]);
  });

  it('is offered only for jobs whose inputs fit its memory limit, MEMORY_PER_INPUT_BYTE per byte', async () => {
    const bounded = (await loadPolarsWriter({
      onUnavailable: (reason) => reasons.push(reason),
      memoryLimitBytes: 1000 * MEMORY_PER_INPUT_BYTE,
    })) as MergeWriter;
    const shape = { columns: COLUMNS, inputColumns: [COLUMNS] };
    expect(bounded.writes({ ...shape, inputBytes: 1000 })).toBe(true);
    expect(bounded.writes({ ...shape, inputBytes: 1001 })).toBe(false);
  });

  it('a request for an engine it was not given fails', async () => {
    const bare = await (
      await import('../../functions/adapters/duckdb-engine/duckdb-engine.ts')
    ).DuckDbEngine.create({ threads: 1 });
    try {
      await expect(bare.compact(request([await write(rows(1, 10))], 'polars'))).rejects.toThrow(
        /no polars merge engine/,
      );
      expect(bare.mergeEngines({ columns: COLUMNS, inputColumns: [COLUMNS], inputBytes: 1000 })).toEqual([
        'duckdb',
      ]);
    } finally {
      await bare.close();
    }
  });
});

describe('withKeyValueMetadata', () => {
  it('replaces the footer key-value metadata and keeps every other field', async () => {
    const path = join(dir, 'kv.parquet');
    await engine.query(
      `COPY (${rows(1, 100)}) TO ${quoteString(path)} (FORMAT parquet, KV_METADATA {old: 'x', other: 'y'})`,
    );
    const bytes = await readFile(path);
    const length = bytes.readUInt32LE(bytes.length - 8);
    const footer = bytes.subarray(bytes.length - 8 - length, bytes.length - 8);
    const before = await engine.query(`SELECT * FROM read_parquet(${parquetPath(path)})`);
    const rewrittenPath = join(dir, 'kv-rewritten.parquet');
    const write = async (entries: Record<string, string>) => {
      const next = withKeyValueMetadata(footer, entries);
      const tail = Buffer.alloc(8);
      tail.writeUInt32LE(next.length, 0);
      tail.write('PAR1', 4, 'latin1');
      await writeFile(
        rewrittenPath,
        Buffer.concat([bytes.subarray(0, bytes.length - 8 - length), next, tail]),
      );
    };
    await write({ a: '1', 'arc:tags': 'host,region' });
    expect(await engine.query(`SELECT * FROM read_parquet(${parquetPath(rewrittenPath)})`)).toEqual(before);
    expect(
      await engine.query(
        `SELECT decode(key) AS k, decode(value) AS v FROM parquet_kv_metadata(${parquetPath(rewrittenPath)}) ORDER BY k`,
      ),
    ).toEqual([
      { k: 'a', v: '1' },
      { k: 'arc:tags', v: 'host,region' },
    ]);
    await write({});
    expect(await engine.query(`SELECT * FROM parquet_kv_metadata(${parquetPath(rewrittenPath)})`)).toEqual(
      [],
    );
    const many = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`k${i}`, `v${i}`]));
    await write(many);
    expect(
      await engine.query(
        `SELECT count(*)::INTEGER AS n FROM parquet_kv_metadata(${parquetPath(rewrittenPath)})`,
      ),
    ).toEqual([{ n: 20 }]);
  });
});
