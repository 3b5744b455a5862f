/**
 * Which engine writes a job's merge: DuckDB, or polars for wide tables. A pure rule over the
 * job's shape; the engine says which engines can write it (Engine.mergeEngines).
 */

import type { DedupRequest, MergeEngineName } from './engine.ts';

/*
 * Measured on the 2-core x64 bench host (loaded: other jobs ran), both engines at 2 threads, one
 * hour of the bench's sample rows plus DOUBLE columns, sorted by time into one ZSTD file
 * (median of 3, engine.compact alone):
 *   100 files x 5,000 rows:  6 columns DuckDB 0.11 s, polars 0.12 s; 12 columns 0.21 s vs 0.17 s;
 *                            20 columns 0.34 s vs 0.26 s; 50 columns 0.83-1.6 s vs 0.68-0.79 s.
 *   250 files x 2,000 rows: 20 columns 0.81 s vs 0.57 s; 50 columns 1.02 s vs 0.84 s.
 *   1,000 files x 500 rows (10-42 KB each): 6, 12, 20 columns DuckDB 0.38-0.55 s, polars 0.9-4.3 s.
 * DuckDB's Parquet writer costs about 2 ms per column per 100,000 rows whatever the compression
 * (uncompressed is barely faster than ZSTD), polars' about a third of that; polars reads each
 * file with a call of its own, which small files do not repay.
 */

/** Tables with at least this many columns can merge on polars. */
export const POLARS_MIN_COLUMNS = 12;

/** ...when their inputs average at least this many bytes (158 KB measured faster, 42 KB slower). */
export const POLARS_MIN_AVERAGE_INPUT_BYTES = 128 * 1024;

/**
 * ...and total at most this many: DuckDB spills a sort larger than its memory limit to disk,
 * polars holds the whole job in memory (111 MB of snappy input at 50 columns peaks at about
 * 700 MiB RSS), and the compact Lambda's memory is shared with DuckDB's.
 */
export const POLARS_MAX_INPUT_BYTES = 192 * 1024 * 1024;

export interface MergeJob {
  readonly columns: number;
  readonly inputs: number;
  readonly inputBytes: number;
  readonly dedup: DedupRequest | undefined;
}

/**
 * The engine for a job, among those that can write it (DuckDB always can). Dedup stays on
 * DuckDB: its 'last' order (file, then row within the file) and 'exact' DISTINCT are written in
 * DuckDB's SQL, and the polars writer implements neither.
 */
export function chooseMergeEngine(job: MergeJob, able: readonly MergeEngineName[]): MergeEngineName {
  const wide =
    job.columns >= POLARS_MIN_COLUMNS &&
    job.inputBytes >= POLARS_MIN_AVERAGE_INPUT_BYTES * job.inputs &&
    job.inputBytes <= POLARS_MAX_INPUT_BYTES;
  return wide && job.dedup === undefined && able.includes('polars') ? 'polars' : 'duckdb';
}
