/**
 * What a job is and what each step returns: the types every step, recovery, the cycle and the
 * Lambdas share. A job's forms, in the order it meets them: the planner's PlannedJob (no id yet);
 * the Job, once the plan step gives it an id and an execution; the JobItem the Map carries (the
 * Job's ref, its inputs stored aside); each step's StepResult; and the PartitionOutcome, the
 * Map iteration's results by step, from which pipeline.ts draws the one verdict.
 */

import type { CompactorConfig, JobKind, TierName } from './config.ts';
import type { Clock, Engine, MergeEngineName } from './engine.ts';
import type { InputRef, Manifest, ManifestState } from './manifest/manifest.ts';
import type { ObjectStore } from './object-store.ts';

/** User metadata every staged and final output carries. */
export const META_JOB_ID = 'compactor-job-id';

export const META_ROWS = 'compactor-rows';

export type JobEvent =
  | {
      readonly type: 'claimed' | 'staged' | 'published' | 'verified' | 'inputs-deleted' | 'cleared';
      readonly job: JobRef;
    }
  | {
      readonly type: 'rolled-back' | 'skipped' | 'failure-not-recorded';
      readonly job: JobRef;
      readonly reason: string;
    }
  | { readonly type: 'quarantined'; readonly key: string; readonly reason: string }
  | {
      readonly type: 'input-quarantined';
      readonly key: string;
      readonly partition: string;
      readonly reason: string;
    };

export interface StepDeps {
  readonly store: ObjectStore;
  readonly config: CompactorConfig;
  readonly clock: Clock;
  readonly signal?: AbortSignal;
  /** Progress, logs and metrics hook; must not throw. */
  readonly onEvent?: (event: JobEvent) => void;
}

export interface CompactDeps extends StepDeps {
  readonly engine: Engine;
  /** Local scratch folder (Lambda: /tmp); each job works in its own subfolder and removes it. */
  readonly workDir: string;
}

/** Identifies a job and who runs it. Steps act only when the manifest names both. */
export interface JobRef {
  readonly tier: JobKind;
  readonly partition: string;
  readonly jobId: string;
  readonly executionId: string;
}

/**
 * A job: who runs it and which inputs it takes. `Job<TierName>` merges its inputs into outputs;
 * `Job<'retention'>` expires them (expireStep).
 */
export interface Job<Kind extends JobKind = JobKind> extends JobRef {
  readonly tier: Kind;
  readonly inputs: readonly InputRef[];
}

export function isCompactionJob(job: Job): job is Job<TierName> {
  return job.tier !== 'retention';
}

export type StepStatus =
  /** The step did its work. */
  | 'done'
  /** An earlier attempt already did it (retry, redrive). */
  | 'already-done'
  /** Nothing to do: the partition is leased by another job, or an input changed. */
  | 'skipped'
  /** The manifest is gone (cleared or rolled back) or now names another owner. */
  | 'superseded';

export interface StepResult {
  readonly jobId: string;
  readonly tier: JobKind;
  readonly partition: string;
  readonly status: StepStatus;
  /** The manifest state after the step ('cleared' once the manifest is gone). */
  readonly state: ManifestState | 'cleared' | 'none';
  readonly reason?: string;
  /** A skip caused by this setting's value (its key), which the operator must fix. */
  readonly misconfigured?: string;
  readonly inputs?: number;
  readonly inputBytes?: number;
  readonly inputRows?: number;
  /** With dedup: the inputs' distinct rows (exact) or keys (last), which the outputs hold. */
  readonly distinctRows?: number;
  readonly outputs?: number;
  readonly outputBytes?: number;
  readonly outputRows?: number;
  readonly keptInputs?: number;
  readonly quarantinedInputs?: number;
  /** Footer key-value metadata keys of the inputs that the outputs do not carry (footer-metadata.ts). */
  readonly droppedMetadataKeys?: readonly string[];
  /** Sort keys (`sortKeys`) no input of the partition has: the outputs are not sorted by them. */
  readonly unsortedBy?: readonly string[];
  /** compact: the engine that wrote the outputs (merge-engine.ts). */
  readonly mergeEngine?: MergeEngineName;
}

/**
 * A job's outputs staged, or published, at once. One output's upload or copy keeps only its own
 * parts in flight, and a job of several outputs would otherwise wait on each in turn; S3 scales by
 * connections ("Horizontal scaling of storage connections",
 * https://docs.aws.amazon.com/AmazonS3/latest/userguide/optimizing-performance-guidelines.html).
 */
export const OUTPUTS_IN_FLIGHT = 4;

export function withSignal(deps: StepDeps): { signal?: AbortSignal } {
  return deps.signal ? { signal: deps.signal } : {};
}

export function result(
  ref: JobRef,
  status: StepStatus,
  state: StepResult['state'],
  extra: Partial<StepResult> = {},
): StepResult {
  return { jobId: ref.jobId, tier: ref.tier, partition: ref.partition, status, state, ...extra };
}

/**
 * A job's figures as its steps report them: from its manifest, or from its receipt, which carries
 * the same fields (receipts.ts receiptOfManifest).
 */
export type JobFigures = Pick<
  Manifest,
  'inputs' | 'inputRows' | 'distinctRows' | 'keptInputs' | 'quarantinedInputs' | 'droppedMetadataKeys'
> & { readonly outputs?: readonly { readonly size: number; readonly rows: number }[] };

export function summary(manifest: JobFigures): Partial<StepResult> {
  const outputs = manifest.outputs ?? [];
  return {
    inputs: manifest.inputs.length,
    inputBytes: manifest.inputs.reduce((sum, i) => sum + i.size, 0),
    ...(manifest.inputRows === undefined ? {} : { inputRows: manifest.inputRows }),
    ...(manifest.distinctRows === undefined ? {} : { distinctRows: manifest.distinctRows }),
    ...(outputs.length === 0
      ? {}
      : {
          outputs: outputs.length,
          outputBytes: outputs.reduce((sum, o) => sum + o.size, 0),
          outputRows: outputs.reduce((sum, o) => sum + o.rows, 0),
        }),
    ...(manifest.keptInputs?.length ? { keptInputs: manifest.keptInputs.length } : {}),
    ...(manifest.quarantinedInputs?.length ? { quarantinedInputs: manifest.quarantinedInputs.length } : {}),
    ...(manifest.droppedMetadataKeys?.length ? { droppedMetadataKeys: manifest.droppedMetadataKeys } : {}),
  };
}
