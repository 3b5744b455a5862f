/**
 * The compaction engine interface (DuckDB implements it). The core decides what to merge;
 * the engine only reads local Parquet files and writes local Parquet files. The merge itself
 * (compact) can be written by a second engine (a MergeWriter) that the core picks per job
 * (merge-engine.ts); everything else, the checks of its outputs included, stays on one engine.
 */

export interface Column {
  readonly name: string;
  /** DuckDB logical type name as reported by DESCRIBE, e.g. INTEGER, BIGINT, DOUBLE, VARCHAR, TIMESTAMP_NS. */
  readonly type: string;
}

export interface InputInfo {
  /** Rows from the footer (parquet_file_metadata), not from scanning. */
  readonly rows: number;
  readonly columns: readonly Column[];
  /**
   * The footer's key-value metadata. A value is null when the footer holds none for the key or it
   * is not UTF-8 text (it cannot be written back unchanged). Absent: the engine does not read it.
   */
  readonly metadata?: Readonly<Record<string, string | null>>;
}

/**
 * Rows to drop while merging. 'exact': rows equal in every column are written once (NULLs
 * equal, as SELECT DISTINCT). 'last': one row per distinct `keys` tuple is written: the one in
 * the last input file, and within that file the last row (inputs are given oldest first).
 */
export type DedupRequest =
  | { readonly mode: 'exact' }
  | { readonly mode: 'last'; readonly keys: readonly string[] };

export interface CompactRequest {
  /** Local Parquet files, already validated with inspect(). */
  readonly inputs: readonly string[];
  /** The unified schema to write: every column cast to this type, in this order. */
  readonly columns: readonly Column[];
  /** Sort keys, most significant first (the time column first). Missing keys are skipped. */
  readonly sortBy: readonly string[];
  /** Empty local folder to write outputs into. */
  readonly outputDir: string;
  /** Split outputs at about this many bytes (always under 5 GiB). */
  readonly targetFileBytes: number;
  readonly rowGroupSize: number;
  /** Absent: every input row is written (the default). */
  readonly dedup?: DedupRequest;
  /** Footer key-value metadata every output carries. Absent or empty: none. */
  readonly metadata?: Readonly<Record<string, string>>;
  /** Which engine writes the outputs (one of Engine.mergeEngines). Absent: 'duckdb'. */
  readonly mergeEngine?: MergeEngineName;
  readonly signal?: AbortSignal;
}

/** The engines that can write compact's outputs. */
export type MergeEngineName = 'duckdb' | 'polars';

/** What a merge engine is asked to write: the job's columns, and each input's own columns. */
export interface MergeShape {
  /** The unified schema the outputs are written with. */
  readonly columns: readonly Column[];
  /** Each input's columns (InputInfo.columns), in input order. */
  readonly inputColumns: readonly (readonly Column[])[];
  /** The inputs' bytes: what an engine holding the job in memory needs room for. */
  readonly inputBytes: number;
}

/**
 * A second engine that writes compact's outputs: the same casts, sort, row groups, split, ZSTD
 * and footer metadata as CompactRequest asks of any engine. The engine holding it reads the
 * outputs' row counts and checks their column types itself, so the checks do not depend on it.
 */
export interface MergeWriter {
  readonly name: Exclude<MergeEngineName, 'duckdb'>;
  /** Whether it writes these columns, cast from these inputs' types, as DuckDB would, in its memory. */
  writes(shape: MergeShape): boolean;
  /** Writes the outputs into request.outputDir; resolves to their paths, in sort order. */
  write(request: CompactRequest, inputBytes: number): Promise<string[]>;
}

export interface DistinctRequest {
  /** Local Parquet files, read together as compact reads them. */
  readonly files: readonly string[];
  /** The unified schema: values compare after the same casts compact applies. */
  readonly columns: readonly Column[];
  readonly dedup: DedupRequest;
  readonly signal?: AbortSignal;
}

/** What countDistinct finds: the distinct rows (or keys), and a hash of them as a set. */
export interface DistinctCount {
  readonly rows: number;
  /**
   * The distinct rows' ('exact') or keys' ('last') fingerprint, independent of order and file
   * split: inputs and outputs of a correct dedup have the same one (KEYS_HASH_ALGORITHM).
   */
  readonly keysHash: string;
}

/**
 * How keysHash is made: the XOR of each distinct row's MD5 (as a 128-bit number, in decimal) over
 * its compared columns written as one JSON object. Receipts name it, so a later check knows what
 * to recompute.
 */
export const KEYS_HASH_ALGORITHM = 'xor-md5-json';

/**
 * One top-level column of a written file, from its footer statistics: the nulls, and the
 * smallest and largest value as text in the column's type. null: some row group has no such
 * statistic (a nested column has none here).
 */
export interface ColumnStats {
  readonly name: string;
  readonly nulls: number | null;
  readonly min: string | null;
  readonly max: string | null;
}

export interface CompactOutput {
  /** Local path of one output file. Outputs are in sort order: the first holds the smallest keys. */
  readonly path: string;
  readonly rows: number;
  readonly bytes: number;
}

/**
 * An integer column's value range in one file, from its footer statistics: `min`/`max` over every
 * row group (null when it holds no non-null value), or why the footer does not prove a range.
 */
export type IntegerBounds =
  | { readonly min: bigint | null; readonly max: bigint | null }
  | { readonly unproved: string };

/** An integer column of one file against a range, counted from the data itself. */
export interface IntegerOutside {
  /** Rows whose non-NULL value lies outside the range. */
  readonly rows: number;
  /** The column's smallest and largest value in the file (null when it holds no non-NULL value). */
  readonly min: bigint | null;
  readonly max: bigint | null;
}

export interface Engine {
  /** Reads and validates the footer; throws InputUnreadableError when the file is not valid Parquet. */
  inspect(file: string): Promise<InputInfo>;
  /** Merges, sorts and writes; returns outputs with their footer row counts. */
  compact(request: CompactRequest): Promise<CompactOutput[]>;
  /**
   * The engines that can write a merge of this shape (CompactRequest.mergeEngine). Absent:
   * 'duckdb' alone.
   */
  mergeEngines?(shape: MergeShape): readonly MergeEngineName[];
  /**
   * How many rows the files hold once deduplicated ('exact': distinct rows; 'last': distinct
   * keys), counted by its own query, apart from any write: the core checks compact's output
   * against it.
   */
  countDistinct(request: DistinctRequest): Promise<DistinctCount>;
  /**
   * Per top-level column of a local file: nulls and min/max from its footer statistics, over every
   * row group (no data is read). What a reader prunes by, and what a job's receipt records.
   * Absent: receipts carry no column statistics.
   */
  columnStats?(file: string): Promise<ColumnStats[]>;
  /**
   * The range of a top-level integer column of a local file, from the footer's min_value/max_value
   * statistics of every row group alone (no data is read). Absent: the engine proves no range,
   * and integer/float mixes stay conflicts.
   */
  integerBounds?(file: string, column: string): Promise<IntegerBounds>;
  /**
   * How many non-NULL values of an integer column of a local file do not survive a round trip
   * through DOUBLE, counted from the data itself: the check that footer statistics told the truth.
   */
  countInexactAsDouble?(file: string, column: string): Promise<number>;
  /**
   * How many non-NULL values of a top-level integer column of a local file lie outside
   * [low, high], with the column's min and max, read from the data (not the statistics): the
   * check that an epoch time column lies in its folder's period. Absent: a table that declares
   * a time unit cannot be compacted.
   */
  integerOutside?(file: string, column: string, low: bigint, high: bigint): Promise<IntegerOutside>;
  /** Runs SQL and returns its rows: the canary writes and reads its table with it (core/canary.ts). */
  query?(sql: string): Promise<Record<string, unknown>[]>;

  close(): Promise<void>;
}

/** Row containment, for repairing a lake that a non-atomic compactor duplicated. */
export interface RowContainment {
  /**
   * How many rows of `inputs` (as a multiset, over the inputs' columns) are not in `evidence`:
   * 0 means every input row is already there, as many times as the inputs hold it.
   */
  countMissing(inputs: readonly string[], evidence: readonly string[]): Promise<number>;
}

export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };
