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

import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DuckDBConnection, JS } from '@duckdb/node-api';
import { DuckDBInstance } from '@duckdb/node-api';
import { quoteString } from '../../core/duckdb-sql.ts';
import type {
  ColumnStats,
  CompactOutput,
  CompactRequest,
  DistinctCount,
  DistinctRequest,
  Engine,
  InputInfo,
  IntegerBounds,
  IntegerOutside,
  MergeEngineName,
  MergeShape,
  MergeWriter,
  RowContainment,
} from '../../core/engine.ts';
import { ConfigError } from '../../core/errors.ts';
import { CallsInFlight } from '../../core/limit.ts';
import { readFooter } from '../parquet-footer.ts';
import { countInexactAsDouble, countMissing, integerBounds, integerOutside } from './duckdb-engine-checks.ts';
import { compact, compactWith } from './duckdb-engine-compact.ts';
import { countDistinct } from './duckdb-engine-dedup.ts';
import { ColumnsBySignature, inspectOne } from './duckdb-engine-inspect.ts';
import type { WithConnection } from './duckdb-engine-sql.ts';
import { columnStats } from './duckdb-engine-stats.ts';

// SQL quoting lives in the core (one copy, shared with the reader views); importers of the engine get it here too.
export { escapeGlob, parquetPath, quoteIdentifier, quoteString } from '../../core/duckdb-sql.ts';
// The bench writes as compact does, with the same source, DESCRIBE and ENUM types.
export { enumTypes } from './duckdb-engine-enums.ts';
export { describe, readAll } from './duckdb-engine-sql.ts';

/** Connections kept for the next calls: as many as a run's concurrent calls mostly are. */
const IDLE_CONNECTIONS = 4;

export interface DuckDbEngineOptions {
  /** DuckDB memory_limit, e.g. '1GB'. Leave headroom for Node itself. Default: 80% of RAM (DuckDB's). */
  readonly memoryLimit?: string;
  /** Worker threads. Default: DuckDB's (all cores). */
  readonly threads?: number;
  /** Where sorts larger than memory spill. Default: `<os.tmpdir()>/duckdb-spill` (DuckDB's own default, `.tmp` in the cwd, is read-only on Lambda). */
  readonly tempDirectory?: string;
  /**
   * Engines that can write compact's outputs instead of DuckDB, when a request names one
   * (CompactRequest.mergeEngine). Default: none.
   */
  readonly mergeWriters?: readonly MergeWriter[];
}

/**
 * The engine: the DuckDB instance, its options, and a connection per call (kept for the next).
 * What each call runs is in duckdb-engine-*.ts (inspect, compact, enums, dedup, checks, sql).
 */
export class DuckDbEngine implements Engine, RowContainment {
  private readonly instance: DuckDBInstance;
  private closed = false;
  /**
   * Connections whose call ended cleanly, for the next calls: node-api closes a connection only
   * synchronously, on the event loop, and a run of many small partitions makes a few calls each.
   */
  private readonly idle: DuckDBConnection[] = [];
  /** Calls in flight (connecting or running), and the connections they run on: close() waits for them. */
  private readonly calls = new CallsInFlight();
  private readonly busy = new Set<DuckDBConnection>();
  private closing: Promise<void> | undefined;
  /** withConnection as the modules take it. */
  private readonly connect: WithConnection = (signal, body) => this.withConnection(signal, body);
  private readonly columnsBySignature = new ColumnsBySignature(this.connect);
  private readonly mergeWriters: readonly MergeWriter[];

  private constructor(instance: DuckDBInstance, mergeWriters: readonly MergeWriter[]) {
    this.instance = instance;
    this.mergeWriters = mergeWriters;
  }

  static async create(options: DuckDbEngineOptions = {}): Promise<DuckDbEngine> {
    const config: Record<string, string> = {
      // Order preservation is what keeps the sorted temp table in rowid order (split path).
      preserve_insertion_order: 'true',
      temp_directory: options.tempDirectory ?? join(tmpdir(), 'duckdb-spill'),
      // Parquet is built in; never try the network for extensions.
      autoinstall_known_extensions: 'false',
      autoload_known_extensions: 'false',
      // The external file cache (on by default) keeps what each query read in memory for later
      // reads (https://github.com/duckdb/duckdb/pull/16463). A job's inputs are read by its own
      // queries and then deleted, so across the jobs of one engine (a local run, the waves of a
      // backlog) it only grows the process: measured, three 2,000-file jobs end at 467 MiB RSS with
      // it and 216 MiB without. The OS page cache still serves a file read twice within a job.
      enable_external_file_cache: 'false',
    };
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
    let refused: ConfigError | undefined;
    try {
      await connection.run(`SET GLOBAL TimeZone = 'UTC'`);
      // Set once the instance is up, so DuckDB's own parser says what is wrong with a value:
      // as a creation option it answers only "Failed to set config".
      if (options.memoryLimit !== undefined) refused = await setMemoryLimit(connection, options.memoryLimit);
    } finally {
      connection.closeSync();
    }
    if (refused) {
      instance.closeSync();
      throw refused;
    }
    return new DuckDbEngine(instance, options.mergeWriters ?? []);
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
      const columns = await this.columnsBySignature.get(footer.signature, file);
      if (columns !== undefined) {
        return { rows: footer.rows, columns: columns.map((c) => ({ ...c })), metadata: footer.metadata };
      }
    }
    return this.inspectOne(file);
  }

  /** DuckDB's per-file check of one file alone (the tests call it as well). */
  private async inspectOne(file: string): Promise<InputInfo> {
    return inspectOne(this.connect, file);
  }

  async compact(request: CompactRequest): Promise<CompactOutput[]> {
    const name = request.mergeEngine ?? 'duckdb';
    if (name === 'duckdb') return compact(this.connect, request);
    const writer = this.mergeWriters.find((w) => w.name === name);
    if (writer === undefined)
      throw new RangeError(`compact: no ${name} merge engine was given to this engine`);
    return compactWith(this.connect, writer, request);
  }

  mergeEngines(shape: MergeShape): MergeEngineName[] {
    return ['duckdb', ...this.mergeWriters.filter((w) => w.writes(shape)).map((w) => w.name)];
  }

  async countDistinct(request: DistinctRequest): Promise<DistinctCount> {
    return countDistinct(this.connect, request);
  }

  async columnStats(file: string): Promise<ColumnStats[]> {
    return columnStats(this.connect, file);
  }

  async integerBounds(file: string, column: string): Promise<IntegerBounds> {
    return integerBounds(this.connect, file, column);
  }

  async countInexactAsDouble(file: string, column: string): Promise<number> {
    return countInexactAsDouble(this.connect, file, column);
  }

  async integerOutside(file: string, column: string, low: bigint, high: bigint): Promise<IntegerOutside> {
    return integerOutside(this.connect, file, column, low, high);
  }

  async countMissing(inputs: readonly string[], evidence: readonly string[]): Promise<number> {
    return countMissing(this.connect, inputs, evidence);
  }

  /**
   * Runs one SQL statement on a connection of its own and returns its rows as plain JS values.
   * Not part of Engine: for the sample-data generator, the demo, benchmarks and tests.
   */
  async query(sql: string): Promise<Record<string, JS>[]> {
    return this.withConnection(undefined, async (connection) =>
      (await connection.runAndReadAll(sql)).getRowObjectsJS(),
    );
  }

  /**
   * Closes DuckDB once no call runs: calls in flight are interrupted and waited for. A call that
   * completes after its thread's environment is torn down (a worker thread ending with the
   * process still running) throws where nothing can catch it, and the whole process aborts.
   */
  close(): Promise<void> {
    // Every caller waits for the same close: a second one must not return while calls still run.
    this.closing ??= this.closeWhenIdle();
    return this.closing;
  }

  private async closeWhenIdle(): Promise<void> {
    this.closed = true;
    for (const connection of this.busy) connection.interrupt();
    await this.calls.idle();
    for (const connection of this.idle.splice(0)) connection.closeSync();
    this.instance.closeSync();
  }

  /**
   * One connection per call at a time: calls may overlap, and interrupt() must stop only that
   * call. A call that ends cleanly hands its connection to the next (at most IDLE_CONNECTIONS
   * wait); one that fails or is aborted closes it, with whatever state the failure left on it.
   */
  private async withConnection<T>(
    signal: AbortSignal | undefined,
    body: (connection: DuckDBConnection) => Promise<T>,
  ): Promise<T> {
    if (this.closed) throw new Error('DuckDbEngine is closed');
    signal?.throwIfAborted();
    return this.calls.run(async () => {
      let connection: DuckDBConnection | undefined;
      const onAbort = () => connection?.interrupt();
      signal?.addEventListener('abort', onAbort, { once: true });
      let clean = false;
      try {
        connection = this.idle.pop() ?? (await this.instance.connect());
        this.busy.add(connection);
        // Closed while it connected: close() waits for this call, which must not start.
        if (this.closed) throw new Error('DuckDbEngine is closed');
        const result = await body(connection);
        clean = true;
        return result;
      } finally {
        signal?.removeEventListener('abort', onAbort);
        if (connection !== undefined) {
          this.busy.delete(connection);
          if (clean && !signal?.aborted && !this.closed && this.idle.length < IDLE_CONNECTIONS) {
            this.idle.push(connection);
          } else {
            connection.closeSync();
          }
        }
      }
    });
  }
}

/** Sets DuckDB's memory limit; the refusal, in DuckDB's words, when it does not read the value. */
async function setMemoryLimit(connection: DuckDBConnection, limit: string): Promise<ConfigError | undefined> {
  try {
    await connection.run(`SET GLOBAL memory_limit = ${quoteString(limit)}`);
    return undefined;
  } catch (error) {
    if (!(error instanceof Error)) throw error;
    return new ConfigError(
      `DuckDB refuses memory limit "${limit}": ${error.message.replace(/^Parser Error: /, '')}`,
      {
        cause: error,
      },
    );
  }
}
