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
  /** The first failures, with the error name the state machine saw (e.g. SchemaConflictError). */
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
          if (failures.length < 20) {
            failures.push({
              partition: input.partition ?? '?',
              error: entry.Error ?? kind,
              cause: entry.Cause ?? '',
            });
          }
          continue;
        }
        const outcome = JSON.parse(entry.Output ?? '{}') as PartitionOutcome;
        // Compacted when this run's clear step finished the job; the numbers are what it staged.
        const finished = outcome.clear?.state === 'cleared' && outcome.clear.status !== 'superseded';
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
