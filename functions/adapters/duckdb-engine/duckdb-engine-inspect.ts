/**
 * Reading an input's schema for DuckDbEngine.inspect: column types remembered per footer
 * signature (one DESCRIBE per signature, not per file), and DuckDB's own per-file check (footer
 * query, DESCRIBE, key-value metadata) for files the JS footer reader does not vouch for.
 */

import type { JS } from '@duckdb/node-api';
import { parquetPath } from '../../core/duckdb-sql.ts';
import type { Column, InputInfo } from '../../core/engine.ts';
import { InputUnreadableError } from '../../core/errors.ts';
import { describe, shortReason, type WithConnection } from './duckdb-engine-sql.ts';

/** Footer signatures whose column types are remembered (a lake has a handful). */
const MAX_SIGNATURES = 1024;

/** Column types by footer signature, for the engine's lifetime. */
export class ColumnsBySignature {
  readonly #withConnection: WithConnection;
  readonly #described = new Map<string, Promise<readonly Column[] | undefined>>();

  constructor(withConnection: WithConnection) {
    this.#withConnection = withConnection;
  }

  /** DESCRIBE of the first file seen with this footer signature; failures are not remembered. */
  get(signature: string, file: string): Promise<readonly Column[] | undefined> {
    const known = this.#described.get(signature);
    if (known !== undefined) return known;
    if (this.#described.size >= MAX_SIGNATURES) this.#described.clear();
    const described = this.#withConnection(undefined, (connection) =>
      describe(connection, `read_parquet(${parquetPath(file)}, hive_partitioning = false)`),
    ).catch(() => {
      this.#described.delete(signature);
      return undefined;
    });
    this.#described.set(signature, described);
    return described;
  }
}

/** One file alone: the footer query, then DESCRIBE, then the checks. */
export async function inspectOne(withConnection: WithConnection, file: string): Promise<InputInfo> {
  const source = parquetPath(file);
  return withConnection(undefined, async (connection) => {
    let footer: Record<string, JS> | undefined;
    let columns: Column[];
    let metadata: Record<string, string | null>;
    try {
      // Footer only: file metadata plus per-chunk metadata, no data pages are read.
      footer = (
        await connection.runAndReadAll(
          `SELECT f.num_rows, f.file_size_bytes,
             (SELECT sum(n) FROM (SELECT DISTINCT row_group_id, row_group_num_rows AS n
                                    FROM parquet_metadata(${source}))) AS row_group_rows,
             (SELECT max(least(coalesce(nullif(dictionary_page_offset, 0), data_page_offset), data_page_offset)
                         + total_compressed_size)
                FROM parquet_metadata(${source})) AS chunk_end
           FROM parquet_file_metadata(${source}) AS f`,
        )
      ).getRowObjectsJS()[0];
      columns = await describe(connection, `read_parquet(${source}, hive_partitioning = false)`);
      metadata = keyValueMetadata(
        (
          await connection.runAndReadAll(`SELECT key, value FROM parquet_kv_metadata(${source})`)
        ).getRowObjectsJS(),
      );
    } catch (error) {
      throw new InputUnreadableError(file, shortReason(error), { cause: error });
    }
    if (footer === undefined) throw new InputUnreadableError(file, 'no footer metadata');
    const rows = Number(footer.num_rows);
    // A footer that parses can still be damaged; these two checks are free and catch the gross cases.
    if (footer.row_group_rows !== null && Number(footer.row_group_rows) !== rows) {
      throw new InputUnreadableError(
        file,
        `footer says ${rows} rows but its row groups hold ${footer.row_group_rows}`,
      );
    }
    if (footer.chunk_end !== null && Number(footer.chunk_end) > Number(footer.file_size_bytes)) {
      throw new InputUnreadableError(
        file,
        `column chunks end at byte ${footer.chunk_end}, past the file size ${footer.file_size_bytes}`,
      );
    }
    return { rows, columns, metadata };
  });
}

/** parquet_kv_metadata rows (BLOB key and value) as a record, as parquet-footer.ts reads them. */
function keyValueMetadata(rows: readonly Record<string, JS>[]): Record<string, string | null> {
  const utf8 = new TextDecoder('utf-8', { fatal: true });
  const decode = (value: JS): string | undefined => {
    if (!(value instanceof Uint8Array)) return undefined;
    try {
      return utf8.decode(value);
    } catch (error) {
      if (error instanceof TypeError) return undefined;
      throw error;
    }
  };
  const out: Record<string, string | null> = {};
  for (const row of rows) {
    const key = decode(row.key ?? null);
    if (key === undefined) continue;
    out[key] = key in out ? null : (decode(row.value ?? null) ?? null);
  }
  return out;
}
