/**
 * Many small partitions: the common real lake, T tables x H hours x F small files per hour
 * (Arc layout, `db/tNNN/2025/01/15/HH/`). Times, each a whole process from spawn to exit,
 * alternating who goes first, on a fresh copy of the same generated lake:
 *
 * - product: `compactor run --tier hourly` (functions/cli/main.ts, the state machine run locally);
 * - duckdb-loop: one Node process, one DuckDB instance, that compacts every hour folder in turn
 *   (read_parquet of its files, ORDER BY time, COPY to one ZSTD file, unlink the inputs), with the
 *   same threads. No manifests, no fsync, no verification: the floor of the same work.
 *
 * Peak RSS of each is its own VmHWM (bench/rss-at-exit.ts as a preload for the CLI,
 * bench/peak-rss.ts in the loop). Generation is deterministic: file f of hour h holds
 * `--rows` rows of the sample generator with ids (h * F + f) * rows + 1..., every table the same
 * bytes (so a table's files are copies, generated once); each file's mtime is in its hour, and the
 * run plans at --now 2025-01-16T02:00Z, when every hour of 2025-01-15 is eligible.
 *
 *   node bench/small-partitions.ts [--tables 20] [--hours 24] [--files 10] [--rows 50]
 *     [--concurrency 4] [--threads 2] [--runs 3] [--dir /tmp/small-partitions] [--keep]
 *     [--only product,duckdb,...] [--product-args '...'] [--node-args='...']
 *     [--variants name=/other/tree/functions/cli/main.ts,...]
 *
 * --variants runs other trees' CLI as well (each its own work dir), in turn with the rest: an A/B
 * of a change against its parent on the same lake, in the same run.
 *
 * Prints one line per run and a JSON summary (medians, ratio) last.
 */

import { execFile } from 'node:child_process';
import { closeSync, mkdirSync, openSync } from 'node:fs';
import { cp, mkdir, readdir, readFile, rm, unlink, utimes } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import type { PartitionProfile } from './partition-profile.ts';
import { peakRssBytes } from './peak-rss.ts';
import { median } from './stats.ts';

const BENCH_DIR = import.meta.dirname;
const CLI = join(BENCH_DIR, '..', 'functions', 'cli', 'main.ts');
const DAY_START_MS = Date.UTC(2025, 0, 15);
const HOUR_MS = 3_600_000;

export interface LakeShape {
  readonly tables: number;
  readonly hours: number;
  readonly files: number;
  readonly rows: number;
}

const pad = (n: number, width = 2) => String(n).padStart(width, '0');
export const tableName = (t: number) => `t${pad(t, 3)}`;

/** Arc key of file f of hour h of table t. */
export function smallKey(t: number, h: number, f: number, files: number): string {
  const name = tableName(t);
  const minute = pad((f * 7) % 60);
  return `db/${name}/2025/01/15/${pad(h)}/${name}_20250115_${pad(h)}${minute}00_${h * files + f}.parquet`;
}

/**
 * Writes the lake under `root`: each (hour, file) once with DuckDB, then copied into every table.
 * Deterministic: the same shape gives the same bytes.
 */
export async function generateSmallLake(root: string, shape: LakeShape): Promise<void> {
  const { DuckDbEngine } = await import('../functions/adapters/duckdb-engine/duckdb-engine.ts');
  const { writeSampleParquet } = await import('../functions/adapters/sample-data.ts');
  const { forEachLimit } = await import('../functions/core/limit.ts');
  const engine = await DuckDbEngine.create({ threads: 1 });
  const templates = join(root, 'templates');
  await mkdir(templates, { recursive: true });
  const cells = Array.from({ length: shape.hours * shape.files }, (_, i) => i);
  try {
    await forEachLimit(cells, 4, async (i) => {
      const h = Math.floor(i / shape.files);
      await writeSampleParquet(engine, join(templates, `${i}.parquet`), {
        rows: shape.rows,
        firstId: i * shape.rows + 1,
        startTimeMs: DAY_START_MS + h * HOUR_MS,
        spanMs: HOUR_MS,
      });
    });
  } finally {
    await engine.close();
  }
  const lake = join(root, 'lake');
  for (let t = 0; t < shape.tables; t++) {
    for (let h = 0; h < shape.hours; h++) {
      await mkdir(join(lake, 'db', tableName(t), '2025', '01', '15', pad(h)), { recursive: true });
      for (let f = 0; f < shape.files; f++) {
        const i = h * shape.files + f;
        const path = join(lake, ...smallKey(t, h, f, shape.files).split('/'));
        await cp(join(templates, `${i}.parquet`), path);
        // Written during its hour, as a writer would: older than --now, so the plan takes it.
        const written = new Date(DAY_START_MS + h * HOUR_MS + (f + 1) * 60_000);
        await utimes(path, written, written);
      }
    }
  }
}

interface RunSample {
  /** 'duckdb', 'product', or a --variants name. */
  readonly tool: string;
  readonly wallMs: number;
  readonly peakRssBytes: number;
  /** User + system CPU of the whole process (all threads), start to exit. */
  readonly cpuMs: number;
  readonly partitions: number;
  readonly rows: number;
}

/** A run with what creating one file cost in the lake's folder just before it (fileCreateUs). */
interface RoundSample extends RunSample {
  readonly createUs: number;
}

function node(
  args: readonly string[],
  env: Record<string, string> = {},
): Promise<{ wallMs: number; stdout: string; stderr: string }> {
  const start = performance.now();
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [...args],
      { maxBuffer: 256 * 1024 * 1024, env: { ...process.env, ...env } },
      (error, stdout, stderr) => {
        const wallMs = performance.now() - start;
        if (error)
          reject(new Error(`node ${args.join(' ')} failed: ${error.message}\n${stderr.slice(-3000)}`));
        else resolve({ wallMs, stdout, stderr });
      },
    );
  });
}

const CREATE_PROBE_FILES = 200;

/**
 * Microseconds one file creation takes in `probe`, a new folder (200 empty files, kept until all
 * are made). A chain creates a file for every object version it writes and a folder for every new
 * key prefix; the loop, one output a partition. On some VM disks a create costs 25 times what it
 * costs in another folder of the same disk, so each round prints it. The files stay: the caller
 * removes the folder when no run is timed any more (see `main`'s lake copies).
 */
export function fileCreateUs(probe: string): number {
  mkdirSync(probe, { recursive: true });
  const start = performance.now();
  for (let i = 0; i < CREATE_PROBE_FILES; i++) closeSync(openSync(join(probe, String(i)), 'wx'));
  return ((performance.now() - start) * 1000) / CREATE_PROBE_FILES;
}

/** The `now` at which every hour of 2025-01-15 is eligible (minAge 1 h after the day's last hour). */
export const NOW = new Date(DAY_START_MS + 26 * HOUR_MS).toISOString();

/** `compactor run`'s arguments over the lake, as the bench and its profile both run it. */
export function runArgs(
  lake: string,
  workDir: string,
  concurrency: number | string,
  threads: number | string,
): string[] {
  return [
    'run',
    '--tier',
    'hourly',
    '--store',
    lake,
    '--now',
    NOW,
    '--quiet',
    '0',
    '--concurrency',
    String(concurrency),
    '--threads',
    String(threads),
    '--work-dir',
    workDir,
  ];
}

async function runProduct(
  lake: string,
  workDir: string,
  rssFile: string,
  opts: { concurrency: number; threads: number; productArgs: string[]; nodeArgs: string[] },
  cli = CLI,
  tool = 'product',
): Promise<RunSample> {
  const { wallMs, stdout } = await node(
    [
      ...opts.nodeArgs,
      '--import',
      join(BENCH_DIR, 'rss-at-exit.ts'),
      cli,
      ...runArgs(lake, workDir, opts.concurrency, opts.threads),
      '--json',
      ...opts.productArgs,
    ],
    { BENCH_RSS_FILE: rssFile },
  );
  const out = JSON.parse(stdout) as { summary?: { compacted?: number }; partitions?: { rows?: number }[] };
  return {
    tool,
    wallMs,
    ...(JSON.parse(await readFile(rssFile, 'utf8')) as { peakRssBytes: number; cpuMs: number }),
    partitions: out.summary?.compacted ?? 0,
    rows: out.partitions?.reduce((total, p) => total + (p.rows ?? 0), 0) ?? 0,
  };
}

async function runDuckDbLoop(lake: string, threads: number): Promise<RunSample> {
  const { wallMs, stdout } = await node([
    join(BENCH_DIR, 'small-partitions.ts'),
    '--worker',
    lake,
    '--threads',
    String(threads),
  ]);
  const out = JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}') as RunSample;
  return { ...out, wallMs };
}

/** The duckdb-loop process: every hour folder of every table in turn, one DuckDB instance. */
async function duckDbLoopWorker(lake: string, threads: number): Promise<void> {
  const { DuckDBInstance } = await import('@duckdb/node-api');
  const { parquetPath, quoteString } = await import('../functions/adapters/duckdb-engine/duckdb-engine.ts');
  const instance = await DuckDBInstance.create(':memory:', { threads: String(threads) });
  const connection = await instance.connect();
  let partitions = 0;
  let rows = 0;
  const db = join(lake, 'db');
  for (const table of (await readdir(db)).sort()) {
    const day = join(db, table, '2025', '01', '15');
    for (const hour of (await readdir(day)).sort()) {
      const folder = join(day, hour);
      const inputs = (await readdir(folder))
        .filter((n) => n.endsWith('.parquet'))
        .sort()
        .map((n) => join(folder, n));
      const out = join(folder, `compacted_${table}_${hour}.zstd.parquet.tmp`);
      const result = await connection.run(
        `COPY (SELECT * FROM read_parquet([${inputs.map(parquetPath).join(', ')}], union_by_name = true) ORDER BY time) ` +
          `TO ${quoteString(out)} (FORMAT parquet, COMPRESSION zstd)`,
      );
      rows += Number(result.rowsChanged);
      for (const input of inputs) await unlink(input);
      partitions++;
    }
  }
  connection.closeSync();
  instance.closeSync();
  const cpu = process.cpuUsage();
  process.stdout.write(
    `${JSON.stringify({ tool: 'duckdb', wallMs: 0, peakRssBytes: peakRssBytes(), cpuMs: (cpu.user + cpu.system) / 1000, partitions, rows })}\n`,
  );
}

/** The lake's shape, threads and folder, as this script and its profile take them. */
export const SHAPE_OPTIONS = {
  tables: { type: 'string', default: '20' },
  hours: { type: 'string', default: '24' },
  files: { type: 'string', default: '10' },
  rows: { type: 'string', default: '50' },
  threads: { type: 'string', default: '2' },
  dir: { type: 'string', default: '/tmp/small-partitions' },
} as const;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      worker: { type: 'string' },
      ...SHAPE_OPTIONS,
      concurrency: { type: 'string', default: '4' },
      runs: { type: 'string', default: '3' },
      only: { type: 'string' },
      'product-args': { type: 'string', default: '' },
      'node-args': { type: 'string', default: '' },
      /** name=path/to/functions/cli/main.ts,...: products of other trees, run in turn with the rest. */
      variants: { type: 'string', default: '' },
      keep: { type: 'boolean', default: false },
    },
  });
  const threads = Number(values.threads);
  if (values.worker) return duckDbLoopWorker(values.worker, threads);
  const shape: LakeShape = {
    tables: Number(values.tables),
    hours: Number(values.hours),
    files: Number(values.files),
    rows: Number(values.rows),
  };
  const partitions = shape.tables * shape.hours;
  const totalRows = partitions * shape.files * shape.rows;
  const dir = values.dir;
  const genRoot = join(dir, `gen-${shape.tables}x${shape.hours}x${shape.files}x${shape.rows}`);
  const marker = join(genRoot, 'done');
  if (!(await readFile(marker, 'utf8').catch(() => undefined))) {
    await rm(genRoot, { recursive: true, force: true });
    const t0 = performance.now();
    await generateSmallLake(genRoot, shape);
    await (await import('node:fs/promises')).writeFile(marker, 'ok');
    process.stderr.write(
      `generated ${partitions * shape.files} files in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`,
    );
  }
  const lakes = join(dir, 'run-lakes');
  const workDir = join(dir, 'work');
  const rssFile = join(dir, 'rss');
  const split = (s: string) => s.split(' ').filter(Boolean);
  const opts = {
    concurrency: Number(values.concurrency),
    threads,
    productArgs: split(values['product-args']),
    nodeArgs: split(values['node-args']),
  };
  // Every run gets a copy of its own, and no copy is removed before the last run: on an ext4
  // without a journal, as this VM's, a file created within a minute of many deletions in its
  // block group costs several times more (the inode allocator skips recently freed inodes one by
  // one), so deleting one run's lake just before the next would tax whichever tool creates more
  // files with the harness's own deletions. Each tool still pays for the deletions it makes.
  await rm(lakes, { recursive: true, force: true });
  let copies = 0;
  const fresh = async (hour?: string) => {
    const lake = join(lakes, String(copies++));
    const from = hour === undefined ? join(genRoot, 'lake') : join(genRoot, 'lake', hour);
    await cp(from, hour === undefined ? lake : join(lake, hour), {
      recursive: true,
      preserveTimestamps: true,
    });
    return lake;
  };
  // Warm-up: one hour folder, so the definition cache (synthesis, validation of the parent and
  // child definitions) and the page cache are warm before anything is timed.
  const firstHour = join('db', tableName(0), '2025', '01', '15', '00');
  const variants = new Map(
    values.variants
      .split(',')
      .filter(Boolean)
      .map((v) => v.split('=') as [string, string]),
  );
  // Each variant its own work dir: its definition cache is keyed by its own tree.
  const workOf = (tool: string) => (variants.has(tool) ? `${workDir}-${tool}` : workDir);
  await runProduct(await fresh(firstHour), workDir, rssFile, { ...opts, nodeArgs: [] });
  for (const [name, cli] of variants) {
    await runProduct(await fresh(firstHour), workOf(name), rssFile, { ...opts, nodeArgs: [] }, cli, name);
  }
  const tools = values.only ? values.only.split(',') : ['product', 'duckdb', ...variants.keys()];
  const samples: RoundSample[] = [];
  const runs = Number(values.runs);
  for (let round = 0; round < runs; round++) {
    // Who goes first changes every round (rotated, then reversed, for more than two).
    const rotated = [...tools.slice(round % tools.length), ...tools.slice(0, round % tools.length)];
    const order = round % 2 === 0 ? rotated : rotated.reverse();
    for (const tool of order) {
      const lake = await fresh();
      const createUs = fileCreateUs(`${lake}-create-probe`);
      const sample = {
        ...(tool === 'duckdb'
          ? await runDuckDbLoop(lake, threads)
          : await runProduct(lake, workOf(tool), rssFile, opts, variants.get(tool) ?? CLI, tool)),
        createUs,
      };
      if (sample.partitions !== partitions || sample.rows !== totalRows) {
        throw new Error(
          `${tool} compacted ${sample.partitions} of ${partitions} partitions, ${sample.rows} of ${totalRows} rows`,
        );
      }
      samples.push(sample);
      process.stderr.write(
        `round ${round} ${tool}: ${(sample.wallMs / 1000).toFixed(2)} s, CPU ${(sample.cpuMs / 1000).toFixed(2)} s, peak RSS ${(sample.peakRssBytes / 2 ** 20).toFixed(0)} MiB, a file create ${sample.createUs.toFixed(0)} us\n`,
      );
    }
  }
  // --keep: the copies stay, each as its run left it.
  if (!values.keep) await rm(lakes, { recursive: true, force: true });
  const of = (tool: string) => samples.filter((s) => s.tool === tool);
  const summary = Object.fromEntries(
    tools.map((tool) => [
      tool,
      {
        wallMs: median(of(tool).map((s) => s.wallMs)),
        cpuMs: median(of(tool).map((s) => s.cpuMs)),
        peakRssMiB: median(of(tool).map((s) => s.peakRssBytes)) / 2 ** 20,
        samplesMs: of(tool).map((s) => Math.round(s.wallMs)),
        cpuSamplesMs: of(tool).map((s) => Math.round(s.cpuMs)),
      },
    ]),
  );
  const p = summary.product;
  const d = summary.duckdb;
  const vsProduct = p
    ? Object.fromEntries(
        [...variants.keys()]
          .filter((name) => summary[name])
          .map((name) => [
            name,
            { wall: (summary[name]?.wallMs ?? 0) / p.wallMs, cpu: (summary[name]?.cpuMs ?? 0) / p.cpuMs },
          ]),
      )
    : {};
  process.stdout.write(
    `${JSON.stringify({
      shape,
      partitions,
      files: partitions * shape.files,
      rows: totalRows,
      concurrency: opts.concurrency,
      threads,
      loadavg: (await import('node:os')).loadavg(),
      fileCreateUs: {
        median: median(samples.map((x) => x.createUs)),
        min: Math.min(...samples.map((x) => x.createUs)),
        max: Math.max(...samples.map((x) => x.createUs)),
      },
      ...summary,
      variantsOverProduct: vsProduct,
      ...(p && d
        ? {
            wallRatio: p.wallMs / d.wallMs,
            cpuRatio: p.cpuMs / d.cpuMs,
            productMsPerPartition: p.wallMs / partitions,
            duckdbMsPerPartition: d.wallMs / partitions,
          }
        : {}),
    })}\n`,
  );
}

// Run as a script (the profile imports the generator).
if (process.argv[1] !== undefined && resolve(process.argv[1]) === import.meta.filename) await main();

/** What one run of this script prints last, as run.ts's `partitions` section keeps it. */
export interface SmallPartitionsResult {
  readonly shape: LakeShape;
  readonly partitions: number;
  readonly files: number;
  readonly rows: number;
  readonly concurrency: number;
  readonly product: { readonly wallMs: number; readonly cpuMs: number; readonly peakRssMiB: number };
  readonly duckdb: { readonly wallMs: number; readonly cpuMs: number; readonly peakRssMiB: number };
  readonly wallRatio: number;
  readonly cpuRatio: number;
  readonly productMsPerPartition: number;
  readonly duckdbMsPerPartition: number;
  /** One file creation in the lake's folder before each run, in microseconds (fileCreateUs). */
  readonly fileCreateUs?: { readonly median: number; readonly min: number; readonly max: number };
}

/** N's targets: the local run within 2x the one-process DuckDB loop, in at most 1.5 GiB. */
export const SMALL_PARTITIONS_TARGETS = { wallRatio: 2, peakRssMiB: 1536 } as const;

/** Runs this script in its own process (as `npm run bench` does) and reads its result. */
export async function runSmallPartitions(
  dir: string,
  shape: LakeShape,
  options: { readonly runs: number; readonly concurrency: number; readonly threads: number },
): Promise<SmallPartitionsResult> {
  const { stdout } = await node([
    import.meta.filename,
    '--dir',
    dir,
    '--tables',
    String(shape.tables),
    '--hours',
    String(shape.hours),
    '--files',
    String(shape.files),
    '--rows',
    String(shape.rows),
    '--runs',
    String(options.runs),
    '--concurrency',
    String(options.concurrency),
    '--threads',
    String(options.threads),
  ]);
  return JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}') as SmallPartitionsResult;
}

/** Where the profiled chain's time went, its three largest buckets first; or where to look. */
function chainCause(profile: PartitionProfile | undefined): string {
  if (!profile)
    return "the chain's local-store calls outweigh the merge (bench/small-partitions-profile.ts splits it)";
  const top = [...profile.buckets].sort((a, b) => b.msPerPartition - a.msPerPartition).slice(0, 3);
  const parts = top.map((b) => `${b.bucket} ${b.msPerPartition.toFixed(1)} ms`).join(', ');
  return `the profiled chain's largest buckets per partition: ${parts}, of ${profile.wallMsPerPartition.toFixed(1)} ms (see its profile)`;
}

/** What a file creation cost on this disk during the runs, when the result has it. */
function createCost(r: SmallPartitionsResult): string {
  const c = r.fileCreateUs;
  if (!c) return '';
  return `; creating a file took ${c.median.toFixed(0)} us here (${c.min.toFixed(0)}-${c.max.toFixed(0)}), which a chain pays for each object version and new folder it writes, the loop once a partition`;
}

export function smallPartitionsTargets(
  r: SmallPartitionsResult,
  profile?: PartitionProfile,
): { name: string; value: string; met: boolean; cause?: string }[] {
  const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  return [
    {
      name: `many small partitions: compactor run over ${r.partitions.toLocaleString('en-US')} partitions (${r.shape.tables} tables x ${r.shape.hours} h x ${r.shape.files} files) <= ${SMALL_PARTITIONS_TARGETS.wallRatio}x a one-process DuckDB loop`,
      value: `${r.wallRatio.toFixed(2)}x (${s(r.product.wallMs)} vs ${s(r.duckdb.wallMs)}; CPU ${r.cpuRatio.toFixed(2)}x)`,
      met: r.wallRatio <= SMALL_PARTITIONS_TARGETS.wallRatio,
      ...(r.wallRatio <= SMALL_PARTITIONS_TARGETS.wallRatio
        ? {}
        : {
            cause: `${r.productMsPerPartition.toFixed(0)} ms per partition against the loop's ${r.duckdbMsPerPartition.toFixed(0)} ms: ${chainCause(profile)}${createCost(r)}`,
          }),
    },
    {
      name: `many small partitions: peak RSS <= ${(SMALL_PARTITIONS_TARGETS.peakRssMiB / 1024).toFixed(1)} GiB`,
      value: `${r.product.peakRssMiB.toFixed(0)} MiB (the loop ${r.duckdb.peakRssMiB.toFixed(0)} MiB)`,
      met: r.product.peakRssMiB <= SMALL_PARTITIONS_TARGETS.peakRssMiB,
    },
  ];
}
