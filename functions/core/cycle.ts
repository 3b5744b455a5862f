/**
 * One compaction cycle run in-process: recover -> plan -> per-partition steps with bounded
 * concurrency. It walks the steps of pipeline.ts, the list the state machine is built from, with
 * the same retry numbers, calling the same step functions the Lambdas call; a failing partition
 * is reported and never stops the others. It runs jobs `concurrency` at a time, where the state
 * machine runs Map items, each item's jobs at once (plan-store.ts mapItems): the same chain per
 * job in another interleaving, which the simulation's overlapping cycles cover. test/core/pipeline-equivalence.test.ts runs seeded
 * faults through this and through the synthesized state machine and compares them step by step.
 */

import type { CompactorConfig, JobKind } from './config.ts';
import type { Clock } from './engine.ts';
import { ConfigError, RETRYABLE_ERRORS } from './errors.ts';
import type { CompactDeps, Job, StepResult } from './job.ts';
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
import { byWave, type WaveJob } from './plan-store.ts';
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
  /** Partitions compacted at once. */
  readonly concurrency: number;
  /** Random hex for job ids. */
  readonly randomHex: () => string;
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

export interface CycleReport {
  readonly tier: JobKind;
  readonly recovery: RecoveryReport;
  readonly plan: Plan;
  readonly jobs: readonly { readonly job: Job; readonly outcome: JobOutcome }[];
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

export async function runCycle(deps: CycleDeps, tier: JobKind): Promise<CycleReport> {
  const recovery = await withRetry('recover', deps, () => recover(deps));
  const plan = await withRetry('plan', deps, () => planCycle(deps.store, deps.config, deps.clock, tier));
  const assigned = assignJobs(plan, deps);
  const jobs: { job: Job; outcome: JobOutcome }[] = [];
  // Wave by wave, as the state machine runs one Map run per wave: a partition's next job starts
  // only once its previous one ended.
  for (const inWave of byWave(assigned)) {
    let next = 0;
    const workers = Array.from({ length: Math.min(deps.concurrency, inWave.length) }, async () => {
      while (next < inWave.length) {
        const { wave: _, ...job } = inWave[next++] as WaveJob;
        const outcome = await runJob(deps, job);
        jobs.push({ job, outcome });
        deps.onProgress?.({ job, done: jobs.length, total: assigned.length, outcome });
      }
    });
    await Promise.all(workers);
  }
  jobs.sort((a, b) => compareKeys(a.job.partition, b.job.partition));
  return { tier, recovery, plan, jobs };
}
