/**
 * What the cost model prices with: AWS's prices, each from the page named beside it, how S3 bills
 * each SDK command, and the model's stated assumptions. Sizes come from the stack's defaults.
 */

import { STACK_DEFAULTS } from '../cdk/config-defaults.ts';
import { LAMBDA_MB_PER_VCPU } from '../functions/core/lambda-sizing.ts';

/**
 * Prices (us-east-1, arm64 Lambda), each from the page named beside it.
 * - Lambda: https://aws.amazon.com/lambda/pricing/
 * - S3 requests (S3 Standard; DELETE is free): https://aws.amazon.com/s3/pricing/
 * - Step Functions: https://aws.amazon.com/step-functions/pricing/ . Standard bills each state
 *   transition ($0.025 per 1,000); Express bills each request ($1.00 per million) and its duration,
 *   rounded up to 100 ms, in 64-MB chunks of memory ($0.06 per GB-hour for the first 1,000
 *   GB-hours a month, the highest tier, used here), with memory = 50 MB + the definition + the
 *   execution data: under 64 MB for a definition below Step Functions' 1 MB limit and the 256 KiB
 *   payload limit, so one chunk.
 * - S3 Tables compaction, the S3 Tables tab of https://aws.amazon.com/s3/pricing/ : $0.002 per
 *   1,000 objects processed, plus $0.005 per GB processed for binpack and $0.01 for sort.
 * - Glue: https://aws.amazon.com/glue/pricing/ ($0.44 per DPU-hour).
 */
export const PRICES = {
  lambdaArmGbSecond: 0.0000133334,
  lambdaPerRequest: 0.2 / 1e6,
  s3PutCopyListPer1000: 0.005,
  s3GetHeadPer1000: 0.0004,
  s3DeletePer1000: 0,
  sfnTransitionPer1000: 0.025,
  sfnExpressPerRequest: 1 / 1e6,
  sfnExpressGbSecond: 0.06 / 3600,
  sfnExpressBilledMb: 64,
  sfnExpressRoundingSeconds: 0.1,
  s3TablesBinpackPerGb: 0.005,
  s3TablesSortPerGb: 0.01,
  s3TablesPer1000Objects: 0.002,
  glueDpuHour: 0.44,
} as const;

/**
 * "When you use a Map state in Distributed mode, you are charged one state transition for each
 * child workflow execution the Distributed Map state starts", whatever the child type
 * (https://docs.aws.amazon.com/step-functions/latest/dg/concepts-transitions.html).
 */
export const CHILD_START_TRANSITIONS = 1;

export const ASSUMPTIONS = {
  /**
   * Lambda gives a function CPU in proportion to its memory: one vCPU's worth per 1,769 MB, so
   * at 3008 MB the compact step's two DuckDB threads share about 1.7 vCPUs, not this machine's 2.
   */
  lambdaMbPerVcpu: LAMBDA_MB_PER_VCPU,
  /** The other four per-partition Lambdas (publish, verify, delete, clear): the stack's size. */
  otherStepMemoryMb: STACK_DEFAULTS.lambda.partitionSteps.memoryMb,
  /** Dataset rows without an S3 bench run: the other four steps' time, each (one or two S3 calls). */
  otherStepSeconds: 0.5,
  /** Partitions per Step Functions execution (the per-execution states are shared by them). */
  partitionsPerExecution: 100,
  /** The recover, plan and summary Lambdas, once per execution: the stack's size... */
  perExecutionMemoryMb: STACK_DEFAULTS.lambda.others.memoryMb,
  /** ...and this long each (stated). */
  perExecutionLambdaSeconds: 2,
  /** Times a raw object is listed by planning before it is compacted (one LIST per 1,000 keys). */
  listingsPerInput: 2,
  /** Glue: minimum 2 DPUs (G.1X x 2 workers), 1-minute minimum billing per job run... */
  glueDpus: 2,
  glueMinimumSeconds: 60,
  /** ...and a stated (not measured here) read-sort-write throughput for the whole job. */
  glueMegabytesPerSecond: 30,
} as const;

/** How each SDK command is billed on S3 (https://aws.amazon.com/s3/pricing/). */
export const COMMAND_CLASS: Readonly<Record<string, 'get' | 'put' | 'free'>> = {
  GetObject: 'get',
  HeadObject: 'get',
  PutObject: 'put',
  CopyObject: 'put',
  CreateMultipartUpload: 'put',
  UploadPart: 'put',
  CompleteMultipartUpload: 'put',
  ListObjectsV2: 'put',
  ListMultipartUploads: 'put',
  DeleteObjects: 'free',
  DeleteObject: 'free',
  AbortMultipartUpload: 'free',
};
