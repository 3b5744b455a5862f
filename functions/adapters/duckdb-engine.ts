/**
 * The Engine on DuckDB (@duckdb/node-api): reads local Parquet footers and writes the merged,
 * sorted, ZSTD-compressed outputs. When the inputs fit the target size (the usual case) the whole
 * job is one `COPY (SELECT ... ORDER BY ...) TO 'part-00000.parquet'`.
 *
 * DuckDB facts this relies on (checked against DuckDB 1.5.6):
 * - `COPY (... ORDER BY ...) TO 'file.parquet'` plans BATCH_COPY_TO_FILE: parallel and order-preserving.
 * - `FILE_SIZE_BYTES` / `ROW_GROUPS_PER_FILE` switch to the parallel COPY_TO_FILE, which interleaves
 *   row groups of different threads even with preserve_insertion_order=true, so its split files
 *   (data_0.parquet, data_1.parquet, ...) are neither sorted inside nor across files. Splitting is
 *   therefore done here: sort once into a temp table, then one order-preserving COPY per rowid range.
 * - ROW_GROUP_SIZE is rounded up to a multiple of the vector size (2048 rows).
 * - read_parquet treats `*`, `?` and `[` in a path as a glob; `[x]` escapes one character.
 * - read_parquet adds hive partition columns for `key=value` folders unless hive_partitioning=false.
 */

import { mkdir, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DuckDBConnection, JS } from '@duckdb/node-api';
import { DuckDBInstance } from '@duckdb/node-api';
import type { CompactOutput, CompactRequest, Engine, InputInfo, RowContainment } from '../core/engine.ts';
import { InputUnreadableError } from '../core/engine.ts';

export interface DuckDbEngineOptions {
  /** DuckDB memory_limit, e.g. '1GB'. Leave headroom for Node itself. Default: 80% of RAM (DuckDB's). */
  readonly memoryLimit?: string;
  /** Worker threads. Default: DuckDB's (all cores). */
  readonly threads?: number;
  /** Where sorts larger than memory spill. Default: `<os.tmpdir()>/duckdb-spill` (DuckDB's own default, `.tmp` in the cwd, is read-only on Lambda). */
  readonly tempDirectory?: string;
}

/** DuckDB's vector size: row groups are multiples of it. */
const VECTOR_SIZE = 2048;

const MAX_REASON_LENGTH = 300;

export class DuckDbEngine implements Engine, RowContainment {
  private readonly instance: DuckDBInstance;
  private closed = false;

  private constructor(instance: DuckDBInstance) {
    this.instance = instance;
  }

  static async create(options: DuckDbEngineOptions = {}): Promise<DuckDbEngine> {
    const config: Record<string, string> = {
      // Order preservation is what keeps the sorted temp table in rowid order (split path).
      preserve_insertion_order: 'true',
      temp_directory: options.tempDirectory ?? join(tmpdir(), 'duckdb-spill'),
      // Parquet is built in; never try the network for extensions.
      autoinstall_known_extensions: 'false',
      autoload_known_extensions: 'false',
    };
    if (options.memoryLimit !== undefined) config.memory_limit = options.memoryLimit;
    if (options.threads !== undefined) {
      if (!Number.isSafeInteger(options.threads) || options.threads < 1) {
        throw new RangeError(`threads must be a positive integer, got ${options.threads}`);
      }
      config.threads = String(options.threads);
    }
    return new DuckDbEngine(await DuckDBInstance.create(':memory:', config));
  }

  async inspect(file: string): Promise<InputInfo> {
    const source = parquetPath(file);
    return this.withConnection(undefined, async (connection) => {
      let footer: Record<string, JS> | undefined;
      let described: Record<string, JS>[];
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
        described = (
          await connection.runAndReadAll(
            `DESCRIBE SELECT * FROM read_parquet(${source}, hive_partitioning = false)`,
          )
        ).getRowObjectsJS();
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
      const columns = described.map((row) => ({
        name: String(row.column_name),
        type: String(row.column_type),
      }));
      return { rows, columns };
    });
  }

  async compact(request: CompactRequest): Promise<CompactOutput[]> {
    const { inputs, columns, outputDir, targetFileBytes, rowGroupSize, signal } = request;
    if (inputs.length === 0) throw new RangeError('compact needs at least one input');
    if (columns.length === 0) throw new RangeError('compact needs at least one column');
    if (!Number.isSafeInteger(rowGroupSize) || rowGroupSize < 1) {
      throw new RangeError(`rowGroupSize must be a positive integer, got ${rowGroupSize}`);
    }
    if (!(targetFileBytes > 0)) {
      throw new RangeError(`targetFileBytes must be positive, got ${targetFileBytes}`);
    }

    const names = new Set(columns.map((c) => c.name.toLowerCase()));
    const orderBy = request.sortBy
      .filter((key) => names.has(key.toLowerCase()))
      .map((key) => `${quoteIdentifier(key)} ASC NULLS LAST`);
    const select =
      `SELECT ${columns.map((c) => `CAST(${quoteIdentifier(c.name)} AS ${c.type}) AS ${quoteIdentifier(c.name)}`).join(', ')}` +
      ` FROM read_parquet([${inputs.map(parquetPath).join(', ')}], union_by_name = true, hive_partitioning = false)` +
      (orderBy.length > 0 ? ` ORDER BY ${orderBy.join(', ')}` : '');
    const copyOptions = `FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE ${rowGroupSize}`;
    const outputPath = (index: number) => join(outputDir, `part-${String(index).padStart(5, '0')}.parquet`);

    let inputBytes = 0;
    for (const input of inputs) inputBytes += (await stat(input)).size;
    await mkdir(outputDir, { recursive: true });

    return this.withConnection(signal, async (connection) => {
      const run = async (sql: string) => {
        signal?.throwIfAborted();
        try {
          await connection.run(sql);
        } catch (error) {
          throw await this.classifyCompactError(connection, error, inputs, signal);
        }
      };
      const paths: string[] = [];
      // Outputs are usually no larger than the inputs (same data, sorted, ZSTD): when the inputs fit
      // the target, one direct COPY is the whole job and costs what a raw DuckDB COPY costs.
      if (inputBytes <= targetFileBytes) {
        paths.push(outputPath(0));
        await run(`COPY (${select}) TO ${quoteString(outputPath(0))} (${copyOptions})`);
      } else {
        await run(`CREATE TEMP TABLE compact_sorted AS ${select}`);
        const total = Number(
          (await connection.runAndReadAll('SELECT count(*) FROM compact_sorted')).getRows()[0]?.[0],
        );
        // Files end on row-group boundaries so only the last row group of each file is short.
        const step = Math.ceil(rowGroupSize / VECTOR_SIZE) * VECTOR_SIZE;
        let written = 0;
        let writtenBytes = 0;
        do {
          const remaining = total - written;
          // Bytes per row: the inputs' until the first output is measured, then the outputs' so far.
          const bytesPerRow = written === 0 ? inputBytes / Math.max(total, 1) : writtenBytes / written;
          const files = Math.max(1, Math.ceil((remaining * bytesPerRow) / targetFileBytes));
          let rows = Math.ceil(remaining / files);
          if (files > 1 && rows > step) rows = Math.min(remaining, Math.round(rows / step) * step);
          const path = outputPath(paths.length);
          paths.push(path);
          await run(
            `COPY (SELECT * FROM compact_sorted WHERE rowid >= ${written} AND rowid < ${written + rows}) ` +
              `TO ${quoteString(path)} (${copyOptions})`,
          );
          written += rows;
          writtenBytes += (await stat(path)).size;
        } while (written < total);
      }
      const outputs: CompactOutput[] = [];
      for (const path of paths) {
        const rows = (
          await connection.runAndReadAll(`SELECT num_rows FROM parquet_file_metadata(${parquetPath(path)})`)
        ).getRows()[0]?.[0];
        outputs.push({ path, rows: Number(rows), bytes: (await stat(path)).size });
      }
      return outputs;
    });
  }

  async countMissing(inputs: readonly string[], evidence: readonly string[]): Promise<number> {
    if (inputs.length === 0) return 0;
    const source = (files: readonly string[]) =>
      `read_parquet([${files.map(parquetPath).join(', ')}], union_by_name = true, hive_partitioning = false)`;
    return this.withConnection(undefined, async (connection) => {
      const described = (
        await connection.runAndReadAll(`DESCRIBE SELECT * FROM ${source(inputs)}`)
      ).getRowObjectsJS();
      const columns = described.map((row) => quoteIdentifier(String(row.column_name))).join(', ');
      if (evidence.length === 0) {
        const [row] = (
          await connection.runAndReadAll(`SELECT count(*) AS n FROM ${source(inputs)}`)
        ).getRowObjectsJS();
        return Number(row?.n);
      }
      // EXCEPT ALL is a multiset difference: a row held twice by the inputs must be there twice.
      const [row] = (
        await connection.runAndReadAll(
          `SELECT count(*) AS n FROM (SELECT ${columns} FROM ${source(inputs)} EXCEPT ALL SELECT ${columns} FROM ${source(evidence)})`,
        )
      ).getRowObjectsJS();
      return Number(row?.n);
    });
  }

  /**
   * Runs one SQL statement on its own connection and returns its rows as plain JS values.
   * Not part of Engine: for the sample-data generator, the demo, benchmarks and tests.
   */
  async query(sql: string): Promise<Record<string, JS>[]> {
    return this.withConnection(undefined, async (connection) =>
      (await connection.runAndReadAll(sql)).getRowObjectsJS(),
    );
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.instance.closeSync();
  }

  /** One connection per call: calls may overlap, and interrupt() must stop only that call. */
  private async withConnection<T>(
    signal: AbortSignal | undefined,
    body: (connection: DuckDBConnection) => Promise<T>,
  ): Promise<T> {
    if (this.closed) throw new Error('DuckDbEngine is closed');
    signal?.throwIfAborted();
    const connection = await this.instance.connect();
    const onAbort = () => connection.interrupt();
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      return await body(connection);
    } finally {
      signal?.removeEventListener('abort', onAbort);
      // Also drops the connection's temp tables.
      connection.closeSync();
    }
  }

  /**
   * Maps a failed compact statement to the error the caller can act on. A damaged data page only
   * shows when it is read (inspect reads footers); the core quarantines an InputUnreadableError.
   */
  private async classifyCompactError(
    connection: DuckDBConnection,
    error: unknown,
    inputs: readonly string[],
    signal: AbortSignal | undefined,
  ): Promise<unknown> {
    if (signal?.aborted) return signal.reason;
    const message = error instanceof Error ? error.message : String(error);
    if (!isCorruptionError(error)) return error;
    const named = inputs.filter((input) => message.includes(input) || message.includes(escapeGlob(input)));
    const [only] = named;
    if (only !== undefined && named.length === 1) {
      return new InputUnreadableError(only, shortReason(error), { cause: error });
    }
    // Page-header damage fails without a file name: read each input in full to find the culprit.
    // Only on this failure path, so the extra read costs nothing on success.
    for (const input of inputs) {
      signal?.throwIfAborted();
      try {
        await connection.run(
          `SELECT sum(hash(COLUMNS(*))) FROM read_parquet(${parquetPath(input)}, hive_partitioning = false)`,
        );
      } catch (readError) {
        if (signal?.aborted) return signal.reason;
        if (!isCorruptionError(readError)) return error;
        return new InputUnreadableError(input, shortReason(readError), { cause: readError });
      }
    }
    return error;
  }
}

/** `"name"` with embedded quotes doubled: any column name is safe in SQL. */
export function quoteIdentifier(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/** `'text'` with embedded quotes doubled (DuckDB strings have no backslash escapes). */
export function quoteString(text: string): string {
  return `'${text.replaceAll("'", "''")}'`;
}

/** Escapes the glob characters DuckDB's file readers expand, so the path names exactly one file. */
export function escapeGlob(path: string): string {
  return path.replace(/[*?[\]]/g, (c) => `[${c}]`);
}

/** A local file path as a read_parquet / parquet_metadata argument. */
export function parquetPath(path: string): string {
  return quoteString(escapeGlob(path));
}

/** DuckDB's error classes for bytes it cannot decode (not memory, interrupts or binder errors). */
function isCorruptionError(error: unknown): boolean {
  const message = error instanceof Error ? error.message : String(error);
  return /^(Invalid Input|Invalid|Serialization|IO) Error/.test(message);
}

/** DuckDB's message on one line, without the echoed SQL, bounded in length. */
function shortReason(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const withoutSql = message.split(/\n\s*LINE \d+:/)[0] ?? message;
  const oneLine = withoutSql.replace(/\s+/g, ' ').trim();
  return oneLine.length > MAX_REASON_LENGTH ? `${oneLine.slice(0, MAX_REASON_LENGTH - 3)}...` : oneLine;
}
