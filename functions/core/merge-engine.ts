/**
 * Which engine writes a job's merge: DuckDB, or polars for wide tables. A pure rule over the
 * job's shape; the engine says which engines can write it (Engine.mergeEngines).
 */

import type { DedupRequest, MergeEngineName } from './engine.ts';

/*
 * Measured on the 2-core x64 bench host (shared: load 3-6, so +-20%), both engines at 2 threads,
 * one hour of the bench's sample rows plus DOUBLE columns sorted by time into one ZSTD file,
 * engine.compact alone (median of 3), DuckDB vs polars:
 *   100 files x 5,000 rows:  6 columns 0.13 vs 0.15 s, 8: 0.16 vs 0.14 s, 12: 0.21 vs 0.17 s,
 *                            16: 0.26 vs 0.23 s, 50: 0.90 vs 0.63 s.
 *   250 files x 2,000 rows (122-158 KB each): 16 columns 0.30 vs 0.30 s, 20: 0.37 vs 0.32 s.
 *   500 files x 1,000 rows at 50 columns (230 KB each): 0.97 vs 0.83 s.
 *   1,000 files x 500 rows (24-120 KB each): 12 columns 0.34 vs 0.53 s, 50: 1.21 vs 1.22 s.
 * DuckDB's Parquet writer costs about 2 ms per column per 100,000 rows whatever the compression
 * (uncompressed is barely faster than ZSTD), polars' about a third of that; polars reads each
 * file with a call of its own (about 1 ms), which small files do not repay.
 */

/** Tables with at least this many columns can merge on polars. */
export const POLARS_MIN_COLUMNS = 12;

/** ...when their inputs average at least this many bytes (at 122 KB the two are even). */
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
 * DuckDB's SQL, and the polars writer implements neither. `able` is asked only for a wide job:
 * asking may load an engine (nodejs-polars, once per process), which a narrow job never needs.
 */
export function chooseMergeEngine(job: MergeJob, able: () => readonly MergeEngineName[]): MergeEngineName {
  const wide =
    job.columns >= POLARS_MIN_COLUMNS &&
    job.inputBytes >= POLARS_MIN_AVERAGE_INPUT_BYTES * job.inputs &&
    job.inputBytes <= POLARS_MAX_INPUT_BYTES;
  return wide && job.dedup === undefined && able().includes('polars') ? 'polars' : 'duckdb';
}
