/**
 * The merge on nodejs-polars: a MergeWriter the DuckDB engine hands compact to when the core
 * picks polars for a job (core/merge-engine.ts). It writes only; DuckDB reads its outputs' row
 * counts, checks their types and runs every verification over them.
 *
 * polars facts this relies on (checked against nodejs-polars 0.25.2):
 * - readParquet of one file adds no hive partition columns; every column is selected by name anyway.
 * - sort with maintainOrder is stable; nullsLast puts NULLs after every value, NaN after numbers.
 * - sinkParquet writes the requested row group size, ZSTD at the given level, min/max/null-count
 *   statistics, and its own ARROW:schema footer key (replaced here by the job's metadata).
 */

import { createRequire } from 'node:module';
import type { CompactRequest, MergeShape, MergeWriter } from '../../core/engine.ts';
import { type Polars, writesShape } from './polars-engine-types.ts';
import { writeMerge } from './polars-engine-write.ts';

export interface PolarsWriterOptions {
  /** Told why, when nodejs-polars does not load (merges then stay on DuckDB). */
  readonly onUnavailable: (reason: string) => void;
  /**
   * polars' worker threads (POLARS_MAX_THREADS, read once when polars loads; an explicit
   * environment value wins). Default: polars' own (every core).
   */
  readonly threads?: number;
  /**
   * The memory a merge may take (the engine's budget, as DuckDB's memory_limit): a job whose
   * inputs would need more (MEMORY_PER_INPUT_BYTE times their bytes) stays on DuckDB, which
   * spills to disk where polars would run out. Default: no bound but the core's.
   */
  readonly memoryLimitBytes?: number;
}

/**
 * Peak memory per byte of input when polars merges it, with room to spare: measured 704-746 MiB
 * peak RSS (the whole process) for 111 MB of snappy Parquet at 50 columns, about 6.7x.
 */
export const MEMORY_PER_INPUT_BYTE = 8;

/**
 * The polars MergeWriter. nodejs-polars (its native binding for this platform) loads the first
 * time a job's shape could go to polars, not before: a run without wide tables never pays for
 * loading it. If it does not load, onUnavailable is told why once and the writer takes no merge,
 * so every merge stays on DuckDB.
 */
export async function loadPolarsWriter({
  onUnavailable,
  threads,
  memoryLimitBytes,
}: PolarsWriterOptions): Promise<MergeWriter> {
  if (threads !== undefined && process.env.POLARS_MAX_THREADS === undefined) {
    process.env.POLARS_MAX_THREADS = String(threads);
  }
  // undefined: not tried yet; null: it did not load.
  let loaded: Polars | null | undefined;
  const polars = (): Polars | undefined => {
    if (loaded === undefined) {
      try {
        // Synchronous, as the Engine's mergeEngines is; nodejs-polars is a CommonJS package.
        loaded = createRequire(import.meta.url)('nodejs-polars') as Polars;
      } catch (error) {
        onUnavailable(
          `nodejs-polars does not load (${error instanceof Error ? error.message : String(error)}); every merge runs on DuckDB`,
        );
        loaded = null;
      }
    }
    return loaded ?? undefined;
  };
  return {
    name: 'polars',
    writes: (shape: MergeShape) =>
      writesShape(shape) &&
      (memoryLimitBytes === undefined || shape.inputBytes * MEMORY_PER_INPUT_BYTE <= memoryLimitBytes) &&
      polars() !== undefined,
    write: async (request: CompactRequest, inputBytes: number) => {
      const p = polars();
      // mergeEngines offered polars only once it loaded.
      if (p === undefined) throw new Error('the polars merge was asked for, but nodejs-polars did not load');
      return writeMerge(p, request, inputBytes);
    },
  };
}
