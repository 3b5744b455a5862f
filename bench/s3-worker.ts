/**
 * One job's whole per-partition chain (compact, publish, verify, delete inputs, clear) over S3,
 * in its own process, as the Lambdas run it: `node bench/s3-worker.ts <task.json>`. The S3
 * client and store are built as functions/lambda/env-deps.ts builds them (createS3Client, the
 * S3Store defaults), pointed at the bench's shaped endpoint. Prints one JSON line (S3RunResult).
 *
 * Each step records its wall and CPU time, when S3 calls were in flight and when the engine was
 * busy, so the report can say how much of a step the Lambda spends waiting on S3 alone.
 */

import { mkdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { InputRef } from '../functions/core/manifest/manifest.ts';
import { peakRssBytes } from './peak-rss.ts';
import { exclusiveMs, type Span, unionMs } from './stats.ts';

export interface S3Task {
  readonly endpoint: string;
  readonly bucket: string;
  readonly partition: string;
  readonly inputs: readonly InputRef[];
  readonly runDir: string;
  readonly threads: number;
  readonly memoryLimit: string;
  readonly partSizeBytes: number;
}

export interface StepTiming {
  readonly step: 'compact' | 'publish' | 'verify' | 'delete' | 'clear';
  readonly status: string;
  readonly wallMs: number;
  readonly cpuMs: number;
  /** Time with at least one S3 call in flight. */
  readonly s3BusyMs: number;
  /** Time with the engine working (footer checks, merge). */
  readonly engineBusyMs: number;
  /** Time with an S3 call in flight and the engine idle: the Lambda only waits on S3. */
  readonly s3OnlyMs: number;
}

export interface S3RunResult {
  readonly steps: readonly StepTiming[];
  /** Most getToFile downloads in flight at once (the compact step's concurrency, reached). */
  readonly maxConcurrentDownloads: number;
  /** The compact step's configured concurrency for these inputs (downloadConcurrency). */
  readonly plannedConcurrency: number;
  /** SDK commands sent, by name (every attempt of a retried command counts once here). */
  readonly commands: Readonly<Record<string, number>>;
  readonly downloadMs: number;
  readonly downloadedBytes: number;
  readonly stagingPutMs: number;
  readonly outputBytes: number;
  readonly outputRows: number;
  readonly outputKeys: readonly string[];
  /** Each published output's size, as the partition's listing gives it after the chain. */
  readonly outputSizes: readonly number[];
  /** The part size the run's S3Store uploaded and copied larger outputs in. */
  readonly partSizeBytes: number;
  readonly maxRssBytes: number;
}

async function main(): Promise<void> {
  const taskFile = process.argv[2];
  if (!taskFile) throw new Error('usage: node bench/s3-worker.ts <task.json>');
  const task = JSON.parse(await readFile(taskFile, 'utf8')) as S3Task;
  const { createS3Client, S3Store } = await import('../functions/adapters/s3-store/s3-store.ts');
  const { DuckDbEngine } = await import('../functions/adapters/duckdb-engine/duckdb-engine.ts');
  const { ForwardingStore } = await import('../functions/core/object-store.ts');
  const { parseConfig } = await import('../functions/core/config.ts');
  const { systemClock } = await import('../functions/core/engine.ts');
  const { newJobId } = await import('../functions/core/manifest/manifest.ts');
  const protocol = await import('../functions/core/protocol.ts');
  const { randomBytes } = await import('node:crypto');

  // As env-deps.ts builds it; the endpoint (and fixed test credentials) point it at the shaper.
  const client = createS3Client({
    endpoint: task.endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
  });
  const commands: Record<string, number> = {};
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const name = String(context.commandName ?? 'unknown').replace(/Command$/, '');
      commands[name] = (commands[name] ?? 0) + 1;
      return next(args);
    },
    { step: 'initialize', name: 'benchCommandCount' },
  );
  const s3Spans: Span[] = [];
  const engineSpans: Span[] = [];
  let downloads = 0;
  let maxDownloads = 0;
  let downloadedBytes = 0;
  const downloadSpans: Span[] = [];
  const stagingSpans: Span[] = [];
  const timed = async <T>(spans: Span[][], run: () => Promise<T>): Promise<T> => {
    const start = performance.now();
    try {
      return await run();
    } finally {
      const span = { start, end: performance.now() };
      for (const list of spans) list.push(span);
    }
  };
  /** Every ObjectStore call here is S3 requests; their spans are the time S3 is in flight. */
  class RecordingStore extends ForwardingStore {
    override list(prefix: string, options?: { readonly signal?: AbortSignal }) {
      const inner = super.list(prefix, options);
      return {
        async *[Symbol.asyncIterator]() {
          const it = inner[Symbol.asyncIterator]();
          for (;;) {
            const next = await timed([s3Spans], () => it.next());
            if (next.done) return;
            yield next.value;
          }
        },
      };
    }
    override head(key: string, options?: { readonly signal?: AbortSignal }) {
      return timed([s3Spans], () => super.head(key, options));
    }
    override getBytes(key: string, options?: { readonly ifMatch?: string; readonly signal?: AbortSignal }) {
      return timed([s3Spans], () => super.getBytes(key, options));
    }
    override getToFile(
      key: string,
      path: string,
      options?: { readonly ifMatch?: string; readonly signal?: AbortSignal },
    ) {
      downloads++;
      maxDownloads = Math.max(maxDownloads, downloads);
      return timed([s3Spans, downloadSpans], async () => {
        try {
          const got = await super.getToFile(key, path, options);
          downloadedBytes += got.size;
          return got;
        } finally {
          downloads--;
        }
      });
    }
    override put(...args: Parameters<ObjectStoreLike['put']>) {
      const spans = args[0].includes('/staging/') ? [s3Spans, stagingSpans] : [s3Spans];
      return timed(spans, () => super.put(...args));
    }
    override copy(...args: Parameters<ObjectStoreLike['copy']>) {
      return timed([s3Spans], () => super.copy(...args));
    }
    override deleteMany(...args: Parameters<ObjectStoreLike['deleteMany']>) {
      return timed([s3Spans], () => super.deleteMany(...args));
    }
  }
  type ObjectStoreLike = InstanceType<typeof ForwardingStore>;
  // The S3Store defaults, but for the part size: fauxqs refuses request bodies over 11 MiB (its
  // Fastify bodyLimit), so parts are 8 MiB where the Lambda's are 64 MiB (see S3_PART_BYTES).
  const store = new RecordingStore(
    new S3Store({ client, bucket: task.bucket, partSizeBytes: task.partSizeBytes }),
  );

  const workDir = join(task.runDir, 'work');
  const spillDir = join(workDir, 'spill');
  await mkdir(spillDir, { recursive: true });
  const duck = await DuckDbEngine.create({
    tempDirectory: spillDir,
    threads: task.threads,
    memoryLimit: task.memoryLimit,
  });
  const engine: import('../functions/core/engine.ts').Engine = {
    inspect: (file) => timed([engineSpans], () => duck.inspect(file)),
    compact: (request) => timed([engineSpans], () => duck.compact(request)),
    countDistinct: (request) => timed([engineSpans], () => duck.countDistinct(request)),
    columnStats: (file) => timed([engineSpans], () => duck.columnStats(file)),
    close: () => duck.close(),
  };
  const config = parseConfig({ quietSeconds: 0 });
  const job = {
    tier: 'hourly' as const,
    partition: task.partition,
    jobId: newJobId(new Date(), () => randomBytes(4).toString('hex')),
    executionId: `bench-s3-${process.pid}`,
    inputs: task.inputs,
  };
  const deps = { store, config, clock: systemClock, engine, workDir };
  const steps: StepTiming[] = [];
  const runStep = async (
    step: StepTiming['step'],
    run: () => Promise<{ status: string; state?: string; outputBytes?: number; outputRows?: number }>,
  ) => {
    const cpu = process.cpuUsage();
    const start = performance.now();
    const result = await run();
    const end = performance.now();
    const used = process.cpuUsage(cpu);
    steps.push({
      step,
      status: `${result.status}/${result.state ?? ''}`,
      wallMs: end - start,
      cpuMs: (used.user + used.system) / 1000,
      s3BusyMs: unionMs(s3Spans, start, end),
      engineBusyMs: unionMs(engineSpans, start, end),
      s3OnlyMs: exclusiveMs(s3Spans, engineSpans, start, end),
    });
    return result;
  };
  const compacted = await runStep('compact', () => protocol.compactStep(deps, job));
  if (compacted.status !== 'done' || compacted.state !== 'staged') {
    throw new Error(`compactStep ended ${compacted.status}/${compacted.state ?? ''}`);
  }
  await runStep('publish', () => protocol.publishStep(deps, job));
  await runStep('verify', () => protocol.verifyStep(deps, job));
  await runStep('delete', () => protocol.deleteInputsStep(deps, job));
  await runStep('clear', () => protocol.clearManifestStep(deps, job));
  await duck.close();
  client.destroy();
  const outputKeys: string[] = [];
  const outputSizes: number[] = [];
  const inputKeys = new Set(task.inputs.map((i) => i.key));
  const plain = new S3Store({
    client: createS3Client({
      endpoint: task.endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    }),
    bucket: task.bucket,
  });
  for await (const object of plain.list(task.partition)) {
    if (inputKeys.has(object.key)) throw new Error(`input ${object.key} was not deleted`);
    outputKeys.push(object.key);
    outputSizes.push(object.size);
  }
  await rm(workDir, { recursive: true, force: true });
  const result: S3RunResult = {
    steps,
    maxConcurrentDownloads: maxDownloads,
    plannedConcurrency: protocol.downloadConcurrency(task.inputs),
    commands,
    downloadMs: unionMs(downloadSpans),
    downloadedBytes,
    stagingPutMs: unionMs(stagingSpans),
    outputBytes: compacted.outputBytes ?? 0,
    outputRows: compacted.outputRows ?? 0,
    outputKeys,
    outputSizes,
    partSizeBytes: task.partSizeBytes,
    maxRssBytes: peakRssBytes(),
  };
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

if (process.argv[1] === import.meta.filename) await main();
