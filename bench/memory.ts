/**
 * The memory case: one partition of about twice the engine's memory limit, compacted through the
 * product path (compactStep) with DuckDB's memory_limit set low, in its own process. It must
 * complete by spilling to the engine's temp directory (watched while it runs); the output is
 * verified like every other.
 */

import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { DuckDbEngine } from '../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { runChild } from './child.ts';
import { removeJob } from './compare.ts';
import { generateSpillDataset } from './datasets.ts';
import { verifyOutputs } from './verify.ts';
import type { WorkerResult, WorkerTask } from './worker.ts';

export interface MemoryResult {
  readonly memoryLimit: string;
  readonly inputBytes: number;
  readonly rows: number;
  readonly columns: number;
  readonly files: number;
  readonly wallMs: number;
  readonly maxRssBytes: number;
  readonly spillPeakBytes: number;
  readonly outputBytes: number;
  readonly verified: boolean;
}

const DOUBLES = 40;
/** Parquet bytes per row of the spill dataset (40 incompressible doubles, id, time, host). */
const BYTES_PER_ROW = 345;
const FILES = 20;

export async function runMemory(
  engine: DuckDbEngine,
  dir: string,
  options: {
    readonly memoryLimit: string;
    readonly targetBytes: number;
    readonly threads: number;
    readonly log: (line: string) => void;
  },
): Promise<MemoryResult> {
  await mkdir(dir, { recursive: true });
  const rowsPerFile = Math.round(options.targetBytes / FILES / BYTES_PER_ROW);
  const ds = await generateSpillDataset(engine, dir, { files: FILES, rowsPerFile, doubles: DOUBLES });
  options.log(
    `  input ${(ds.bytes / 1e6).toFixed(0)} MB, ${ds.rows.toLocaleString('en-US')} rows, memory_limit ${options.memoryLimit}`,
  );
  const runDir = join(dir, 'run');
  const task: WorkerTask = {
    tool: 'product',
    storeRoot: ds.storeRoot,
    partition: ds.partition,
    paths: ds.paths,
    runDir,
    threads: options.threads,
    memoryLimit: options.memoryLimit,
  };
  await mkdir(runDir, { recursive: true });
  try {
    const result = await runChild<WorkerResult>('worker.ts', task, join(runDir, 'task.json'));
    await verifyOutputs(engine, 'memory/product', result.outputs, ds.rows, true);
    const out: MemoryResult = {
      memoryLimit: options.memoryLimit,
      inputBytes: ds.bytes,
      rows: ds.rows,
      columns: ds.columns,
      files: ds.files,
      wallMs: result.wallMs,
      maxRssBytes: result.maxRssBytes,
      spillPeakBytes: result.spillPeakBytes ?? 0,
      outputBytes: result.outputBytes,
      verified: true,
    };
    options.log(
      `  ${(out.wallMs / 1000).toFixed(1)} s, peak RSS ${(out.maxRssBytes / 2 ** 20).toFixed(0)} MiB, spilled up to ${(out.spillPeakBytes / 2 ** 20).toFixed(0)} MiB`,
    );
    if (out.spillPeakBytes === 0)
      throw new Error('memory case: the engine never spilled; the case proves nothing');
    return out;
  } finally {
    await removeJob(ds);
    await rm(dir, { recursive: true, force: true });
  }
}
