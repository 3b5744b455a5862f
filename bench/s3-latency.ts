/**
 * The latency-true S3 bench: the product's per-partition chain over the S3 path (the real SDK
 * and S3Store, as the Lambdas build them) against fauxqs, an in-process S3-protocol server,
 * behind bench/s3-shaper.ts, which adds Lambda -> S3 first-byte latency and a per-connection
 * bandwidth. Runs the three bench datasets and the three jobs the cost model prices (an Arc
 * hour, a Firehose hour, a full 2 GiB job). Measures the download concurrency reached,
 * multipart use on upload, and per Lambda step how long it waits on S3 alone versus computes.
 *
 * The stated S3 behaviour (https://josnyder.com/blog/2023/s3_observations.html, measured
 * in-region on warm keep-alive connections: about 15 ms to first byte and at most about 100 MB/s
 * for any single request; AWS's performance guidelines,
 * https://docs.aws.amazon.com/AmazonS3/latest/userguide/optimizing-performance-guidelines.html,
 * size one connection at 85-90 MB/s and state 100-200 ms for small objects as an upper range):
 * 25 ms first-byte latency (a margin over the measured 15 ms for Lambda's network path) and
 * 90 MB/s per connection. The shaper has no aggregate cap (Lambda's is not documented) and
 * fauxqs copies objects locally, so a server-side CopyObject of a large output is faster here.
 */

import { mkdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { URL } from 'node:url';
import { startFauxqs } from 'fauxqs';
import type { DuckDbEngine } from '../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { createS3Client, S3Store } from '../functions/adapters/s3-store/s3-store.ts';
import { writeSampleParquet } from '../functions/adapters/sample-data.ts';
import { forEachLimit } from '../functions/core/limit.ts';
import type { InputRef } from '../functions/core/manifest/manifest.ts';
import { runChild } from './child.ts';
import { DATASETS, type DatasetSpec, generateDataset, HOUR_START_MS } from './datasets.ts';
import { type Shaper, type ShaperStats, startShaper } from './s3-shaper.ts';
import type { S3RunResult, S3Task } from './s3-worker.ts';
import { verifyOutputs } from './verify.ts';
import type { WorkerResult, WorkerTask } from './worker.ts';

export const S3_FIRST_BYTE_LATENCY_MS = 25;
export const S3_BYTES_PER_SECOND = 90e6;
/**
 * Multipart part size of the bench's S3Store. The Lambda's S3Store uses 64 MiB (one PUT below
 * that), but fauxqs refuses request bodies over 11 MiB: here outputs over 8 MiB go up as
 * multipart uploads of 8 MiB parts, 4 in flight, which for outputs of 8-64 MiB is faster than
 * the Lambda's single PUT at one connection's bandwidth.
 */
export const S3_PART_BYTES = 8 * 2 ** 20;

export const S3_SOURCES = [
  'https://josnyder.com/blog/2023/s3_observations.html',
  'https://docs.aws.amazon.com/AmazonS3/latest/userguide/optimizing-performance-guidelines.html',
] as const;

export type CostJobId = 'arc-hour' | 'firehose-hour' | 'full-job' | 'small-partition';

export interface S3LatencyCase extends DatasetSpec {
  /** The cost model's job this run measures, if any. */
  readonly costJob?: CostJobId;
  /** How much smaller than the named job this run is (1, or 8 for --quick's big jobs). */
  readonly scale: number;
}

export interface S3Job {
  readonly id: string;
  readonly title: string;
  readonly costJob?: CostJobId;
  readonly scale: number;
  readonly files: number;
  readonly bytes: number;
  readonly rows: number;
  /** The run with the median compact wall time, its shaper counters, and every run's compact wall. */
  readonly run: S3RunResult;
  readonly shaper: ShaperStats;
  readonly compactWallMs: readonly number[];
  /**
   * A cost job's merge by raw DuckDB over the same files, read in place (bench/worker.ts
   * 'duckdb', the run with the median CPU time): the compute part of the job's floor.
   */
  readonly rawDuckDb?: { readonly wallMs: number; readonly cpuMs: number };
}

export interface S3LatencyResult {
  readonly firstByteLatencyMs: number;
  readonly bytesPerSecond: number;
  readonly sources: readonly string[];
  readonly jobs: readonly S3Job[];
}

const GIB = 2 ** 30;
const BUCKET = 'bench-lake';

/** Rows per file that give about `targetBytes` of the sample generator's snappy Parquet. */
async function rowsForFileBytes(engine: DuckDbEngine, dir: string, targetBytes: number): Promise<number> {
  let rows = Math.max(100, Math.round(targetBytes / 16));
  for (let i = 0; i < 2; i++) {
    const path = join(dir, `probe-${i}.parquet`);
    await writeSampleParquet(engine, path, {
      rows,
      firstId: 1,
      startTimeMs: HOUR_START_MS,
      spanMs: 3_600_000,
    });
    const size = (await stat(path)).size;
    await rm(path);
    rows = Math.max(100, Math.round((rows * targetBytes) / size));
  }
  return rows;
}

/** Bytes of one sample file of `rows` rows. */
async function fileBytesForRows(engine: DuckDbEngine, dir: string, rows: number): Promise<number> {
  const path = join(dir, 'probe-rows.parquet');
  await writeSampleParquet(engine, path, { rows, firstId: 1, startTimeMs: HOUR_START_MS, spanMs: 3_600_000 });
  const size = (await stat(path)).size;
  await rm(path);
  return size;
}

/** The Arc hour: 120 files of about 200 KB in one hour partition (the cost model's arc-hour job). */
export async function arcHourCase(engine: DuckDbEngine, dir: string): Promise<S3LatencyCase> {
  await mkdir(dir, { recursive: true });
  return {
    id: 'arc-hour',
    title: 'Arc hour: 120 files x 200 KB',
    files: 120,
    rowsPerFile: await rowsForFileBytes(engine, dir, 200_000),
    extraColumns: 0,
    costJob: 'arc-hour',
    scale: 1,
  };
}

/** The bench datasets, then the cost model's jobs (shrunk 8x by --quick, except the small Arc hour). */
export async function s3LatencyCases(
  engine: DuckDbEngine,
  dir: string,
  options: { readonly quick: boolean; readonly datasets: readonly string[] },
): Promise<S3LatencyCase[]> {
  const quick = options.quick;
  await mkdir(dir, { recursive: true });
  const shrink = quick ? 8 : 1;
  const rowsOf12K = await rowsForFileBytes(engine, dir, 12_000);
  const rowsOf64M = await rowsForFileBytes(engine, dir, 64e6 / shrink);
  const fileOf50K = await fileBytesForRows(engine, dir, 50_000);
  const fullFiles = Math.min(5000, Math.floor((2 * GIB) / shrink / fileOf50K));
  // The cost model prices the job that ran: a quick run's rows are for the 1/8 job, and say so.
  const suffix = quick ? ' (quick: 1/8 size)' : '';
  return [
    ...DATASETS.filter((d) => options.datasets.includes(d.id)).map((d) => ({ ...d, scale: 1 })),
    await arcHourCase(engine, dir),
    {
      // The most common lake's partition: thousands of them a cycle (cost.ts prices the cycle).
      id: 'small-partition',
      title: 'small partition-hour: 10 files x 12 KB',
      files: 10,
      rowsPerFile: rowsOf12K,
      extraColumns: 0,
      costJob: 'small-partition',
      scale: 1,
    },
    {
      id: 'firehose-hour',
      title: `Firehose hour: 12 files x 64 MB${suffix}`,
      files: 12,
      rowsPerFile: rowsOf64M,
      extraColumns: 0,
      costJob: 'firehose-hour',
      scale: shrink,
    },
    {
      id: 'full-job',
      title: `full 2 GiB job: files of 50,000 rows${suffix}`,
      files: fullFiles,
      rowsPerFile: 50_000,
      extraColumns: 0,
      costJob: 'full-job',
      scale: shrink,
    },
  ];
}

export async function runS3Latency(
  engine: DuckDbEngine,
  dir: string,
  options: {
    readonly jobs: readonly S3LatencyCase[];
    readonly runs: (spec: S3LatencyCase) => number;
    readonly threads: number;
    readonly memoryLimit: string;
    readonly log: (line: string) => void;
  },
): Promise<S3LatencyResult> {
  const { shaper, direct, close } = await startLatencyTrueS3(dir);
  const jobs: S3Job[] = [];
  try {
    for (const spec of options.jobs) {
      const t = Date.now();
      const ds = await generateDataset(engine, join(dir, 'data'), spec);
      const upload = async (): Promise<InputRef[]> => {
        const inputs: InputRef[] = new Array(ds.keys.length);
        await forEachLimit([...ds.keys], 16, async (key, i) => {
          const { etag } = await direct.put(key, { file: ds.paths[i] as string });
          inputs[i] = { key, size: (await stat(ds.paths[i] as string)).size, etag };
        });
        return inputs;
      };
      options.log(
        `s3 ${spec.id}: ${ds.files} files, ${(ds.bytes / 1e6).toFixed(1)} MB (generated in ${((Date.now() - t) / 1000).toFixed(0)} s)`,
      );
      const runs: { run: S3RunResult; shaper: ShaperStats }[] = [];
      for (let n = 0; n < options.runs(spec); n++) {
        const inputs = await upload();
        const runDir = join(dir, 'runs', `${spec.id}-${n}`);
        shaper.resetStats();
        const run = await runChain(shaper.endpoint, ds.partition, inputs, runDir, options);
        const stats = shaper.stats();
        const paths: string[] = [];
        for (const key of run.outputKeys) {
          const path = join(runDir, `out-${paths.length}.parquet`);
          await direct.getToFile(key, path);
          paths.push(path);
        }
        await verifyOutputs(engine, `s3/${spec.id}`, paths, ds.rows, true);
        await deleteAll(direct);
        await rm(runDir, { recursive: true, force: true });
        runs.push({ run, shaper: stats });
        const compact = run.steps.find((s) => s.step === 'compact');
        options.log(
          `  compact ${((compact?.wallMs ?? 0) / 1000).toFixed(2)} s (S3 only ${((compact?.s3OnlyMs ?? 0) / 1000).toFixed(2)} s, ` +
            `engine ${((compact?.engineBusyMs ?? 0) / 1000).toFixed(2)} s), downloads in flight ${run.maxConcurrentDownloads}/${run.plannedConcurrency}, ` +
            `chain ${(run.steps.reduce((sum, s) => sum + s.wallMs, 0) / 1000).toFixed(2)} s`,
        );
      }
      const rawDuckDb = spec.costJob
        ? await rawDuckDbMerge(engine, ds.paths, ds.rows, join(dir, 'runs', `${spec.id}-duckdb`), {
            ...options,
            runs: options.runs(spec),
          })
        : undefined;
      if (rawDuckDb) {
        options.log(
          `  raw DuckDB in place ${(rawDuckDb.wallMs / 1000).toFixed(2)} s, cpu ${(rawDuckDb.cpuMs / 1000).toFixed(2)} s`,
        );
      }
      await rm(ds.storeRoot, { recursive: true, force: true });
      const compactWall = (r: S3RunResult) => r.steps.find((s) => s.step === 'compact')?.wallMs ?? 0;
      const walls = runs.map((r) => compactWall(r.run));
      const chosen = [...runs].sort((a, b) => compactWall(a.run) - compactWall(b.run))[
        Math.floor(runs.length / 2)
      ];
      if (!chosen) throw new Error(`s3 ${spec.id}: no run`);
      jobs.push({
        id: spec.id,
        title: spec.title,
        ...(spec.costJob ? { costJob: spec.costJob } : {}),
        scale: spec.scale,
        files: ds.files,
        bytes: ds.bytes,
        rows: ds.rows,
        run: chosen.run,
        shaper: chosen.shaper,
        compactWallMs: walls,
        ...(rawDuckDb ? { rawDuckDb } : {}),
      });
    }
  } finally {
    await close();
  }
  return {
    firstByteLatencyMs: S3_FIRST_BYTE_LATENCY_MS,
    bytesPerSecond: S3_BYTES_PER_SECOND,
    sources: S3_SOURCES,
    jobs,
  };
}

/**
 * Raw DuckDB's merge of the local `paths` (the compare section's 'duckdb' tool), `runs` times in
 * its own process; the run with the median CPU time, its output verified.
 */
async function rawDuckDbMerge(
  engine: DuckDbEngine,
  paths: readonly string[],
  rows: number,
  runDir: string,
  options: { readonly runs: number; readonly threads: number },
): Promise<{ readonly wallMs: number; readonly cpuMs: number }> {
  const results: WorkerResult[] = [];
  for (let n = 0; n < options.runs; n++) {
    await mkdir(runDir, { recursive: true });
    const task: WorkerTask = {
      tool: 'duckdb',
      storeRoot: runDir,
      partition: '',
      paths,
      runDir,
      threads: options.threads,
    };
    try {
      const result = await runChild<WorkerResult>('worker.ts', task, join(runDir, 'task.json'));
      await verifyOutputs(engine, 'raw DuckDB', result.outputs, rows, true);
      results.push(result);
    } finally {
      await rm(runDir, { recursive: true, force: true });
    }
  }
  const median = [...results].sort((a, b) => a.cpuMs - b.cpuMs)[Math.floor(results.length / 2)];
  if (!median) throw new Error('raw DuckDB: no run');
  return { wallMs: median.wallMs, cpuMs: median.cpuMs };
}

/**
 * The product's per-partition chain over `inputs` in its own process (bench/s3-worker.ts), its
 * S3 client pointed at `endpoint`; its work files under `runDir`.
 */
export async function runChain(
  endpoint: string,
  partition: string,
  inputs: readonly InputRef[],
  runDir: string,
  options: { readonly threads: number; readonly memoryLimit: string },
): Promise<S3RunResult> {
  await mkdir(runDir, { recursive: true });
  const task: S3Task = {
    endpoint,
    bucket: BUCKET,
    partition,
    inputs,
    runDir,
    threads: options.threads,
    memoryLimit: options.memoryLimit,
    partSizeBytes: S3_PART_BYTES,
  };
  return runChild<S3RunResult>('s3-worker.ts', task, join(runDir, 'task.json'));
}

export interface LatencyTrueS3 {
  readonly bucket: string;
  /** The shaper in front of the server: point measured clients at shaper.endpoint. */
  readonly shaper: Shaper;
  /** Straight to the server, unshaped: for setup and checks, never measured. */
  readonly direct: S3Store;
  readonly close: () => Promise<void>;
}

/** fauxqs with the bench's bucket, storing objects under `dir`, behind the latency shaper. */
export async function startLatencyTrueS3(dir: string): Promise<LatencyTrueS3> {
  await mkdir(dir, { recursive: true });
  // Objects on disk, not in the server's memory: the full job holds 2 GiB.
  const server = await startFauxqs({
    port: 0,
    host: '127.0.0.1',
    logger: false,
    s3StorageDir: join(dir, 'fauxqs'),
  });
  server.createBucket(BUCKET);
  const target = new URL(server.address);
  const shaper = await startShaper({
    targetHost: target.hostname,
    targetPort: Number(target.port),
    firstByteLatencyMs: S3_FIRST_BYTE_LATENCY_MS,
    bytesPerSecond: S3_BYTES_PER_SECOND,
  });
  const client = createS3Client({
    endpoint: server.address,
    region: 'us-east-1',
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
  });
  return {
    bucket: BUCKET,
    shaper,
    direct: new S3Store({ client, bucket: BUCKET, partSizeBytes: 5 * 2 ** 20 }),
    close: async () => {
      client.destroy();
      await shaper.close();
      await server.stop();
    },
  };
}

export async function deleteAll(store: S3Store): Promise<void> {
  const keys: { key: string }[] = [];
  for await (const object of store.list('')) keys.push({ key: object.key });
  for (let i = 0; i < keys.length; i += 1000) await store.deleteMany(keys.slice(i, i + 1000));
}
