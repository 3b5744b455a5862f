/**
 * The DuckDB column types the polars writer writes, as the polars types whose Parquet columns
 * DuckDB reads back as the same type (checked after every write by DESCRIBE), and the casts it
 * makes as DuckDB's CAST makes them. Any other type or cast keeps the merge on DuckDB.
 */

import type { DataType } from 'nodejs-polars';
import type { MergeShape } from '../../core/engine.ts';

/** The nodejs-polars module, loaded by polars-engine.ts. */
export type Polars = typeof import('nodejs-polars');

const TYPES: Readonly<Record<string, (p: Polars) => DataType>> = {
  BOOLEAN: (p) => p.Bool,
  TINYINT: (p) => p.Int8,
  SMALLINT: (p) => p.Int16,
  INTEGER: (p) => p.Int32,
  BIGINT: (p) => p.Int64,
  FLOAT: (p) => p.Float32,
  DOUBLE: (p) => p.Float64,
  VARCHAR: (p) => p.String,
  DATE: (p) => p.Date,
  TIMESTAMP: (p) => p.Datetime('us'),
  TIMESTAMP_NS: (p) => p.Datetime('ns'),
  'TIMESTAMP WITH TIME ZONE': (p) => p.Datetime('us', 'UTC'),
};

/** Integer widths: a narrower integer widens to a wider one exactly, as DuckDB's CAST does. */
const INTEGER_BITS: Readonly<Record<string, number>> = { TINYINT: 8, SMALLINT: 16, INTEGER: 32, BIGINT: 64 };

/** The polars type a DuckDB type is written as. */
export function polarsType(p: Polars, duckDbType: string): DataType {
  const make = TYPES[duckDbType];
  if (make === undefined) throw new RangeError(`the polars writer does not write ${duckDbType}`);
  return make(p);
}

/**
 * Whether the polars writer gives what DuckDB's CAST gives for a column of type `from` written as
 * `to`: the same type; a wider integer; or an integer or FLOAT as DOUBLE (the schema union only
 * merges integers into DOUBLE when every value is proven exact, so no rounding differs).
 */
export function castWritten(from: string, to: string): boolean {
  if (!(from in TYPES) || !(to in TYPES)) return false;
  if (from === to) return true;
  const fromBits = INTEGER_BITS[from];
  const toBits = INTEGER_BITS[to];
  if (fromBits !== undefined && toBits !== undefined) return fromBits < toBits;
  return to === 'DOUBLE' && (fromBits !== undefined || from === 'FLOAT');
}

/** Whether every column of every input is written as DuckDB would write it (a missing column is NULLs). */
export function writesShape({ columns, inputColumns }: MergeShape): boolean {
  const wanted = new Map(columns.map((c) => [c.name.toLowerCase(), c.type]));
  if (![...wanted.values()].every((type) => type in TYPES)) return false;
  return inputColumns.every((input) =>
    input.every((c) => {
      const to = wanted.get(c.name.toLowerCase());
      return to !== undefined && castWritten(c.type, to);
    }),
  );
}
