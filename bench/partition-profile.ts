/**
 * One partition's chain in `compactor run` over many small partitions, split into buckets that
 * add up to the run's wall time divided by its partitions (bench/small-partitions-profile.ts
 * records the spans; bench/profile-buckets.ts splits the time). Each moment goes to the deepest
 * span running then: an fsync inside a manifest put counts as an fsync, the rest of the put as a
 * manifest request, the handler's time outside its store and engine calls as the step's own code.
 */

import { join } from 'node:path';
import { attribute, type LevelSpan } from './profile-buckets.ts';
import { table } from './report-format.ts';

/** A timed call the profile saw, and the step handler it ran in (if any). */
export interface ProfiledSpan {
  readonly kind: 'parent-execution' | 'child-execution' | 'step' | 'store' | 'engine' | 'fsync';
  /** The step handler the span is (kind 'step') or runs in. */
  readonly step?: string;
  /** Store calls: what the key is (manifests, plans, staging, data, ...). */
  readonly keyKind?: string;
  readonly start: number;
  readonly end: number;
}

export const PARTITION_BUCKETS = [
  'interpreter',
  'manifest requests',
  'fsyncs',
  'engine queries',
  'verification',
  'other store calls',
  "steps' own code",
  'run-level steps',
  'outside the executions',
] as const;
export type PartitionBucket = (typeof PARTITION_BUCKETS)[number];

/** What each bucket holds, for the report. */
export const PARTITION_BUCKET_NOTES: Readonly<Record<PartitionBucket, string>> = {
  interpreter:
    'aws-local-stepfunctions running the parent and child executions outside any handler, with the Map emulation (its item reader and result writer)',
  'manifest requests':
    "the local store's calls on manifest keys (reads, conditional puts, deletes), less their fsyncs",
  fsyncs: 'every file and folder fsync the local store makes (the durability the docs promise), in the chain',
  'engine queries':
    "DuckDB calls: each input's footer check, the merge and write, the output's column statistics",
  verification: 'the verify step: its HEADs of the published outputs and its own code',
  'other store calls':
    "the chain's other store calls (inputs fetched, staging put, publish copy, input deletes, receipt), less their fsyncs",
  "steps' own code":
    "the handlers outside their store and engine calls: middy, Powertools, the steps' JS (checksums, manifests built)",
  'run-level steps': "recover, plan and summary, each run's once, spread over its partitions",
  'outside the executions': 'the local run before and after its execution: scratch folders, run records',
};

const RUN_LEVEL_STEPS: readonly string[] = ['recover', 'plan', 'summary'];

/** The bucket and depth of one span. */
export function classify(span: ProfiledSpan): LevelSpan {
  const at = (bucket: PartitionBucket, level: number): LevelSpan => ({
    bucket,
    level,
    start: span.start,
    end: span.end,
  });
  if (span.kind === 'parent-execution') return at('interpreter', 0);
  if (span.kind === 'child-execution') return at('interpreter', 1);
  if (span.step !== undefined && RUN_LEVEL_STEPS.includes(span.step)) return at('run-level steps', 2);
  if (span.kind === 'step') return at(span.step === 'verify' ? 'verification' : "steps' own code", 2);
  if (span.kind === 'fsync') return at('fsyncs', 4);
  if (span.kind === 'engine') return at('engine queries', 3);
  // A store call outside any handler is the interpreter's (the Map's item reader, result writer).
  if (span.step === undefined) return at('interpreter', 3);
  if (span.keyKind === 'manifests') return at('manifest requests', 3);
  return at(span.step === 'verify' ? 'verification' : 'other store calls', 3);
}

/** ms per partition in each bucket over [from, to]; they add up to (to - from) / partitions. */
export function partitionBuckets(
  spans: readonly ProfiledSpan[],
  from: number,
  to: number,
  partitions: number,
): { readonly bucket: string; readonly msPerPartition: number }[] {
  const buckets = attribute(spans.map(classify), from, to, 'outside the executions');
  return PARTITION_BUCKETS.map((bucket) => ({
    bucket,
    msPerPartition: (buckets.find((b) => b.bucket === bucket)?.ms ?? 0) / partitions,
  }));
}

/** The profile the bench's `partitions` section keeps (results.json's partitionsProfile). */
export interface PartitionProfile {
  readonly shape: {
    readonly tables: number;
    readonly hours: number;
    readonly files: number;
    readonly rows: number;
  };
  readonly partitions: number;
  readonly concurrency: number;
  readonly wallMs: number;
  readonly wallMsPerPartition: number;
  readonly cpuMs: number;
  readonly buckets: readonly { readonly bucket: string; readonly msPerPartition: number }[];
  readonly loadAverage: readonly number[];
}

/** The per-partition table: ms and share per bucket, what each holds, the sum last. */
export function partitionProfileTable(p: PartitionProfile): string {
  const sum = p.buckets.reduce((total, b) => total + b.msPerPartition, 0);
  return table(
    ['bucket', 'ms per partition', 'share', 'what it holds'],
    [
      ...p.buckets.map((b) => [
        b.bucket,
        b.msPerPartition.toFixed(2),
        `${((b.msPerPartition / sum) * 100).toFixed(1)}%`,
        PARTITION_BUCKET_NOTES[b.bucket as PartitionBucket] ?? '',
      ]),
      ['**sum = wall per partition**', sum.toFixed(2), '100%', ''],
    ],
  );
}

export function partitionProfileNote(p: PartitionProfile, fullPartitions: number | undefined): string {
  const reduced =
    fullPartitions !== undefined && fullPartitions !== p.partitions
      ? ` (reduced from the timed run's ${fullPartitions.toLocaleString('en-US')} so the instrumented run stays short; per partition the chain is the same)`
      : '';
  return (
    `One instrumented \`compactor run --tier hourly\` path in one process (bench/small-partitions-profile.ts) over ` +
    `${p.partitions.toLocaleString('en-US')} partitions${reduced}, ${p.shape.tables} tables x ${p.shape.hours} h x ${p.shape.files} files x ${p.shape.rows} rows, ` +
    `at concurrency ${p.concurrency}: ${(p.wallMs / 1000).toFixed(1)} s, ${p.wallMsPerPartition.toFixed(1)} ms per partition ` +
    `(CPU ${(p.cpuMs / 1000).toFixed(1)} s); load average ${p.loadAverage.map((l) => l.toFixed(1)).join('/')} at its end. ` +
    'The instrumentation wraps every store, engine and fsync call, so the wall is a little above an uninstrumented run.'
  );
}

/** The section of bench/results.md. */
export function partitionProfileSection(p: PartitionProfile, fullPartitions: number | undefined): string[] {
  return [
    "## Many small partitions: where one partition's chain goes",
    '',
    partitionProfileNote(p, fullPartitions),
    '',
    partitionProfileTable(p),
    '',
  ];
}

/**
 * Runs bench/small-partitions-profile.ts in its own process (its instrumentation patches the
 * store, the engine and fs for the whole process) over `shape`, and keeps its buckets.
 */
export async function runPartitionProfile(
  dir: string,
  shape: PartitionProfile['shape'],
  options: { readonly threads: number },
): Promise<PartitionProfile> {
  const { execFile } = await import('node:child_process');
  const script = join(import.meta.dirname, 'small-partitions-profile.ts');
  const args = [
    script,
    ...['--dir', dir, '--tables', String(shape.tables), '--hours', String(shape.hours)],
    ...['--files', String(shape.files), '--rows', String(shape.rows), '--threads', String(options.threads)],
    ...['--concurrency', '1'],
  ];
  const stdout = await new Promise<string>((resolve, reject) =>
    execFile(process.execPath, args, { maxBuffer: 64 * 1024 * 1024 }, (error, out, err) => {
      if (error)
        reject(new Error(`small-partitions-profile.ts failed: ${error.message}\n${err.slice(-2000)}`));
      else resolve(out);
    }),
  );
  const run = JSON.parse(stdout) as PartitionProfile;
  return {
    shape: run.shape,
    partitions: run.partitions,
    concurrency: run.concurrency,
    wallMs: run.wallMs,
    wallMsPerPartition: run.wallMsPerPartition,
    cpuMs: run.cpuMs,
    buckets: run.buckets,
    loadAverage: run.loadAverage,
  };
}
