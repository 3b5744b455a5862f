/**
 * The cost model: dollars per GiB compacted, from the measured product throughput and the
 * measured request counts, next to S3 Tables compaction and Glue. Every price and assumption is
 * a named constant below and is printed with the results.
 */

import { downloadConcurrency } from '../functions/core/protocol.ts';
import type { Comparison } from './compare.ts';
import type { RequestAccounting } from './requests.ts';
import type { TransitionCount } from './transitions.ts';

export const PRICES = {
  lambdaArmGbSecond: 0.0000133334,
  lambdaPerRequest: 0.2 / 1e6,
  s3PutCopyListPer1000: 0.005,
  s3GetHeadPer1000: 0.0004,
  s3DeletePer1000: 0,
  sfnTransitionPer1000: 0.025,
  s3TablesBinpackPerGb: 0.005,
  s3TablesSortPerGb: 0.01,
  s3TablesPer1000Objects: 0.002,
  glueDpuHour: 0.44,
} as const;

export const ASSUMPTIONS = {
  /**
   * Lambda gives a function CPU in proportion to its memory: one vCPU's worth per 1,769 MB, so
   * at 3008 MB the compact step's two DuckDB threads share about 1.7 vCPUs, not this machine's 2.
   */
  lambdaMbPerVcpu: 1769,
  /** The other four per-partition Lambdas (upload, verify, delete, clear) run at 512 MB... */
  otherStepMemoryMb: 512,
  /** ...for about this long each (one or two S3 calls). */
  otherStepSeconds: 0.5,
  /** Partitions per Step Functions execution (the per-execution states are shared by them). */
  partitionsPerExecution: 100,
  /** recover, plan and summary Lambdas per execution, at 512 MB, this long each. */
  perExecutionLambdaSeconds: 2,
  /** Times a raw object is listed by planning before it is compacted (one LIST per 1,000 keys). */
  listingsPerInput: 2,
  /** S3 GET throughput of one compact Lambda (8 or more downloads in flight). */
  s3MegabytesPerSecond: 90,
  /** S3 first-byte latency per GET; with k in flight (the compact step's downloadConcurrency) each adds this / k of wall time. */
  s3GetLatencyMs: 20,
  /** Glue: minimum 2 DPUs (G.1X x 2 workers), 1-minute minimum billing per job run... */
  glueDpus: 2,
  glueMinimumSeconds: 60,
  /** ...and a stated (not measured here) read-sort-write throughput for the whole job. */
  glueMegabytesPerSecond: 30,
} as const;

const GIB = 2 ** 30;

export interface CostRow {
  readonly scenario: string;
  readonly inputBytes: number;
  readonly files: number;
  /** Product wall time measured on this machine for one job of this size (s). */
  readonly measuredSeconds: number;
  /** The product's CPU time on this machine for that job (s). */
  readonly cpuSeconds: number;
  /**
   * The compact Lambda's billed compute time: the measured wall time, or the CPU time spread over
   * the Lambda's vCPUs if that is longer (fewer cores than here).
   */
  readonly lambdaSeconds: number;
  /** vCPUs the compact Lambda gets at its memory size. */
  readonly lambdaVcpus: number;
  /** Assumed extra wall time waiting on S3 transfers in Lambda (s). */
  readonly s3WaitSeconds: number;
  /** GETs in flight for this file size (the compact step's own rule). */
  readonly s3ConcurrentGets: number;
  readonly perGib: {
    readonly lambdaCompute: number;
    readonly lambdaRequests: number;
    readonly s3Requests: number;
    readonly stepFunctions: number;
    readonly total: number;
    readonly totalWithS3Wait: number;
    readonly s3TablesBinpack: number;
    readonly s3TablesSort: number;
    readonly glue: number;
  };
  readonly meetsTarget: boolean;
}

export interface CostModel {
  readonly prices: typeof PRICES;
  readonly assumptions: typeof ASSUMPTIONS;
  readonly lambdaMemoryMb: number;
  readonly transitionsPerPartition: number;
  readonly transitionsPerExecution: number;
  readonly transitionsSource: string;
  /** Store calls per job beyond the N input GETs and ceil(N/1000) deletes, by S3 class. */
  readonly fixedCalls: {
    readonly get: number;
    readonly put: number;
    readonly list: number;
    readonly delete: number;
  };
  readonly targetPerGib: number;
  readonly rows: readonly CostRow[];
}

export function costModel(input: {
  readonly comparisons: readonly Comparison[];
  readonly requests: RequestAccounting;
  readonly transitions: TransitionCount | undefined;
  readonly lambdaMemoryMb: number;
}): CostModel {
  const reference = input.requests.jobs.find((j) => j.tier === 'hourly') ?? input.requests.jobs[0];
  if (!reference) throw new Error('cost model: no request accounting');
  const n = reference.inputs;
  const fixedCalls = {
    get: reference.byClass.get - n,
    put: reference.byClass.put,
    list: reference.byClass.list,
    delete: reference.byClass.delete - Math.ceil(n / 1000),
  };
  const perPartition = input.transitions?.perPartition ?? 7;
  const perExecution = input.transitions?.perExecution ?? 8;
  const a = ASSUMPTIONS;
  const p = PRICES;

  const lambdaVcpus = input.lambdaMemoryMb / a.lambdaMbPerVcpu;
  const row = (
    scenario: string,
    bytes: number,
    files: number,
    seconds: number,
    cpuSeconds: number,
  ): CostRow => {
    const lambdaSeconds = Math.max(seconds, cpuSeconds / lambdaVcpus);
    const inFlight = downloadConcurrency(Array.from({ length: files }, () => ({ size: bytes / files })));
    const s3WaitSeconds = bytes / 1e6 / a.s3MegabytesPerSecond + (files * a.s3GetLatencyMs) / 1000 / inFlight;
    const compactGbS = (input.lambdaMemoryMb / 1024) * lambdaSeconds;
    const otherGbS = 4 * (a.otherStepMemoryMb / 1024) * a.otherStepSeconds;
    const executionGbS =
      (3 * (a.otherStepMemoryMb / 1024) * a.perExecutionLambdaSeconds) / a.partitionsPerExecution;
    const lambdaCompute = (compactGbS + otherGbS + executionGbS) * p.lambdaArmGbSecond;
    const lambdaRequests = (5 + 3 / a.partitionsPerExecution) * p.lambdaPerRequest;
    const gets = files + fixedCalls.get;
    const putClass = fixedCalls.put + fixedCalls.list + (a.listingsPerInput * files) / 1000;
    const s3Requests = (gets * p.s3GetHeadPer1000 + putClass * p.s3PutCopyListPer1000) / 1000;
    const stepFunctions =
      ((perPartition + perExecution / a.partitionsPerExecution) * p.sfnTransitionPer1000) / 1000;
    const total = lambdaCompute + lambdaRequests + s3Requests + stepFunctions;
    const waitCost = (input.lambdaMemoryMb / 1024) * s3WaitSeconds * p.lambdaArmGbSecond;
    const gib = bytes / GIB;
    const glueSeconds = Math.max(a.glueMinimumSeconds, bytes / 1e6 / a.glueMegabytesPerSecond);
    const perGib = {
      lambdaCompute: lambdaCompute / gib,
      lambdaRequests: lambdaRequests / gib,
      s3Requests: s3Requests / gib,
      stepFunctions: stepFunctions / gib,
      total: total / gib,
      totalWithS3Wait: (total + waitCost) / gib,
      s3TablesBinpack: p.s3TablesBinpackPerGb + ((files / gib) * p.s3TablesPer1000Objects) / 1000,
      s3TablesSort: p.s3TablesSortPerGb + ((files / gib) * p.s3TablesPer1000Objects) / 1000,
      glue:
        (((a.glueDpus * glueSeconds) / 3600) * p.glueDpuHour) / gib +
        (gets * p.s3GetHeadPer1000) / 1000 / gib,
    };
    return {
      scenario,
      inputBytes: bytes,
      files,
      measuredSeconds: seconds,
      cpuSeconds,
      lambdaSeconds,
      lambdaVcpus,
      s3WaitSeconds,
      s3ConcurrentGets: inFlight,
      perGib,
      meetsTarget: perGib.totalWithS3Wait <= 0.001,
    };
  };

  const rows: CostRow[] = [];
  for (const c of input.comparisons) {
    const product = c.tools.find((t) => t.tool === 'product');
    if (!product) continue;
    rows.push(
      row(c.dataset.title, c.dataset.bytes, c.dataset.files, product.wallMs / 1000, product.cpuMs / 1000),
    );
    if (c.dataset.id === 'i') {
      // The same files, as many as a full job takes (maxJobBytes 2 GiB), at the measured throughput.
      const scale = (2 * GIB) / c.dataset.bytes;
      rows.push(
        row(
          '(i) scaled to a full 2 GiB job',
          2 * GIB,
          Math.min(5000, Math.round(c.dataset.files * scale)),
          (product.wallMs / 1000) * scale,
          (product.cpuMs / 1000) * scale,
        ),
      );
    }
  }
  return {
    prices: PRICES,
    assumptions: ASSUMPTIONS,
    lambdaMemoryMb: input.lambdaMemoryMb,
    transitionsPerPartition: perPartition,
    transitionsPerExecution: perExecution,
    transitionsSource: input.transitions
      ? 'counted on the synthesized state machine'
      : 'stated (synthesis failed)',
    fixedCalls,
    targetPerGib: 0.001,
    rows,
  };
}
