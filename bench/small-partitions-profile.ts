/**
 * Where one partition's chain goes in `compactor run --tier hourly` over many small partitions
 * (bench/small-partitions.ts's lake). Runs the command's own path in this process (store guard,
 * synthesized definition from the cache, runWorkflowLocally, the handlers bound in-process) with
 * instrumentation, best at --concurrency 1 so the times add up per partition:
 *
 * - every LocalFolderStore call (count, ms), by method and by what the key is (manifest, plan,
 *   staging, data, results, ...); fsyncs (FileHandle.sync and fs.fsync, file or folder) counted
 *   inside them;
 * - every DuckDbEngine call and every DuckDB statement (by its first words), and connects;
 * - each Lambda handler's time (runWorkflowLocally's onStep: middy + Powertools + the step);
 * - each aws-local-stepfunctions execution (StateMachine.run until its result), the parent's and
 *   each child's.
 *
 * The interpreter's share is a child execution's time minus its handlers' time; the handlers'
 * remainder (handler minus store and engine time inside it) is the middy/Powertools wrapping plus
 * the steps' own JS. The same calls, kept as spans, are split into bench/partition-profile.ts's
 * buckets per partition (its `buckets`, which add up to the wall time per partition); `npm run
 * bench` runs this script in its `partitions` section (runPartitionProfile) and reports those.
 *
 *   node bench/small-partitions-profile.ts [--tables 20] [--hours 24] [--files 10] [--rows 50]
 *     [--concurrency 1] [--threads 2] [--dir /tmp/small-partitions]
 */

import { AsyncLocalStorage } from 'node:async_hooks';
import { tracingChannel } from 'node:diagnostics_channel';
import type { FileHandle } from 'node:fs/promises';
import * as fsp from 'node:fs/promises';
import { cp, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { syncBuiltinESMExports } from 'node:module';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { SPAN_CHANNEL, type SpanContext } from '../functions/local-runner/timing-spans.ts';
import { type ProfiledSpan, partitionBuckets } from './partition-profile.ts';
import { generateSmallLake, NOW, runArgs, SHAPE_OPTIONS, tableName } from './small-partitions.ts';

interface Tally {
  n: number;
  ms: number;
}
const tallies = new Map<string, Tally>();
/** The store call an fsync or lock is made in (its label), to count them per kind of store call. */
const inStoreCall = new AsyncLocalStorage<string>();
/** The same calls as spans, with the step handler each ran in, for the buckets. */
const spans: ProfiledSpan[] = [];
const inStep = new AsyncLocalStorage<string>();
function span(
  kind: ProfiledSpan['kind'],
  start: number,
  extra: { keyKind?: string; step?: string } = {},
): void {
  const step = extra.step ?? inStep.getStore();
  spans.push({
    kind,
    start,
    end: performance.now(),
    ...(step !== undefined ? { step } : {}),
    ...(extra.keyKind !== undefined ? { keyKind: extra.keyKind } : {}),
  });
}
function add(name: string, ms: number): void {
  const t = tallies.get(name) ?? { n: 0, ms: 0 };
  t.n++;
  t.ms += ms;
  tallies.set(name, t);
}

/** What a store key is, for the report. */
function keyKind(key: unknown): string {
  if (Array.isArray(key)) return keyKind((key[0] as { key?: unknown } | undefined)?.key);
  if (typeof key !== 'string') return 'other';
  const m = /_compaction\/([a-z]+)\//.exec(key);
  if (m) return m[1] as string;
  if (key.includes('_compaction/')) return 'state-root';
  return key.endsWith('.parquet') ? 'data' : 'data-prefix';
}

// fsyncs: FileHandle.sync (a file's, or a folder's elsewhere), told apart by the path `open` opened
// (durable-fs imports open by name), and fs.fsync (the local store's folders: durable-fs fsyncDir).
const handlePaths = new WeakMap<FileHandle, string>();
const realOpen = fsp.open;
(fsp as unknown as { default: typeof fsp }).default.open = (async (path: string, ...rest: unknown[]) => {
  const handle = await (realOpen as (...a: unknown[]) => Promise<FileHandle>)(path, ...rest);
  handlePaths.set(handle, String(path));
  return handle;
}) as typeof fsp.open;
// The store's synchronous metadata calls (durable-fs.ts, the lock, reads), timed by call and store call.
{
  const fsDefault = (await import('node:fs')).default as unknown as Record<
    string,
    (...a: unknown[]) => unknown
  >;
  for (const name of [
    'unlinkSync',
    'renameSync',
    'linkSync',
    'rmdirSync',
    'mkdirSync',
    'writeFileSync',
    'statSync',
    'lstatSync',
    'openSync',
    'readdirSync',
  ]) {
    const real = fsDefault[name] as (...a: unknown[]) => unknown;
    fsDefault[name] = function (this: unknown, ...args: unknown[]) {
      const where = inStoreCall.getStore();
      if (where === undefined) return real.apply(this, args);
      const start = performance.now();
      try {
        return real.apply(this, args);
      } finally {
        add(`sync:${name} in ${where}`, performance.now() - start);
      }
    };
  }
}
{
  const fsDefault = (await import('node:fs')).default as unknown as Record<string, unknown>;
  const realFsync = fsDefault.fsync as (fd: number, callback: (error: Error | null) => void) => void;
  fsDefault.fsync = function (this: unknown, fd: number, callback: (error: Error | null) => void) {
    const start = performance.now();
    const where = inStoreCall.getStore();
    realFsync.call(this, fd, (error) => {
      const ms = performance.now() - start;
      span('fsync', start);
      add('fsync:dir', ms);
      add(`fsync:dir in ${where ?? 'no store call'}`, ms);
      callback(error);
    });
  };
}
syncBuiltinESMExports();
{
  const probe = await realOpen(import.meta.filename, 'r');
  const proto = Object.getPrototypeOf(probe) as FileHandle;
  await probe.close();
  const realSync = proto.sync;
  proto.sync = async function (this: FileHandle) {
    const start = performance.now();
    try {
      return await realSync.call(this);
    } finally {
      const path = handlePaths.get(this) ?? '';
      const dir = !/\.[a-z]+$|\/data$|\/[0-9a-f-]{8,}$/.test(path);
      const ms = performance.now() - start;
      span('fsync', start);
      add(`fsync:${dir ? 'dir' : 'file'}`, ms);
      add(`fsync:${dir ? 'dir' : 'file'} in ${inStoreCall.getStore() ?? 'no store call'}`, ms);
    }
  };
}

function wrapMethods(
  proto: Record<string, unknown>,
  names: readonly string[],
  label: (name: string, args: unknown[]) => string,
  kind?: (args: unknown[]) => { kind: 'store' | 'engine'; keyKind?: string },
): void {
  for (const name of names) {
    const real = proto[name] as (...a: unknown[]) => unknown;
    if (typeof real !== 'function') continue;
    if (name === 'list') {
      proto[name] = function (this: unknown, ...args: unknown[]) {
        const self = this;
        return (async function* () {
          const start = performance.now();
          try {
            yield* real.apply(self, args) as AsyncIterable<unknown>;
          } finally {
            add(label(name, args), performance.now() - start);
            if (kind) span(kind(args).kind, start, kind(args));
          }
        })();
      };
      continue;
    }
    proto[name] = async function (this: unknown, ...args: unknown[]) {
      const start = performance.now();
      try {
        const call = () => real.apply(this, args);
        return await (label(name, args).startsWith('store:')
          ? inStoreCall.run(label(name, args), call)
          : call());
      } finally {
        add(label(name, args), performance.now() - start);
        if (kind) span(kind(args).kind, start, kind(args));
      }
    };
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      ...SHAPE_OPTIONS,
      concurrency: { type: 'string', default: '1' },
    },
  });
  const shape = {
    tables: Number(values.tables),
    hours: Number(values.hours),
    files: Number(values.files),
    rows: Number(values.rows),
  };
  const partitions = shape.tables * shape.hours;
  const genRoot = join(values.dir, `gen-${shape.tables}x${shape.hours}x${shape.files}x${shape.rows}`);
  if (!(await readFile(join(genRoot, 'done'), 'utf8').catch(() => undefined))) {
    await rm(genRoot, { recursive: true, force: true });
    await generateSmallLake(genRoot, shape);
    await writeFile(join(genRoot, 'done'), 'ok');
  }
  const lake = join(values.dir, 'profile-lake');
  const workDir = join(values.dir, 'profile-work');

  // Instrumentation: the store, the engine, DuckDB's connections, the interpreter.
  const { LocalFolderStore } = await import('../functions/adapters/local-store/local-store.ts');
  const storeProto = LocalFolderStore.prototype as unknown as Record<string, unknown>;
  const storeMethods = Object.getOwnPropertyNames(storeProto).filter(
    (n) => n !== 'constructor' && typeof Object.getOwnPropertyDescriptor(storeProto, n)?.value === 'function',
  );
  wrapMethods(
    storeProto,
    storeMethods,
    (name, args) => `store:${name}:${keyKind(args[0])}`,
    (args) => ({ kind: 'store', keyKind: keyKind(args[0]) }),
  );
  const { KeyLocks } = await import('../functions/adapters/local-store/local-store-lock.ts');
  const lockProto = KeyLocks.prototype as unknown as Record<string, unknown>;
  const realLock = lockProto.lock as (...a: unknown[]) => Promise<() => void>;
  lockProto.lock = async function (this: unknown, ...args: unknown[]) {
    const start = performance.now();
    const release = await realLock.apply(this, args);
    add(`lock:take in ${inStoreCall.getStore() ?? 'no store call'}`, performance.now() - start);
    return () => {
      const t = performance.now();
      release();
      add('lock:release', performance.now() - t);
    };
  };
  const { DuckDbEngine } = await import('../functions/adapters/duckdb-engine/duckdb-engine.ts');
  const engineProto = DuckDbEngine.prototype as unknown as Record<string, unknown>;
  wrapMethods(
    engineProto,
    [
      'inspect',
      'compact',
      'columnStats',
      'countDistinct',
      'integerBounds',
      'countInexactAsDouble',
      'integerOutside',
      'countMissing',
    ],
    (name) => `engine:${name}`,
    () => ({ kind: 'engine' }),
  );
  const duck = await import('@duckdb/node-api');
  const sqlLabel = (sql: unknown) => {
    const s = String(sql).replace(/\s+/g, ' ');
    if (s.startsWith('COPY')) return 'COPY (merge+write)';
    if (s.startsWith('DESCRIBE')) return 'DESCRIBE';
    if (s.includes('parquet_file_metadata')) return 'SELECT num_rows FROM parquet_file_metadata(output)';
    if (s.includes('parquet_kv_metadata')) return 'parquet_kv_metadata';
    return s.slice(0, 40);
  };
  wrapMethods(
    duck.DuckDBConnection.prototype as unknown as Record<string, unknown>,
    ['run', 'runAndReadAll'],
    (_name, args) => `sql:${sqlLabel(args[0])}`,
  );
  wrapMethods(
    duck.DuckDBInstance.prototype as unknown as Record<string, unknown>,
    ['connect'],
    () => 'duckdb:connect',
  );
  const asl = await import('aws-local-stepfunctions');
  const machineProto = asl.StateMachine.prototype as unknown as Record<string, unknown>;
  const realRun = machineProto.run as (...a: unknown[]) => { result: Promise<unknown> };
  let executions = 0;
  machineProto.run = function (this: unknown, ...args: unknown[]) {
    const start = performance.now();
    const execution = realRun.apply(this, args);
    const name = String(
      (args[1] as { context?: { Execution?: { Name?: string } } })?.context?.Execution?.Name ?? '',
    );
    const kind = executions++ === 0 ? 'parent' : 'child';
    execution.result.then(
      () => {
        add(`asl:${kind} execution`, performance.now() - start);
        span(kind === 'parent' ? 'parent-execution' : 'child-execution', start, {});
      },
      () => add(`asl:${kind} execution (failed) ${name}`, performance.now() - start),
    );
    return execution;
  };

  // Each step handler's span (functions/local-runner/timing-spans.ts), and the step the calls inside it run in.
  const steps = tracingChannel<string | undefined, SpanContext & { start?: number }>(SPAN_CHANNEL);
  steps.start.bindStore(inStep, (context) =>
    context.name.startsWith('step: ') ? context.name.slice('step: '.length) : inStep.getStore(),
  );
  steps.subscribe({
    start(context) {
      context.start = performance.now();
    },
    end() {},
    asyncStart() {},
    asyncEnd(context) {
      if (context.name.startsWith('step: '))
        span('step', context.start ?? 0, { step: context.name.slice('step: '.length) });
    },
    error() {},
  });

  // The run command's own path (functions/cli/commands/run.ts), with onStep observing the handlers.
  const { readArgs } = await import('../functions/cli/strict-args.ts');
  const { commandContext } = await import('../functions/cli/command.ts');
  const { buildEngine, parseStackContext } = await import('../functions/cli/context.ts');
  const { assertCliStore } = await import('../functions/cli/store-guard.ts');
  const { runWorkflowLocally, synthesizeWorkflow } = await import('../functions/local-runner/run.ts');
  const argv = runArgs(lake, workDir, values.concurrency, values.threads);
  const read = readArgs(argv);
  if (!read.ok) throw new Error('bad arguments');
  const options = read.options;
  const runOnce = async (label: string) => {
    const ctx = await commandContext(options);
    await assertCliStore(ctx, (line) => process.stderr.write(`${line}\n`));
    const { engine } = await buildEngine(options);
    const stackContext = parseStackContext(options.context);
    const definitionCacheDir = join(workDir, 'definitions');
    const workflow = await synthesizeWorkflow(
      {
        ...stackContext,
        dataPrefix: ctx.target.dataPrefix,
        map: { maxConcurrency: Number(values.concurrency) },
      },
      { cacheDir: definitionCacheDir },
    );
    const stateTimes: [string, number][] = [];
    const t0 = performance.now();
    const { execution, output } = await runWorkflowLocally(
      workflow,
      { store: ctx.target.store, config: ctx.config, clock: ctx.clock, engine: async () => engine, workDir },
      {
        tier: 'hourly',
        definitionCacheDir,
        now: NOW,
        onStep: (step, _payload, _result, elapsedMs) => add(`handler:${step}`, elapsedMs),
        onStateEntered: (name) => stateTimes.push([name, performance.now() - t0]),
      },
    );
    const wallMs = performance.now() - t0;
    await engine.close();
    const from = t0;
    if (execution.status !== 'SUCCEEDED' || !output)
      throw new Error(`${label}: execution ${execution.status} ${execution.error} ${execution.cause}`);
    return { from, wallMs, stateTimes, compacted: output.summary.compacted };
  };

  // Warm-up on one hour folder (definition cache, validation marks, page cache), then reset tallies.
  await rm(lake, { recursive: true, force: true });
  const firstHour = join('db', tableName(0), '2025', '01', '15', '00');
  await cp(join(genRoot, 'lake', firstHour), join(lake, firstHour), {
    recursive: true,
    preserveTimestamps: true,
  });
  await runOnce('warm-up');
  await rm(lake, { recursive: true, force: true });
  await cp(join(genRoot, 'lake'), lake, { recursive: true, preserveTimestamps: true });
  await mkdir(workDir, { recursive: true });
  tallies.clear();
  spans.length = 0;
  executions = 0;
  const cpu0 = process.cpuUsage();
  const run = await runOnce('profiled');
  const cpu = process.cpuUsage(cpu0);
  if (run.compacted !== partitions) throw new Error(`compacted ${run.compacted} of ${partitions}`);
  await new Promise((r) => setTimeout(r, 50));

  const rows = [...tallies.entries()]
    .map(([name, t]) => ({
      name,
      calls: t.n,
      callsPerPartition: +(t.n / partitions).toFixed(2),
      ms: +t.ms.toFixed(1),
      msPerPartition: +(t.ms / partitions).toFixed(3),
    }))
    .sort((a, b) => a.name.localeCompare(b.name));
  process.stdout.write(
    `${JSON.stringify(
      {
        shape,
        partitions,
        concurrency: Number(values.concurrency),
        wallMs: run.wallMs,
        wallMsPerPartition: run.wallMs / partitions,
        cpuMs: (cpu.user + cpu.system) / 1000,
        loadAverage: loadavg(),
        buckets: partitionBuckets(spans, run.from, run.from + run.wallMs, partitions),
        states: run.stateTimes,
        rows,
      },
      null,
      1,
    )}\n`,
  );
}

await main();
