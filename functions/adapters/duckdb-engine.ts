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
 * - read_parquet's virtual column `file_index` is the position of a row's file in the list; the
 *   parallel sort is not stable, so it is the last sort key (ties keep the inputs' order).
 *   `file_row_number` is a row's position in its file; dedup 'last' orders by both. A data
 *   column of the same name hides a virtual column.
 * - DISTINCT, GROUP BY and PARTITION BY treat NULLs as equal to each other.
 * - An ENUM column is written to Parquet as the same UTF8 strings (dictionary-encoded, with min/max
 *   statistics), and reads back as VARCHAR; a VARCHAR value outside the ENUM fails the cast.
 * - A file's column types (DESCRIBE) follow from its footer's schema elements, key-value metadata
 *   and created_by alone: files whose footers agree on these get the same types.
 */

import { mkdir, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DuckDBConnection, JS } from '@duckdb/node-api';
import { DuckDBInstance } from '@duckdb/node-api';
import { escapeGlob, parquetPath, quoteIdentifier, quoteString } from '../core/duckdb-sql.ts';
import type {
  Column,
  CompactOutput,
  CompactRequest,
  DedupRequest,
  DistinctRequest,
  Engine,
  InputInfo,
  IntegerBounds,
  IntegerOutside,
  RowContainment,
} from '../core/engine.ts';
import { InputUnreadableError } from '../core/engine.ts';
import { DedupError } from '../core/errors.ts';
import { readFooter } from './parquet-footer.ts';

// SQL quoting lives in the core (one copy, shared with the reader views); importers of the engine get it here too.
export { escapeGlob, parquetPath, quoteIdentifier, quoteString } from '../core/duckdb-sql.ts';

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

/** read_parquet's virtual column: the position of a row's file in the input list. */
const FILE_INDEX = 'file_index';

/** read_parquet's virtual column: a row's position in its file. */
const FILE_ROW_NUMBER = 'file_row_number';

/** Columns the dedup queries carry beside the data; never written. */
const DEDUP_FILE = '__compactor_file_index';
const DEDUP_ROW = '__compactor_file_row';

/** Jobs at least this large sort their low-cardinality string columns as ENUMs. */
const ENUM_MIN_INPUT_BYTES = 64 * 1024 * 1024;

/** ...and whose string columns are at least 1/5 of the columns. */
const ENUM_MIN_COLUMN_SHARE = 5;

/** A string column with at most this many distinct values is sorted as an ENUM. */
const ENUM_MAX_VALUES = 1024;

/** Footer signatures whose column types are remembered (a lake has a handful). */
const MAX_SIGNATURES = 1024;

export class DuckDbEngine implements Engine, RowContainment {
  private readonly instance: DuckDBInstance;
  private closed = false;
  private readonly describedBySignature = new Map<string, Promise<readonly Column[] | undefined>>();

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
    const instance = await DuckDBInstance.create(':memory:', config);
    // Casts between TIMESTAMP and TIMESTAMPTZ (union_by_name makes them implicitly) read the naive
    // side in the session time zone, the host's by default: UTC, whatever the host, so a naive
    // timestamp is taken as UTC (naiveTimestampsUtc) the same on a laptop as on Lambda. Not an
    // instance option: ICU's settings exist only once the instance is up.
    const connection = await instance.connect();
    try {
      await connection.run(`SET GLOBAL TimeZone = 'UTC'`);
    } finally {
      connection.closeSync();
    }
    return new DuckDbEngine(instance);
  }

  /**
   * Reads and checks one input's footer. The footer is decoded in JS (parquet-footer.ts) and DuckDB
   * is asked for column types once per distinct footer signature (schema, key-value metadata,
   * writer: what DuckDB derives types from), so a job of thousands of small files costs a few
   * DESCRIBEs, not thousands of metadata queries. A file that is not plainly fine (it does not
   * decode, fails a check, or its DESCRIBE fails) takes DuckDB's per-file check: its result or
   * error is exactly what that check gives.
   */
  async inspect(file: string): Promise<InputInfo> {
    if (this.closed) throw new Error('DuckDbEngine is closed');
    // Any failure here, an I/O error included, is left to the per-file check to report.
    const footer = await readFooter(file).catch(() => undefined);
    if (footer !== undefined && footer.rowGroupRows === footer.rows && footer.chunkEnd <= footer.fileBytes) {
      const columns = await this.columnsOf(footer.signature, file);
      if (columns !== undefined) {
        return { rows: footer.rows, columns: columns.map((c) => ({ ...c })), metadata: footer.metadata };
      }
    }
    return this.inspectOne(file);
  }

  /** DESCRIBE of the first file seen with this footer signature; failures are not remembered. */
  private columnsOf(signature: string, file: string): Promise<readonly Column[] | undefined> {
    const known = this.describedBySignature.get(signature);
    if (known !== undefined) return known;
    if (this.describedBySignature.size >= MAX_SIGNATURES) this.describedBySignature.clear();
    const described = this.withConnection(undefined, (connection) =>
      describe(connection, `read_parquet(${parquetPath(file)}, hive_partitioning = false)`),
    ).catch(() => {
      this.describedBySignature.delete(signature);
      return undefined;
    });
    this.describedBySignature.set(signature, described);
    return described;
  }

  /** One file alone: the footer query, then DESCRIBE, then the checks. */
  private async inspectOne(file: string): Promise<InputInfo> {
    const source = parquetPath(file);
    return this.withConnection(undefined, async (connection) => {
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

  async compact(request: CompactRequest): Promise<CompactOutput[]> {
    const { inputs, columns, outputDir, targetFileBytes, rowGroupSize, signal, dedup } = request;
    if (inputs.length === 0) throw new RangeError('compact needs at least one input');
    if (columns.length === 0) throw new RangeError('compact needs at least one column');
    if (dedup) dedupColumns(columns, dedup);
    if (!Number.isSafeInteger(rowGroupSize) || rowGroupSize < 1) {
      throw new RangeError(`rowGroupSize must be a positive integer, got ${rowGroupSize}`);
    }
    if (!(targetFileBytes > 0)) {
      throw new RangeError(`targetFileBytes must be positive, got ${targetFileBytes}`);
    }

    const names = new Set(columns.map((c) => c.name.toLowerCase()));
    const sortKeys = request.sortBy.filter((key) => names.has(key.toLowerCase()));
    const orderBy = sortKeys.map((key) => `${quoteIdentifier(key)} ASC NULLS LAST`);
    // Equal sort keys keep the inputs' order (DuckDB's parallel sort alone does not): rows that
    // arrived together stay together, which makes the output deterministic and much smaller.
    if (orderBy.length > 0 && !names.has(FILE_INDEX)) orderBy.push(FILE_INDEX);
    const source = readAll(inputs);
    const copyOptions = `FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE ${rowGroupSize}${kvMetadataOption(request.metadata)}`;
    const outputPath = (index: number) => join(outputDir, `part-${String(index).padStart(5, '0')}.parquet`);

    // All at once: one at a time, thousands of small inputs cost tens of milliseconds.
    const sizes = await Promise.all(inputs.map(async (input) => (await stat(input)).size));
    const inputBytes = sizes.reduce((sum, size) => sum + size, 0);
    await mkdir(outputDir, { recursive: true });

    return this.withConnection(signal, async (connection) => {
      const classify = async (error: unknown) => this.classifyCompactError(connection, error, inputs, signal);
      const run = async (sql: string) => {
        signal?.throwIfAborted();
        try {
          await connection.run(sql);
        } catch (error) {
          throw await classify(error);
        }
      };
      const read = async (sql: string): Promise<Record<string, JS>[]> => {
        signal?.throwIfAborted();
        try {
          return (await connection.runAndReadAll(sql)).getRowObjectsJS();
        } catch (error) {
          throw await classify(error);
        }
      };
      const enums = await enumTypes(read, source, columns, sortKeys, inputBytes);
      const casts = columns
        .map(
          (c) =>
            `CAST(${quoteIdentifier(c.name)} AS ${enums.get(c.name) ?? c.type}) AS ${quoteIdentifier(c.name)}`,
        )
        .join(', ');
      const plain = `SELECT ${casts} FROM ${source}`;
      const sorted = orderBy.length > 0 ? `${plain} ORDER BY ${orderBy.join(', ')}` : plain;
      const select = dedup ? dedupSelect(casts, columns, source, sortKeys, dedup) : sorted;
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

  async countDistinct(request: DistinctRequest): Promise<number> {
    const { files, columns, dedup, signal } = request;
    if (files.length === 0) return 0;
    // Plain types, no ENUMs, no window: a query of its own, so a fault in compact's cannot hide here.
    const compared = dedupColumns(columns, dedup);
    const source = readAll(files);
    return this.withConnection(signal, async (connection) => {
      const [row] = (
        await connection.runAndReadAll(
          `SELECT count(*) AS n FROM (SELECT DISTINCT ${compared
            .map((c) => `CAST(${quoteIdentifier(c.name)} AS ${c.type})`)
            .join(', ')} FROM ${source})`,
        )
      ).getRowObjectsJS();
      return Number(row?.n);
    });
  }

  async integerBounds(file: string, column: string): Promise<IntegerBounds> {
    const source = parquetPath(file);
    return this.withConnection(undefined, async (connection) => {
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
        if (
          row.stats_min_value === null &&
          row.stats_max_value === null &&
          nulls !== null &&
          nulls === values
        )
          continue;
        const low = integerText(row.stats_min_value);
        const high = integerText(row.stats_max_value);
        if (low === undefined || high === undefined)
          return { unproved: `${group} has no min/max statistics` };
        if (min === null || low < min) min = low;
        if (max === null || high > max) max = high;
      }
      return { min, max };
    });
  }

  async countInexactAsDouble(file: string, column: string): Promise<number> {
    const value = quoteIdentifier(column);
    return this.withConnection(undefined, async (connection) => {
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

  async integerOutside(file: string, column: string, low: bigint, high: bigint): Promise<IntegerOutside> {
    const value = `CAST(${quoteIdentifier(column)} AS HUGEINT)`;
    return this.withConnection(undefined, async (connection) => {
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

  async countMissing(inputs: readonly string[], evidence: readonly string[]): Promise<number> {
    if (inputs.length === 0) return 0;
    return this.withConnection(undefined, async (connection) => {
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

/**
 * The columns dedup compares: every column ('exact') or the key columns ('last'), as the schema
 * names them. A key the schema lacks fails: comparing without it would merge different series.
 */
function dedupColumns(columns: readonly Column[], dedup: DedupRequest): readonly Column[] {
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
function dedupSelect(
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
 * The ENUM types compact sorts some string columns as (column name -> type). Sorting carries every
 * column through the sort; a low-cardinality string column (tags: host, region) costs far less
 * carried as an ENUM, which the Parquet writer stores as the same UTF8 strings. Worth the two
 * extra scans only for large jobs that sort. Exported for the bench, which writes as compact does.
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

/**
 * The COPY option that writes footer key-value metadata (KV_METADATA, a struct of key: value;
 * https://duckdb.org/docs/current/data/parquet/overview, "Writing to Parquet Files"), or ''.
 */
function kvMetadataOption(metadata: Readonly<Record<string, string>> | undefined): string {
  const entries = Object.entries(metadata ?? {});
  if (entries.length === 0) return '';
  return `, KV_METADATA {${entries.map(([k, v]) => `${quoteIdentifier(k)}: ${quoteString(v)}`).join(', ')}}`;
}

/** A statistics value printed as a whole number, as a bigint; undefined when it is not one. */
function integerText(value: JS | undefined): bigint | undefined {
  if (typeof value !== 'string' || !/^-?\d+$/.test(value)) return undefined;
  return BigInt(value);
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

/** Every row of these local files, read as compact reads them: columns matched by name, no hive columns. */
export function readAll(files: readonly string[]): string {
  return `read_parquet([${files.map(parquetPath).join(', ')}], union_by_name = true, hive_partitioning = false)`;
}

/** The columns and DuckDB types of `SELECT * FROM source`. */
export async function describe(connection: DuckDBConnection, source: string): Promise<Column[]> {
  const rows = (await connection.runAndReadAll(`DESCRIBE SELECT * FROM ${source}`)).getRowObjectsJS();
  return rows.map((row) => ({ name: String(row.column_name), type: String(row.column_type) }));
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
