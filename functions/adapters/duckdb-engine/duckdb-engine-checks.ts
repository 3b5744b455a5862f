/**
 * The queries the core's merge checks ask DuckDbEngine: integer bounds from row-group statistics,
 * integers a DOUBLE cannot hold exactly, integers outside a range, and rows missing from the
 * evidence (RowContainment).
 */

import type { JS } from '@duckdb/node-api';
import { parquetPath, quoteIdentifier, quoteString } from '../../core/duckdb-sql.ts';
import type { IntegerBounds, IntegerOutside } from '../../core/engine.ts';
import { describe, readAll, type WithConnection } from './duckdb-engine-sql.ts';

export async function integerBounds(
  withConnection: WithConnection,
  file: string,
  column: string,
): Promise<IntegerBounds> {
  const source = parquetPath(file);
  return withConnection(undefined, async (connection) => {
    // min_value/max_value only: the deprecated min/max may be ordered as signed bytes.
    const rows = (
      await connection.runAndReadAll(
        `SELECT g.row_group_id, c.stats_min_value, c.stats_max_value, c.stats_null_count, c.num_values, c.path_in_schema
           FROM (SELECT DISTINCT row_group_id FROM parquet_metadata(${source})) AS g
           LEFT JOIN (SELECT * FROM parquet_metadata(${source}) WHERE lower(path_in_schema) = lower(${quoteString(column)})) AS c
             USING (row_group_id)
           ORDER BY g.row_group_id`,
      )
    ).getRowObjectsJS();
    let min: bigint | null = null;
    let max: bigint | null = null;
    for (const row of rows) {
      const group = `row group ${row.row_group_id}`;
      if (row.path_in_schema === null) return { unproved: `${group} has no column chunk for it` };
      const values = row.num_values === null ? null : BigInt(row.num_values as bigint);
      const nulls = row.stats_null_count === null ? null : BigInt(row.stats_null_count as bigint);
      // A chunk of NULLs only has no min/max and needs none.
      if (row.stats_min_value === null && row.stats_max_value === null && nulls !== null && nulls === values)
        continue;
      const low = integerText(row.stats_min_value);
      const high = integerText(row.stats_max_value);
      if (low === undefined || high === undefined) return { unproved: `${group} has no min/max statistics` };
      if (min === null || low < min) min = low;
      if (max === null || high > max) max = high;
    }
    return { min, max };
  });
}

export async function countInexactAsDouble(
  withConnection: WithConnection,
  file: string,
  column: string,
): Promise<number> {
  const value = quoteIdentifier(column);
  return withConnection(undefined, async (connection) => {
    // HUGEINT holds every 64-bit value and every DOUBLE within ±2^127: no overflow either way.
    const [row] = (
      await connection.runAndReadAll(
        `SELECT count(*) AS n FROM read_parquet(${parquetPath(file)}, hive_partitioning = false)
           WHERE ${value} IS NOT NULL AND TRY_CAST(CAST(${value} AS DOUBLE) AS HUGEINT) IS DISTINCT FROM CAST(${value} AS HUGEINT)`,
      )
    ).getRowObjectsJS();
    return Number(row?.n);
  });
}

export async function integerOutside(
  withConnection: WithConnection,
  file: string,
  column: string,
  low: bigint,
  high: bigint,
): Promise<IntegerOutside> {
  const value = `CAST(${quoteIdentifier(column)} AS HUGEINT)`;
  return withConnection(undefined, async (connection) => {
    // HUGEINT holds every signed and unsigned 64-bit value; min/max come back as text so no
    // value passes through a JS number.
    const [row] = (
      await connection.runAndReadAll(
        `SELECT count(*) FILTER (WHERE ${value} < ${low}::HUGEINT OR ${value} > ${high}::HUGEINT) AS outside,
                CAST(min(${value}) AS VARCHAR) AS lo, CAST(max(${value}) AS VARCHAR) AS hi
           FROM read_parquet(${parquetPath(file)}, hive_partitioning = false)`,
      )
    ).getRowObjectsJS();
    const text = (v: unknown) => (typeof v === 'string' ? BigInt(v) : null);
    return { rows: Number(row?.outside ?? 0), min: text(row?.lo), max: text(row?.hi) };
  });
}

export async function countMissing(
  withConnection: WithConnection,
  inputs: readonly string[],
  evidence: readonly string[],
): Promise<number> {
  if (inputs.length === 0) return 0;
  return withConnection(undefined, async (connection) => {
    const columns = (await describe(connection, readAll(inputs)))
      .map((c) => quoteIdentifier(c.name))
      .join(', ');
    if (evidence.length === 0) {
      const [row] = (
        await connection.runAndReadAll(`SELECT count(*) AS n FROM ${readAll(inputs)}`)
      ).getRowObjectsJS();
      return Number(row?.n);
    }
    // EXCEPT ALL is a multiset difference: a row held twice by the inputs must be there twice.
    const [row] = (
      await connection.runAndReadAll(
        `SELECT count(*) AS n FROM (SELECT ${columns} FROM ${readAll(inputs)} EXCEPT ALL SELECT ${columns} FROM ${readAll(evidence)})`,
      )
    ).getRowObjectsJS();
    return Number(row?.n);
  });
}

/** A statistics value printed as a whole number, as a bigint; undefined when it is not one. */
function integerText(value: JS | undefined): bigint | undefined {
  if (typeof value !== 'string' || !/^-?\d+$/.test(value)) return undefined;
  return BigInt(value);
}
