/**
 * The bench's cost tables: dollars per GiB compacted, from the measured product throughput and the
 * measured request counts, next to S3 Tables compaction and Glue. The prices and their arithmetic
 * are the cost model's (functions/core/cost), which `compactor plan` prices with too; the bench's
 * own assumptions are named constants in cost-prices.ts, printed with the results.
 */

import { CHILD_DEFAULTS } from '../cdk/child-budget.ts';
import { STACK_DEFAULTS } from '../cdk/config-defaults.ts';
import { parseConfig } from '../functions/core/config.ts';
import {
  addCalls,
  CHILD_START_TRANSITIONS,
  COMMAND_CLASS,
  compactMemoryOf,
  expressBilledSeconds,
  expressDurationUsd,
  floorRequests,
  ITEM_RECORD_CALLS,
  JOB_RECORD_CALLS,
  lambdaDurationUsd,
  lambdaRequestsUsd,
  multipartRequests,
  NO_REQUESTS,
  PART_BYTES,
  PRICES,
  type RequestClass,
  requestsOf,
  requestsUsd,
  scaleCalls,
  transitionsUsd,
} from '../functions/core/cost/index.ts';
import { smallCompactMemoryMb } from '../functions/core/lambda-sizing.ts';
import { mapItems } from '../functions/core/plan-store.ts';
import { downloadConcurrency } from '../functions/core/protocol.ts';
import type { Comparison } from './compare.ts';
import { ASSUMPTIONS } from './cost-prices.ts';
import { usd6 } from './report-format.ts';
import type { RequestAccounting } from './requests.ts';
import type { CostJobId, S3Job, S3LatencyResult } from './s3-latency.ts';
import type { S3RunResult, StepTiming } from './s3-worker.ts';
import type { TransitionCount } from './transitions.ts';

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
  /**
   * Measured wall time the compact step waits on S3 alone (no engine call running) over the S3
   * path behind the shaper (bench/s3-latency.ts), for this dataset; 0 when it did not run.
   */
  readonly s3WaitSeconds: number;
  readonly s3WaitMeasured: boolean;
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

export type ChildType = 'STANDARD' | 'EXPRESS';

/** One priced term of a job: what is counted, how many, at what unit price. */
export interface CostTerm {
  readonly name: string;
  /** The arithmetic, printed: quantity x unit price. */
  readonly arithmetic: string;
  readonly usd: number;
}

export interface JobCost {
  readonly job: CostJobId;
  readonly title: string;
  readonly childType: ChildType;
  readonly inputBytes: number;
  readonly files: number;
  /** Billed seconds of each Lambda of the chain, from the S3 bench run (measured). */
  readonly lambdaSeconds: Readonly<Record<StepTiming['step'], number>>;
  readonly terms: readonly CostTerm[];
  readonly total: number;
  readonly s3Tables: {
    readonly strategy: 'binpack' | 'sort';
    readonly terms: readonly CostTerm[];
    readonly total: number;
  };
  /**
   * What any compactor pays for the job: one GET per input, one PUT per output (floorRequests),
   * and raw DuckDB's CPU time for the same merge at one vCPU's Lambda price (floorTerms).
   */
  readonly floor: number;
  readonly floorTerms: readonly CostTerm[];
  readonly target: { readonly text: string; readonly limit: number; readonly met: boolean };
  /** Where missed: the largest terms and what they measure. */
  readonly cause?: string;
}

/**
 * One cycle of many small partitions (100 tables x 24 hours), priced from the measured chain of
 * one small partition, beside its floor (jobFloor of that partition, times the partitions).
 */
export interface CycleCost {
  readonly childType: ChildType;
  readonly partitions: number;
  readonly filesPerPartition: number;
  readonly perPartition: number;
  readonly total: number;
  readonly floor: number;
  /** The cycle's wall time: items / maxConcurrency chains of the measured one, one after another. */
  readonly seconds: number;
  readonly maxConcurrency: number;
  /** The Map items carrying the partitions (cycleItems). */
  readonly items: number;
  /** The largest terms of one partition, as a share of its bill. */
  readonly largest: readonly { readonly name: string; readonly usd: number }[];
}

/** The cycle's lake: every table's last day of hours, each hour a small partition. */
export const CYCLE_SHAPE = { tables: 100, hours: 24 } as const;
export const CYCLE_PARTITIONS = CYCLE_SHAPE.tables * CYCLE_SHAPE.hours;

/**
 * The Map items the plan step gives the cycle's partitions (plan-store.ts mapItems, at the
 * stack's default smallJobsPerItem for the child type): the hours of one table share items.
 */
export function cycleItems(smallJobsPerItem: number): number {
  const { layout } = parseConfig({});
  const jobs = Array.from({ length: CYCLE_PARTITIONS }, (_, i) => ({
    partition: `db/t${Math.floor(i / CYCLE_SHAPE.hours)}/2025/01/15/${String(i % CYCLE_SHAPE.hours).padStart(2, '0')}/`,
    compactSize: 'small' as const,
  }));
  return mapItems(jobs, layout, smallJobsPerItem).length;
}

/** A bill at most this multiple of its floor: the rule for the Arc hour and the cycle. */
export const FLOOR_RATIO = 1.5;

/**
 * The cost targets, written once: the Arc hour at most FLOOR_RATIO x its floor and a
 * third of S3 Tables binpack; a full 2 GiB job a tenth of S3 Tables sort. The other jobs, for which
 * the issue sets none, are held to the Arc hour's.
 */
export const COST_TARGETS = {
  'arc-hour': { s3Tables: 'binpack', share: 3, floorRatio: FLOOR_RATIO },
  'full-job': { s3Tables: 'sort', share: 10 },
} as const satisfies Partial<
  Record<
    CostJobId,
    { readonly s3Tables: 'binpack' | 'sort'; readonly share: number; readonly floorRatio?: number }
  >
>;

/** `job`: one partition's bill with its share of its Map item (jobCost's jobsPerItem). */
export function cycleCost(
  job: JobCost,
  chainSeconds: number,
  maxConcurrency: number,
  items: number,
): CycleCost {
  const floorPerPartition = job.floor;
  return {
    childType: job.childType,
    partitions: CYCLE_PARTITIONS,
    filesPerPartition: job.files,
    perPartition: job.total,
    total: job.total * CYCLE_PARTITIONS,
    floor: floorPerPartition * CYCLE_PARTITIONS,
    // An item runs its jobs at once: the cycle takes its items' turns, not its partitions'.
    seconds: Math.ceil(items / maxConcurrency) * chainSeconds,
    maxConcurrency,
    items,
    largest: [...job.terms]
      .sort((x, y) => y.usd - x.usd)
      .slice(0, 3)
      .map((t) => ({ name: t.name, usd: t.usd })),
  };
}

export interface CostModel {
  readonly prices: typeof PRICES;
  readonly assumptions: typeof ASSUMPTIONS;
  readonly lambdaMemoryMb: number;
  readonly transitionsPerItem: number;
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
  /** The three user jobs, each for both child types; empty when the S3 bench did not run. */
  readonly jobs: readonly JobCost[];
  /** The cycle of many small partitions, for both child types, when the S3 bench ran its job. */
  readonly cycles?: readonly CycleCost[];
}

const f = (n: number, digits = 3) => Number(n.toFixed(digits)).toString();

/** Billed seconds of a Lambda: its wall time, or its CPU time over its vCPUs if longer. */
export function billedSeconds(step: StepTiming, memoryMb: number): number {
  return Math.max(step.wallMs, step.cpuMs / (memoryMb / ASSUMPTIONS.lambdaMbPerVcpu)) / 1000;
}

/** What the bench's floor of a job holds (jobFloor), as the report says it. */
export const FLOOR_DEFINITION =
  "one GET per input, one PUT per output, raw DuckDB's CPU time for the same merge at Lambda's price";

/**
 * A job's floor, what any compactor pays for it, term by term: one GET per input and one PUT per
 * output written (functions/core/cost floorRequests), and raw DuckDB's merge of the same files
 * (measured by the S3 bench) at Lambda's price for its CPU time. One vCPU-second costs the GB-s of
 * 1,769 MB, the memory at which a function has one vCPU
 * (https://docs.aws.amazon.com/lambda/latest/dg/configuration-memory.html): Lambda bills memory x
 * time and gives CPU in proportion to memory, so no size runs that CPU time for less. Raw
 * DuckDB reads the files in place: waiting on S3 is not in it.
 */
export function jobFloor(job: S3Job): CostTerm[] {
  const p = PRICES;
  const outputs = Math.max(1, job.run.outputKeys.length);
  const requests = floorRequests('compaction', job.files, outputs);
  const terms: CostTerm[] = [
    {
      name: 'floor: one GET per input, one PUT per output',
      arithmetic: `${requests.get} x $${p.s3GetHeadPer1000} / 1,000 + ${requests.put} x $${p.s3PutCopyListPer1000} / 1,000`,
      usd: requestsUsd(requests),
    },
  ];
  if (job.rawDuckDb) {
    const cpuSeconds = job.rawDuckDb.cpuMs / 1000;
    const mb = ASSUMPTIONS.lambdaMbPerVcpu;
    terms.push({
      name: "floor: raw DuckDB's merge of the same files (CPU time at one vCPU's price)",
      arithmetic: `${mb} MB / 1024 x ${f(cpuSeconds)} CPU s = ${f((mb / 1024) * cpuSeconds)} GB-s x $${p.lambdaArmGbSecond}`,
      usd: lambdaDurationUsd(mb, cpuSeconds),
    });
  }
  return terms;
}

/** The SDK commands of an upload or a copy in parts. */
const MULTIPART_COMMANDS = [
  'CreateMultipartUpload',
  'UploadPart',
  'UploadPartCopy',
  'CompleteMultipartUpload',
];

/**
 * A measured chain's GET-class and PUT-class requests as the Lambdas' S3Store would send them.
 * The bench's store goes to parts above its own part size (the test server takes smaller
 * bodies than the Lambda's parts); each output that did is counted again as the cost model counts
 * an output at the Lambda's part size, PART_BYTES: one PUT and one CopyObject, plus the parts,
 * their create and complete and the copy's HEAD beyond that (multipartRequests). A run that
 * recorded no sizes is counted as measured.
 */
export function requestsAtLambdaParts(
  run: Pick<S3RunResult, 'commands'> & Partial<Pick<S3RunResult, 'outputSizes' | 'partSizeBytes'>>,
): { readonly get: number; readonly put: number; readonly recounted: number } {
  const count = (cls: RequestClass) =>
    Object.entries(run.commands)
      .filter(([name]) => (COMMAND_CLASS[name] ?? 'put') === cls)
      .reduce((sum, [, n]) => sum + n, 0);
  // LIST is billed as PUT.
  const measured = { get: count('get'), put: count('put') + count('list') };
  const { outputSizes, partSizeBytes } = run;
  const inParts =
    partSizeBytes === undefined || partSizeBytes >= PART_BYTES
      ? []
      : (outputSizes ?? []).filter((size) => size > partSizeBytes);
  if (inParts.length === 0) return { ...measured, recounted: 0 };
  const sentInParts = MULTIPART_COMMANDS.reduce((sum, name) => sum + (run.commands[name] ?? 0), 0);
  const atLambda = multipartRequests(inParts);
  return {
    // Each copy in parts HEADs its source first.
    get: measured.get - inParts.length + atLambda.get,
    put: measured.put - sentInParts + 2 * inParts.length + atLambda.put,
    recounted: inParts.length,
  };
}

/**
 * A job's price for one child type, term by term, from the S3 bench's measured run of it: every
 * Lambda's billed time and every S3 request the chain sent on the wire.
 */
export function jobCost(input: {
  readonly job: S3Job & { readonly costJob: CostJobId };
  readonly childType: ChildType;
  readonly transitionsPerItem: number;
  readonly transitionsPerPartition: number;
  readonly transitionsPerExecution: number;
  readonly lambdaMemoryMb: number;
  /**
   * Jobs sharing the job's Map item, and so its child's start and states (Standard) or its
   * request and duration (Express; its jobs, alike here, run at once); default 1.
   */
  readonly jobsPerItem?: number;
}): JobCost {
  const p = PRICES;
  const a = ASSUMPTIONS;
  const { job } = input;
  const steps = job.run.steps;
  // The compact step runs on the function the plan sizes the job for (functions/core/lambda-sizing.ts).
  const compactMb = compactMemoryOf(
    { tier: 'hourly', inputBytes: job.bytes },
    {
      memoryMb: {
        compact: input.lambdaMemoryMb,
        partitionSteps: a.otherStepMemoryMb,
        others: a.perExecutionMemoryMb,
      },
      smallCompactMemoryMb: smallCompactMemoryMb(input.childType, input.lambdaMemoryMb),
    },
  );
  const stepMemory = (step: StepTiming['step']) => (step === 'compact' ? compactMb : a.otherStepMemoryMb);
  const lambdaSeconds = Object.fromEntries(
    steps.map((s) => [s.step, billedSeconds(s, stepMemory(s.step))]),
  ) as Record<StepTiming['step'], number>;
  const terms: CostTerm[] = [];
  const term = (name: string, arithmetic: string, value: number) =>
    terms.push({ name, arithmetic, usd: value });

  const compactGbS = (compactMb / 1024) * lambdaSeconds.compact;
  term(
    'compact Lambda duration',
    `${compactMb} MB / 1024 x ${f(lambdaSeconds.compact)} s = ${f(compactGbS)} GB-s x $${p.lambdaArmGbSecond}`,
    lambdaDurationUsd(compactMb, lambdaSeconds.compact),
  );
  const others = steps.filter((s) => s.step !== 'compact');
  const otherSeconds = others.reduce((sum, s) => sum + (lambdaSeconds[s.step] ?? 0), 0);
  const otherGbS = (a.otherStepMemoryMb / 1024) * otherSeconds;
  term(
    'publish, verify, delete, clear Lambdas',
    `${a.otherStepMemoryMb} MB / 1024 x (${others.map((s) => f(lambdaSeconds[s.step] ?? 0)).join(' + ')}) s = ${f(otherGbS)} GB-s x $${p.lambdaArmGbSecond}`,
    lambdaDurationUsd(a.otherStepMemoryMb, otherSeconds),
  );
  const execGbS =
    (3 * (a.perExecutionMemoryMb / 1024) * a.perExecutionLambdaSeconds) / a.partitionsPerExecution;
  term(
    "recover, plan, summary Lambdas (the execution's, shared)",
    `3 x ${a.perExecutionMemoryMb} MB / 1024 x ${a.perExecutionLambdaSeconds} s (stated) / ${a.partitionsPerExecution} partitions = ${f(execGbS, 4)} GB-s x $${p.lambdaArmGbSecond}`,
    lambdaDurationUsd(a.perExecutionMemoryMb, (3 * a.perExecutionLambdaSeconds) / a.partitionsPerExecution),
  );
  const invokes = steps.length + 3 / a.partitionsPerExecution;
  term(
    'Lambda requests',
    `${f(invokes, 2)} invocations x $${f(p.lambdaPerRequest * 1e6, 2)} / 1,000,000`,
    lambdaRequestsUsd(invokes),
  );

  const { get: gets, put: puts, recounted } = requestsAtLambdaParts(job.run);
  const onTheWire =
    recounted === 0
      ? 'measured on the wire'
      : `measured on the wire, ${recounted} output(s) in parts recounted at the Lambda's ${PART_BYTES / 2 ** 20} MiB parts`;
  term(
    `S3 GET/HEAD (${onTheWire})`,
    `${gets} x $${p.s3GetHeadPer1000} / 1,000`,
    requestsUsd({ ...NO_REQUESTS, get: gets }),
  );
  const planningLists = (a.listingsPerInput * job.files) / 1000;
  term(
    `S3 PUT/COPY/POST/LIST (${onTheWire}, + planning)`,
    `(${puts} + ${a.listingsPerInput} listings x ${job.files} keys / 1,000 per LIST = ${f(puts + planningLists, 2)}) x $${p.s3PutCopyListPer1000} / 1,000`,
    requestsUsd({ ...NO_REQUESTS, put: puts + planningLists }),
  );

  const k = input.jobsPerItem ?? 1;
  const perItem = k === 1 ? '' : ` / ${f(k, 2)} jobs an item`;
  // Outside the measured chain: the plan step's record of the job's Map item, which the job's
  // compact handler reads (functions/core/plan-store.ts).
  const record = requestsOf(addCalls(scaleCalls(ITEM_RECORD_CALLS, 1 / k), JOB_RECORD_CALLS));
  term(
    "the plan's record of the job's Map item (not in the measured chain)",
    `${f(record.put, 2)} PUT (one an item${perItem}) x $${p.s3PutCopyListPer1000} / 1,000 + ${record.get} GET x $${p.s3GetHeadPer1000} / 1,000`,
    requestsUsd(record),
  );

  const execShare = input.transitionsPerExecution / a.partitionsPerExecution;
  if (input.childType === 'STANDARD') {
    const transitions =
      (CHILD_START_TRANSITIONS + input.transitionsPerItem) / k + input.transitionsPerPartition + execShare;
    term(
      'Step Functions transitions',
      `((${CHILD_START_TRANSITIONS} child start + ${input.transitionsPerItem} item states)${perItem} + ${input.transitionsPerPartition} job states + ${input.transitionsPerExecution} / ${a.partitionsPerExecution} of the execution's) = ${f(transitions, 2)} x $${p.sfnTransitionPer1000} / 1,000`,
      transitionsUsd(transitions),
    );
  } else {
    const transitions = CHILD_START_TRANSITIONS / k + execShare;
    term(
      'Step Functions transitions',
      `(${CHILD_START_TRANSITIONS} child start${perItem} + ${input.transitionsPerExecution} / ${a.partitionsPerExecution} of the execution's) = ${f(transitions, 2)} x $${p.sfnTransitionPer1000} / 1,000`,
      transitionsUsd(transitions),
    );
    term('Express child request', `1${perItem} x $1.00 / 1,000,000`, p.sfnExpressPerRequest / k);
    // The child lasts as long as its Lambdas run, one after another (state overhead not measured
    // here), each at least its billed time: fewer vCPUs than here stretch the compact step.
    const wall = steps.reduce((sum, s) => sum + Math.max(s.wallMs / 1000, lambdaSeconds[s.step] ?? 0), 0);
    const billed = expressBilledSeconds(wall);
    const gbS = (p.sfnExpressBilledMb / 1024) * billed;
    term(
      'Express child duration',
      `${p.sfnExpressBilledMb} MB / 1024 x ${f(billed, 1)} s (the chain's ${f(wall, 2)} s, rounded up to 100 ms)${perItem} = ${f(gbS / k, 4)} GB-s x $${f(p.sfnExpressGbSecond, 10)}`,
      expressDurationUsd(wall) / k,
    );
  }
  const total = terms.reduce((sum, t) => sum + t.usd, 0);

  const gb = job.bytes / GIB;
  const own = COST_TARGETS[job.costJob as keyof typeof COST_TARGETS];
  const goal = own ?? COST_TARGETS['arc-hour'];
  const strategy = goal.s3Tables;
  const perGb = strategy === 'sort' ? p.s3TablesSortPerGb : p.s3TablesBinpackPerGb;
  const tablesTerms: CostTerm[] = [
    { name: `S3 Tables ${strategy}: data`, arithmetic: `${f(gb, 4)} GB x $${perGb}`, usd: gb * perGb },
    {
      name: `S3 Tables ${strategy}: objects`,
      arithmetic: `${job.files} objects x $${p.s3TablesPer1000Objects} / 1,000`,
      usd: (job.files * p.s3TablesPer1000Objects) / 1000,
    },
  ];
  const tablesTotal = tablesTerms.reduce((sum, t) => sum + t.usd, 0);
  const floorTerms = jobFloor(job);
  const floor = floorTerms.reduce((sum, t) => sum + t.usd, 0);
  const tablesLimit = tablesTotal / goal.share;
  const limit = 'floorRatio' in goal ? Math.min(tablesLimit, goal.floorRatio * floor) : tablesLimit;
  const met = total <= limit;
  const rule =
    ('floorRatio' in goal ? `<= ${f(goal.floorRatio, 1)}x its floor and ` : '') +
    `<= 1/${goal.share} of S3 Tables ${strategy}`;
  const target = {
    text: own ? rule : `${rule} (the Arc hour's target; the issue sets none for this job)`,
    limit,
    met,
  };
  let cause: string | undefined;
  if (!met) {
    const sorted = [...terms].sort((x, y) => y.usd - x.usd);
    const alone = sorted.filter((t) => t.usd > limit);
    const top = sorted.slice(0, 3).map((t) => `${t.name} ${usd6(t.usd)} (${f((t.usd / total) * 100, 0)}%)`);
    // Reading every input once is the floor of any compactor that does not keep the data itself.
    const inputGets = (job.files * p.s3GetHeadPer1000) / 1000;
    const s3Requests = terms.filter((t) => t.name.startsWith('S3 ')).reduce((sum, t) => sum + t.usd, 0);
    cause =
      `${usd6(total)} against ${usd6(limit)}: largest terms ${top.join(', ')}` +
      (alone.length > 0 ? `; ${alone.map((t) => t.name).join(' and ')} alone exceed the limit` : '') +
      `; S3 requests together ${usd6(s3Requests)} (${f((s3Requests / limit) * 100, 0)}% of the limit), of which one GET per input, which any compactor pays, ${usd6(inputGets)}`;
  }
  return {
    job: job.costJob,
    title: job.title,
    childType: input.childType,
    inputBytes: job.bytes,
    files: job.files,
    lambdaSeconds,
    terms,
    total,
    s3Tables: { strategy, terms: tablesTerms, total: tablesTotal },
    floor,
    floorTerms,
    target,
    ...(cause ? { cause } : {}),
  };
}

export function costModel(input: {
  readonly comparisons: readonly Comparison[];
  readonly requests: RequestAccounting;
  readonly transitions: TransitionCount | undefined;
  readonly s3?: S3LatencyResult | undefined;
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
  const perItem = input.transitions?.perItem ?? 3;
  const perPartition = input.transitions?.perPartition ?? 7;
  const perExecution = input.transitions?.perExecution ?? 9;
  const a = ASSUMPTIONS;
  const p = PRICES;
  const s3Runs = new Map((input.s3?.jobs ?? []).map((j) => [j.id, j]));

  const lambdaVcpus = input.lambdaMemoryMb / a.lambdaMbPerVcpu;
  const row = (
    scenario: string,
    bytes: number,
    files: number,
    seconds: number,
    cpuSeconds: number,
    s3: { readonly seconds: number; readonly measured: boolean },
  ): CostRow => {
    const lambdaSeconds = Math.max(seconds, cpuSeconds / lambdaVcpus);
    const inFlight = downloadConcurrency(Array.from({ length: files }, () => ({ size: bytes / files })));
    const s3WaitSeconds = s3.seconds;
    const lambdaCompute =
      lambdaDurationUsd(input.lambdaMemoryMb, lambdaSeconds) +
      lambdaDurationUsd(a.otherStepMemoryMb, 4 * a.otherStepSeconds) +
      lambdaDurationUsd(a.perExecutionMemoryMb, (3 * a.perExecutionLambdaSeconds) / a.partitionsPerExecution);
    const lambdaRequests = lambdaRequestsUsd(5 + 3 / a.partitionsPerExecution);
    const gets = files + fixedCalls.get;
    const putClass = fixedCalls.put + fixedCalls.list + (a.listingsPerInput * files) / 1000;
    const s3Requests = requestsUsd({ ...NO_REQUESTS, get: gets, put: putClass });
    const stepFunctions = transitionsUsd(
      CHILD_START_TRANSITIONS + perItem + perPartition + perExecution / a.partitionsPerExecution,
    );
    const total = lambdaCompute + lambdaRequests + s3Requests + stepFunctions;
    const waitCost = lambdaDurationUsd(input.lambdaMemoryMb, s3WaitSeconds);
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
      s3WaitMeasured: s3.measured,
      s3ConcurrentGets: inFlight,
      perGib,
      meetsTarget: perGib.totalWithS3Wait <= 0.001,
    };
  };
  /** The compact step's measured wait on S3 alone for a dataset, scaled by bytes for a bigger job. */
  const s3Wait = (id: string, scale = 1) => {
    const compact = s3Runs.get(id)?.run.steps.find((s) => s.step === 'compact');
    return compact
      ? { seconds: (compact.s3OnlyMs / 1000) * scale, measured: true }
      : { seconds: 0, measured: false };
  };

  const rows: CostRow[] = [];
  for (const c of input.comparisons) {
    const product = c.tools.find((t) => t.tool === 'product');
    if (!product) continue;
    rows.push(
      row(
        c.dataset.title,
        c.dataset.bytes,
        c.dataset.files,
        product.wallMs / 1000,
        product.cpuMs / 1000,
        s3Wait(c.dataset.id),
      ),
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
          s3Wait('i', scale),
        ),
      );
    }
  }
  const jobs: JobCost[] = [];
  for (const job of input.s3?.jobs ?? []) {
    const costJob = job.costJob;
    if (costJob === undefined) continue;
    for (const childType of ['STANDARD', 'EXPRESS'] as const) {
      jobs.push(
        jobCost({
          job: { ...job, costJob },
          childType,
          transitionsPerItem: perItem,
          transitionsPerPartition: perPartition,
          transitionsPerExecution: perExecution,
          lambdaMemoryMb: input.lambdaMemoryMb,
        }),
      );
    }
  }
  const small = input.s3?.jobs.find((j) => j.costJob === 'small-partition');
  const chainSeconds = small ? small.run.steps.reduce((sum, step) => sum + step.wallMs, 0) / 1000 : 0;
  // The cycle's partitions share Map items, the hours of a table; each job above has its own.
  const cycles = small
    ? (['STANDARD', 'EXPRESS'] as const).map((childType) => {
        const items = cycleItems(CHILD_DEFAULTS[childType].smallJobsPerItem);
        return cycleCost(
          jobCost({
            job: { ...small, costJob: 'small-partition' },
            childType,
            transitionsPerItem: perItem,
            transitionsPerPartition: perPartition,
            transitionsPerExecution: perExecution,
            lambdaMemoryMb: input.lambdaMemoryMb,
            jobsPerItem: CYCLE_PARTITIONS / items,
          }),
          chainSeconds,
          STACK_DEFAULTS.map.maxConcurrency,
          items,
        );
      })
    : [];
  return {
    ...(cycles.length > 0 ? { cycles } : {}),
    prices: PRICES,
    assumptions: ASSUMPTIONS,
    lambdaMemoryMb: input.lambdaMemoryMb,
    transitionsPerItem: perItem,
    transitionsPerPartition: perPartition,
    transitionsPerExecution: perExecution,
    transitionsSource: input.transitions
      ? 'counted on the synthesized state machine'
      : 'stated (synthesis failed)',
    fixedCalls,
    targetPerGib: 0.001,
    rows,
    jobs,
  };
}
