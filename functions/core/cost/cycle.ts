/**
 * The price of one planned cycle (one execution of one tier): every Lambda of the workflow's steps
 * (pipeline.ts) at its size, every S3 request the steps send, Step Functions as the child type
 * bills, and the cycle's wall time at the Map's concurrency. An estimate at list prices.
 */

import { compactSizeOf } from '../lambda-sizing.ts';
import {
  AFTER_PARTITIONS,
  BEFORE_PARTITIONS,
  type ExecutionType,
  type LambdaSizeClass,
  PARTITION_STEPS,
} from '../pipeline.ts';
import { compactSecondsAt, expireEstimateSeconds, STATED_SECONDS } from './durations.ts';
import {
  CHILD_START_TRANSITIONS,
  expressDurationUsd,
  lambdaDurationUsd,
  lambdaRequestsUsd,
  PRICE_BASIS,
  PRICE_REGION,
  PRICES,
  type RequestCounts,
  requestsUsd,
  transitionsUsd,
} from './prices.ts';
import {
  addCalls,
  addRequests,
  floorRequests,
  ITEM_RECORD_CALLS,
  JOB_RECORD_CALLS,
  type JobKindPriced,
  jobCalls,
  multipartRequests,
  NO_REQUESTS,
  outputSizes,
  RECOVER_CALLS,
  requestsOf,
  SUMMARY_CALLS,
  scaleCalls,
  WAVE_CALLS,
} from './requests.ts';
import type { TransitionCount } from './transitions.ts';

/** What the model needs of a planned job. */
export interface JobToPrice {
  readonly tier: string;
  readonly inputs: number;
  readonly inputBytes: number;
  readonly wave: number;
  /**
   * The Map item carrying the job, numbered within its wave (plan-store.ts mapItemIndexes): jobs
   * of one item share its child. Absent: the job has a child of its own.
   */
  readonly item?: number;
}

/** One Map item's child as its jobs share it: how many they are, and its seconds (their longest). */
export interface ItemShare {
  readonly jobs: number;
  readonly seconds: number;
}

/** The deployed settings the price depends on. */
export interface CostSettings {
  readonly childExecutionType: ExecutionType;
  readonly maxConcurrency: number;
  readonly memoryMb: Readonly<Record<LambdaSizeClass, number>>;
  /** The small compact function's memory, where the stack has one (lambda-sizing.ts smallCompactMemoryMb). */
  readonly smallCompactMemoryMb?: number | undefined;
  /** Outputs are split at this size; an output is assumed as large as its inputs. */
  readonly targetFileBytes: number;
}

/** One line of the bill: what it counts and what each service costs. */
export interface CostLine {
  readonly jobs: number;
  readonly inputFiles: number;
  readonly inputBytes: number;
  readonly lambdaSeconds: number;
  readonly lambdaInvocations: number;
  readonly requests: RequestCounts;
  readonly transitions: number;
  readonly expressRequests: number;
  readonly lambdaUsd: number;
  readonly s3Usd: number;
  readonly stepFunctionsUsd: number;
  readonly totalUsd: number;
  /** The jobs' floor (floorRequests): what any compactor pays for them, beside totalUsd. */
  readonly floorUsd: number;
}

export interface CycleCost {
  readonly region: string;
  readonly basis: string;
  readonly childExecutionType: ExecutionType;
  readonly maxConcurrency: number;
  readonly waves: number;
  /** Each planned job's price beside its floor, in plan order. */
  readonly jobs: readonly { readonly totalUsd: number; readonly floorUsd: number }[];
  /** One line per tier of the planned jobs; `seconds`: its jobs, wave after wave, at the Map's concurrency. */
  readonly tiers: readonly ({ readonly tier: string; readonly seconds: number } & CostLine)[];
  /** The execution's own: recover, plan and summary, the planning's listing, the parent's states. */
  readonly execution: CostLine & { readonly seconds: number };
  /** `seconds`: the cycle's estimated wall time, the execution's steps and every tier's jobs. */
  readonly total: CostLine & { readonly seconds: number };
}

const EMPTY: CostLine = {
  jobs: 0,
  inputFiles: 0,
  inputBytes: 0,
  lambdaSeconds: 0,
  lambdaInvocations: 0,
  requests: NO_REQUESTS,
  transitions: 0,
  expressRequests: 0,
  lambdaUsd: 0,
  s3Usd: 0,
  stepFunctionsUsd: 0,
  totalUsd: 0,
  floorUsd: 0,
};

function addLines(a: CostLine, b: CostLine): CostLine {
  return {
    jobs: a.jobs + b.jobs,
    inputFiles: a.inputFiles + b.inputFiles,
    inputBytes: a.inputBytes + b.inputBytes,
    lambdaSeconds: a.lambdaSeconds + b.lambdaSeconds,
    lambdaInvocations: a.lambdaInvocations + b.lambdaInvocations,
    requests: addRequests(a.requests, b.requests),
    transitions: a.transitions + b.transitions,
    expressRequests: a.expressRequests + b.expressRequests,
    lambdaUsd: a.lambdaUsd + b.lambdaUsd,
    s3Usd: a.s3Usd + b.s3Usd,
    stepFunctionsUsd: a.stepFunctionsUsd + b.stepFunctionsUsd,
    totalUsd: a.totalUsd + b.totalUsd,
    floorUsd: a.floorUsd + b.floorUsd,
  };
}

/** A retention job expires files; every other tier's merges them. */
export function kindOf(job: Pick<JobToPrice, 'tier'>): JobKindPriced {
  return job.tier === 'retention' ? 'retention' : 'compaction';
}

/** The memory of the compact function the job runs on: the small one for a small job, where there is one. */
export function compactMemoryOf(
  job: Pick<JobToPrice, 'tier' | 'inputBytes'>,
  settings: Pick<CostSettings, 'memoryMb' | 'smallCompactMemoryMb'>,
): number {
  return compactSizeOf(job) === 'small' && settings.smallCompactMemoryMb !== undefined
    ? settings.smallCompactMemoryMb
    : settings.memoryMb.compact;
}

/** Each partition step's Lambda: its memory and estimated billed seconds for this job. */
export function chainSeconds(
  job: Pick<JobToPrice, 'tier' | 'inputs' | 'inputBytes'>,
  settings: Pick<CostSettings, 'memoryMb' | 'smallCompactMemoryMb'>,
): readonly { readonly step: string; readonly memoryMb: number; readonly seconds: number }[] {
  const compactMb = compactMemoryOf(job, settings);
  const first =
    kindOf(job) === 'retention'
      ? expireEstimateSeconds(job.inputs)
      : compactSecondsAt(compactMb, job.inputBytes, job.inputs);
  return PARTITION_STEPS.map((s) => ({
    step: s.step,
    memoryMb: s.size === 'compact' ? compactMb : settings.memoryMb[s.size],
    seconds: s.size === 'compact' ? first : STATED_SECONDS.partitionStep,
  }));
}

/**
 * A Map item's child, beyond its jobs' chains: its start (a transition of the parent), as Standard
 * its own states around the jobs, as Express its request and its duration, which is its longest
 * job's, as its jobs run at once.
 */
export function itemCost(
  item: ItemShare,
  settings: Pick<CostSettings, 'childExecutionType'>,
  transitions: Pick<TransitionCount, 'perItem'>,
): { readonly transitions: number; readonly stepFunctionsUsd: number } {
  if (settings.childExecutionType === 'EXPRESS') {
    return {
      transitions: CHILD_START_TRANSITIONS,
      stepFunctionsUsd:
        transitionsUsd(CHILD_START_TRANSITIONS) +
        PRICES.sfnExpressPerRequest +
        expressDurationUsd(item.seconds),
    };
  }
  const count = CHILD_START_TRANSITIONS + transitions.perItem;
  return { transitions: count, stepFunctionsUsd: transitionsUsd(count) };
}

/**
 * One job's line: its chain's Lambdas, its requests, its chain's states, and its share of its
 * Map item's child (`item`; default: a child of its own).
 */
export function jobCost(
  job: JobToPrice,
  settings: CostSettings,
  transitions: Pick<TransitionCount, 'perItem' | 'perPartition'>,
  item?: ItemShare,
): CostLine & { readonly seconds: number } {
  const chain = chainSeconds(job, settings);
  const seconds = chain.reduce((sum, s) => sum + s.seconds, 0);
  const lambdaUsd =
    chain.reduce((sum, s) => sum + lambdaDurationUsd(s.memoryMb, s.seconds), 0) +
    lambdaRequestsUsd(chain.length);
  const kind = kindOf(job);
  // A retention job writes no output.
  const outputs = kind === 'retention' ? [] : outputSizes(job.inputBytes, settings.targetFileBytes);
  const share = item ?? { jobs: 1, seconds };
  // The item's record is one put, which its jobs share.
  const calls = addCalls(
    ...Object.values(jobCalls({ inputs: job.inputs, outputs: outputs.length }, kind)),
    JOB_RECORD_CALLS,
    scaleCalls(ITEM_RECORD_CALLS, 1 / share.jobs),
  );
  const requests = addRequests(requestsOf(calls), multipartRequests(outputs));
  const s3Usd = requestsUsd(requests);
  const express = settings.childExecutionType === 'EXPRESS';
  const child = itemCost(share, settings, transitions);
  const own = express ? 0 : transitions.perPartition;
  const transitionCount = own + child.transitions / share.jobs;
  const stepFunctionsUsd = transitionsUsd(own) + child.stepFunctionsUsd / share.jobs;
  return {
    jobs: 1,
    inputFiles: job.inputs,
    inputBytes: job.inputBytes,
    lambdaSeconds: seconds,
    lambdaInvocations: chain.length,
    requests,
    transitions: transitionCount,
    expressRequests: express ? 1 / share.jobs : 0,
    lambdaUsd,
    s3Usd,
    stepFunctionsUsd,
    totalUsd: lambdaUsd + s3Usd + stepFunctionsUsd,
    floorUsd: requestsUsd(floorRequests(kind, job.inputs, outputs.length)),
    seconds,
  };
}

/**
 * The wall time of Map items run `concurrency` at a time in their order, each as soon as a slot
 * is free (how a Map Run starts its children), wave after wave.
 */
export function scheduleSeconds(
  jobs: readonly { readonly wave: number; readonly seconds: number }[],
  concurrency: number,
): number {
  const waves = new Map<number, number[]>();
  for (const job of jobs) waves.set(job.wave, [...(waves.get(job.wave) ?? []), job.seconds]);
  let total = 0;
  for (const wave of [...waves.keys()].sort((a, b) => a - b)) {
    const slots = new Array<number>(Math.max(1, concurrency)).fill(0);
    for (const seconds of waves.get(wave) ?? []) {
      const first = slots.indexOf(Math.min(...slots));
      slots[first] = (slots[first] ?? 0) + seconds;
    }
    total += Math.max(...slots);
  }
  return total;
}

/**
 * The cycle's price: its jobs by tier, the execution's own steps and states, and the planning's
 * S3 requests (`planning`: counted on the plan's own listing).
 */
export function cycleCost(input: {
  readonly jobs: readonly JobToPrice[];
  readonly settings: CostSettings;
  readonly transitions: TransitionCount;
  readonly planning: RequestCounts;
}): CycleCost {
  const { settings, transitions } = input;
  // Each job's Map item, and each item's jobs and seconds (its longest job's).
  const itemKey = (job: JobToPrice, i: number) => `${job.wave}:${job.item ?? `own-${i}`}`;
  const items = new Map<string, { wave: number; jobs: number; seconds: number }>();
  for (const [i, job] of input.jobs.entries()) {
    const own = chainSeconds(job, settings).reduce((sum, s) => sum + s.seconds, 0);
    const item = items.get(itemKey(job, i)) ?? { wave: job.wave, jobs: 0, seconds: 0 };
    items.set(itemKey(job, i), { wave: job.wave, jobs: item.jobs + 1, seconds: Math.max(item.seconds, own) });
  }
  const priced = input.jobs.map((job, i) => ({
    job,
    item: itemKey(job, i),
    cost: jobCost(job, settings, transitions, items.get(itemKey(job, i))),
  }));
  const tiers = [...new Set(input.jobs.map((j) => j.tier))].map((tier) => {
    const own = priced.filter((p) => p.job.tier === tier);
    const ownItems = new Set(own.map((p) => p.item));
    const schedule = [...items.entries()]
      .filter(([key]) => ownItems.has(key))
      .map(([, item]) => ({ wave: item.wave, seconds: item.seconds }));
    return {
      tier,
      ...own.map((p) => p.cost).reduce<CostLine>(addLines, EMPTY),
      seconds: scheduleSeconds(schedule, settings.maxConcurrency),
    };
  });
  // Every plan has a first wave, empty or not (plan-store.ts); an empty plan skips the Map.
  const waves = input.jobs.length === 0 ? 0 : Math.max(...input.jobs.map((j) => j.wave)) + 1;
  const executionSteps = [...BEFORE_PARTITIONS, ...AFTER_PARTITIONS];
  const executionSeconds = executionSteps.length * STATED_SECONDS.executionStep;
  const executionLambdaUsd =
    lambdaDurationUsd(settings.memoryMb.others, executionSeconds) + lambdaRequestsUsd(executionSteps.length);
  const requests = addRequests(
    input.planning,
    requestsOf(addCalls(RECOVER_CALLS, SUMMARY_CALLS, scaleCalls(WAVE_CALLS, Math.max(1, waves)))),
  );
  const parentTransitions = transitions.perExecution + transitions.perWave * waves;
  const execution = {
    ...EMPTY,
    seconds: executionSeconds,
    lambdaSeconds: executionSeconds,
    lambdaInvocations: executionSteps.length,
    requests,
    transitions: parentTransitions,
    lambdaUsd: executionLambdaUsd,
    s3Usd: requestsUsd(requests),
    stepFunctionsUsd: transitionsUsd(parentTransitions),
    totalUsd: executionLambdaUsd + requestsUsd(requests) + transitionsUsd(parentTransitions),
  };
  const total = {
    ...[...tiers, execution].reduce<CostLine>(addLines, EMPTY),
    seconds: [...tiers, execution].reduce((sum, line) => sum + line.seconds, 0),
  };
  return {
    region: PRICE_REGION,
    basis: PRICE_BASIS,
    childExecutionType: settings.childExecutionType,
    maxConcurrency: settings.maxConcurrency,
    waves,
    jobs: priced.map(({ cost }) => ({ totalUsd: cost.totalUsd, floorUsd: cost.floorUsd })),
    tiers,
    execution,
    total,
  };
}
