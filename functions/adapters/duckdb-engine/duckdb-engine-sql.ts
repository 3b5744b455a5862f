/**
 * What the engine's modules share: the connection each call runs on, the read_parquet source
 * compact reads its inputs with, DESCRIBE, and DuckDB's error messages shortened for a reason.
 */

import type { DuckDBConnection } from '@duckdb/node-api';
import type { Column } from '../../core/engine.ts';

export { readAll } from '../../core/duckdb-sql.ts';

/** DuckDbEngine's connection per call: the modules run their SQL on it, never on one of their own. */
export type WithConnection = <T>(
  signal: AbortSignal | undefined,
  body: (connection: DuckDBConnection) => Promise<T>,
) => Promise<T>;

const MAX_REASON_LENGTH = 300;

/** The columns and DuckDB types of `SELECT * FROM source`. */
export async function describe(connection: DuckDBConnection, source: string): Promise<Column[]> {
  const rows = (await connection.runAndReadAll(`DESCRIBE SELECT * FROM ${source}`)).getRowObjectsJS();
  return rows.map((row) => ({ name: String(row.column_name), type: String(row.column_type) }));
}

/** DuckDB's message on one line, without the echoed SQL, bounded in length. */
export function shortReason(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const withoutSql = message.split(/\n\s*LINE \d+:/)[0] ?? message;
  const oneLine = withoutSql.replace(/\s+/g, ' ').trim();
  return oneLine.length > MAX_REASON_LENGTH ? `${oneLine.slice(0, MAX_REASON_LENGTH - 3)}...` : oneLine;
}
