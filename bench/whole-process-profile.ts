/**
 * Where the wall time of one whole `compactor run` process goes: the command run with
 * bench/span-recorder.ts loaded (`node --import`), which records the product's own timing spans
 * (functions/local-runner/timing-spans.ts), split into buckets that add up to the process's wall
 * time from spawn to exit (bench/profile-buckets.ts). What no span covers is named for where it
 * falls: Node's start-up before the first module, module loading and argument parsing before the
 * first span, the CLI's own code between its spans, the exit after the last one, and spawn and
 * teardown outside the process's clock.
 */

import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { attribute, type Bucket, type LevelSpan, orderBuckets } from './profile-buckets.ts';
import { table } from './report-format.ts';
import type { SpanRecord } from './span-recorder.ts';

export const SPAN_RECORDER = join(import.meta.dirname, 'span-recorder.ts');

/** The profile of one `compactor run` process: the profiled run of median wall time. */
export interface WholeProcessProfile {
  /** Profiled runs (after the timed ones); the buckets are those of the median one. */
  readonly runs: number;
  /** That run's wall time, spawn to exit: the buckets' sum. */
  readonly wallMs: number;
  readonly samplesMs: readonly number[];
  readonly buckets: readonly Bucket[];
  readonly loadAverage: readonly number[];
}

const NODE_START = 'node start-up (before the first module)';
const MODULES = 'CLI modules and arguments (before the first span)';
const BETWEEN = "CLI's own code between its spans (partition rows, warnings)";
const EXIT = 'exit (after the command returned)';
const OUTSIDE = "spawn and teardown (outside the process's clock)";

/** Bucket labels of the product's span names, in the order a run passes them. */
const LABELS: Readonly<Record<string, string>> = {
  'cli: modules of the local runner':
    'modules of the local runner (ASL interpreter, handlers, DuckDB library)',
  'cli: settings and store check': 'settings and store check',
  'cli: engine': 'DuckDB engine (an instance; its library loads with the modules)',
  'cli: definition (cache or synthesis)': 'state machine definition (cache read)',
  'definition: synthesis (cache miss)': 'CDK synthesis (cache miss)',
  'cli: workflow run': 'local run set-up (scratch, owners)',
  'run: interpreter': 'interpreter (aws-local-stepfunctions, Map and result emulation)',
  'run: run records and scratch': 'run records and scratch removal',
  'cli: report': 'summary report',
  'cli: engine close': 'engine close',
};
const ORDER = [
  NODE_START,
  MODULES,
  ...Object.values(LABELS).slice(0, 7),
  ...['recover', 'plan', 'compact', 'publish', 'verify', 'delete-inputs', 'clear-manifest', 'summary'].map(
    (step) => `step: ${step}`,
  ),
  ...Object.values(LABELS).slice(7),
  BETWEEN,
  EXIT,
  OUTSIDE,
];

/** A recorded run's buckets; they add up to `wallMs` (spawn to exit, measured by the parent). */
export function wholeProcessBuckets(record: SpanRecord, wallMs: number): Bucket[] {
  const spans: LevelSpan[] = record.spans.map((s) => ({
    bucket: LABELS[s.name] ?? s.name,
    level: s.depth,
    start: s.start,
    end: s.end,
  }));
  const first = Math.min(record.exitAtMs, ...spans.map((s) => s.start));
  const last = Math.max(first, ...spans.map((s) => s.end));
  const synthetic: LevelSpan[] = [
    { bucket: NODE_START, level: 0, start: 0, end: record.loadedAtMs },
    { bucket: MODULES, level: 0, start: record.loadedAtMs, end: first },
    { bucket: BETWEEN, level: 0, start: first, end: last },
    { bucket: EXIT, level: 0, start: last, end: record.exitAtMs },
  ];
  return [
    ...attribute([...synthetic, ...spans], 0, record.exitAtMs, 'unaccounted'),
    { bucket: OUTSIDE, ms: wallMs - record.exitAtMs },
  ];
}

/**
 * Runs `runOnce` (one `compactor run` process given extra node arguments and environment; its
 * spawn-to-exit ms) `runs` times with the recorder, and keeps the median run's buckets.
 */
export async function profileWholeProcess(
  runOnce: (nodeArgs: readonly string[], env: Readonly<Record<string, string>>) => Promise<number>,
  runs: number,
): Promise<WholeProcessProfile> {
  const dir = await mkdtemp(join(tmpdir(), 'compactor-spans-'));
  try {
    const profiled: { wallMs: number; buckets: Bucket[] }[] = [];
    for (let i = 0; i < runs; i++) {
      const file = join(dir, `spans-${i}.json`);
      const wallMs = await runOnce(['--import', SPAN_RECORDER], { COMPACTOR_SPAN_FILE: file });
      const record = JSON.parse(await readFile(file, 'utf8')) as SpanRecord;
      profiled.push({ wallMs, buckets: wholeProcessBuckets(record, wallMs) });
    }
    const samplesMs = profiled.map((p) => p.wallMs);
    const chosen = [...profiled].sort((a, b) => a.wallMs - b.wallMs)[Math.floor((runs - 1) / 2)];
    if (!chosen) throw new Error('whole-process profile: no run');
    return {
      runs,
      wallMs: chosen.wallMs,
      samplesMs,
      buckets: orderBuckets(chosen.buckets, ORDER).map(({ bucket, ms }) => ({ bucket, ms })),
      loadAverage: loadavg(),
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** The profile as a table: ms and share of each bucket, the sum last. */
export function wholeProcessProfileTable(p: WholeProcessProfile): string {
  const rows = orderBuckets(p.buckets, ORDER);
  const sum = rows.reduce((total, r) => total + r.ms, 0);
  return table(
    ['where the process goes', 'ms', 'share'],
    [
      ...rows.map((r) => [r.bucket, r.ms.toFixed(0), `${(r.share * 100).toFixed(1)}%`]),
      ['**sum = wall, spawn to exit**', sum.toFixed(0), '100%'],
    ],
  );
}

/** One line under the table: which run it is, and how it compares with the timed runs. */
export function wholeProcessProfileNote(p: WholeProcessProfile, timedMedianMs: number): string {
  return (
    `The profiled run of median wall time of ${p.runs} (${p.samplesMs.map((ms) => (ms / 1000).toFixed(2)).join(', ')} s), ` +
    `run after the timed ones with bench/span-recorder.ts loaded; the timed runs' median ${(timedMedianMs / 1000).toFixed(2)} s, ` +
    `load average ${p.loadAverage.map((l) => l.toFixed(1)).join('/')} at its end. ` +
    `Steps are each handler's own time (middy, Powertools, the step); the interpreter is the execution's time outside them.`
  );
}
