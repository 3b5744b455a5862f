/**
 * DuckDbEngine's dedup on real Parquet files: 'exact' drops only rows equal in every column
 * (NULLs equal, as DISTINCT), 'last' keeps per key the row of the last input and within it the
 * last row, countDistinct counts what a correct dedup writes, and without dedup every row stays.
 */

import { copyFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  type DuckDbEngine,
  parquetPath,
  quoteString,
} from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { summarizeIds, writeSampleParquet } from '../../functions/adapters/sample-data.ts';
import type { CompactOutput, CompactRequest, DedupRequest } from '../../functions/core/engine.ts';
import { DedupError } from '../../functions/core/errors.ts';
import { unifySchemas } from '../../functions/core/schema.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';

let dir: string;
let engine: DuckDbEngine;
let counter = 0;

useEngineAndDir(
  'duckdb-dedup-test-',
  (e, d) => {
    engine = e;
    dir = d;
  },
  { engine: (d) => ({ threads: 2, tempDirectory: join(d, 'spill') }) },
);

/** A Parquet file of `rows`: SQL tuples (time as 'HH:MM:SS' of 2025-01-15), with these column names and types. */
async function parquet(columns: string, rows: readonly string[]): Promise<string> {
  const path = join(dir, `in-${counter++}.parquet`);
  await engine.query(
    `COPY (SELECT * FROM (VALUES ${rows.join(', ')}) AS t(${columns})) TO ${quoteString(path)} (FORMAT parquet)`,
  );
  return path;
}

const CPU_COLUMNS = 'time, host, value, note';
const row = (time: string, host: string, value: string, note: string) =>
  `(TIMESTAMP '2025-01-15 ${time}', ${host}::VARCHAR, ${value}::DOUBLE, ${note}::VARCHAR)`;

async function columnsOf(files: readonly string[]) {
  const infos = await Promise.all(files.map((file) => engine.inspect(file)));
  return unifySchemas(
    'test',
    files.map((key, i) => ({ key, columns: infos[i]?.columns ?? [] })),
  );
}

async function compact(
  inputs: readonly string[],
  dedup: DedupRequest | undefined,
  options: Partial<CompactRequest> = {},
): Promise<CompactOutput[]> {
  return engine.compact({
    inputs,
    columns: await columnsOf(inputs),
    sortBy: ['time'],
    outputDir: join(dir, `out-${counter++}`),
    targetFileBytes: 512 * 1024 * 1024,
    rowGroupSize: 122_880,
    ...(dedup ? { dedup } : {}),
    ...options,
  });
}

/** The outputs' rows in stored order, as `HH:MM:SS host value note` strings. */
async function readRows(outputs: readonly CompactOutput[]): Promise<string[]> {
  const rows = await engine.query(
    `SELECT strftime(time, '%H:%M:%S') AS t, host, value, note
       FROM read_parquet([${outputs.map((o) => parquetPath(o.path)).join(', ')}], file_row_number = true)
      ORDER BY file_index, file_row_number`,
  );
  return rows.map((r) => `${r.t} ${r.host} ${r.value} ${r.note}`);
}

/** Nine rows in two files; six are distinct over every column. */
async function exactFixture(): Promise<string[]> {
  const a = await parquet(CPU_COLUMNS, [
    row('10:00:00', "'a'", '1.0', 'NULL'),
    row('10:00:00', "'a'", '1.0', 'NULL'), // the row before, again: dropped
    row('10:00:00', "'a'", '1.0', "'x'"), // differs in note only: kept
    row('10:00:00', "'b'", '1.0', 'NULL'), // differs in host only: kept
    row('10:01:00', "'a'", '1.0', 'NULL'), // differs in time only: kept
  ]);
  const b = await parquet(CPU_COLUMNS, [
    row('10:00:00', "'a'", '1.0', 'NULL'), // a duplicate across files: dropped
    row('10:00:00', "'a'", '2.0', 'NULL'), // differs in value only: kept
    row('10:02:00', 'NULL', 'NULL', 'NULL'),
    row('10:02:00', 'NULL', 'NULL', 'NULL'), // all NULL, twice: NULLs compare equal, kept once
  ]);
  return [a, b];
}

describe('dedup "exact"', () => {
  it('drops rows equal in every column only: a row differing in any column is kept; NULLs compare equal', async () => {
    const inputs = await exactFixture();
    const outputs = await compact(inputs, { mode: 'exact' });
    expect(outputs.reduce((sum, o) => sum + o.rows, 0)).toBe(6);
    // Sorted by time; equal times keep the order of the first input holding the row.
    expect((await readRows(outputs)).sort()).toEqual(
      [
        '10:00:00 a 1 null',
        '10:00:00 a 1 x',
        '10:00:00 b 1 null',
        '10:00:00 a 2 null',
        '10:01:00 a 1 null',
        '10:02:00 null null null',
      ].sort(),
    );
    const times = (await readRows(outputs)).map((r) => r.slice(0, 8));
    expect(times).toEqual([...times].sort());
    const columns = await columnsOf(inputs);
    const before = await engine.countDistinct({ files: inputs, columns, dedup: { mode: 'exact' } });
    const after = await engine.countDistinct({
      files: outputs.map((o) => o.path),
      columns,
      dedup: { mode: 'exact' },
    });
    expect(before.rows).toBe(6);
    // The same rows, not only as many: the set's hash does not depend on order or file split.
    expect(after).toEqual(before);
    const fewer = await engine.countDistinct({ files: inputs.slice(1), columns, dedup: { mode: 'exact' } });
    expect(fewer.keysHash).not.toBe(before.keysHash);
  });

  it('compares values as written, after the safe widenings: INTEGER 5 and BIGINT 5 are one row', async () => {
    const narrow = await parquet('time, n', ["(TIMESTAMP '2025-01-15 10:00:00', 5::INTEGER)"]);
    const wide = await parquet('time, n', ["(TIMESTAMP '2025-01-15 10:00:00', 5::BIGINT)"]);
    const outputs = await compact([narrow, wide], { mode: 'exact' });
    expect(outputs.map((o) => o.rows)).toEqual([1]);
    const [described] = await engine.query(
      `SELECT column_type FROM (DESCRIBE SELECT n FROM read_parquet(${parquetPath(outputs[0]?.path ?? '')}))`,
    );
    expect(described?.column_type).toBe('BIGINT');
  });

  it('across split outputs: sorted within and across files, each row once', async () => {
    const original = join(dir, `sample-${counter++}.parquet`);
    await writeSampleParquet(engine, original, {
      rows: 20_000,
      firstId: 1,
      startTimeMs: Date.UTC(2025, 0, 15, 10),
      spanMs: 3_600_000,
    });
    // The same file landed three times (a writer retried): every row is there three times.
    const inputs = [original];
    for (let i = 0; i < 2; i++) {
      const copy = join(dir, `sample-copy-${counter++}.parquet`);
      await copyFile(original, copy);
      inputs.push(copy);
    }
    const outputs = await compact(
      inputs,
      { mode: 'exact' },
      { targetFileBytes: 100_000, rowGroupSize: 2048 },
    );
    expect(outputs.length).toBeGreaterThan(1);
    const paths = outputs.map((o) => o.path);
    expect(await summarizeIds(engine, paths)).toEqual({
      rows: 20_000n,
      distinct: 20_000n,
      min: 1n,
      max: 20_000n,
    });
    const [inversions] = await engine.query(
      `SELECT count(*) AS bad FROM (
         SELECT time, lag(time) OVER (ORDER BY file_index, file_row_number) AS previous
           FROM read_parquet([${paths.map(parquetPath).join(', ')}], file_row_number = true))
       WHERE time < previous`,
    );
    expect(Number(inversions?.bad)).toBe(0);
  });
});

describe('dedup "last"', () => {
  /** Older file first. Keys (host, time): (a,10:00) x3, (b,10:00), (a,10:01), (NULL,10:02) x2. */
  async function lastFixture(): Promise<{ older: string; newer: string }> {
    const older = await parquet(CPU_COLUMNS, [
      row('10:00:00', "'a'", '1.0', "'first'"),
      row('10:00:00', "'a'", '1.5', "'later in the older file'"),
      row('10:00:00', "'b'", '7.0', 'NULL'),
      row('10:01:00', "'a'", '3.0', 'NULL'),
    ]);
    const newer = await parquet(CPU_COLUMNS, [
      row('10:00:00', "'a'", '2.0', "'newer file'"),
      row('10:02:00', 'NULL', '9.0', 'NULL'),
      row('10:02:00', 'NULL', '9.5', "'later null key'"),
    ]);
    return { older, newer };
  }

  const LAST: DedupRequest = { mode: 'last', keys: ['host', 'time'] };

  it('keeps per key + time the row of the last input file and, within a file, the later row', async () => {
    const { older, newer } = await lastFixture();
    const outputs = await compact([older, newer], LAST);
    const rows = await readRows(outputs);
    expect([...rows].sort()).toEqual([
      '10:00:00 a 2 newer file',
      '10:00:00 b 7 null',
      '10:01:00 a 3 null',
      // A NULL key is one key, as in DISTINCT.
      '10:02:00 null 9.5 later null key',
    ]);
    // Sorted by time; equal times in the order of the inputs the kept rows come from.
    expect(rows.slice(0, 2)).toEqual(['10:00:00 b 7 null', '10:00:00 a 2 newer file']);
    const columns = await columnsOf([older, newer]);
    expect((await engine.countDistinct({ files: [older, newer], columns, dedup: LAST })).rows).toBe(4);
  });

  it('"last" follows the order the inputs are given: reversed, the other file wins', async () => {
    const { older, newer } = await lastFixture();
    const outputs = await compact([newer, older], LAST);
    expect((await readRows(outputs)).sort()).toEqual([
      '10:00:00 a 1.5 later in the older file',
      '10:00:00 b 7 null',
      '10:01:00 a 3 null',
      '10:02:00 null 9.5 later null key',
    ]);
  });

  it('a key column the inputs lack is refused, never ignored (ignoring it would merge series)', async () => {
    const { older, newer } = await lastFixture();
    const missing: DedupRequest = { mode: 'last', keys: ['hostname', 'time'] };
    await expect(compact([older, newer], missing)).rejects.toThrow(DedupError);
    await expect(
      engine.countDistinct({ files: [older], columns: await columnsOf([older]), dedup: missing }),
    ).rejects.toThrow(/dedup key column "hostname" is not in the inputs/);
  });

  it('a data column named file_row_number is refused: it would hide the write order', async () => {
    const shadowing = await parquet('time, host, file_row_number', [
      "(TIMESTAMP '2025-01-15 10:00:00', 'a', 1)",
    ]);
    await expect(compact([shadowing], LAST)).rejects.toThrow(/column named "file_row_number"/);
  });
});

describe('no dedup (the default)', () => {
  it('writes every row, duplicates included', async () => {
    const inputs = await exactFixture();
    const outputs = await compact(inputs, undefined);
    expect(outputs.reduce((sum, o) => sum + o.rows, 0)).toBe(9);
  });
});
