/**
 * One compaction cycle run in-process: recover -> plan -> per-partition steps with bounded
 * concurrency. It calls the same step functions the Lambdas call, in the same order the
 * state machine does; a failing partition is reported and never stops the others.
 */

import type { CompactorConfig, JobKind } from './config.ts';
import type { Clock } from './engine.ts';
import { ConfigError, RETRYABLE_ERRORS } from './errors.ts';
import type { CompactDeps, JobSpec, StepDeps, StepResult } from './job.ts';
import { newJobId } from './manifest.ts';
import { compareKeys, type ObjectStore } from './object-store.ts';
import { type Plan, type PlannedJob, type PlanScope, planTier } from './planner.ts';
import { type RecoveryDeps, type RecoveryReport, recover } from './recovery.ts';
import { expireStep, planRetention } from './retention.ts';
import { clearStep } from './steps/clear.ts';
import { compactStep } from './steps/compact.ts';
import { deleteInputsStep } from './steps/delete-inputs.ts';
import { publishStep } from './steps/publish.ts';
import { verifyStep } from './steps/verify.ts';

/** How a step is retried on a transient error, as the state machine's Retry does. */
export interface RetryPolicy {
  /** Attempts per step, the first included. */
  readonly attempts: number;
  /** Waits before attempt n (n >= 2). */
  readonly sleep: (attempt: number) => Promise<void>;
}

export const DEFAULT_RETRY: RetryPolicy = {
  attempts: 4,
  sleep: (attempt) =>
    new Promise((resolve) => setTimeout(resolve, 200 * 2 ** (attempt - 2) * (0.5 + Math.random()))),
};

export interface CycleDeps extends CompactDeps, RecoveryDeps {
  readonly retry?: RetryPolicy;
  /** Partitions compacted at once. */
  readonly concurrency: number;
  /** Random hex for job ids. */
  readonly randomHex: () => string;
  readonly onProgress?: (progress: JobProgress) => void;
}

export interface JobProgress {
  readonly job: JobSpec;
  readonly done: number;
  readonly total: number;
  readonly outcome: JobOutcome;
}

export type JobOutcome =
  | { readonly status: 'compacted' | 'skipped' | 'superseded'; readonly steps: readonly StepResult[] }
  | { readonly status: 'failed'; readonly steps: readonly StepResult[]; readonly error: Error };

export interface CycleReport {
  readonly tier: JobKind;
  readonly recovery: RecoveryReport;
  readonly plan: Plan;
  readonly jobs: readonly { readonly job: JobSpec; readonly outcome: JobOutcome }[];
}

/** What runJob needs: a compaction job also needs the engine and a work folder, a retention job neither. */
export type JobDeps = StepDeps & Partial<Pick<CompactDeps, 'engine' | 'workDir'>>;

/** Runs one job through every step, stopping when a step says there is nothing more to do. */
export async function runJob(
  deps: JobDeps,
  job: JobSpec,
  retry: RetryPolicy = DEFAULT_RETRY,
): Promise<JobOutcome> {
  const steps: StepResult[] = [];
  const attempt = async (step: () => Promise<StepResult>): Promise<StepResult> => {
    for (let n = 1; ; n++) {
      try {
        return await step();
      } catch (error) {
        const retryable =
          error instanceof Error && (RETRYABLE_ERRORS as readonly string[]).includes(error.name);
        if (!retryable || n >= retry.attempts) throw error;
        await retry.sleep(n + 1);
      }
    }
  };
  try {
    // A retention job's first step claims, checks and commits; the later steps are the same.
    const compacted = await attempt(() => {
      if (job.tier === 'retention') return expireStep(deps, job);
      const { engine, workDir } = deps;
      if (!engine || workDir === undefined) {
        throw new ConfigError(`a ${job.tier} job needs the engine and a work folder`);
      }
      return compactStep({ ...deps, engine, workDir }, job);
    });
    steps.push(compacted);
    if (compacted.status === 'skipped' || compacted.status === 'superseded') {
      return { status: compacted.status, steps };
    }
    for (const step of [publishStep, verifyStep, deleteInputsStep, clearStep]) {
      const stepResult = await attempt(() => step(deps, job));
      steps.push(stepResult);
      if (stepResult.status === 'superseded') return { status: 'superseded', steps };
    }
    return { status: 'compacted', steps };
  } catch (error) {
    // Isolate the partition: report it with its named error; recovery resolves what it left.
    if (!(error instanceof Error)) throw error;
    return { status: 'failed', steps, error };
  }
}

export function assignJobs(
  plan: Plan,
  deps: Pick<CycleDeps, 'clock' | 'randomHex' | 'executionId'>,
): JobSpec[] {
  const now = deps.clock.now();
  return plan.jobs.map((job: PlannedJob) => ({
    tier: job.tier,
    partition: job.partition,
    inputs: job.inputs,
    jobId: newJobId(now, deps.randomHex),
    executionId: deps.executionId,
  }));
}

/** The plan of one kind of job: a compaction tier's candidates, or the expired files. */
export async function planJobs(
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
  const recovery = await recover(deps);
  const plan = await planJobs(deps.store, deps.config, deps.clock, tier);
  const specs = assignJobs(plan, deps);
  const jobs: { job: JobSpec; outcome: JobOutcome }[] = [];
  let next = 0;
  const workers = Array.from({ length: Math.min(deps.concurrency, specs.length) }, async () => {
    while (next < specs.length) {
      const job = specs[next++] as JobSpec;
      const outcome = await runJob(deps, job, deps.retry);
      jobs.push({ job, outcome });
      deps.onProgress?.({ job, done: jobs.length, total: specs.length, outcome });
    }
  });
  await Promise.all(workers);
  jobs.sort((a, b) => compareKeys(a.job.partition, b.job.partition));
  return { tier, recovery, plan, jobs };
}
