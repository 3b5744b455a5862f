/**
 * The names the stack (cdk/) and the code (functions/) must agree on, written once: the steps,
 * the EMF metrics the dashboard and alarms read, their namespace and service, the environment
 * variables the stack sets and the Lambdas read, the errors Step Functions retries, and the shape
 * of a Lambda's size. Pure: no SDK, no process.env, nothing happens on import.
 */

import { RETRYABLE_ERRORS } from './core/errors.ts';
import { STEPS, type StepName, WORKFLOW_STEPS } from './core/pipeline.ts';

/** The steps, in workflow order, each named after its handler file `functions/<step>.ts` (core/pipeline.ts). */
export { STEPS, type StepName };

/**
 * The scheduled canary's Lambdas (the stack's `canary`), each named after its handler file
 * `functions/<name>.ts`: write the canary table, check it after its compaction, remove it.
 */
export const CANARY_STEPS = ['canary-seed', 'canary-check', 'canary-remove'] as const;
export type CanaryStepName = (typeof CANARY_STEPS)[number];

/** Each step's state name in the state machine (the console and execution history show these). */
export const STEP_STATE_NAMES = Object.fromEntries(
  WORKFLOW_STEPS.map((s) => [s.step, s.stateName]),
) as Readonly<Record<StepName, string>>;

/** The EMF metrics the handlers publish and the dashboard and alarms read. */
export const METRICS = {
  compacted: 'PartitionsCompacted',
  skipped: 'PartitionsSkipped',
  failed: 'PartitionsFailed',
  bytesIn: 'BytesIn',
  bytesOut: 'BytesOut',
  rowsIn: 'RowsIn',
  rowsOut: 'RowsOut',
  filesIn: 'FilesIn',
  filesOut: 'FilesOut',
  quarantined: 'Quarantined',
  recoveryActions: 'RecoveryActions',
  /** Manifests the Recover step could not resolve (their partitions wait; the rest is planned). */
  recoveryUnresolved: 'RecoveryUnresolved',
  /** One per execution that reached Plan, with dimension `tier` (missed-start alarms). */
  executionsPlanned: 'ExecutionsPlanned',
  /** Plan's, with dimension `tier`: seconds since the oldest eligible partition became due (backlog alarms). */
  oldestEligibleAge: 'OldestEligibleAgeSeconds',
  /** Plan's, with dimension `tier`: partitions eligible for the tier, planned or not. */
  eligiblePartitions: 'EligiblePartitions',
} as const;
export type MetricName = (typeof METRICS)[keyof typeof METRICS];

/** The EMF metrics' default CloudWatch namespace (the stack's `metricsNamespace`). */
export const METRICS_NAMESPACE = 'Compactor';

/** Powertools' service name: the logs' `service` and every metric's `service` dimension. */
export const SERVICE_NAME = 'compactor';

/** The environment variables the stack sets on the step Lambdas. */
export const ENV = {
  dataBucket: 'DATA_BUCKET',
  /** Data root, '' or ending with '/'. */
  dataPrefix: 'DATA_PREFIX',
  /** The core's ConfigInput as JSON. */
  config: 'COMPACTOR_CONFIG',
  /** Which step the function runs (the local runner binds handlers by it). */
  step: 'COMPACTOR_STEP',
  serviceName: 'POWERTOOLS_SERVICE_NAME',
  metricsNamespace: 'POWERTOOLS_METRICS_NAMESPACE',
  /** The DuckDB Lambdas' only (compact, canary seed and check): work folder, DuckDB's memory limit and threads. */
  workDir: 'WORK_DIR',
  duckDbMemoryLimit: 'DUCKDB_MEMORY_LIMIT',
  duckDbThreads: 'DUCKDB_THREADS',
} as const;

/** Where a Lambda works in /tmp (the stack sets it on the DuckDB Lambdas; the others default to it). */
export const DEFAULT_WORK_DIR = '/tmp/compactor';

/**
 * The error a Map fails with when more of its items failed than it tolerates ("the maximum
 * percentage of failed items before the Map Run fails",
 * https://docs.aws.amazon.com/step-functions/latest/apireference/API_UpdateMapRun.html).
 * The execution fails in the Map state, so a redrive re-runs the Map Run's failed children only
 * ("A redriven parent workflow redrives all the unsuccessful states, including Distributed Map",
 * https://docs.aws.amazon.com/step-functions/latest/dg/redrive-map-run.html).
 */
export const MAP_FAILED_ERROR = 'States.ExceedToleratedFailureThreshold';

/**
 * The error a Map item (a child workflow) fails with when one of its jobs failed: each job's own
 * error and cause are in the item's cause, a JSON list of its jobs' outcomes, which Summary reads
 * (core/run-summary.ts judgeMapItem).
 */
export const ITEM_FAILED_ERROR = 'JobsFailed';

/**
 * Errors worth retrying the same step for; everything else fails the partition. The Lambda.*
 * names are the set Step Functions recommends retrying for every Lambda task
 * (https://docs.aws.amazon.com/step-functions/latest/dg/bp-lambda-serviceexception.html), plus
 * throttling.
 */
export const TRANSIENT_ERRORS: readonly string[] = [
  ...RETRYABLE_ERRORS,
  'Lambda.ClientExecutionTimeoutException',
  'Lambda.ServiceException',
  'Lambda.AWSLambdaException',
  'Lambda.SdkClientException',
  'Lambda.TooManyRequestsException',
];

/** A step Lambda's size; the defaults are the stack's (`STACK_DEFAULTS.lambda` in cdk/config-defaults.ts). */
export interface LambdaSize {
  readonly memoryMb: number;
  readonly ephemeralStorageMb: number;
  readonly timeoutSeconds: number;
}
