/**
 * The summary of one execution's Map run, read from what the Distributed Map's ResultWriter
 * stored: a manifest.json naming SUCCEEDED_n.json / FAILED_n.json files, each an array of child
 * executions with their JSON `Output` (or `Error` and `Cause`).
 */

import { ConfigError } from './errors.ts';
import type { Layout } from './layout.ts';
import type { ObjectStore } from './object-store.ts';

interface StepNumbers {
  readonly status?: string;
  readonly state?: string;
  readonly inputs?: number;
  readonly outputs?: number;
  readonly inputBytes?: number;
  readonly outputBytes?: number;
  readonly outputRows?: number;
}

/**
 * What one Map iteration returns (the item processor's last state): the compact step's result,
 * and the clear step's when the job went all the way.
 */
export interface PartitionOutcome {
  readonly partition: string;
  readonly jobId?: string;
  readonly status: string;
  readonly compact?: StepNumbers;
  /** The publish step's result: `done`/`already-done` only when this execution committed the job. */
  readonly publish?: StepNumbers;
  /**
   * The same, from a definition deployed before the step was renamed: a redriven execution runs
   * its own definition, so its Map results may still name it `upload`.
   */
  readonly upload?: StepNumbers;
  readonly clear?: StepNumbers;
}

export interface RunSummary {
  readonly partitions: number;
  readonly compacted: number;
  readonly skipped: number;
  readonly failed: number;
  readonly filesIn: number;
  readonly filesOut: number;
  readonly bytesIn: number;
  readonly bytesOut: number;
  readonly rows: number;
  /**
   * The first MAX_FAILURES_LISTED failures, with the error name the state machine saw (e.g.
   * SchemaConflictError), each cause cut to MAX_CAUSE_CHARS: the execution's output, which holds
   * them, is limited to 256 KiB
   * (https://docs.aws.amazon.com/step-functions/latest/dg/service-quotas.html#service-limits-task-executions).
   */
  readonly failures: readonly {
    readonly partition: string;
    readonly error: string;
    readonly cause: string;
  }[];
}

interface ResultEntry {
  readonly Status?: string;
  readonly Input?: string;
  readonly Output?: string;
  readonly Error?: string;
  readonly Cause?: string;
}

export const MAX_FAILURES_LISTED = 20;
export const MAX_CAUSE_CHARS = 1024;

/** Keeps the start of a long cause (where the error names the file and the fix) and says what was cut. */
export function truncateCause(cause: string): string {
  if (cause.length <= MAX_CAUSE_CHARS) return cause;
  const note = ` … [${cause.length - MAX_CAUSE_CHARS} more characters cut]`;
  return `${cause.slice(0, MAX_CAUSE_CHARS - note.length)}${note}`;
}

/**
 * Failures are within the tolerance while their share does not exceed it: the Distributed Map's
 * ToleratedFailurePercentage is "the maximum percentage of failed items before the Map Run fails"
 * (https://docs.aws.amazon.com/step-functions/latest/apireference/API_UpdateMapRun.html); the
 * workflow applies it after Summary instead of in the Map.
 */
export function withinTolerance(
  summary: Pick<RunSummary, 'failed' | 'partitions'>,
  percent: number,
): boolean {
  if (summary.failed === 0) return true;
  return (summary.failed * 100) / summary.partitions <= percent;
}

export const EMPTY_SUMMARY: RunSummary = {
  partitions: 0,
  compacted: 0,
  skipped: 0,
  failed: 0,
  filesIn: 0,
  filesOut: 0,
  bytesIn: 0,
  bytesOut: 0,
  rows: 0,
  failures: [],
};

export async function summarizeMapRun(
  store: ObjectStore,
  layout: Layout,
  manifestKey: string,
): Promise<RunSummary> {
  const resultsRoot = `${layout.stateRoot}results/`;
  const inside = (key: string) => {
    if (!key.startsWith(resultsRoot)) throw new ConfigError(`Map results ${key} are outside ${resultsRoot}`);
    return key;
  };
  const manifest = JSON.parse((await store.getBytes(inside(manifestKey))).body.toString('utf8')) as {
    ResultFiles?: Record<string, readonly { Key: string }[]>;
  };
  let summary: { -readonly [K in keyof RunSummary]: RunSummary[K] } = { ...EMPTY_SUMMARY, failures: [] };
  const failures: { partition: string; error: string; cause: string }[] = [];
  for (const [kind, files] of Object.entries(manifest.ResultFiles ?? {})) {
    for (const file of files) {
      const entries = JSON.parse(
        (await store.getBytes(inside(file.Key))).body.toString('utf8'),
      ) as ResultEntry[];
      for (const entry of entries) {
        summary.partitions++;
        if (kind !== 'SUCCEEDED' || entry.Status !== 'SUCCEEDED') {
          summary.failed++;
          const input = entry.Input ? (JSON.parse(entry.Input) as { partition?: string }) : {};
          if (failures.length < MAX_FAILURES_LISTED) {
            failures.push({
              partition: input.partition ?? '?',
              error: entry.Error ?? kind,
              cause: truncateCause(entry.Cause ?? ''),
            });
          }
          continue;
        }
        const outcome = JSON.parse(entry.Output ?? '{}') as PartitionOutcome;
        // Compacted when this execution committed the job (its publish step did it or found it
        // done) and its clear step saw the job through; the numbers are what it staged. A job that
        // recovery rolled back, or took over, meanwhile was superseded at publish: not ours.
        const published = (outcome.publish ?? outcome.upload)?.status;
        const committed = published === 'done' || published === 'already-done';
        const finished = committed && outcome.clear?.state === 'cleared';
        if (finished) {
          const numbers = outcome.compact ?? {};
          summary = {
            ...summary,
            compacted: summary.compacted + 1,
            filesIn: summary.filesIn + (numbers.inputs ?? 0),
            filesOut: summary.filesOut + (numbers.outputs ?? 0),
            bytesIn: summary.bytesIn + (numbers.inputBytes ?? 0),
            bytesOut: summary.bytesOut + (numbers.outputBytes ?? 0),
            rows: summary.rows + (numbers.outputRows ?? 0),
          };
        } else {
          summary.skipped++;
        }
      }
    }
  }
  return { ...summary, failures };
}
