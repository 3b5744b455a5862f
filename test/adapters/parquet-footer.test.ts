import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import pl from 'nodejs-polars';
import { describe, expect, it } from 'vitest';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { parquetPath } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { readFooter } from '../../functions/adapters/parquet-footer.ts';
import { writeSampleParquet } from '../../functions/adapters/sample-data.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';

const START_MS = Date.UTC(2024, 0, 15, 10);
const fixture = {} as { engine: DuckDbEngine; dir: string };
useEngineAndDir('parquet-footer-test-', (engine, dir) => {
  Object.assign(fixture, { engine, dir });
});

/** The same numbers from DuckDB's own metadata functions. */
async function duckdbFooter(file: string) {
  const [row] = await fixture.engine.query(
    `SELECT f.num_rows, f.file_size_bytes,
       (SELECT coalesce(sum(n), 0) FROM (SELECT DISTINCT row_group_id, row_group_num_rows AS n
                                         FROM parquet_metadata(${parquetPath(file)}))) AS row_group_rows,
       (SELECT coalesce(max(least(coalesce(nullif(dictionary_page_offset, 0), data_page_offset), data_page_offset)
                   + total_compressed_size), 0) FROM parquet_metadata(${parquetPath(file)})) AS chunk_end
     FROM parquet_file_metadata(${parquetPath(file)}) AS f`,
  );
  return {
    rows: Number(row?.num_rows),
    rowGroupRows: Number(row?.row_group_rows),
    chunkEnd: Number(row?.chunk_end),
    fileBytes: Number(row?.file_size_bytes),
  };
}

describe('readFooter', () => {
  it('reads the row counts and chunk end DuckDB reads, for one and many row groups and no rows', async () => {
    const files: string[] = [];
    for (const [name, rows, extraColumns] of [
      ['small', 10, 0],
      ['wide', 3_000, 40],
      ['empty', 0, 0],
    ] as const) {
      const file = join(fixture.dir, `${name}.parquet`);
      await writeSampleParquet(fixture.engine, file, {
        rows,
        firstId: 0,
        startTimeMs: START_MS,
        spanMs: 1,
        extraColumns,
      });
      files.push(file);
    }
    // Several row groups, one with a dictionary page per string column.
    const groups = join(fixture.dir, 'groups.parquet');
    await fixture.engine.query(
      `COPY (SELECT range AS id, 'h' || (range % 3) AS host FROM range(10000)) TO ${parquetPath(groups)} (FORMAT parquet, ROW_GROUP_SIZE 2048)`,
    );
    files.push(groups);
    // Nested columns (a struct, a list), whose schema elements have children.
    const nested = join(fixture.dir, 'nested.parquet');
    await fixture.engine.query(
      `COPY (SELECT range AS id, {'a': range, 'b': 'x' || range} AS s, [range, range + 1] AS l FROM range(1000)) TO ${parquetPath(nested)} (FORMAT parquet, ROW_GROUP_SIZE 300)`,
    );
    files.push(nested);
    // Another writer (polars, in Rust): its own field order, statistics and pages.
    const polars = join(fixture.dir, 'polars.parquet');
    pl.DataFrame({ id: [1, 2, 3], host: ['a', 'b', null], value: [0.5, 1.5, 2.5] }).writeParquet(polars, {
      compression: 'zstd',
    });
    files.push(polars);
    for (const file of files) {
      const footer = await readFooter(file);
      expect(footer).toBeDefined();
      expect({ ...footer, signature: undefined, metadata: undefined }).toEqual({
        ...(await duckdbFooter(file)),
        signature: undefined,
        metadata: undefined,
      });
    }
    expect((await readFooter(groups))?.rowGroupRows).toBe(10_000);
  });

  it('gives one signature to files of one schema and writer, and another when a type, name or key-value differs', async () => {
    const write = async (name: string, sql: string) => {
      const file = join(fixture.dir, `${name}.parquet`);
      await fixture.engine.query(`COPY (${sql}) TO ${parquetPath(file)} (FORMAT parquet)`);
      return (await readFooter(file))?.signature;
    };
    const a = await write('a', 'SELECT 1::INTEGER AS x, 2.5::DOUBLE AS y');
    const b = await write('b', 'SELECT 7::INTEGER AS x, 9.5::DOUBLE AS y FROM range(100)');
    const wider = await write('wider', 'SELECT 1::BIGINT AS x, 2.5::DOUBLE AS y');
    const renamed = await write('renamed', 'SELECT 1::INTEGER AS z, 2.5::DOUBLE AS y');
    const file = join(fixture.dir, 'kv.parquet');
    await fixture.engine.query(
      `COPY (SELECT 1::INTEGER AS x, 2.5::DOUBLE AS y) TO ${parquetPath(file)} (FORMAT parquet, KV_METADATA {origin: 'test'})`,
    );
    const kv = (await readFooter(file))?.signature;
    expect(a).toBeDefined();
    expect(b).toBe(a);
    expect(new Set([a, wider, renamed, kv]).size).toBe(4);
  });

  it('reads the key-value metadata parquet_kv_metadata reads: text values, a key with a quote, none', async () => {
    const file = join(fixture.dir, 'kv-read.parquet');
    await fixture.engine.query(
      `COPY (SELECT 1 AS x) TO ${parquetPath(file)} (FORMAT parquet, KV_METADATA {"arc:tags": 'host,region', "it's": 'ü ''q''', empty: ''})`,
    );
    const rows = await fixture.engine.query(
      `SELECT decode(key) AS k, decode(value) AS v FROM parquet_kv_metadata(${parquetPath(file)})`,
    );
    const duckdb = Object.fromEntries(rows.map((r) => [String(r.k), String(r.v)]));
    expect(duckdb).toEqual({ 'arc:tags': 'host,region', "it's": "ü 'q'", empty: '' });
    expect((await readFooter(file))?.metadata).toEqual(duckdb);
    const plain = join(fixture.dir, 'kv-none.parquet');
    await fixture.engine.query(`COPY (SELECT 1 AS x) TO ${parquetPath(plain)} (FORMAT parquet)`);
    expect((await readFooter(plain))?.metadata).toEqual({});
  });

  it('returns undefined for what is not a Parquet footer, so the caller asks DuckDB', async () => {
    const good = join(fixture.dir, 'good.parquet');
    await writeSampleParquet(fixture.engine, good, {
      rows: 500,
      firstId: 0,
      startTimeMs: START_MS,
      spanMs: 1,
    });
    const bytes = await readFile(good);
    const variants: Record<string, Buffer> = {
      empty: Buffer.alloc(0),
      text: Buffer.from('time,host\n'.repeat(50)),
      magic: Buffer.concat([bytes.subarray(0, -1), Buffer.from([0])]),
      length: (() => {
        const b = Buffer.from(bytes);
        b.writeUInt32LE(b.length * 2, b.length - 8);
        return b;
      })(),
      garbage: (() => {
        const b = Buffer.from(bytes);
        const start = b.length - 8 - b.readUInt32LE(b.length - 8);
        b.fill(0xff, start, b.length - 8);
        return b;
      })(),
    };
    for (const [name, content] of Object.entries(variants)) {
      const file = join(fixture.dir, `bad-${name}.parquet`);
      await writeFile(file, content);
      expect(await readFooter(file), name).toBeUndefined();
    }
  });
});
