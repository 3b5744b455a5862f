import { join } from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { parquetPath } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import type { WithConnection } from '../../functions/adapters/duckdb-engine/duckdb-engine-sql.ts';
import {
  columnStatsByQuery,
  doubleText,
  footerColumnStats,
} from '../../functions/adapters/duckdb-engine/duckdb-engine-stats.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';

const fixture = {} as { engine: DuckDbEngine; dir: string };
useEngineAndDir('duckdb-engine-stats-test-', (engine, dir) => {
  Object.assign(fixture, { engine, dir });
});

// DuckDB's own reading, on an instance of its own in the engine's session time zone (UTC).
let instance: DuckDBInstance;
const withConnection: WithConnection = async (_signal, body) => {
  const connection = await instance.connect();
  try {
    return await body(connection);
  } finally {
    connection.closeSync();
  }
};
beforeAll(async () => {
  instance = await DuckDBInstance.create(':memory:', { threads: '1' });
  await withConnection(undefined, (c) => c.run(`SET GLOBAL TimeZone = 'UTC'`));
});
afterAll(() => instance.closeSync());

let files = 0;
async function write(select: string, rowGroupSize = 2048): Promise<string> {
  const file = join(fixture.dir, `f${files++}.parquet`);
  await fixture.engine.query(
    `COPY (${select}) TO ${parquetPath(file)} (FORMAT parquet, ROW_GROUP_SIZE ${rowGroupSize})`,
  );
  return file;
}

/** Deterministic doubles over every magnitude: random bit patterns, NaNs left out. */
function doubles(count: number): number[] {
  const view = new DataView(new ArrayBuffer(8));
  let state = 0x9e3779b97f4a7c15n;
  const out: number[] = [];
  while (out.length < count) {
    state = (state * 6364136223846793005n + 1442695040888963407n) & 0xffffffffffffffffn;
    view.setBigUint64(0, state);
    const value = view.getFloat64(0);
    if (!Number.isNaN(value)) out.push(value);
  }
  return out;
}

describe('footerColumnStats', () => {
  it("gives DuckDB's answer for every type it reads, over many row groups, nulls and edge values", async () => {
    // 10,000 rows in row groups of 2,048: each column's extremes sit in different groups, and
    // text order ('9' > '10', UTF-16 order of U+FF21 and U+1F600) would pick the wrong ones.
    const file = await write(
      `SELECT range % 7 = 0 AS b,
              (range % 200 - 100)::TINYINT AS t, (range * 6 - 30000)::SMALLINT AS s,
              (range * 214748 - 1073741824)::INTEGER AS i,
              CASE WHEN range = 9999 THEN 9223372036854775807 WHEN range = 5 THEN -9223372036854775808
                   ELSE range * 1000003 END::BIGINT AS l,
              CASE WHEN range = 9000 THEN 1e16 WHEN range = 3 THEN -0.00001 ELSE (range - 5000) / 7 END::DOUBLE AS d,
              CASE range % 5 WHEN 0 THEN NULL WHEN 1 THEN 'a' || range WHEN 2 THEN '' WHEN 3 THEN '\uFF21'
                   ELSE '😀' || range END AS v,
              CASE WHEN range < 2048 THEN '😀' ELSE '\uFF21' END AS w,
              DATE '0001-01-01' + (range * 365)::INTEGER AS dt,
              TIMESTAMP '1969-12-31 23:59:59.999999' + INTERVAL (range * 1234567) MICROSECOND AS ts,
              TIMESTAMPTZ '2026-01-01 00:00:00.5+00' + INTERVAL (range) SECOND AS tz,
              CASE WHEN range < 4096 THEN NULL ELSE range END AS late,
              NULL::BIGINT AS none, {'a': range} AS nested, [range] AS list
       FROM range(10000)`,
    );
    const fromFooter = footerColumnStats(file);
    expect(fromFooter).toBeDefined();
    expect(fromFooter).toEqual(await columnStatsByQuery(withConnection, file));
    expect(await fixture.engine.columnStats(file)).toEqual(fromFooter);
    expect(fromFooter?.find((c) => c.name === 'v')).toEqual({
      name: 'v',
      nulls: 2000,
      min: '',
      max: '😀9999',
    });
    // Row group 0 holds only U+1F600, the others only U+FF21: UTF-8 byte order, not UTF-16's.
    expect(fromFooter?.find((c) => c.name === 'w')).toEqual({
      name: 'w',
      nulls: 0,
      min: '\uFF21',
      max: '😀',
    });
  });

  it("writes doubles as DuckDB's CAST to VARCHAR does, over every magnitude", async () => {
    const values = [
      ...doubles(3000),
      0.0001,
      0.00001,
      1e15,
      1e16,
      123456789012345680000,
      5e-324,
      Number.MAX_VALUE,
      -1.5e-7,
      100,
      0.1,
      Number.POSITIVE_INFINITY,
      Number.NEGATIVE_INFINITY,
      -0,
      0,
    ];
    const rows = await fixture.engine.query(
      `SELECT v, CAST(v AS VARCHAR) AS text FROM (SELECT unnest([${values
        .map((v) =>
          Number.isFinite(v) ? `${v.toExponential()}::DOUBLE` : `'${v > 0 ? 'inf' : '-inf'}'::DOUBLE`,
        )
        .join(', ')}]) AS v)`,
    );
    expect(rows).toHaveLength(values.length);
    const wrong = rows.filter((r) => doubleText(r.v as number) !== r.text);
    expect(wrong).toEqual([]);
  });

  it('answers as DuckDB for a NaN, which DuckDB writes no min or max for', async () => {
    const file = await write(
      `SELECT CASE WHEN range = 3 THEN 'nan'::DOUBLE ELSE range::DOUBLE END AS x FROM range(10)`,
    );
    expect(footerColumnStats(file)).toEqual(await columnStatsByQuery(withConnection, file));
  });

  it("leaves to DuckDB's query the types and values it does not render", async () => {
    for (const select of [
      'SELECT 1.5::FLOAT AS x',
      'SELECT 1.5::DECIMAL(9, 2) AS x',
      'SELECT 18446744073709551615::UBIGINT AS x',
      `SELECT '\\xAA'::BLOB AS x`,
      `SELECT TIMESTAMP_NS '2026-01-01 00:00:00.123456789' AS x`,
      `SELECT TIMESTAMP_MS '2026-01-01 00:00:00.123' AS x`,
      `SELECT '3f1d8d2c-8f7a-4a43-9a7d-7b3c1b9f0e11'::UUID AS x`,
      `SELECT TIME '12:00:00' AS x`,
      `SELECT DATE '0001-01-01' - 1 AS x`,
    ]) {
      const file = await write(`SELECT 1 AS id, * FROM (${select})`);
      expect(footerColumnStats(file), select).toBeUndefined();
      expect(await fixture.engine.columnStats(file), select).toEqual(
        await columnStatsByQuery(withConnection, file),
      );
    }
  });
});
