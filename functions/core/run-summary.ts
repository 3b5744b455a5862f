/**
 * The summary of one execution's Map run, read from what the Distributed Map's ResultWriter
 * stored: a manifest.json naming SUCCEEDED_n.json / FAILED_n.json files, each an array of child
 * executions with their JSON `Output` (or `Error` and `Cause`).
 */

import type { CompactorConfig, JobKind } from './config.ts';
import { ConfigError } from './errors.ts';
import { summary as jobFigures } from './job.ts';
import type { Layout } from './layout.ts';
import { getBytesIfExists, type ObjectStore } from './object-store.ts';
import {
  committedVerdict,
  isCommitted,
  type PartitionOutcome,
  type PartitionVerdict,
  partitionVerdict,
  resultOf,
  type StepNumbers,
} from './pipeline.ts';
import { JOB_FIELD } from './plan-store.ts';
import { jobReceipt } from './receipts.ts';
import { stateFolder } from './state-root.ts';

export interface RunSummary {
  readonly partitions: number;
  /**
   * The Map items the partitions' jobs rode in (several small jobs share one, plan-store.ts
   * mapItems), and those that failed: the Map's tolerance counts items.
   */
  readonly items: number;
  readonly failedItems: number;
  /** Partitions per verdict (pipeline.ts partitionVerdict), the CLI's table judges them the same. */
  readonly compacted: number;
  readonly expired: number;
  readonly skipped: number;
  readonly superseded: number;
  readonly failed: number;
  readonly filesIn: number;
  readonly filesOut: number;
  readonly bytesIn: number;
  readonly bytesOut: number;
  /** Rows the committed jobs read (their inputs') and wrote. */
  readonly rowsIn: number;
  /** Totals of the committed (compacted or expired) partitions: what their compact step staged. */
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

/** One Map item as the ResultWriter files (and the local runner) record it. */
export interface MapItemResult {
  readonly Status?: string;
  /** The item's input as JSON (ResultWriter) or as a value (the local runner's `Item`). */
  readonly Input?: string;
  readonly Item?: unknown;
  /** The chain's output: JSON text (ResultWriter) or a value (the local runner). */
  readonly Output?: unknown;
  readonly Error?: string;
  readonly Cause?: string;
}

export interface JudgedPartition {
  readonly partition: string;
  readonly verdict: PartitionVerdict;
  /** The job as the Map item named it (its id, its planned inputs), when it did. */
  readonly job?: { readonly jobId?: string; readonly inputFiles?: number; readonly inputBytes?: number };
  /** What the chain returned, when it did. */
  readonly outcome?: PartitionOutcome;
  /**
   * The job's figures: its compact step's result in the outcome, or, for a job that committed
   * before its child failed as a whole, its receipt's (settleByReceipts).
   */
  readonly compact?: StepNumbers;
  readonly error?: string;
  readonly cause?: string;
}

function jsonValue(value: unknown): unknown {
  return typeof value === 'string' ? JSON.parse(value) : value;
}

interface ItemJob {
  readonly partition?: string;
  readonly jobId?: string;
  readonly inputFiles?: number;
  readonly inputBytes?: number;
}

/**
 * The job outcomes a Map item's child recorded: its output when it succeeded; when it failed
 * because a job failed, its cause (the state machine's `Item failed` state puts them there). An
 * item planned as one job (before items carried several) returned one outcome, not a list.
 */
function itemOutcomes(entry: MapItemResult, succeeded: boolean): readonly PartitionOutcome[] | undefined {
  if (succeeded) {
    const output = jsonValue(entry.Output) ?? {};
    return (Array.isArray(output) ? output : [output]) as PartitionOutcome[];
  }
  // Any other failure (a timeout, the child stopped) has a plain cause: no outcomes.
  if (!entry.Cause?.startsWith('[')) return undefined;
  try {
    const cause = JSON.parse(entry.Cause) as unknown;
    return Array.isArray(cause) ? (cause as PartitionOutcome[]) : undefined;
  } catch (error) {
    if (error instanceof SyntaxError) return undefined;
    throw error;
  }
}

/**
 * The one reading of a Map item: each of its jobs' partition, verdict, outcome or failure. A job
 * without a recorded outcome (its child failed as a whole) failed with the item's error, unless
 * its receipt says otherwise (settleByReceipts, which Summary and the CLI run after this).
 */
export function judgeMapItem(tier: JobKind, entry: MapItemResult, failedKind = false): JudgedPartition[] {
  // A child's input: several jobs ({ table, jobs }), or one job under JOB_FIELD, as the
  // definition's ItemSelector passes it (a definition without one: the job itself).
  const input = (jsonValue(entry.Input ?? entry.Item) ?? {}) as ItemJob & {
    jobs?: readonly ItemJob[];
    [JOB_FIELD]?: ItemJob;
  };
  const jobs = input.jobs ?? [input[JOB_FIELD] ?? input];
  const outcomes = itemOutcomes(entry, !failedKind && entry.Status === 'SUCCEEDED');
  return jobs.map((job, i) => {
    const found = outcomes?.[i];
    const outcome =
      found && (job.partition === undefined || found.partition === job.partition) ? found : undefined;
    const planned = {
      job: {
        ...(job.jobId !== undefined ? { jobId: job.jobId } : {}),
        ...(job.inputFiles !== undefined ? { inputFiles: job.inputFiles } : {}),
        ...(job.inputBytes !== undefined ? { inputBytes: job.inputBytes } : {}),
      },
    };
    if (outcome === undefined || outcome.failure !== undefined) {
      return {
        partition: outcome?.partition ?? job.partition ?? '?',
        verdict: 'failed',
        ...planned,
        error: outcome?.failure?.Error ?? entry.Error ?? 'FAILED',
        cause: outcome?.failure?.Cause ?? entry.Cause ?? '',
      };
    }
    const compact = resultOf(outcome, 'compact');
    return {
      partition: outcome.partition ?? job.partition ?? '?',
      verdict: partitionVerdict(tier, outcome),
      ...planned,
      outcome,
      ...(compact === undefined ? {} : { compact }),
    };
  });
}

/**
 * Settles by their receipts the jobs judged failed only because their Map item's child failed as
 * a whole, with no outcome (an Express child's execution timeout ends every job in it): a job
 * committed and cleared before that has a receipt, which the clear step writes before the
 * manifest goes. One this execution cleared counts committed, with the receipt's figures; one
 * another execution's recovery rolled forward counts superseded; the others stay failed (their
 * manifests are recovery's). One GET per such job: a child failing whole is rare.
 */
export async function settleByReceipts(
  scope: SummaryScope,
  judged: readonly JudgedPartition[],
): Promise<JudgedPartition[]> {
  const { store, config, tier, executionId } = scope;
  return Promise.all(
    judged.map(async (j): Promise<JudgedPartition> => {
      const jobId = j.job?.jobId;
      if (j.verdict !== 'failed' || j.outcome !== undefined || jobId === undefined) return j;
      const found = await jobReceipt(store, config, { tier, partition: j.partition, jobId });
      if (found === undefined) return j;
      const { error: _error, cause: _cause, ...settled } = j;
      if (found.receipt.executionId !== executionId) return { ...settled, verdict: 'superseded' };
      return {
        ...settled,
        verdict: committedVerdict(tier),
        compact: { status: 'done', state: 'cleared', ...jobFigures(found.receipt) },
      };
    }),
  );
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
 * (https://docs.aws.amazon.com/step-functions/latest/apireference/API_UpdateMapRun.html). The
 * Map applies it to its items, each one job or several small ones; Summary reports the same
 * verdict beside the counts.
 */
export function withinTolerance(
  summary: Pick<RunSummary, 'failedItems' | 'items'>,
  percent: number,
): boolean {
  if (summary.failedItems === 0) return true;
  return (summary.failedItems * 100) / summary.items <= percent;
}

export const EMPTY_SUMMARY: RunSummary = {
  partitions: 0,
  items: 0,
  failedItems: 0,
  compacted: 0,
  expired: 0,
  skipped: 0,
  superseded: 0,
  failed: 0,
  filesIn: 0,
  filesOut: 0,
  bytesIn: 0,
  bytesOut: 0,
  rowsIn: 0,
  rows: 0,
  failures: [],
};

/** Adds one judged partition to the totals. */
export function addToSummary(summary: RunSummary, judged: JudgedPartition): RunSummary {
  const counted = {
    ...summary,
    partitions: summary.partitions + 1,
    [judged.verdict]: summary[judged.verdict] + 1,
  };
  if (judged.verdict === 'failed') {
    if (summary.failures.length >= MAX_FAILURES_LISTED) return counted;
    return {
      ...counted,
      failures: [
        ...summary.failures,
        {
          partition: judged.partition,
          error: judged.error ?? 'FAILED',
          cause: truncateCause(judged.cause ?? ''),
        },
      ],
    };
  }
  if (!isCommitted(judged.verdict) || !judged.compact) return counted;
  const numbers = judged.compact;
  return {
    ...counted,
    filesIn: summary.filesIn + (numbers.inputs ?? 0),
    filesOut: summary.filesOut + (numbers.outputs ?? 0),
    bytesIn: summary.bytesIn + (numbers.inputBytes ?? 0),
    bytesOut: summary.bytesOut + (numbers.outputBytes ?? 0),
    rowsIn: summary.rowsIn + (numbers.inputRows ?? 0),
    rows: summary.rows + (numbers.outputRows ?? 0),
  };
}

/** Whose Map runs are summarized: the store, the tier its jobs ran as, the execution that ran them. */
export interface SummaryScope {
  readonly store: ObjectStore;
  readonly config: CompactorConfig;
  readonly tier: JobKind;
  /** The execution's id (its ARN on AWS): the one its jobs' receipts name when it cleared them. */
  readonly executionId: string;
}

/** The summary of an execution's Map runs (one per wave): every item of each, judged once. */
export async function summarizeMapRuns(
  scope: SummaryScope,
  manifestKeys: readonly string[],
): Promise<RunSummary> {
  let summary = EMPTY_SUMMARY;
  for (const key of manifestKeys) summary = await summarizeMapRun(scope, key, summary);
  return summary;
}

export async function summarizeMapRun(
  scope: SummaryScope,
  manifestKey: string,
  before: RunSummary = EMPTY_SUMMARY,
): Promise<RunSummary> {
  const { store, config, tier } = scope;
  const resultsRoot = stateFolder(config.layout.stateRoot, 'results');
  const inside = (key: string) => {
    if (!key.startsWith(resultsRoot)) throw new ConfigError(`Map results ${key} are outside ${resultsRoot}`);
    return key;
  };
  const manifest = JSON.parse((await store.getBytes(inside(manifestKey))).body.toString('utf8')) as {
    ResultFiles?: Record<string, readonly { Key: string }[]>;
  };
  let summary = before;
  for (const [kind, files] of Object.entries(manifest.ResultFiles ?? {})) {
    for (const file of files) {
      const entries = JSON.parse(
        (await store.getBytes(inside(file.Key))).body.toString('utf8'),
      ) as MapItemResult[];
      for (const entry of entries) {
        // PENDING: items a failed or aborted Map Run never started (input-output-resultwriter.html).
        const judged =
          kind === 'PENDING'
            ? { Error: 'NotStarted', Cause: 'the Map Run stopped before it started this partition', ...entry }
            : entry;
        const failedItem = kind !== 'SUCCEEDED' || judged.Status !== 'SUCCEEDED';
        summary = {
          ...summary,
          items: summary.items + 1,
          failedItems: summary.failedItems + (failedItem ? 1 : 0),
        };
        const jobs = await settleByReceipts(scope, judgeMapItem(tier, judged, failedItem));
        for (const job of jobs) summary = addToSummary(summary, job);
      }
    }
  }
  return summary;
}

/** The totals a summary counts, without the failure list. */
type Counts = Omit<RunSummary, 'failures'>;

const COUNT_FIELDS = Object.keys(EMPTY_SUMMARY).filter((k) => k !== 'failures') as (keyof Counts)[];

/**
 * Where an execution's Summary keeps the totals it recorded as metrics, beside its Map results
 * (expired with them). An execution can be summarized more than once: by the rule when it fails,
 * then by its last state after a redrive succeeds.
 */
export function recordedSummaryKey(layout: Layout, executionName: string): string {
  return `${stateFolder(layout.stateRoot, 'results')}${executionName}-summary.json`;
}

export async function readRecordedSummary(
  store: ObjectStore,
  layout: Layout,
  executionName: string,
): Promise<Counts | undefined> {
  const found = await getBytesIfExists(store, recordedSummaryKey(layout, executionName));
  return found ? (JSON.parse(found.body.toString('utf8')) as Counts) : undefined;
}

export async function writeRecordedSummary(
  store: ObjectStore,
  layout: Layout,
  executionName: string,
  summary: RunSummary,
): Promise<void> {
  const counts = Object.fromEntries(COUNT_FIELDS.map((k) => [k, summary[k]]));
  await store.put(recordedSummaryKey(layout, executionName), Buffer.from(JSON.stringify(counts)), {
    contentType: 'application/json',
  });
}

/**
 * What a summary adds to the totals already recorded for its execution: a redrive's Summary counts
 * every partition again, so the metrics take only what grew (the partitions the redrive compacted).
 * Failures seen before stay counted; they happened.
 */
export function unrecorded(summary: RunSummary, recorded: Counts | undefined): RunSummary {
  if (!recorded) return summary;
  const delta = Object.fromEntries(
    COUNT_FIELDS.map((k) => [k, Math.max(0, summary[k] - (recorded[k] ?? 0))]),
  ) as unknown as Counts;
  return { ...delta, failures: summary.failures };
}
