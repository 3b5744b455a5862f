/**
 * A backlog: one hour holding many times a job's file bound (20,000 small files; --quick 4,000),
 * drained by one `compactor run --tier hourly` (one execution: its jobs run one per wave), against
 * one raw DuckDB process merging the same files in one COPY. Whole processes, spawn to exit, with
 * each one's peak RSS. Flat memory is shown with V8's heap held to FLAT_HEAP_MB, as the planner
 * bench holds it: the backlog then runs in about what one job bound of the same files needs. With
 * V8's default heap on a large machine its peak grows further, by garbage V8 has no need to collect.
 */

import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cp, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { STACK_DEFAULTS } from '../cdk/config-defaults.ts';
import type { DuckDbEngine } from '../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { errorCode } from '../functions/core/errors.ts';
import { generateDataset, PARTITION } from './datasets.ts';
import { hourlyRunArgs, rawDuckDbTask } from './orchestration.ts';
import type { WorkerResult } from './worker.ts';

const WORKER = fileURLToPath(new URL('./worker.ts', import.meta.url));

export interface BacklogRun {
  readonly files: number;
  readonly wallMs: number;
  readonly maxRssBytes: number;
}

export interface BacklogResult {
  readonly files: number;
  readonly rowsPerFile: number;
  /** The job bound the run planned with (the stack's default `maxJobFiles`). */
  readonly maxJobFiles: number;
  readonly jobs: number;
  readonly waves: number;
  /** Raw files left in the hour after the one run: 0 when the backlog drained. */
  readonly rawLeft: number;
  readonly rowsExact: boolean;
  readonly product: BacklogRun;
  /** The product over one job bound of the same files: one job, one wave. */
  readonly productOneJob: BacklogRun;
  /** The whole backlog and one job bound again, V8's heap held to FLAT_HEAP_MB. */
  readonly flat: { readonly backlog: BacklogRun; readonly oneJob: BacklogRun };
  readonly duckdb: BacklogRun;
}

/** Peak RSS of a child, from its VmHWM polled until it exits (the high-water mark only grows). */
function runMeasured(
  args: readonly string[],
): Promise<{ wallMs: number; maxRssBytes: number; stdout: string }> {
  const start = performance.now();
  const child = spawn(process.execPath, [...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  let maxRssBytes = 0;
  const poll = setInterval(() => {
    try {
      const match = /^VmHWM:\s+(\d+)\s+kB$/m.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'));
      if (match?.[1]) maxRssBytes = Math.max(maxRssBytes, Number(match[1]) * 1024);
    } catch (error) {
      // The process ended between two polls.
      if (errorCode(error) !== 'ENOENT') throw error;
    }
  }, 25);
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      clearInterval(poll);
      const wallMs = performance.now() - start;
      if (code !== 0) reject(new Error(`node ${args.join(' ')} exited ${code}: ${stderr}`));
      else resolve({ wallMs, maxRssBytes, stdout });
    });
  });
}

interface RunOutput {
  readonly summary?: { readonly compacted?: number; readonly rows?: number };
  readonly plan?: { readonly jobs?: number; readonly waves?: number };
  readonly partitions?: readonly { readonly rows?: number }[];
}

export async function runBacklog(
  engine: DuckDbEngine,
  dir: string,
  options: { readonly files: number; readonly rowsPerFile: number; readonly log: (line: string) => void },
): Promise<BacklogResult> {
  const maxJobFiles = STACK_DEFAULTS.maxJobFiles;
  const spec = {
    id: 'backlog',
    title: 'backlog',
    files: options.files,
    rowsPerFile: options.rowsPerFile,
    extraColumns: 0,
  };
  const t = Date.now();
  const ds = await generateDataset(engine, join(dir, 'data'), spec);
  options.log(
    `  ${ds.files.toLocaleString('en-US')} files x ${ds.rowsPerFile} rows in one hour (generated in ${((Date.now() - t) / 1000).toFixed(0)} s)`,
  );
  const workDir = join(dir, 'work');
  const lake = join(dir, 'lake');
  const product = async (
    keep?: number,
    nodeArgs: readonly string[] = [],
  ): Promise<BacklogRun & { out: RunOutput; rawLeft: number }> => {
    await rm(lake, { recursive: true, force: true });
    await cp(ds.storeRoot, lake, { recursive: true });
    const hour = join(lake, ...PARTITION.split('/'));
    if (keep !== undefined) {
      const names = (await readdir(hour)).filter((n) => n.endsWith('.parquet')).sort();
      for (const name of names.slice(keep)) await rm(join(hour, name));
    }
    const files = keep ?? ds.files;
    const run = await runMeasured([...nodeArgs, ...hourlyRunArgs(lake, workDir)]);
    const out = JSON.parse(run.stdout) as RunOutput;
    const rawLeft = (await readdir(hour)).filter((n) => /^cpu_\d{8}_\d{6}_\d+\.parquet$/.test(n)).length;
    return { files, wallMs: run.wallMs, maxRssBytes: run.maxRssBytes, out, rawLeft };
  };
  const duckdb = async (): Promise<BacklogRun> => {
    const run = await runMeasured([WORKER, await rawDuckDbTask(dir, ds)]);
    const result = JSON.parse(run.stdout.trim().split('\n').at(-1) ?? '{}') as WorkerResult;
    return {
      files: ds.files,
      wallMs: run.wallMs,
      maxRssBytes: Math.max(run.maxRssBytes, result.maxRssBytes),
    };
  };
  // Warm-up: the page cache and the definition cache.
  await product(maxJobFiles);
  const oneJob = await product(maxJobFiles);
  const whole = await product();
  const heap = [`--max-old-space-size=${FLAT_HEAP_MB}`];
  const flatOneJob = await product(maxJobFiles, heap);
  const flatWhole = await product(undefined, heap);
  const raw = await duckdb();
  const rows = whole.out.partitions?.reduce((sum, p) => sum + (p.rows ?? 0), 0) ?? 0;
  const result: BacklogResult = {
    files: ds.files,
    rowsPerFile: ds.rowsPerFile,
    maxJobFiles,
    jobs: whole.out.plan?.jobs ?? 0,
    waves: whole.out.plan?.waves ?? 0,
    rawLeft: whole.rawLeft,
    rowsExact: rows === ds.rows,
    product: { files: whole.files, wallMs: whole.wallMs, maxRssBytes: whole.maxRssBytes },
    productOneJob: { files: oneJob.files, wallMs: oneJob.wallMs, maxRssBytes: oneJob.maxRssBytes },
    flat: {
      backlog: { files: flatWhole.files, wallMs: flatWhole.wallMs, maxRssBytes: flatWhole.maxRssBytes },
      oneJob: { files: flatOneJob.files, wallMs: flatOneJob.wallMs, maxRssBytes: flatOneJob.maxRssBytes },
    },
    duckdb: raw,
  };
  for (const line of backlogRows(result)) options.log(`  ${line}`);
  await rm(dir, { recursive: true, force: true });
  return result;
}

const MiB = 2 ** 20;

/** The section's lines, for the log and results.md alike. */
export function backlogRows(r: BacklogResult): string[] {
  const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  const m = (bytes: number) => `${(bytes / MiB).toFixed(0)} MiB`;
  return [
    `compactor run --tier hourly over ${r.files.toLocaleString('en-US')} files: ${s(r.product.wallMs)}, peak RSS ${m(r.product.maxRssBytes)}; ${r.jobs} job(s) of at most ${r.maxJobFiles} files in ${r.waves} wave(s); raw files left ${r.rawLeft}; rows ${r.rowsExact ? 'exact' : 'NOT exact'}`,
    `the same over ${r.productOneJob.files.toLocaleString('en-US')} of them (one job): ${s(r.productOneJob.wallMs)}, peak RSS ${m(r.productOneJob.maxRssBytes)}`,
    `with V8's heap held to ${FLAT_HEAP_MB} MiB: the backlog peaks at ${m(r.flat.backlog.maxRssBytes)} (${s(r.flat.backlog.wallMs)}), one job at ${m(r.flat.oneJob.maxRssBytes)}: ${(r.flat.backlog.maxRssBytes / r.flat.oneJob.maxRssBytes).toFixed(2)}x`,
    `raw DuckDB, one COPY over all ${r.files.toLocaleString('en-US')} files: ${s(r.duckdb.wallMs)}, peak RSS ${m(r.duckdb.maxRssBytes)} (product ${(r.product.wallMs / r.duckdb.wallMs).toFixed(2)}x its time, ${(r.product.maxRssBytes / r.duckdb.maxRssBytes).toFixed(2)}x its memory)`,
  ];
}

/**
 * The targets: the hour drained by one execution with rows exact, and flat memory (with a
 * bounded heap, the backlog's peak RSS within a quarter of one job's, whatever the backlog's size).
 */
export const FLAT_MEMORY_RATIO = 1.25;

/** V8's heap for the flat-memory pair: half the plan Lambda's memory, as the planner bench. */
export const FLAT_HEAP_MB = 256;

export function backlogTargets(
  r: BacklogResult,
): { name: string; value: string; met: boolean; cause?: string }[] {
  const drained = r.rawLeft === 0 && r.rowsExact;
  const ratio = r.flat.backlog.maxRssBytes / r.flat.oneJob.maxRssBytes;
  return [
    {
      name: `backlog: an hour of ${r.files.toLocaleString('en-US')} files drained by one execution, rows exact`,
      value: `${r.jobs} jobs in ${r.waves} waves, ${r.rawLeft} raw files left, rows ${r.rowsExact ? 'exact' : 'not exact'}, ${(r.product.wallMs / 1000).toFixed(1)} s (raw DuckDB ${(r.duckdb.wallMs / 1000).toFixed(1)} s)`,
      met: drained,
      ...(drained
        ? {}
        : {
            cause: `${r.rawLeft} raw files left: more than maxJobsPerPartition jobs of ${r.maxJobFiles} files`,
          }),
    },
    {
      name: `backlog: flat memory, peak RSS over ${r.files.toLocaleString('en-US')} files <= ${FLAT_MEMORY_RATIO}x over one job's ${r.productOneJob.files.toLocaleString('en-US')} (heap ${FLAT_HEAP_MB} MiB)`,
      value: `${(r.flat.backlog.maxRssBytes / MiB).toFixed(0)} MiB vs ${(r.flat.oneJob.maxRssBytes / MiB).toFixed(0)} MiB (${ratio.toFixed(2)}x; default heap ${(r.product.maxRssBytes / MiB).toFixed(0)} MiB; raw DuckDB over all files ${(r.duckdb.maxRssBytes / MiB).toFixed(0)} MiB)`,
      met: ratio <= FLAT_MEMORY_RATIO,
    },
  ];
}

export function backlogMarkdown(r: BacklogResult): string[] {
  return [
    '## Backlog: one hour of many job bounds (`bench/backlog.ts`)',
    '',
    `One hour of ${r.files.toLocaleString('en-US')} files x ${r.rowsPerFile} rows, drained by one \`compactor run --tier hourly\` (its jobs, at most ${r.maxJobFiles} files each, run one per wave), against one raw DuckDB process merging every file in one COPY; whole processes, spawn to exit, peak RSS polled from /proc.`,
    '',
    ...backlogRows(r).map((line) => `- ${line}`),
    '',
  ];
}
