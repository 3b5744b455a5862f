/**
 * The ENUM types compact sorts some string columns as: sorting carries every column through the
 * sort, and a low-cardinality string column (tags: host, region) costs far less carried as an
 * ENUM, which the Parquet writer stores as the same UTF8 strings.
 */

import type { JS } from '@duckdb/node-api';
import { quoteIdentifier, quoteString } from '../../core/duckdb-sql.ts';

/** Jobs at least this large sort their low-cardinality string columns as ENUMs. */
const ENUM_MIN_INPUT_BYTES = 64 * 1024 * 1024;

/** ...and whose string columns are at least 1/5 of the columns. */
const ENUM_MIN_COLUMN_SHARE = 5;

/** A string column with at most this many distinct values is sorted as an ENUM. */
const ENUM_MAX_VALUES = 1024;

/**
 * The ENUM types compact sorts some string columns as (column name -> type). Worth the two extra
 * scans only for large jobs that sort. Exported for the bench, which writes as compact does.
 */
export async function enumTypes(
  read: (sql: string) => Promise<Record<string, JS>[]>,
  source: string,
  columns: readonly { readonly name: string; readonly type: string }[],
  sortKeys: readonly string[],
  inputBytes: number,
): Promise<Map<string, string>> {
  if (sortKeys.length === 0 || inputBytes < ENUM_MIN_INPUT_BYTES) return new Map();
  return lowCardinalityColumns(read, source, columns, sortKeys);
}

/**
 * The VARCHAR columns (not sort keys) with few distinct values, each mapped to the ENUM type of
 * exactly its values, sorted (so the ENUM's order is the strings' order). A HyperLogLog estimate
 * over a 1% sample of the vectors keeps high-cardinality columns out of the exact pass; the exact
 * pass lists every distinct value, so every row casts (a value outside the ENUM would fail the
 * statement, never change a row).
 */
async function lowCardinalityColumns(
  read: (sql: string) => Promise<Record<string, JS>[]>,
  source: string,
  columns: readonly { readonly name: string; readonly type: string }[],
  sortKeys: readonly string[],
): Promise<Map<string, string>> {
  const keys = new Set(sortKeys.map((k) => k.toLowerCase()));
  const strings = columns.filter((c) => c.type === 'VARCHAR' && !keys.has(c.name.toLowerCase()));
  const enums = new Map<string, string>();
  // Only when strings are a good part of each row: in a wide numeric table the scans cost more than they save.
  if (strings.length === 0 || strings.length * ENUM_MIN_COLUMN_SHARE < columns.length) return enums;
  const [estimates] = await read(
    `SELECT ${strings.map((c, i) => `approx_count_distinct(${quoteIdentifier(c.name)}) AS e${i}`).join(', ')}
       FROM (SELECT * FROM ${source} USING SAMPLE 1% (system, 42))`,
  );
  const candidates = strings.filter(
    (_, i) => Number(estimates?.[`e${i}`] ?? Number.POSITIVE_INFINITY) <= ENUM_MAX_VALUES,
  );
  if (candidates.length === 0) return enums;
  const [lists] = await read(
    `SELECT ${candidates
      .map((c, i) => {
        const column = quoteIdentifier(c.name);
        return `list(DISTINCT ${column} ORDER BY ${column}) FILTER (WHERE ${column} IS NOT NULL) AS v${i}`;
      })
      .join(', ')} FROM ${source}`,
  );
  candidates.forEach((c, i) => {
    const values = listItems(lists?.[`v${i}`]);
    // The sample can miss values; past the bound (or with no values at all) the column stays VARCHAR.
    if (values === undefined || values.length === 0 || values.length > ENUM_MAX_VALUES) return;
    enums.set(c.name, `ENUM(${values.map((v) => quoteString(String(v))).join(', ')})`);
  });
  return enums;
}

/** The items of a LIST value as getRowObjectsJS returns it. */
function listItems(value: JS | undefined): readonly JS[] | undefined {
  if (Array.isArray(value)) return value;
  if (value !== null && typeof value === 'object' && 'items' in value && Array.isArray(value.items)) {
    return value.items as readonly JS[];
  }
  return undefined;
}
