/**
 * One compaction cycle run in-process: recover -> plan -> per-partition steps with bounded
 * concurrency. It walks the steps of pipeline.ts, the list the state machine is built from, with
 * the same retry numbers, calling the same step functions the Lambdas call; a failing partition
 * is reported and never stops the others. It groups each wave's jobs into the Map items the Plan
 * step writes (plan-store.ts mapItems) and runs the items `concurrency` at a time; an item fails
 * when any of its jobs failed, and `redriveFailedItems` runs each failed item once more, whole, as
 * an operator's redrive does. test/core/pipeline-equivalence.test.ts runs seeded faults through
 * this and through the synthesized state machine and compares them step by step.
 */

import type { CompactorConfig, JobKind } from './config.ts';
import type { Clock } from './engine.ts';
import { ConfigError, RETRYABLE_ERRORS } from './errors.ts';
import type { CompactDeps, Job, StepResult } from './job.ts';
import { forEachLimit } from './limit.ts';
import { newJobId } from './manifest/manifest.ts';
import { compareKeys, type ObjectStore } from './object-store.ts';
import {
  DEFAULT_CHILD_EXECUTION_TYPE,
  type ExecutionType,
  endsChain,
  type JobDeps,
  PARTITION_STEPS,
  type PartitionVerdict,
  partitionVerdict,
  retryDelaysSeconds,
  retryOf,
  type StepName,
} from './pipeline.ts';
import { itemsByWave, jobSize, type WaveJob } from './plan-store.ts';
import { type Plan, type PlannedJob, type PlanScope, planTier } from './planner/planner.ts';
import { type RecoveryDeps, type RecoveryReport, recover } from './recovery.ts';
import { planRetention } from './retention.ts';

/** Waits this many milliseconds (tests pass one that returns at once). */
export type Sleep = (ms: number) => Promise<void>;

const realSleep: Sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** How the cycle runs its steps: as the stack's state machine with these children does. */
export interface RetryDeps {
  /** The Map's child workflows the chain's retries follow (the stack's `map.childExecutionType`). */
  readonly childExecutionType?: ExecutionType;
  /** The wait between attempts; full jitter over the step's retry delays, as the state machine. */
  readonly sleep?: Sleep;
}

export interface CycleDeps extends CompactDeps, RecoveryDeps, RetryDeps {
  /** Map items run at once (the Map's MaxConcurrency); an item runs its jobs one after another. */
  readonly concurrency: number;
  /**
   * Runs each failed Map item once more after its wave, every job of it with the same job id in
   * the same execution, as an operator's redrive of the execution does (default: no redrive).
   */
  readonly redriveFailedItems?: boolean;
  /** Random hex for job ids. */
  readonly randomHex: () => string;
  /** Each job's outcome as its item's first run ends (a redrive's outcomes are in the report). */
  readonly onProgress?: (progress: JobProgress) => void;
  /** Each step's result as it returns (the equivalence test compares these with the state machine's). */
  readonly onStep?: (step: StepName, job: Job, result: StepResult) => void;
}

export interface JobProgress {
  readonly job: Job;
  readonly done: number;
  readonly total: number;
  readonly outcome: JobOutcome;
}

export type JobOutcome =
  | { readonly status: Exclude<PartitionVerdict, 'failed'>; readonly steps: readonly StepResult[] }
  | { readonly status: 'failed'; readonly steps: readonly StepResult[]; readonly error: Error };

export interface JobReport {
  readonly job: Job;
  /** The job's final outcome: its redrive's when its item was redriven. */
  readonly outcome: JobOutcome;
  /** The job's Map item: its wave, its number within the wave, and how many jobs it holds. */
  readonly item: { readonly wave: number; readonly index: number; readonly jobs: number };
  /** The outcome of the item's first run, when a redrive ran the item again. */
  readonly firstRun?: JobOutcome;
}

export interface CycleReport {
  readonly tier: JobKind;
  readonly recovery: RecoveryReport;
  readonly plan: Plan;
  /** Every job once, by partition. */
  readonly jobs: readonly JobReport[];
}

export type { JobDeps };

/**
 * Runs `attempt` as the state machine runs a task: again on an error its Retry names (by name),
 * up to the step's retries, after a wait drawn with full jitter below each retry delay.
 */
async function withRetry<T>(step: StepName, deps: RetryDeps, attempt: () => Promise<T>): Promise<T> {
  const delays = retryDelaysSeconds(retryOf(step, deps.childExecutionType ?? DEFAULT_CHILD_EXECUTION_TYPE));
  const sleep = deps.sleep ?? realSleep;
  for (let retry = 0; ; retry++) {
    try {
      return await attempt();
    } catch (error) {
      const delay = delays[retry];
      const retryable =
        error instanceof Error && (RETRYABLE_ERRORS as readonly string[]).includes(error.name);
      if (!retryable || delay === undefined) throw error;
      await sleep(Math.random() * delay * 1000);
    }
  }
}

/**
 * Runs one job through the partition steps (pipeline.ts) in order, as one Map item of the state
 * machine does: the chain ends where a step's `endsOn` says (the Choice after Compact), and every
 * later step runs even when an earlier one found the job superseded, as the chain does.
 */
export async function runJob(
  deps: JobDeps & RetryDeps & Pick<CycleDeps, 'onStep'>,
  job: Job,
): Promise<JobOutcome> {
  const steps: StepResult[] = [];
  const outcome: Record<string, StepResult> = {};
  try {
    for (const step of PARTITION_STEPS) {
      const result = await withRetry(step.step, deps, () => step.run(deps, job));
      steps.push(result);
      outcome[step.resultKey] = result;
      deps.onStep?.(step.step, job, result);
      if (endsChain(step, result)) break;
    }
  } catch (error) {
    // Isolate the partition: report it with its named error; recovery resolves what it left.
    if (!(error instanceof Error)) throw error;
    return { status: 'failed', steps, error };
  }
  const verdict = partitionVerdict(job.tier, { partition: job.partition, jobId: job.jobId, ...outcome });
  if (verdict === 'failed') throw new Error('a chain that returned cannot have failed');
  return { status: verdict, steps };
}

export function assignJobs(
  plan: Plan,
  deps: Pick<CycleDeps, 'clock' | 'randomHex' | 'executionId'>,
): WaveJob[] {
  const now = deps.clock.now();
  return plan.jobs.map((job: PlannedJob) => ({
    tier: job.tier,
    partition: job.partition,
    inputs: job.inputs,
    jobId: newJobId(now, deps.randomHex),
    executionId: deps.executionId,
    wave: job.wave,
  }));
}

/** The plan of one kind of job: a compaction tier's candidates, or the expired files. */
export async function planCycle(
  store: ObjectStore,
  config: CompactorConfig,
  clock: Clock,
  kind: JobKind,
  scope: PlanScope = {},
): Promise<Plan> {
  switch (kind) {
    case 'hourly':
    case 'daily':
    case 'monthly':
      return planTier(store, config, clock, kind, scope);
    case 'retention':
      // Retention rules already name tables; a scope there would be a second, silent filter.
      if (scope.only !== undefined) throw new ConfigError('"only" scopes a compaction tier, not retention');
      return planRetention(store, config, clock);
  }
}

/** Each wave's jobs in its Map items, grouped as the Plan step groups them (plan-store.ts). */
function jobItemsByWave(assigned: readonly WaveJob[], config: CompactorConfig): Job[][][] {
  const sized = assigned.map(({ wave, ...job }) => ({
    job,
    wave,
    partition: job.partition,
    compactSize: jobSize(job).compactSize,
  }));
  return itemsByWave(sized, config.layout, config.smallJobsPerItem).map((inWave) =>
    inWave.map((item) => item.jobs.map((s) => s.job)),
  );
}

type ItemRun = { readonly job: Job; readonly outcome: JobOutcome }[];

/**
 * Runs Map items `concurrency` at a time, each item's jobs one after another: the simulation's
 * scheduler needs one actor's calls in a deterministic order. The state machine runs an item's
 * jobs at once, an interleaving the simulation's overlapping cycles and zombie steps cover.
 */
async function runItems(
  deps: CycleDeps,
  items: readonly (readonly Job[])[],
  onJob: (job: Job, outcome: JobOutcome) => void,
): Promise<ItemRun[]> {
  const runs: ItemRun[] = items.map(() => []);
  await forEachLimit(items, deps.concurrency, async (item, index) => {
    for (const job of item) {
      const outcome = await runJob(deps, job);
      (runs[index] as ItemRun).push({ job, outcome });
      onJob(job, outcome);
    }
  });
  return runs;
}

export async function runCycle(deps: CycleDeps, tier: JobKind): Promise<CycleReport> {
  const recovery = await withRetry('recover', deps, () => recover(deps));
  const plan = await withRetry('plan', deps, () => planCycle(deps.store, deps.config, deps.clock, tier));
  const assigned = assignJobs(plan, deps);
  const jobs: JobReport[] = [];
  let done = 0;
  const progress = (job: Job, outcome: JobOutcome) =>
    deps.onProgress?.({ job, done: ++done, total: assigned.length, outcome });
  // Wave by wave, as the state machine runs one Map run per wave: a partition's next job starts
  // only once its previous one ended.
  for (const [wave, items] of jobItemsByWave(assigned, deps.config).entries()) {
    const first = await runItems(deps, items, progress);
    // An item fails when any of its jobs failed (its child's JobsFailed); a redrive runs it whole,
    // its committed jobs too, which answer from their receipts.
    const failed = deps.redriveFailedItems
      ? first.flatMap((run, index) => (run.some((r) => r.outcome.status === 'failed') ? [index] : []))
      : [];
    const redone = await runItems(
      deps,
      failed.map((index) => items[index] as Job[]),
      () => {},
    );
    const again = new Map(failed.map((index, n) => [index, redone[n]]));
    for (const [index, run] of first.entries()) {
      const redrive = again.get(index);
      for (const [n, { job, outcome }] of run.entries()) {
        const item = { wave, index, jobs: run.length };
        const redriven = redrive?.[n]?.outcome;
        jobs.push(redriven ? { job, outcome: redriven, item, firstRun: outcome } : { job, outcome, item });
      }
    }
  }
  jobs.sort((a, b) => compareKeys(a.job.partition, b.job.partition));
  return { tier, recovery, plan, jobs };
}
