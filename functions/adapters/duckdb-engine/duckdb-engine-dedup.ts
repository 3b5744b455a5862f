/**
 * Dedup for DuckDbEngine: the columns a dedup mode compares, the deduplicating SELECT compact
 * writes, and countDistinct, the separate query the core checks compact's dedup against.
 */

import { quoteIdentifier } from '../../core/duckdb-sql.ts';
import type { Column, DedupRequest, DistinctCount, DistinctRequest } from '../../core/engine.ts';
import { DedupError } from '../../core/errors.ts';
import { readAll, type WithConnection } from './duckdb-engine-sql.ts';

/** read_parquet's virtual column: the position of a row's file in the input list. */
export const FILE_INDEX = 'file_index';

/** read_parquet's virtual column: a row's position in its file. */
const FILE_ROW_NUMBER = 'file_row_number';

/** Columns the dedup queries carry beside the data; never written. */
const DEDUP_FILE = '__compactor_file_index';
const DEDUP_ROW = '__compactor_file_row';

/**
 * The columns dedup compares: every column ('exact') or the key columns ('last'), as the schema
 * names them. A key the schema lacks fails: comparing without it would merge different series.
 */
export function dedupColumns(columns: readonly Column[], dedup: DedupRequest): readonly Column[] {
  const byName = new Map(columns.map((c) => [c.name.toLowerCase(), c]));
  // A data column named like a virtual column hides it, and with it the inputs' order.
  const reserved =
    dedup.mode === 'exact' ? [DEDUP_FILE] : [FILE_INDEX, FILE_ROW_NUMBER, DEDUP_FILE, DEDUP_ROW];
  for (const name of reserved) {
    if (byName.has(name)) {
      throw new DedupError(
        `dedup "${dedup.mode}" cannot run: the inputs have a column named "${name}", which it needs for the inputs' order; rename the column${dedup.mode === 'last' ? ' or use mode "exact"' : ''}`,
      );
    }
  }
  if (dedup.mode === 'exact') return columns;
  if (dedup.keys.length === 0) throw new RangeError('dedup "last" needs at least one key column');
  return dedup.keys.map((key) => {
    const column = byName.get(key.toLowerCase());
    if (!column) {
      throw new DedupError(
        `dedup key column "${key}" is not in the inputs (columns: ${columns.map((c) => c.name).join(', ')})`,
      );
    }
    return column;
  });
}

/**
 * The deduplicating SELECT, sorted as the plain one is (sort keys, then the input's position).
 * 'exact' groups by every column, keeping the first input that holds the row for the order;
 * 'last' keeps, per key, the row of the last input and within it the last row.
 */
export function dedupSelect(
  casts: string,
  columns: readonly Column[],
  source: string,
  sortKeys: readonly string[],
  dedup: DedupRequest,
): string {
  const list = columns.map((c) => quoteIdentifier(c.name)).join(', ');
  const file = quoteIdentifier(DEDUP_FILE);
  const orderBy = [...sortKeys.map((key) => `${quoteIdentifier(key)} ASC NULLS LAST`), file].join(', ');
  if (dedup.mode === 'exact') {
    return `SELECT ${list} FROM (SELECT ${casts}, min(${FILE_INDEX}) AS ${file} FROM ${source} GROUP BY ALL) ORDER BY ${orderBy}`;
  }
  const row = quoteIdentifier(DEDUP_ROW);
  const keys = dedupColumns(columns, dedup)
    .map((c) => quoteIdentifier(c.name))
    .join(', ');
  return (
    `SELECT ${list} FROM (SELECT ${casts}, ${FILE_INDEX} AS ${file}, ${FILE_ROW_NUMBER} AS ${row} FROM ${source})` +
    ` QUALIFY row_number() OVER (PARTITION BY ${keys} ORDER BY ${file} DESC, ${row} DESC) = 1` +
    ` ORDER BY ${orderBy}`
  );
}

/**
 * Engine.countDistinct: the rows left once the files' rows are deduplicated as `dedup` says, and
 * the hash of that set (KEYS_HASH_ALGORITHM: to_json of the row as the casts name it, MD5, XOR).
 */
export async function countDistinct(
  withConnection: WithConnection,
  request: DistinctRequest,
): Promise<DistinctCount> {
  const { files, columns, dedup, signal } = request;
  if (files.length === 0) return { rows: 0, keysHash: '0' };
  // Plain types, no ENUMs, no window: a query of its own, so a fault in compact's cannot hide here.
  const compared = dedupColumns(columns, dedup);
  const source = readAll(files);
  return withConnection(signal, async (connection) => {
    const [row] = (
      await connection.runAndReadAll(
        `SELECT count(*) AS n, CAST(coalesce(bit_xor(md5_number(CAST(to_json(d) AS VARCHAR))), 0) AS VARCHAR) AS h FROM (SELECT DISTINCT ${compared
          .map((c) => `CAST(${quoteIdentifier(c.name)} AS ${c.type}) AS ${quoteIdentifier(c.name)}`)
          .join(', ')} FROM ${source}) AS d`,
      )
    ).getRowObjectsJS();
    return { rows: Number(row?.n), keysHash: String(row?.h) };
  });
}
