/**
 * One measured run of one tool, in its own process (so tools never share a heap and each peak
 * RSS is its own): `node bench/worker.ts <task.json>`. Prints one JSON line (WorkerResult).
 * Setup (engine creation, module loading, listing the inputs) is not timed; the timed part is
 * what a tool does to turn the inputs into one sorted ZSTD Parquet file.
 */

import { randomBytes } from 'node:crypto';
import { copyFile, mkdir, open, readFile, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { DuckDBConnection, DuckDBInstance } from '@duckdb/node-api';
import { peakRssBytes } from './peak-rss.ts';

export type Tool =
  | 'product'
  | 'duckdb'
  | 'polars-scan'
  | 'polars-sink'
  | 'polars-read'
  | 'floor'
  | 'fetch'
  | 'write'
  | 'footers';

export interface WorkerTask {
  readonly tool: Tool;
  readonly storeRoot: string;
  readonly partition: string;
  readonly paths: readonly string[];
  /** Scratch folder of this run (outputs of the peers, the product's work dir). */
  readonly runDir: string;
  readonly threads: number;
  /** The product's DuckDB memory limit (the compact Lambda's). */
  readonly memoryLimit?: string;
  /** floor: bytes to write (the product's output size). */
  readonly floorBytes?: number;
}

export interface WorkerResult {
  readonly tool: Tool;
  readonly wallMs: number;
  /** User + system CPU of the whole process during the timed part (all threads). */
  readonly cpuMs: number;
  /** Peak resident set of the process (VmHWM; see peak-rss.ts). */
  readonly maxRssBytes: number;
  readonly outputs: readonly string[];
  readonly outputBytes: number;
  readonly outputRows?: number;
  /** product: wall-clock spans of the parts of the compact step. */
  readonly phases?: Readonly<Record<string, number>>;
  readonly status?: string;
  /** product: the engine that wrote the merge (core/merge-engine.ts). */
  readonly mergeEngine?: string;
  /** product: bytes the engine spilled to its temp directory (peak seen while running). */
  readonly spillPeakBytes?: number;
}

function cpuMsSince(start: NodeJS.CpuUsage): number {
  const used = process.cpuUsage(start);
  return (used.user + used.system) / 1000;
}

async function sizeOf(paths: readonly string[]): Promise<number> {
  let total = 0;
  for (const path of paths) total += (await stat(path)).size;
  return total;
}

/** Times one DuckDB statement that writes `out`, then closes the database. */
async function timeDuckDbWrite(
  task: WorkerTask,
  instance: DuckDBInstance,
  connection: DuckDBConnection,
  sql: string,
  out: string,
): Promise<WorkerResult> {
  const cpu = process.cpuUsage();
  const start = performance.now();
  await connection.run(sql);
  const wallMs = performance.now() - start;
  const cpuMs = cpuMsSince(cpu);
  connection.closeSync();
  instance.closeSync();
  return { tool: task.tool, wallMs, cpuMs, maxRssBytes: 0, outputs: [out], outputBytes: await sizeOf([out]) };
}

async function runDuckDb(task: WorkerTask): Promise<WorkerResult> {
  const { DuckDBInstance } = await import('@duckdb/node-api');
  const { parquetPath, quoteString } = await import('../functions/adapters/duckdb-engine/duckdb-engine.ts');
  const instance = await DuckDBInstance.create(':memory:', { threads: String(task.threads) });
  const connection = await instance.connect();
  const out = join(task.runDir, 'duckdb.parquet');
  const sql =
    `COPY (SELECT * FROM read_parquet([${task.paths.map(parquetPath).join(', ')}], union_by_name = true) ORDER BY time) ` +
    `TO ${quoteString(out)} (FORMAT parquet, COMPRESSION zstd)`;
  return timeDuckDbWrite(task, instance, connection, sql, out);
}

/**
 * DuckDB's Parquet writer alone: the rows already read and sorted as the product sorts them (by
 * time, then input; tag strings as the ENUMs compact uses for large jobs), held in memory, written
 * to one ZSTD file with the product's row groups. Only the write is timed: what a DuckDB merge
 * pays after its sort, whatever it is tuned to.
 */
async function runWrite(task: WorkerTask): Promise<WorkerResult> {
  const { DuckDBInstance } = await import('@duckdb/node-api');
  const { describe, enumTypes, quoteIdentifier, quoteString, readAll } = await import(
    '../functions/adapters/duckdb-engine/duckdb-engine.ts'
  );
  const { parseConfig } = await import('../functions/core/config.ts');
  const config = parseConfig({});
  const instance = await DuckDBInstance.create(':memory:', {
    threads: String(task.threads),
    ...(task.memoryLimit ? { memory_limit: task.memoryLimit } : {}),
  });
  const connection = await instance.connect();
  const read = async (sql: string) => (await connection.runAndReadAll(sql)).getRowObjectsJS();
  const source = readAll(task.paths);
  const columns = await describe(connection, source);
  const enums = await enumTypes(read, source, columns, [config.timeColumn], await sizeOf(task.paths));
  const casts = columns.map(
    (c) => `CAST(${quoteIdentifier(c.name)} AS ${enums.get(c.name) ?? c.type}) AS ${quoteIdentifier(c.name)}`,
  );
  await connection.run(
    `CREATE TEMP TABLE sorted AS SELECT ${casts.join(', ')} FROM ${source} ` +
      `ORDER BY ${quoteIdentifier(config.timeColumn)} ASC NULLS LAST, file_index`,
  );
  const out = join(task.runDir, 'write.parquet');
  const sql =
    `COPY (SELECT * FROM sorted) TO ${quoteString(out)} ` +
    `(FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE ${config.rowGroupSize})`;
  return timeDuckDbWrite(task, instance, connection, sql, out);
}

async function runPolars(task: WorkerTask): Promise<WorkerResult> {
  const { default: pl } = await import('nodejs-polars');
  const out = join(task.runDir, `${task.tool}.parquet`);
  const glob = join(task.storeRoot, ...task.partition.split('/'), '*.parquet');
  const cpu = process.cpuUsage();
  const start = performance.now();
  if (task.tool === 'polars-scan') {
    const df = await pl.scanParquet(glob).sort('time').collect();
    df.writeParquet(out, { compression: 'zstd' });
  } else if (task.tool === 'polars-sink') {
    await pl.scanParquet(glob).sort('time').sinkParquet(out, { compression: 'zstd' }).collect();
  } else {
    const frames = task.paths.map((path) => pl.readParquet(path));
    const df = pl.concat(frames).sort({ by: 'time', multithreaded: true });
    df.writeParquet(out, { compression: 'zstd' });
  }
  const wallMs = performance.now() - start;
  const cpuMs = cpuMsSince(cpu);
  return { tool: task.tool, wallMs, cpuMs, maxRssBytes: 0, outputs: [out], outputBytes: await sizeOf([out]) };
}

/** The I/O floor: read every input byte, write as many bytes as the product's output. */
async function runFloor(task: WorkerTask): Promise<WorkerResult> {
  const out = join(task.runDir, 'floor.bin');
  const body = Buffer.alloc(task.floorBytes ?? 0, 7);
  const cpu = process.cpuUsage();
  const start = performance.now();
  let read = 0;
  let next = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < task.paths.length) {
        const path = task.paths[next++] as string;
        read += (await readFile(path)).length;
      }
    }),
  );
  const handle = await open(out, 'w');
  try {
    await handle.writeFile(body);
  } finally {
    await handle.close();
  }
  const wallMs = performance.now() - start;
  const cpuMs = cpuMsSince(cpu);
  if (read === 0 && task.paths.length > 0) throw new Error('floor read nothing');
  return { tool: task.tool, wallMs, cpuMs, maxRssBytes: 0, outputs: [], outputBytes: body.length };
}

/**
 * The fetch floor: what any tool that must first bring the inputs to local disk pays before it
 * merges. Each input copied (kernel copy) to a new local file in a new folder, laid out and paced
 * as the compact step downloads (its folders, its concurrency), then the folder removed.
 */
async function runFetch(task: WorkerTask): Promise<WorkerResult> {
  const { downloadConcurrency, inputPaths } = await import('../functions/core/protocol.ts');
  const { forEachLimit } = await import('../functions/core/limit.ts');
  const sizes = await Promise.all(task.paths.map(async (path) => ({ path, size: (await stat(path)).size })));
  const dir = join(task.runDir, 'fetch');
  const cpu = process.cpuUsage();
  const start = performance.now();
  await mkdir(dir);
  const destinations = inputPaths(dir, sizes.length);
  const copies = sizes.map(({ path }, i) => ({ path, dest: destinations[i] as string }));
  await forEachLimit(copies, downloadConcurrency(sizes), ({ path, dest }) => copyFile(path, dest));
  await rm(dir, { recursive: true, force: true });
  const wallMs = performance.now() - start;
  const cpuMs = cpuMsSince(cpu);
  return { tool: task.tool, wallMs, cpuMs, maxRssBytes: 0, outputs: [], outputBytes: 0 };
}

/** Exactly what the compact Lambda runs for one partition: compactStep (claim, then stage). */
/**
 * Issue 14 item 3, one footer pass: the compact step validates every input's footer before the
 * merge (DuckDbEngine.inspect: the JS footer reader per file, one DESCRIBE per distinct schema,
 * DuckDB's own per-file check only for a file that fails). Timed against DuckDB's one query over
 * the whole list (parquet_file_metadata and parquet_metadata: the same row and chunk checks), both
 * over the same local files in this process, alternating, the median of three each.
 */
async function runFooters(task: WorkerTask): Promise<WorkerResult> {
  const { DuckDbEngine } = await import('../functions/adapters/duckdb-engine/duckdb-engine.ts');
  const { parquetPath } = await import('../functions/core/duckdb-sql.ts');
  const list = `[${task.paths.map(parquetPath).join(', ')}]`;
  const listPass = `SELECT f.file_name, f.num_rows, m.row_group_rows, m.chunk_end, f.file_size_bytes
       FROM parquet_file_metadata(${list}) AS f
       JOIN (SELECT file_name, sum(n) AS row_group_rows, max(e) AS chunk_end
               FROM (SELECT file_name, row_group_id, any_value(row_group_num_rows) AS n,
                            max(data_page_offset + total_compressed_size) AS e
                       FROM parquet_metadata(${list}) GROUP BY file_name, row_group_id)
              GROUP BY file_name) AS m USING (file_name)`;
  const product: number[] = [];
  const duckdb: number[] = [];
  let cpuMs = 0;
  for (let round = 0; round < 3; round++) {
    // A fresh engine each round: the product's DESCRIBE cache lives as long as one compact Lambda.
    const engine = await DuckDbEngine.create({
      threads: task.threads,
      ...(task.memoryLimit ? { memoryLimit: task.memoryLimit } : {}),
    });
    const cpu = process.cpuUsage();
    let start = performance.now();
    const infos = await Promise.all(task.paths.map((path) => engine.inspect(path)));
    product.push(performance.now() - start);
    cpuMs += cpuMsSince(cpu);
    start = performance.now();
    const rows = await engine.query(listPass);
    duckdb.push(performance.now() - start);
    if (rows.length !== infos.length)
      throw new Error(`list pass saw ${rows.length} of ${infos.length} files`);
    await engine.close();
  }
  const mid = (values: number[]) => [...values].sort((a, b) => a - b)[1] as number;
  return {
    tool: task.tool,
    wallMs: mid(product),
    cpuMs: cpuMs / 3,
    maxRssBytes: 0,
    outputs: [],
    outputBytes: 0,
    phases: { 'product footer pass': mid(product), 'DuckDB list pass': mid(duckdb) },
  };
}

async function runProduct(task: WorkerTask): Promise<WorkerResult> {
  const { DuckDbEngine } = await import('../functions/adapters/duckdb-engine/duckdb-engine.ts');
  const { loadPolarsWriter } = await import('../functions/adapters/polars-engine/polars-engine.ts');
  const { megabytes } = await import('../functions/lambda/compact-engine.ts');
  const { LocalFolderStore } = await import('../functions/adapters/local-store/local-store.ts');
  const { parseConfig } = await import('../functions/core/config.ts');
  const { systemClock } = await import('../functions/core/engine.ts');
  const { newJobId } = await import('../functions/core/manifest/manifest.ts');
  const { compactStep } = await import('../functions/core/protocol.ts');
  const { loadManifest } = await import('../functions/core/manifest/manifest-cas.ts');
  const { TimedEngine, TimedStore } = await import('./timed.ts');

  const config = parseConfig({ quietSeconds: 0 });
  const inner = new LocalFolderStore(task.storeRoot);
  const inputs: { key: string; size: number; etag: string }[] = [];
  for await (const object of inner.list(task.partition)) {
    if (object.key.endsWith('.parquet'))
      inputs.push({ key: object.key, size: object.size, etag: object.etag });
  }
  const workDir = join(task.runDir, 'work');
  const spillDir = join(workDir, 'spill');
  await mkdir(spillDir, { recursive: true });
  // As functions/compact.ts builds it in the Lambda: spill under the work dir, the stack's
  // limits, polars for the merges the core gives it (lambda/compact-engine.ts).
  const memoryLimitBytes = megabytes(task.memoryLimit);
  const polars = await loadPolarsWriter({
    onUnavailable: (reason) => process.stderr.write(`${reason}\n`),
    threads: task.threads,
    ...(memoryLimitBytes !== undefined ? { memoryLimitBytes } : {}),
  });
  const duck = await DuckDbEngine.create({
    tempDirectory: spillDir,
    threads: task.threads,
    ...(task.memoryLimit ? { memoryLimit: task.memoryLimit } : {}),
    ...(polars ? { mergeWriters: [polars] } : {}),
  });
  const store = new TimedStore(inner);
  const engine = new TimedEngine(duck);
  const spill = new SpillWatcher(spillDir);
  const job = {
    tier: 'hourly' as const,
    partition: task.partition,
    jobId: newJobId(new Date(), () => randomBytes(4).toString('hex')),
    executionId: `bench-${process.pid}`,
    inputs,
  };
  const deps = { store, config, clock: systemClock, engine, workDir };
  spill.start();
  const cpu = process.cpuUsage();
  const start = performance.now();
  const result = await compactStep(deps, job);
  const wallMs = performance.now() - start;
  const cpuMs = cpuMsSince(cpu);
  await spill.stop();
  await duck.close();
  if (result.status !== 'done' || result.state !== 'staged') {
    throw new Error(`compactStep ended ${result.status}/${result.state}: ${result.reason ?? ''}`);
  }
  const loaded = await loadManifest({ store: inner, config, clock: systemClock }, job.tier, job.partition);
  const outputs = (loaded?.manifest.outputs ?? []).map((o) =>
    join(task.storeRoot, ...o.stagingKey.split('/')),
  );
  return {
    tool: task.tool,
    wallMs,
    cpuMs,
    maxRssBytes: 0,
    outputs,
    outputBytes: result.outputBytes ?? 0,
    outputRows: result.outputRows ?? 0,
    phases: { ...store.phases(start), ...engine.phases(start) },
    status: `${result.status}/${result.state}`,
    ...(result.mergeEngine ? { mergeEngine: result.mergeEngine } : {}),
    spillPeakBytes: spill.peak,
  };
}

/** Polls the engine's temp directory while it runs: proof that a large job spilled. */
class SpillWatcher {
  readonly #dir: string;
  #timer: NodeJS.Timeout | undefined;
  #busy = false;
  peak = 0;

  constructor(dir: string) {
    this.#dir = dir;
  }

  start(): void {
    this.#timer = setInterval(() => void this.#sample(), 100);
  }

  async #sample(): Promise<void> {
    if (this.#busy) return;
    this.#busy = true;
    try {
      const { readdir } = await import('node:fs/promises');
      let total = 0;
      for (const name of await readdir(this.#dir).catch(() => [] as string[])) {
        total += await stat(join(this.#dir, name)).then(
          (s) => (s.isFile() ? s.size : 0),
          () => 0,
        );
      }
      this.peak = Math.max(this.peak, total);
    } finally {
      this.#busy = false;
    }
  }

  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    await this.#sample();
  }
}

async function main(): Promise<void> {
  const taskFile = process.argv[2];
  if (!taskFile) throw new Error('usage: node bench/worker.ts <task.json>');
  const task = JSON.parse(await readFile(taskFile, 'utf8')) as WorkerTask;
  await mkdir(task.runDir, { recursive: true });
  let result: WorkerResult;
  switch (task.tool) {
    case 'product':
      result = await runProduct(task);
      break;
    case 'duckdb':
      result = await runDuckDb(task);
      break;
    case 'polars-scan':
    case 'polars-sink':
    case 'polars-read':
      result = await runPolars(task);
      break;
    case 'floor':
      result = await runFloor(task);
      break;
    case 'fetch':
      result = await runFetch(task);
      break;
    case 'write':
      result = await runWrite(task);
      break;
    case 'footers':
      result = await runFooters(task);
      break;
    default:
      throw new Error(`unknown tool ${String(task.tool)}`);
  }
  const maxRssBytes = peakRssBytes();
  process.stdout.write(`${JSON.stringify({ ...result, maxRssBytes })}\n`);
}

await main();
