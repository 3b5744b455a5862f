/**
 * The per-partition chain (compact -> publish -> verify -> delete inputs -> clear manifest) runs
 * as a Distributed Map child workflow, EXPRESS by default, STANDARD by choice
 * (`compactor.map.childExecutionType`). This file holds what the choice changes and the
 * arithmetic that keeps an Express child inside its limit. Pure (no aws-cdk-lib): cdk/config.ts
 * checks settings with it at synth time, the workflow construct renders it.
 *
 * Facts designed around:
 * - An Express execution lasts at most five minutes
 *   (https://docs.aws.amazon.com/step-functions/latest/dg/concepts-standard-vs-express.html).
 * - AWS does not say how a Map Run starts its Express children, only that redriven ones are
 *   "started using the StartExecution API action" (https://docs.aws.amazon.com/step-functions/latest/dg/redrive-map-run.html).
 *   Asynchronous Express is at-least-once (https://docs.aws.amazon.com/step-functions/latest/dg/express-at-least-once-execution.html),
 *   so the design assumes it, the conservative choice: a child may run twice, even at once.
 *   Every step is idempotent under the same job and tolerates an earlier attempt still running
 *   (DESIGN "The job protocol"); test/core/concurrency.test.ts and
 *   test/cli/local-workflow.test.ts run a whole chain twice and overlapping.
 * - Redriving a Map Run reruns its failed Express children from their start with StartExecution
 *   (https://docs.aws.amazon.com/step-functions/latest/apireference/API_RedriveExecution.html).
 * - Step Functions keeps no execution history for Express executions; it stores a Map Run's
 *   Express children's response and status
 *   (https://docs.aws.amazon.com/step-functions/latest/dg/concepts-statemachines.html), and their
 *   states are in CloudWatch Logs when the state machine logs them (cw-logs.html). It logs ALL
 *   events with execution data (compaction-workflow.ts).
 */

import { DEFAULTS } from '../functions/core/config.ts';
import {
  compactEstimateSeconds,
  compactSecondsAt,
  MEASURED_COMPACT,
  S3_WAIT,
} from '../functions/core/cost/index.ts';
import { SMALL_COMPACT, smallCompactMemoryMb } from '../functions/core/lambda-sizing.ts';
import {
  EXECUTION_TYPES,
  type ExecutionType,
  PARTITION_STEPS,
  RETRY,
  retryDelaysSeconds,
  type StepRetry,
} from '../functions/core/pipeline.ts';

export { retryDelaysSeconds };
export type ChildRetry = StepRetry;

export const CHILD_EXECUTION_TYPES = EXECUTION_TYPES;
export type ChildExecutionType = ExecutionType;

/** An Express execution's maximum duration (concepts-standard-vs-express, above). */
export const EXPRESS_MAX_SECONDS = 300;
/**
 * Kept free of the five minutes for state transitions and invocation overhead the task timeouts
 * do not cover: the chain's worst case must be at most EXPRESS_MAX_SECONDS - this.
 */
export const EXPRESS_MARGIN_SECONDS = 30;
export const EXPRESS_BUDGET_SECONDS = EXPRESS_MAX_SECONDS - EXPRESS_MARGIN_SECONDS;

/** Retry of each of the chain's Lambda tasks (pipeline.ts holds the numbers, the cycle runs them too). */
export function childRetry(type: ChildExecutionType): StepRetry {
  return RETRY[type];
}

/**
 * A function's Init phase is limited to 10 seconds; when it does not finish in time, Lambda
 * retries it at the first invocation under the function's timeout
 * (https://docs.aws.amazon.com/lambda/latest/dg/lambda-runtime-environment.html). So a cold
 * invocation can last the Init cap plus the timeout.
 */
export const LAMBDA_INIT_CAP_SECONDS = 10;
/** Beyond the Init cap: the invoke's own round trip and queueing, which no page bounds. */
export const INVOKE_MARGIN_SECONDS = 2;

/**
 * A task waits this much longer than its Lambda's timeout, so the chain never moves on while the
 * Lambda still runs: Express the Init cap and a margin; Standard keeps its minute.
 */
export function taskSlackSeconds(type: ChildExecutionType): number {
  return type === 'EXPRESS' ? LAMBDA_INIT_CAP_SECONDS + INVOKE_MARGIN_SECONDS : 60;
}

export function taskTimeoutSeconds(lambdaTimeoutSeconds: number, type: ChildExecutionType): number {
  return lambdaTimeoutSeconds + taskSlackSeconds(type);
}

export interface ChainTaskBound {
  readonly task: string;
  readonly attempts: number;
  readonly taskTimeoutSeconds: number;
  readonly backoffSeconds: number;
  readonly worstSeconds: number;
}

/**
 * The longest one child can take: every attempt of every task running into its task timeout,
 * with every retry wait at its longest. The Choice and Pass states add only transitions (margin).
 */
export function chainWorstCase(settings: {
  readonly type: ChildExecutionType;
  readonly compactTimeoutSeconds: number;
  readonly partitionStepTimeoutSeconds: number;
}): { readonly totalSeconds: number; readonly tasks: readonly ChainTaskBound[] } {
  const retry = childRetry(settings.type);
  const backoffSeconds = retryDelaysSeconds(retry).reduce((sum, d) => sum + d, 0);
  const bound = (task: string, lambdaTimeout: number): ChainTaskBound => {
    const timeout = taskTimeoutSeconds(lambdaTimeout, settings.type);
    const attempts = 1 + retry.maxAttempts;
    return {
      task,
      attempts,
      taskTimeoutSeconds: timeout,
      backoffSeconds,
      worstSeconds: attempts * timeout + backoffSeconds,
    };
  };
  const tasks = PARTITION_STEPS.map((s) =>
    bound(
      s.stateName.toLowerCase(),
      s.size === 'compact' ? settings.compactTimeoutSeconds : settings.partitionStepTimeoutSeconds,
    ),
  );
  return { totalSeconds: tasks.reduce((sum, t) => sum + t.worstSeconds, 0), tasks };
}

/** A job at its bounds must be estimated to take at most this share of the compact timeout. */
export const JOB_TIMEOUT_SHARE = 0.5;

const MiB = 1024 * 1024;

export interface ChildDefaults {
  readonly compactTimeoutSeconds: number;
  readonly partitionStepTimeoutSeconds: number;
  readonly maxJobBytes: number;
  readonly maxJobFiles: number;
  /**
   * Small jobs a Map item carries (plan-store.ts mapItems). An Express child is billed by its
   * start, request and duration, which the item's jobs share. A Standard child is billed per state
   * entered: an item of several jobs enters 3 states of its own (its Map, the failure Choice, its
   * end) besides its start, so sharing them pays only from 4 jobs an item on (the start and 3
   * states over 4 jobs, 1 each, as a chain of its own pays), while the hourly cycle of a lake
   * brings each table one hour: 1, no item states.
   */
  readonly smallJobsPerItem: number;
}

/**
 * Express: compact 36 s and the four partition steps 9 s give a worst case of
 * 2 x (36 + 12) + 1 + 4 x (2 x (9 + 12) + 1) = 97 + 172 = 269 s <= 270 s (five minutes less the
 * margin). A job of 256 MiB in 2,000 files is estimated at
 * 268.4 MB x 0.0141 + 2000 x 0.00022 + 268.4 / 90 + 2000 x 0.025 / 8 = 3.78 + 0.44 + 2.98 + 6.25
 * = 13.5 s, under half of 36 s; 512 MiB would be 20.2 s, over it. The small compact function
 * (functions/core/lambda-sizing.ts) has the same timeout; its largest job, 64 MiB in 2,000 files
 * on 0.58 vCPU, is estimated at 11.1 s. An Arc hour (120 x 200 KB) is one job; a Firehose hour
 * (12 x 64 MB), three.
 * Standard: the Lambda maximum (900 s) and 2 GiB / 5,000 files.
 */
export const CHILD_DEFAULTS: Readonly<Record<ChildExecutionType, ChildDefaults>> = {
  EXPRESS: {
    compactTimeoutSeconds: 36,
    partitionStepTimeoutSeconds: 9,
    maxJobBytes: 256 * MiB,
    maxJobFiles: 2000,
    smallJobsPerItem: DEFAULTS.smallJobsPerItem,
  },
  STANDARD: {
    compactTimeoutSeconds: 900,
    partitionStepTimeoutSeconds: 300,
    maxJobBytes: 2048 * MiB,
    maxJobFiles: 5000,
    smallJobsPerItem: 1,
  },
};

/**
 * Why these settings cannot run as Express children, or undefined. Keys are named as in the
 * `compactor` context.
 */
export function expressRefusal(settings: {
  readonly compactMemoryMb: number;
  readonly compactTimeoutSeconds: number;
  readonly partitionStepTimeoutSeconds: number;
  readonly maxJobBytes: number;
  readonly maxJobFiles: number;
}): { readonly key: string; readonly message: string } | undefined {
  const worst = chainWorstCase({ type: 'EXPRESS', ...settings });
  if (worst.totalSeconds > EXPRESS_BUDGET_SECONDS) {
    const parts = worst.tasks
      .map((t) => `${t.task} ${t.attempts} x ${t.taskTimeoutSeconds} s + ${t.backoffSeconds} s`)
      .join(', ');
    return {
      key: 'map.childExecutionType',
      message: `is "EXPRESS", whose executions last at most ${EXPRESS_MAX_SECONDS} s, but the per-partition chain can take ${worst.totalSeconds} s (${parts}; each task waits its Lambda's timeout + ${taskSlackSeconds('EXPRESS')} s), more than the ${EXPRESS_BUDGET_SECONDS} s allowed (${EXPRESS_MARGIN_SECONDS} s margin): lower lambda.compact.timeoutSeconds (${settings.compactTimeoutSeconds}) or lambda.partitionSteps.timeoutSeconds (${settings.partitionStepTimeoutSeconds}), or set map.childExecutionType to "STANDARD" for bigger jobs`,
    };
  }
  const estimate = compactEstimateSeconds(settings.maxJobBytes, settings.maxJobFiles);
  const allowed = settings.compactTimeoutSeconds * JOB_TIMEOUT_SHARE;
  if (estimate > allowed) {
    return {
      key: 'maxJobBytes',
      message: `(${settings.maxJobBytes}) with maxJobFiles (${settings.maxJobFiles}) makes a job of about ${estimate.toFixed(1)} s (measured ${MEASURED_COMPACT.secondsPerMB} s/MB and ${MEASURED_COMPACT.secondsPerFile} s/file, plus S3 at ${S3_WAIT.megabytesPerSecond} MB/s and ${S3_WAIT.firstByteMs} ms per GET / ${S3_WAIT.minInFlight}), more than ${JOB_TIMEOUT_SHARE * 100}% of lambda.compact.timeoutSeconds (${settings.compactTimeoutSeconds}) that an Express child allows: lower maxJobBytes or maxJobFiles, or set map.childExecutionType to "STANDARD"`,
    };
  }
  // The small compact function has the same timeout and less CPU: its largest job must fit too.
  const smallMb = smallCompactMemoryMb('EXPRESS', settings.compactMemoryMb);
  if (smallMb !== undefined) {
    const bytes = Math.min(SMALL_COMPACT.maxJobBytes, settings.maxJobBytes);
    const small = compactSecondsAt(smallMb, bytes, settings.maxJobFiles);
    if (small > allowed) {
      return {
        key: 'lambda.compact.timeoutSeconds',
        message: `(${settings.compactTimeoutSeconds}) is also the small compact function's (${smallMb} MB), whose largest job (${bytes} bytes in maxJobFiles ${settings.maxJobFiles} files) is estimated at ${small.toFixed(1)} s, more than ${JOB_TIMEOUT_SHARE * 100}% of it: raise it, lower maxJobFiles, or set map.childExecutionType to "STANDARD"`,
      };
    }
  }
  return undefined;
}
