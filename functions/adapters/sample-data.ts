/**
 * Deterministic sample Parquet for tests, the demo and benchmarks, generated inside DuckDB from
 * range() (no JS row loops). The same spec always yields the same rows.
 *
 * Columns: id BIGINT (firstId .. firstId+rows-1, unique: tests count ids to prove no row is lost or
 * duplicated), time TIMESTAMP (a permutation spread over [startTimeMs, startTimeMs+spanMs), so files
 * are not sorted by time), host VARCHAR, region VARCHAR, value DOUBLE, count INTEGER, then optional
 * c0..cN DOUBLE.
 */

import type { JS } from '@duckdb/node-api';
import { parquetPath, quoteIdentifier, quoteString } from './duckdb-engine/duckdb-engine.ts';

/** Runs SQL and returns rows (DuckDbEngine.query satisfies it). */
export interface SqlRunner {
  query(sql: string): Promise<Record<string, JS>[]>;
}

export type SampleColumn = 'host' | 'region' | 'value' | 'count';

export interface SampleSpec {
  readonly rows: number;
  readonly firstId: bigint | number;
  readonly startTimeMs: number;
  /** Times fall in [startTimeMs, startTimeMs + spanMs). */
  readonly spanMs: number;
  readonly hosts?: readonly string[];
  readonly regions?: readonly string[];
  /** Adds c0..c{n-1} DOUBLE columns (wider rows for benchmarks). */
  readonly extraColumns?: number;
  /** Default snappy, what most writers produce (outputs are ZSTD, so tests can tell them apart). */
  readonly compression?: 'snappy' | 'zstd';
  /** Schema-evolution cases: write count as BIGINT instead of INTEGER. */
  readonly countType?: 'INTEGER' | 'BIGINT';
  /** Schema-evolution cases: leave these columns out. */
  readonly omitColumns?: readonly SampleColumn[];
  /** Input row group size; DuckDB's default when absent. */
  readonly rowGroupSize?: number;
}

export const DEFAULT_HOSTS: readonly string[] = ['web-01', 'web-02', 'web-03', 'db-01', 'cache-01'];
export const DEFAULT_REGIONS: readonly string[] = ['eu-west-1', 'us-east-1', 'ap-southeast-2'];

/** A prime larger than any row count used: i * P mod rows is a permutation of 0..rows-1. */
const PERMUTATION_PRIME = 2_654_435_761n;

export async function writeSampleParquet(db: SqlRunner, path: string, spec: SampleSpec): Promise<void> {
  const { rows, startTimeMs, spanMs } = spec;
  const extra = spec.extraColumns ?? 0;
  if (!Number.isSafeInteger(rows) || rows < 0)
    throw new RangeError(`rows must be a non-negative integer: ${rows}`);
  if (BigInt(rows) >= PERMUTATION_PRIME) throw new RangeError(`rows must be below ${PERMUTATION_PRIME}`);
  if (!Number.isSafeInteger(startTimeMs))
    throw new RangeError(`startTimeMs must be an integer: ${startTimeMs}`);
  if (!Number.isSafeInteger(spanMs) || spanMs < 1)
    throw new RangeError(`spanMs must be a positive integer: ${spanMs}`);
  if (!Number.isSafeInteger(extra) || extra < 0) throw new RangeError(`extraColumns must be >= 0: ${extra}`);
  const firstId = BigInt(spec.firstId);
  const omit = new Set(spec.omitColumns ?? []);
  const pick = (values: readonly string[], salt: number) => {
    if (values.length === 0) throw new RangeError('hosts and regions need at least one value');
    const list = `[${values.map(quoteString).join(', ')}]`;
    return `${list}[1 + ((id + ${salt}) % ${values.length} + ${values.length}) % ${values.length}]`;
  };

  const columns = [
    'id',
    // The offset (from firstId) makes each file's permutation different.
    `make_timestamp(${startTimeMs * 1000}::BIGINT + ((((i::HUGEINT * ${PERMUTATION_PRIME} + ${firstId}) % ${rows || 1} + ${rows || 1}) % ${rows || 1}) * ${spanMs * 1000} // ${rows || 1})::BIGINT) AS time`,
  ];
  if (!omit.has('host')) columns.push(`${pick(spec.hosts ?? DEFAULT_HOSTS, 0)} AS host`);
  if (!omit.has('region')) columns.push(`${pick(spec.regions ?? DEFAULT_REGIONS, 1)} AS region`);
  if (!omit.has('value')) columns.push('((id::HUGEINT * 7919) % 100003)::DOUBLE / 100 AS value');
  if (!omit.has('count')) columns.push(`(id % 1000)::${spec.countType ?? 'INTEGER'} AS "count"`);
  for (let k = 0; k < extra; k++) {
    columns.push(`((id::HUGEINT * ${k + 3}) % 10007)::DOUBLE / ${k + 1} AS ${quoteIdentifier(`c${k}`)}`);
  }
  const options = [`FORMAT parquet`, `COMPRESSION ${spec.compression ?? 'snappy'}`];
  if (spec.rowGroupSize !== undefined) options.push(`ROW_GROUP_SIZE ${spec.rowGroupSize}`);
  await db.query(
    `COPY (SELECT ${columns.join(', ')} FROM (SELECT range AS i, ${firstId}::BIGINT + range AS id FROM range(${rows}))) ` +
      `TO ${quoteString(path)} (${options.join(', ')})`,
  );
}

/** Every id in the files, ascending (a multiset: duplicates are kept). */
export async function readIds(db: SqlRunner, files: readonly string[]): Promise<bigint[]> {
  if (files.length === 0) return [];
  const rows = await db.query(`SELECT id FROM ${source(files)} ORDER BY id`);
  return rows.map((row) => BigInt(row.id as bigint));
}

export interface IdSummary {
  readonly rows: bigint;
  readonly distinct: bigint;
  readonly min: bigint | null;
  readonly max: bigint | null;
}

/**
 * Id counts without moving ids to JS (for large files): with contiguous ids, rows == distinct ==
 * max - min + 1 == expected proves nothing was lost or duplicated.
 */
export async function summarizeIds(db: SqlRunner, files: readonly string[]): Promise<IdSummary> {
  if (files.length === 0) return { rows: 0n, distinct: 0n, min: null, max: null };
  const [row] = await db.query(
    `SELECT count(*)::BIGINT AS rows, count(DISTINCT id)::BIGINT AS distinct_ids, min(id) AS min, max(id) AS max FROM ${source(files)}`,
  );
  if (row === undefined) throw new Error('summarizeIds returned no row');
  const big = (value: JS) => (value === null ? null : BigInt(value as bigint));
  return {
    rows: BigInt(row.rows as bigint),
    distinct: BigInt(row.distinct_ids as bigint),
    min: big(row.min ?? null),
    max: big(row.max ?? null),
  };
}

function source(files: readonly string[]): string {
  return `read_parquet([${files.map(parquetPath).join(', ')}], union_by_name = true, hive_partitioning = false)`;
}
