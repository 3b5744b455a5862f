/**
 * The bench's stated assumptions beside the cost model's (functions/core/cost: the prices, each
 * from its page, and how S3 bills each call). Sizes come from the stack's defaults.
 */

import { STACK_DEFAULTS } from '../cdk/config-defaults.ts';
import { STATED_SECONDS } from '../functions/core/cost/index.ts';
import { LAMBDA_MB_PER_VCPU } from '../functions/core/lambda-sizing.ts';

export const ASSUMPTIONS = {
  /**
   * Lambda gives a function CPU in proportion to its memory: one vCPU's worth per 1,769 MB, so
   * at 3008 MB the compact step's two DuckDB threads share about 1.7 vCPUs, not this machine's 2.
   */
  lambdaMbPerVcpu: LAMBDA_MB_PER_VCPU,
  /** The other four per-partition Lambdas (publish, verify, delete, clear): the stack's size. */
  otherStepMemoryMb: STACK_DEFAULTS.lambda.partitionSteps.memoryMb,
  /** Dataset rows without an S3 bench run: the other four steps' time, each (one or two S3 calls). */
  otherStepSeconds: STATED_SECONDS.partitionStep,
  /** Partitions per Step Functions execution (the per-execution states are shared by them). */
  partitionsPerExecution: 100,
  /** The recover, plan and summary Lambdas, once per execution: the stack's size... */
  perExecutionMemoryMb: STACK_DEFAULTS.lambda.others.memoryMb,
  /** ...and this long each (stated). */
  perExecutionLambdaSeconds: STATED_SECONDS.executionStep,
  /** Times a raw object is listed by planning before it is compacted (one LIST per 1,000 keys). */
  listingsPerInput: 2,
  /** Glue: minimum 2 DPUs (G.1X x 2 workers), 1-minute minimum billing per job run... */
  glueDpus: 2,
  glueMinimumSeconds: 60,
  /** ...and a stated (not measured here) read-sort-write throughput for the whole job. */
  glueMegabytesPerSecond: 30,
} as const;
