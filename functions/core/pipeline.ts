/**
 * The workflow's steps, written once: their order, the state name the console shows, where each
 * result sits in the state's data, the manifest state each partition step moves from and to,
 * which Lambda size (and so timeout) each gets, how each is retried, and the one verdict on a
 * partition's outcome.
 *
 * From this list come the state machine (cdk/constructs/compaction-workflow.ts builds its chain,
 * Choice, result Pass state, timeouts and Retry from it), the Lambdas (one per step, named by
 * `step`, cdk/constructs/compactor-functions.ts), the local runner's bindings, the in-process
 * cycle (cycle.ts walks the same rows with the same retry numbers), Summary and the CLI's table
 * (both judge a partition with `partitionVerdict`). Adding a step is one row here, plus its
 * handler `functions/<step>.ts` and its grants (cdk/constructs/step-grants.ts).
 */

import type { JobKind } from './config.ts';
import { ConfigError } from './errors.ts';
import {
  type CompactDeps,
  isCompactionJob,
  type Job,
  type StepDeps,
  type StepResult,
  type StepStatus,
} from './job.ts';
import type { ManifestState } from './manifest/manifest.ts';
import { expireStep } from './retention.ts';
import { clearManifestStep } from './steps/clear-manifest.ts';
import { compactStep } from './steps/compact.ts';
import { deleteInputsStep } from './steps/delete-inputs.ts';
import { publishStep } from './steps/publish.ts';
import { verifyStep } from './steps/verify.ts';

/**
 * The Map's child workflows: EXPRESS (at most five minutes each) or STANDARD. The parent is always
 * Standard. The stack's `map.childExecutionType`; its budget arithmetic is in cdk/child-budget.ts.
 */
export const EXECUTION_TYPES = ['EXPRESS', 'STANDARD'] as const;
export type ExecutionType = (typeof EXECUTION_TYPES)[number];
export const DEFAULT_CHILD_EXECUTION_TYPE: ExecutionType = 'EXPRESS';

/** Which of the stack's three Lambda sizes (`lambda.compact`, `.partitionSteps`, `.others`) a step runs with. */
export type LambdaSizeClass = 'compact' | 'partitionSteps' | 'others';

/** Retry of a task on a transient error (ASL Retry; full jitter). */
export interface StepRetry {
  readonly intervalSeconds: number;
  readonly backoffRate: number;
  /** Retries after the first attempt (ASL MaxAttempts). */
  readonly maxAttempts: number;
  readonly maxDelaySeconds: number;
}

/**
 * Standard: five retries with backoff. Express: one retry after at most a second, or the chain's
 * worst case would not fit five minutes (cdk/child-budget.ts).
 */
export const RETRY: Readonly<Record<ExecutionType, StepRetry>> = {
  EXPRESS: { intervalSeconds: 1, backoffRate: 2, maxAttempts: 1, maxDelaySeconds: 1 },
  STANDARD: { intervalSeconds: 2, backoffRate: 2, maxAttempts: 5, maxDelaySeconds: 60 },
};

/**
 * The waits before each retry, at their longest: the interval times the backoff rate per retry,
 * capped at MaxDelaySeconds; full jitter only shortens them ("a random number between 0 and the
 * computed backoff", https://docs.aws.amazon.com/cdk/api/v2/docs/aws-cdk-lib.aws_stepfunctions.JitterType.html).
 */
export function retryDelaysSeconds(retry: StepRetry): number[] {
  return Array.from({ length: retry.maxAttempts }, (_, k) =>
    Math.min(retry.intervalSeconds * retry.backoffRate ** k, retry.maxDelaySeconds),
  );
}

interface StepRow {
  /** The step's name: its handler file `functions/<step>.ts`, its function, its metrics and logs. */
  readonly step: string;
  /** The state's name in the state machine (the console and the execution history show it). */
  readonly stateName: string;
  /** Where the task's result sits in the state's data (`$.<resultKey>`) and in a partition's outcome. */
  readonly resultKey: string;
  readonly size: LambdaSizeClass;
}

/** What a job step needs: a compaction job also needs the engine and a work folder, a retention job neither. */
export type JobDeps = StepDeps & Partial<Pick<CompactDeps, 'engine' | 'workDir'>>;

export interface PartitionStep extends StepRow {
  /** The manifest state the step acts on ('none': no manifest yet) and the one it leaves. */
  readonly from: ManifestState | 'none';
  readonly to: ManifestState | 'cleared';
  /**
   * Statuses after which the partition's chain ends at this step: in the state machine a Choice
   * (`choice`) after the task sends them to a Pass state (`endState`) that ends the item.
   */
  readonly endsOn?: {
    readonly statuses: readonly StepStatus[];
    readonly choice: string;
    readonly endState: string;
  };
  readonly run: (deps: JobDeps, job: Job) => Promise<StepResult>;
}

/**
 * A compaction job claims, stages and merges; a retention job claims, re-checks and commits its
 * expired files (publish and verify then find it verified; delete inputs and clear finish it).
 */
export async function compactOrExpire(deps: JobDeps, job: Job): Promise<StepResult> {
  if (!isCompactionJob(job)) return expireStep(deps, job);
  const { engine, workDir } = deps;
  if (!engine || workDir === undefined) {
    throw new ConfigError(`a ${job.tier} job needs the engine and a work folder`);
  }
  return compactStep({ ...deps, engine, workDir }, job);
}

/** The execution's steps before the Map: every manifest left anywhere is resolved, then the plan. */
export const BEFORE_PARTITIONS = [
  { step: 'recover', stateName: 'Recover', resultKey: 'recovery', size: 'others' },
  { step: 'plan', stateName: 'Plan', resultKey: 'plan', size: 'others' },
] as const satisfies readonly StepRow[];

/** One partition's chain: each of the Map's items runs these in order. */
export const PARTITION_STEPS = [
  {
    step: 'compact',
    stateName: 'Compact',
    resultKey: 'compact',
    size: 'compact',
    from: 'none',
    to: 'staged',
    endsOn: { statuses: ['skipped', 'superseded'], choice: 'Staged?', endState: 'Skipped' },
    run: compactOrExpire,
  },
  {
    step: 'publish',
    stateName: 'Publish',
    resultKey: 'publish',
    size: 'partitionSteps',
    from: 'staged',
    to: 'published',
    run: publishStep,
  },
  {
    step: 'verify',
    stateName: 'Verify',
    resultKey: 'verify',
    size: 'partitionSteps',
    from: 'published',
    to: 'verified',
    run: verifyStep,
  },
  {
    step: 'delete-inputs',
    stateName: 'Delete inputs',
    resultKey: 'deleteInputs',
    size: 'partitionSteps',
    from: 'verified',
    to: 'inputs-deleted',
    run: deleteInputsStep,
  },
  {
    step: 'clear-manifest',
    stateName: 'Clear manifest',
    resultKey: 'clearManifest',
    size: 'partitionSteps',
    from: 'inputs-deleted',
    to: 'cleared',
    run: clearManifestStep,
  },
] as const satisfies readonly PartitionStep[];

/** The execution's step after the Map: the run's totals, metrics and tolerated failures. */
export const AFTER_PARTITIONS = [
  { step: 'summary', stateName: 'Summary', resultKey: 'summary', size: 'others' },
] as const satisfies readonly StepRow[];

/** Every step, in workflow order. */
export const WORKFLOW_STEPS: readonly (StepRow | PartitionStep)[] = [
  ...BEFORE_PARTITIONS,
  ...PARTITION_STEPS,
  ...AFTER_PARTITIONS,
];

export type StepName =
  | (typeof BEFORE_PARTITIONS)[number]['step']
  | (typeof PARTITION_STEPS)[number]['step']
  | (typeof AFTER_PARTITIONS)[number]['step'];
export type PartitionStepName = (typeof PARTITION_STEPS)[number]['step'];
export type PartitionResultKey = (typeof PARTITION_STEPS)[number]['resultKey'];

/** The step names, in workflow order. */
export const STEPS = WORKFLOW_STEPS.map((s) => s.step) as readonly StepName[];

/** A step's row by name. */
export function stepRow(step: StepName): StepRow | PartitionStep {
  const row = WORKFLOW_STEPS.find((s) => s.step === step);
  if (!row) throw new ConfigError(`no step ${step}`);
  return row;
}

/** How a step is retried: the chain's steps as the Map's children, the rest as the (Standard) parent. */
export function retryOf(step: StepName, childType: ExecutionType): StepRetry {
  return PARTITION_STEPS.some((s) => s.step === step) ? RETRY[childType] : RETRY.STANDARD;
}

/** The numbers a step's result carries, as far as the verdict and the totals read them. */
export interface StepNumbers {
  readonly status?: string;
  readonly state?: string;
  readonly reason?: string;
  /** A skip caused by this setting's value (its key). */
  readonly misconfigured?: string;
  readonly inputs?: number;
  readonly outputs?: number;
  readonly inputBytes?: number;
  readonly outputBytes?: number;
  readonly inputRows?: number;
  readonly outputRows?: number;
  /** With dedup: the inputs' distinct rows, which the outputs hold. */
  readonly distinctRows?: number;
  readonly quarantinedInputs?: number;
  /** Sort keys no input had (compact). */
  readonly unsortedBy?: readonly string[];
}

/**
 * What one Map item returns (the chain's last state): each step's result under its `resultKey`,
 * as far as the chain went.
 */
export type PartitionOutcome = {
  readonly partition: string;
  readonly jobId?: string;
  /** The error that ended the job's chain (the state machine's `Job failed` state records it). */
  readonly failure?: { readonly Error: string; readonly Cause: string };
} & { readonly [K in PartitionResultKey]?: StepNumbers } & {
  /**
   * The same results from a definition deployed before the steps took their present names: a
   * redriven execution runs its own definition, so its Map results may still name them so.
   */
  readonly upload?: StepNumbers;
  readonly clear?: StepNumbers;
};

/** A step's result in an outcome, by its present name or the one an older definition gave it. */
export function resultOf(outcome: PartitionOutcome, key: PartitionResultKey): StepNumbers | undefined {
  if (key === 'publish') return outcome.publish ?? outcome.upload;
  if (key === 'clearManifest') return outcome.clearManifest ?? outcome.clear;
  return outcome[key];
}

/**
 * What became of one partition in one execution:
 * - compacted / expired: this execution committed the job (its publish step did it or found it
 *   done) and its clear step saw the job through; a retention job's commit expires files;
 * - skipped: the compact step found nothing to do (the partition is leased, an input changed,
 *   every input was quarantined);
 * - superseded: the job was rolled back or taken over by recovery meanwhile: not this execution's;
 * - failed: the chain failed (a step's error its Retry did not absorb).
 */
export type PartitionVerdict = 'compacted' | 'expired' | 'skipped' | 'superseded' | 'failed';
export const PARTITION_VERDICTS: readonly PartitionVerdict[] = [
  'compacted',
  'expired',
  'skipped',
  'superseded',
  'failed',
];

/** The one verdict on a partition: `undefined` outcome is a failed Map item. */
export function partitionVerdict(tier: JobKind, outcome: PartitionOutcome | undefined): PartitionVerdict {
  if (outcome === undefined || outcome.failure !== undefined) return 'failed';
  const compact = resultOf(outcome, 'compact')?.status;
  if (compact === 'skipped') return 'skipped';
  const published = resultOf(outcome, 'publish')?.status;
  const committed = published === 'done' || published === 'already-done';
  if (committed && resultOf(outcome, 'clearManifest')?.state === 'cleared') return committedVerdict(tier);
  return 'superseded';
}

/** The verdict on a job this execution committed and cleared: a retention job's commit expires files. */
export function committedVerdict(tier: JobKind): PartitionVerdict {
  return tier === 'retention' ? 'expired' : 'compacted';
}

/** Whether the verdict means this execution committed the job (its numbers count in the totals). */
export function isCommitted(verdict: PartitionVerdict): boolean {
  return verdict === 'compacted' || verdict === 'expired';
}

/** Whether a partition's chain ends after this step's result (the state machine's Choice). */
export function endsChain(step: PartitionStep, result: Pick<StepResult, 'status'>): boolean {
  return step.endsOn?.statuses.includes(result.status) ?? false;
}

/** The partition steps up to and including `step`: the results a chain that ends there carries. */
export function stepsThrough(step: PartitionStep): readonly PartitionStep[] {
  return PARTITION_STEPS.slice(0, PARTITION_STEPS.indexOf(step as (typeof PARTITION_STEPS)[number]) + 1);
}
