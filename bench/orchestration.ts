/**
 * Orchestration overhead: one local cycle (recover -> plan -> every partition through every
 * step, as runCycle does and the state machine mirrors) over many small partitions, against the
 * time the engine itself worked (footer checks + merges). The difference is what the protocol
 * costs: manifests, conditional writes, downloads, staging, publish, verify, deletes, clear.
 *
 * Then whole processes, timed from spawn to exit: `compactor run --tier hourly` over one 200-file
 * partition against a Node process running raw DuckDB's COPY of the same files (bench/worker.ts),
 * and the CLI's start-up for commands that need neither the stack nor an engine.
 */

import { execFile } from 'node:child_process';
import { copyFile, cp, mkdir, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { DuckDbEngine } from '../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { LocalFolderStore } from '../functions/adapters/local-store/local-store.ts';
import { writeSampleParquet } from '../functions/adapters/sample-data.ts';
import { parseConfig } from '../functions/core/config.ts';
import { runCycle } from '../functions/core/cycle.ts';
import { systemClock } from '../functions/core/engine.ts';
import type { ObjectStore } from '../functions/core/object-store.ts';
import { FaultStore } from '../test/support/fault-store.ts';
import { THREADS } from './compact-lambda.ts';
import { DATASETS, type Dataset, type DatasetSpec, generateDataset } from './datasets.ts';
import { median } from './stats.ts';
import { TimedEngine } from './timed.ts';
import {
  profileWholeProcess,
  type WholeProcessProfile,
  wholeProcessProfileTable,
} from './whole-process-profile.ts';
import type { WorkerTask } from './worker.ts';

export interface OrchestrationRun {
  readonly concurrency: number;
  readonly cycleWallMs: number;
  readonly engineBusyMs: number;
  readonly storeCalls: number;
  /** Time spent inside store calls, by kind (summed over calls; they may overlap). */
  readonly storeMsByOp: Readonly<Record<string, number>>;
  readonly compacted: number;
}

/** Times every call of an ObjectStore (list: until its iteration ends), summed by method. */
function timeCalls(inner: ObjectStore, totals: Record<string, number>): ObjectStore {
  const add = (op: string, ms: number) => {
    totals[op] = (totals[op] ?? 0) + ms;
  };
  return new Proxy(inner, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver);
      if (typeof value !== 'function' || typeof prop !== 'string') return value;
      if (prop === 'list') {
        return (...args: unknown[]) =>
          (async function* () {
            const start = performance.now();
            try {
              yield* (value as (...a: unknown[]) => AsyncIterable<unknown>).apply(target, args);
            } finally {
              add('list', performance.now() - start);
            }
          })();
      }
      return async (...args: unknown[]) => {
        const start = performance.now();
        try {
          return await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
        } finally {
          add(prop, performance.now() - start);
        }
      };
    },
  });
}

export interface OrchestrationResult {
  readonly partitions: number;
  readonly filesPerPartition: number;
  readonly rowsPerFile: number;
  readonly runs: readonly OrchestrationRun[];
  /** Concurrency 1: cycle wall minus engine time, per partition. */
  readonly overheadPerPartitionMs: number;
  readonly overheadShare: number;
  readonly wholeProcess?: WholeProcessResult;
  readonly startup?: readonly StartupResult[];
}

/** `compactor run --tier hourly` over one partition against raw DuckDB, each a whole process. */
export interface WholeProcessResult {
  readonly files: number;
  readonly rowsPerFile: number;
  readonly runs: number;
  /** Median, spawn to exit. */
  readonly productWallMs: number;
  readonly duckdbWallMs: number;
  readonly ratio: number;
  readonly productSamplesMs: readonly number[];
  readonly duckdbSamplesMs: readonly number[];
  /** The first run: it synthesizes the stack (the definition cache is empty). */
  readonly coldProductWallMs: number;
  /** Where a run's wall time goes, from the product's timing spans (runs after the timed ones). */
  readonly profile?: WholeProcessProfile;
}

export interface StartupResult {
  readonly command: string;
  /** Median, spawn to exit. */
  readonly wallMs: number;
  readonly samplesMs: readonly number[];
  /** A target applies (commands that need neither the stack nor an engine). */
  readonly light: boolean;
}

/** The whole process's target: at most this many times raw DuckDB's whole process. */
export const WHOLE_PROCESS_TARGET = 1.15;
export const STARTUP_TARGET_MS = 500;

const FILES = 10;
const ROWS = 200;
const TEMPLATES = 5;

export async function runOrchestration(
  engine: DuckDbEngine,
  dir: string,
  options: { readonly partitions: number; readonly quick?: boolean; readonly log: (line: string) => void },
): Promise<OrchestrationResult> {
  await mkdir(dir, { recursive: true });
  const templates: string[] = [];
  for (let t = 0; t < TEMPLATES; t++) {
    const path = join(dir, `template-${t}.parquet`);
    await writeSampleParquet(engine, path, {
      rows: ROWS,
      firstId: t * ROWS + 1,
      startTimeMs: Date.UTC(2025, 0, 10),
      spanMs: 3_600_000,
    });
    templates.push(path);
  }
  // One job an item: runCycle runs an item's jobs one after another, so `concurrency` jobs run at
  // once, as a Map of that MaxConcurrency over single-job items does.
  const config = parseConfig({ quietSeconds: 0, smallJobsPerItem: 1 });
  const runs: OrchestrationRun[] = [];
  for (const concurrency of [1, 2]) {
    const lake = join(dir, `lake-${concurrency}`);
    const start = Date.UTC(2025, 0, 10);
    for (let p = 0; p < options.partitions; p++) {
      const hour = new Date(start + p * 3_600_000);
      const ymd = hour.toISOString().slice(0, 10).replaceAll('-', '');
      const hh = String(hour.getUTCHours()).padStart(2, '0');
      const folder = `db/cpu/${ymd.slice(0, 4)}/${ymd.slice(4, 6)}/${ymd.slice(6, 8)}/${hh}`;
      for (let f = 0; f < FILES; f++) {
        const path = join(lake, ...folder.split('/'), `cpu_${ymd}_${hh}0000_${f}.parquet`);
        await mkdir(dirname(path), { recursive: true });
        await copyFile(templates[f % TEMPLATES] as string, path);
      }
    }
    const timed = new TimedEngine(engine);
    const storeMsByOp: Record<string, number> = {};
    const store = new FaultStore(timeCalls(new LocalFolderStore(lake), storeMsByOp));
    let counter = 0;
    const t0 = performance.now();
    const report = await runCycle(
      {
        store,
        config,
        clock: systemClock,
        engine: timed,
        workDir: join(dir, 'work'),
        executionId: `bench-cycle-${concurrency}`,
        isOwnerAlive: async () => false,
        concurrency,
        randomHex: () => (++counter).toString(16).padStart(8, '0'),
      },
      'hourly',
    );
    const cycleWallMs = performance.now() - t0;
    const compacted = report.jobs.filter((j) => j.outcome.status === 'compacted').length;
    if (compacted !== options.partitions) {
      const failed = report.jobs.find((j) => j.outcome.status === 'failed');
      throw new Error(
        `orchestration: ${compacted} of ${options.partitions} partitions compacted` +
          (failed?.outcome.status === 'failed' ? `; first failure: ${failed.outcome.error.message}` : ''),
      );
    }
    const run = {
      concurrency,
      cycleWallMs,
      engineBusyMs: timed.busyMs(),
      storeCalls: store.calls.length,
      storeMsByOp,
      compacted,
    };
    runs.push(run);
    options.log(
      `  concurrency ${concurrency}: cycle ${(cycleWallMs / 1000).toFixed(2)} s, engine busy ${(run.engineBusyMs / 1000).toFixed(2)} s, ${run.storeCalls} store calls`,
    );
    await rm(lake, { recursive: true, force: true });
  }
  const serial = runs[0] as OrchestrationRun;
  const whole = await runWholeProcess(engine, join(dir, 'whole'), {
    rowsPerFile: options.quick ? 2_000 : wholeDataset().rowsPerFile,
    runs: options.quick ? 2 : 5,
    log: options.log,
  });
  return {
    partitions: options.partitions,
    filesPerPartition: FILES,
    rowsPerFile: ROWS,
    runs,
    overheadPerPartitionMs: (serial.cycleWallMs - serial.engineBusyMs) / options.partitions,
    overheadShare: (serial.cycleWallMs - serial.engineBusyMs) / serial.cycleWallMs,
    ...whole,
  };
}

const BENCH_DIR = import.meta.dirname;
const CLI = fileURLToPath(new URL('../functions/cli/main.ts', import.meta.url));
/** Dataset (i)'s shape: 200 files of one hour partition. */
function wholeDataset(): DatasetSpec {
  const spec = DATASETS.find((d) => d.id === 'i');
  if (!spec) throw new Error('bench/datasets.ts has no dataset (i)');
  return spec;
}

/**
 * The task file of raw DuckDB's one COPY over a dataset's files (bench/worker.ts), in a fresh
 * scratch folder under `dir`: its path.
 */
export async function rawDuckDbTask(dir: string, ds: Dataset): Promise<string> {
  const runDir = join(dir, 'duckdb-run');
  await rm(runDir, { recursive: true, force: true });
  await mkdir(runDir, { recursive: true });
  const task: WorkerTask = {
    tool: 'duckdb',
    storeRoot: ds.storeRoot,
    partition: ds.partition,
    paths: ds.paths,
    runDir,
    threads: THREADS,
  };
  const taskFile = join(dir, 'duckdb-task.json');
  await writeFile(taskFile, JSON.stringify(task));
  return taskFile;
}

/** `compactor run --tier hourly` over a lake with the bench's threads, its JSON on stdout: node's arguments. */
export function hourlyRunArgs(lake: string, workDir: string): string[] {
  return [
    CLI,
    'run',
    '--tier',
    'hourly',
    '--store',
    lake,
    '--quiet',
    '0',
    '--threads',
    String(THREADS),
    '--work-dir',
    workDir,
    '--json',
  ];
}

/** Runs a Node script with arguments; resolves its wall time (spawn to exit) and stdout. */
function timedNode(
  args: readonly string[],
  env: Readonly<Record<string, string>> = {},
): Promise<{ wallMs: number; stdout: string }> {
  const start = performance.now();
  return new Promise((resolve, reject) => {
    const options = { maxBuffer: 64 * 1024 * 1024, env: { ...process.env, ...env } };
    execFile(process.execPath, [...args], options, (error, stdout, stderr) => {
      const wallMs = performance.now() - start;
      if (error) reject(new Error(`node ${args.join(' ')} failed: ${error.message}\n${stderr.slice(-2000)}`));
      else resolve({ wallMs, stdout });
    });
  });
}

async function runWholeProcess(
  engine: DuckDbEngine,
  dir: string,
  options: { readonly rowsPerFile: number; readonly runs: number; readonly log: (line: string) => void },
): Promise<{ wholeProcess: WholeProcessResult; startup: StartupResult[] }> {
  const spec = { ...wholeDataset(), rowsPerFile: options.rowsPerFile };
  const ds = await generateDataset(engine, join(dir, 'data'), spec);
  const workDir = join(dir, 'work');
  const lake = join(dir, 'lake');
  const product = async (
    nodeArgs: readonly string[] = [],
    env: Readonly<Record<string, string>> = {},
  ): Promise<number> => {
    await rm(lake, { recursive: true, force: true });
    await cp(ds.storeRoot, lake, { recursive: true });
    const { wallMs, stdout } = await timedNode([...nodeArgs, ...hourlyRunArgs(lake, workDir)], env);
    const out = JSON.parse(stdout) as { summary?: { compacted?: number }; partitions?: { rows?: number }[] };
    const rows = out.partitions?.reduce((sum, p) => sum + (p.rows ?? 0), 0);
    if (out.summary?.compacted !== 1 || rows !== ds.rows) {
      throw new Error(
        `compactor run compacted ${out.summary?.compacted} partition(s), ${rows} of ${ds.rows} rows`,
      );
    }
    return wallMs;
  };
  const duckdb = async (): Promise<number> =>
    (await timedNode([join(BENCH_DIR, 'worker.ts'), await rawDuckDbTask(dir, ds)])).wallMs;
  // Warm-up: the page cache, the definition cache (this first run synthesizes the stack).
  const coldProductWallMs = await product();
  await duckdb();
  const productSamplesMs: number[] = [];
  const duckdbSamplesMs: number[] = [];
  for (let round = 0; round < options.runs; round++) {
    // Alternate who goes first.
    if (round % 2 === 0) {
      productSamplesMs.push(await product());
      duckdbSamplesMs.push(await duckdb());
    } else {
      duckdbSamplesMs.push(await duckdb());
      productSamplesMs.push(await product());
    }
  }
  const productWallMs = median(productSamplesMs);
  const duckdbWallMs = median(duckdbSamplesMs);
  options.log(
    `  whole process over ${ds.files} files x ${ds.rowsPerFile} rows: compactor run ${(productWallMs / 1000).toFixed(2)} s ` +
      `(first, synthesizing: ${(coldProductWallMs / 1000).toFixed(2)} s), raw DuckDB ${(duckdbWallMs / 1000).toFixed(2)} s`,
  );
  const profile = await profileWholeProcess(product, options.runs > 2 ? 3 : 1);
  options.log(
    `  where a compactor run process goes (ms, spawn to exit):\n${wholeProcessProfileTable(profile)}`,
  );

  // Start-up: the lake as the last run left it (compacted), an empty lake for `run`.
  const empty = join(dir, 'empty');
  await mkdir(empty, { recursive: true });
  const commands: { command: string; args: string[]; light: boolean }[] = [
    { command: 'compactor --help', args: ['--help'], light: true },
    { command: 'compactor status', args: ['status', '--store', lake], light: true },
    { command: 'compactor visible', args: ['visible', '--store', lake], light: true },
    {
      command: 'compactor run --tier hourly (empty lake)',
      args: ['run', '--tier', 'hourly', '--store', empty, '--work-dir', workDir],
      light: false,
    },
  ];
  const startup: StartupResult[] = [];
  for (const { command, args, light } of commands) {
    await timedNode([CLI, ...args]);
    const samplesMs: number[] = [];
    for (let i = 0; i < Math.max(3, options.runs); i++)
      samplesMs.push((await timedNode([CLI, ...args])).wallMs);
    startup.push({ command, wallMs: median(samplesMs), samplesMs, light });
    options.log(`  start-up ${command}: ${(median(samplesMs) / 1000).toFixed(2)} s`);
  }
  await rm(dir, { recursive: true, force: true });
  return {
    wholeProcess: {
      files: ds.files,
      rowsPerFile: ds.rowsPerFile,
      runs: options.runs,
      productWallMs,
      duckdbWallMs,
      ratio: productWallMs / duckdbWallMs,
      productSamplesMs,
      duckdbSamplesMs,
      coldProductWallMs,
      profile,
    },
    startup,
  };
}
