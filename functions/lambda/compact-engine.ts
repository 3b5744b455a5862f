/**
 * The compact Lambda's engine: DuckDB as the other Lambdas have it (lambda-engine.ts), with polars
 * to write the merges the core gives it (core/merge-engine.ts). Without a loadable polars binding
 * every merge runs on DuckDB, and the log says so.
 */

import { join } from 'node:path';
import { DuckDbEngine } from '../adapters/duckdb-engine/duckdb-engine.ts';
import { loadPolarsWriter } from '../adapters/polars-engine/polars-engine.ts';
import { duckDbSettingsFromEnv } from './env-deps.ts';
import { SPILL_DIR } from './work-dir.ts';

export async function compactEngine(workDir: string): Promise<DuckDbEngine> {
  const settings = duckDbSettingsFromEnv();
  const memoryLimitBytes = megabytes(settings.memoryLimit);
  const polars = await loadPolarsWriter({
    onUnavailable: (reason) => console.warn(reason),
    ...(settings.threads !== undefined ? { threads: settings.threads } : {}),
    // DuckDB's share of the Lambda's memory: it idles while polars writes a merge.
    ...(memoryLimitBytes !== undefined ? { memoryLimitBytes } : {}),
  });
  return DuckDbEngine.create({
    tempDirectory: join(workDir, SPILL_DIR),
    ...settings,
    mergeWriters: [polars],
  });
}

/** A memory limit in the form the stack sets it (duckDbMemoryLimit: `<n>MB`), in bytes. */
export function megabytes(limit: string | undefined): number | undefined {
  const match = /^(\d+)MB$/.exec(limit ?? '');
  return match ? Number(match[1]) * 1e6 : undefined;
}
