/**
 * The cost model of a cycle (functions/core/cost/cycle.ts) on a small plan worked out by hand:
 * two hourly jobs (10 inputs of 1 MB, 2,000 inputs of 100 KB) in one wave and a second job of the
 * first partition in a second wave, for both child types. Each dollar figure below is the
 * arithmetic written out with the list prices as numbers, so a changed price, a dropped request
 * or a transition billed to an Express child fails.
 */

import { describe, expect, it } from 'vitest';
import {
  compactEstimateSeconds,
  compactSecondsAt,
  cycleCost,
  expressBilledSeconds,
  jobCost,
  MEASURED_COMPACT,
  multipartRequests,
  outputSizes,
  PART_BYTES,
  scheduleSeconds,
} from '../../../functions/core/cost/index.ts';
import { costSettings, TRANSITIONS } from '../../support/cost-fixture.ts';

const settings = costSettings;

const JOBS = [
  { tier: 'hourly', inputs: 10, inputBytes: 10e6, wave: 0 },
  { tier: 'hourly', inputs: 2000, inputBytes: 200e6, wave: 0 },
  { tier: 'hourly', inputs: 10, inputBytes: 10e6, wave: 1 },
];
const PLANNING = { get: 0, put: 0, list: 3, delete: 0 };

/** $ per GB-second (arm64), per request; S3 per 1,000; a Standard transition per 1,000. */
const GBS = 0.0000133334;
const INVOKE = 0.2e-6;

describe('one job', () => {
  it('estimates the compact step from the measured rates and the S3 wait, slower on fewer vCPUs', () => {
    // 10 MB x 0.0141 + 10 x 0.00022 = 0.1432 s compute; 10 / 90 + 10 x 0.025 / 8 = 0.14236 s on S3.
    expect(compactEstimateSeconds(10e6, 10)).toBeCloseTo(
      10 * MEASURED_COMPACT.secondsPerMB + 10 * MEASURED_COMPACT.secondsPerFile + 10 / 90 + 0.03125,
      12,
    );
    expect(compactSecondsAt(3008, 10e6, 10)).toBe(compactEstimateSeconds(10e6, 10));
    expect(compactSecondsAt(10240, 10e6, 10)).toBe(compactEstimateSeconds(10e6, 10));
    // Half the memory: half the vCPUs, the compute twice as long.
    const compute = 10 * MEASURED_COMPACT.secondsPerMB + 10 * MEASURED_COMPACT.secondsPerFile;
    expect(compute).toBeCloseTo(0.1432, 12);
    expect(compactSecondsAt(1504, 10e6, 10)).toBeCloseTo(compactEstimateSeconds(10e6, 10) + compute, 12);
  });

  it('splits outputs at the target size', () => {
    expect(outputSizes(1, 100)).toEqual([1]);
    expect(outputSizes(100, 100)).toEqual([100]);
    expect(outputSizes(250, 100)).toEqual([100, 100, 50]);
  });

  it('uploads and copies an output larger than a part in parts, heading the copy source', () => {
    expect(multipartRequests([PART_BYTES])).toEqual({ get: 0, put: 0, list: 0, delete: 0 });
    // 3 parts: Create + 3 UploadPart + Complete and Create + 3 UploadPartCopy + Complete, 5 and 5
    // requests where one PUT and one COPY are counted: 8 more, and the copy's HEAD.
    expect(multipartRequests([PART_BYTES, 2 * PART_BYTES + 1])).toEqual({
      get: 1,
      put: 8,
      list: 0,
      delete: 0,
    });
  });

  it('prices a Standard child of its own: its Lambdas, its requests and 1 + 3 + 7 transitions', () => {
    const compact = compactEstimateSeconds(10e6, 10);
    const cost = jobCost(JOBS[0] as (typeof JOBS)[number], settings('STANDARD'), TRANSITIONS);
    expect(cost.lambdaUsd).toBeCloseTo((3008 / 1024) * compact * GBS + 4 * 0.5 * 0.5 * GBS + 5 * INVOKE, 15);
    // GET: 5 manifest reads + 10 inputs + 1 HEAD + the job record; PUT: 5 manifest writes + the
    // staging PUT + the COPY + the receipt + the job record; LIST: the staging listing; DELETE:
    // 1 + 2 batches.
    expect(cost.requests).toEqual({ get: 17, put: 9, list: 1, delete: 3 });
    expect(cost.s3Usd).toBeCloseTo((17 * 0.0004 + 10 * 0.005) / 1000, 15);
    // The child's start, its 3 states around its jobs, the job's 7.
    expect(cost.transitions).toBe(11);
    expect(cost.stepFunctionsUsd).toBeCloseTo((11 * 0.025) / 1000, 15);
    expect(cost.seconds).toBeCloseTo(compact + 4 * 0.5, 12);
  });

  it('prices an Express child: the child start, $1 per million, 64 MB x the chain rounded up to 100 ms', () => {
    const cost = jobCost(JOBS[0] as (typeof JOBS)[number], settings('EXPRESS'), TRANSITIONS);
    const chain = compactEstimateSeconds(10e6, 10) + 2;
    expect(expressBilledSeconds(chain)).toBeCloseTo(Math.ceil(chain * 10) / 10, 12);
    expect(cost.transitions).toBe(1);
    expect(cost.stepFunctionsUsd).toBeCloseTo(
      0.025 / 1000 + 1e-6 + (64 / 1024) * (Math.ceil(chain * 10) / 10) * (0.06 / 3600),
      15,
    );
  });

  it("shares a Map item's child among its jobs: its start, and its states (Standard) or its request and duration, its longest job's (Express)", () => {
    const job = JOBS[0] as (typeof JOBS)[number];
    const chain = compactEstimateSeconds(10e6, 10) + 2;
    const item = { jobs: 4, seconds: chain + 1 };
    const standard = jobCost(job, settings('STANDARD'), TRANSITIONS, item);
    expect(standard.transitions).toBe((1 + 3) / 4 + 7);
    expect(standard.stepFunctionsUsd).toBeCloseTo(((1 + 3) / 4 + 7) * (0.025 / 1000), 15);
    const express = jobCost(job, settings('EXPRESS'), TRANSITIONS, item);
    expect(express.transitions).toBe(1 / 4);
    expect(express.expressRequests).toBe(1 / 4);
    expect(express.stepFunctionsUsd).toBeCloseTo(
      (0.025 / 1000 + 1e-6 + (64 / 1024) * (Math.ceil((chain + 1) * 10) / 10) * (0.06 / 3600)) / 4,
      15,
    );
    // Its Lambdas are its own, and its requests but its share of the item's record (one put).
    const alone = jobCost(job, settings('EXPRESS'), TRANSITIONS);
    expect(express.lambdaUsd).toBe(alone.lambdaUsd);
    expect(express.requests).toEqual({ ...alone.requests, put: alone.requests.put - 1 + 1 / 4 });
    expect(express.stepFunctionsUsd).toBeLessThan(alone.stepFunctionsUsd / 3);
  });

  it('a cycle of jobs sharing items pays each child once and takes as long as its items, not its jobs', () => {
    const shared = JOBS.map((j) => ({ ...j, item: 0 }));
    const own = cycleCost({
      jobs: JOBS,
      settings: settings('STANDARD'),
      transitions: TRANSITIONS,
      planning: PLANNING,
    });
    const items = cycleCost({
      jobs: shared,
      settings: { ...settings('STANDARD'), maxConcurrency: 1 },
      transitions: TRANSITIONS,
      planning: PLANNING,
    });
    // Wave 0: one child for its two jobs; wave 1: one for its one. Three children before.
    expect(items.tiers[0]?.transitions).toBeCloseTo(2 * (1 + 3) + 3 * 7, 12);
    expect(own.tiers[0]?.transitions).toBeCloseTo(3 * (1 + 3) + 3 * 7, 12);
    // At concurrency 1 the first wave's jobs still run at once, inside their item.
    const seconds = JOBS.map((j) => jobCost(j, settings('STANDARD'), TRANSITIONS).seconds);
    expect(items.tiers[0]?.seconds).toBeCloseTo(
      Math.max(seconds[0] ?? 0, seconds[1] ?? 0) + (seconds[2] ?? 0),
      9,
    );
  });

  it('prices a small job at the small compact function’s memory and a larger one at lambda.compact’s', () => {
    const sized = { ...settings('EXPRESS'), smallCompactMemoryMb: 1024 };
    const small = jobCost(JOBS[0] as (typeof JOBS)[number], sized, TRANSITIONS);
    const seconds = compactSecondsAt(1024, 10e6, 10);
    expect(small.lambdaUsd).toBeCloseTo((1024 / 1024) * seconds * GBS + 4 * 0.5 * 0.5 * GBS + 5 * INVOKE, 15);
    // 200 MB is past the small function's 64 MiB: the 3,008 MB function, as without one.
    const large = jobCost(JOBS[1] as (typeof JOBS)[number], sized, TRANSITIONS);
    expect(large.lambdaUsd).toBe(
      jobCost(JOBS[1] as (typeof JOBS)[number], settings('EXPRESS'), TRANSITIONS).lambdaUsd,
    );
    // The small function is the cheaper one for the small job, though it runs longer.
    expect(small.lambdaUsd).toBeLessThan(
      jobCost(JOBS[0] as (typeof JOBS)[number], settings('EXPRESS'), TRANSITIONS).lambdaUsd,
    );
    expect(seconds).toBeGreaterThan(compactEstimateSeconds(10e6, 10));
  });

  it('deletes 2,000 inputs in two batches; its 200 MB output goes up and is copied in 3 parts', () => {
    const cost = jobCost(JOBS[1] as (typeof JOBS)[number], settings('EXPRESS'), TRANSITIONS);
    // 200e6 B / 64 MiB -> 3 parts: the staging PUT and the COPY become 5 requests each, + a HEAD.
    expect(cost.requests).toEqual({ get: 2007 + 1, put: 9 + 8, list: 1, delete: 4 });
  });
});

describe('the floor beside each job', () => {
  it('is one GET per input and one PUT per output; a retention job has none; the lines add it up', () => {
    const [small, large] = [JOBS[0], JOBS[1]].map((j) =>
      jobCost(j as (typeof JOBS)[number], settings('EXPRESS'), TRANSITIONS),
    );
    expect(small?.floorUsd).toBeCloseTo((10 * 0.0004 + 1 * 0.005) / 1000, 15);
    expect(large?.floorUsd).toBeCloseTo((2000 * 0.0004 + 1 * 0.005) / 1000, 15);
    const retention = jobCost(
      { tier: 'retention', inputs: 50, inputBytes: 1e9, wave: 0 },
      settings('EXPRESS'),
      TRANSITIONS,
    );
    expect(retention.floorUsd).toBe(0);
    const cycle = cycleCost({
      jobs: JOBS,
      settings: settings('EXPRESS'),
      transitions: TRANSITIONS,
      planning: PLANNING,
    });
    expect(cycle.jobs.map((j) => j.floorUsd)).toEqual(
      JOBS.map((j) => jobCost(j, settings('EXPRESS'), TRANSITIONS).floorUsd),
    );
    expect(cycle.tiers[0]?.floorUsd).toBeCloseTo(
      cycle.jobs.reduce((sum, j) => sum + j.floorUsd, 0),
      15,
    );
    expect(cycle.execution.floorUsd).toBe(0);
    expect(cycle.total.floorUsd).toBeCloseTo(cycle.tiers[0]?.floorUsd ?? -1, 15);
  });
});

describe('a retention job', () => {
  it('heads its inputs instead of downloading them and writes no output', () => {
    const cost = jobCost(
      { tier: 'retention', inputs: 40, inputBytes: 4e9, wave: 0 },
      settings('STANDARD'),
      TRANSITIONS,
    );
    // GET: the claim's 2 reads, 40 HEADs, 3 reads of publish, verify, delete, the clear's, the job
    // record; PUT: the claim and its commit, the delete's CAS, the receipt, the record; LIST: the
    // other tiers' manifests (2) and the staging listing.
    expect(cost.requests).toEqual({ get: 2 + 40 + 3 + 1 + 1, put: 2 + 1 + 1 + 1, list: 3, delete: 3 });
    // Its first step: 0.5 s stated and 40 HEADs 8 at a time at 25 ms.
    expect(cost.seconds).toBeCloseTo(0.5 + (40 * 0.025) / 8 + 4 * 0.5, 12);
  });
});

describe('a cycle', () => {
  it('schedules each wave on the Map concurrency, waves one after another', () => {
    const jobs = [
      { wave: 0, seconds: 3 },
      { wave: 0, seconds: 1 },
      { wave: 0, seconds: 1 },
      { wave: 1, seconds: 2 },
    ];
    expect(scheduleSeconds(jobs, 10)).toBe(3 + 2);
    // Two slots: 3 | 1 + 1 -> 3, then 2.
    expect(scheduleSeconds(jobs, 2)).toBe(3 + 2);
    expect(scheduleSeconds(jobs, 1)).toBe(5 + 2);
  });

  it.each(['STANDARD', 'EXPRESS'] as const)(
    'adds its jobs, the execution and the parent states: %s',
    (child) => {
      const cost = cycleCost({
        jobs: JOBS,
        settings: settings(child),
        transitions: TRANSITIONS,
        planning: PLANNING,
      });
      const jobs = JOBS.map((j) => jobCost(j, settings(child), TRANSITIONS));
      const [hourly] = cost.tiers;
      expect(cost.tiers).toHaveLength(1);
      expect(hourly).toMatchObject({ tier: 'hourly', jobs: 3, inputFiles: 2020, inputBytes: 220e6 });
      expect(hourly?.totalUsd).toBeCloseTo(
        jobs.reduce((s, j) => s + j.totalUsd, 0),
        15,
      );
      // The two jobs of the first wave at once, then the third.
      expect(hourly?.seconds).toBeCloseTo(
        Math.max(jobs[0]?.seconds ?? 0, jobs[1]?.seconds ?? 0) + (jobs[2]?.seconds ?? 0),
        12,
      );
      expect(cost.waves).toBe(2);
      // Parent: 8 states once + 4 per wave, every child type (the parent is Standard).
      expect(cost.execution.transitions).toBe(16);
      expect(cost.execution.stepFunctionsUsd).toBeCloseTo((16 * 0.025) / 1000, 15);
      // Recover, plan, summary at 512 MB for 2 s each.
      expect(cost.execution.lambdaUsd).toBeCloseTo(0.5 * 6 * GBS + 3 * INVOKE, 15);
      // The planning's 3 LISTs; recover's 7 listings; per wave 3 PUT and 3 GET; Summary's read and write.
      expect(cost.execution.requests).toEqual({ get: 7, put: 7, list: 10, delete: 0 });
      expect(cost.total.totalUsd).toBeCloseTo((hourly?.totalUsd ?? 0) + cost.execution.totalUsd, 15);
      expect(cost.total.seconds).toBeCloseTo((hourly?.seconds ?? 0) + 6, 12);
      expect(cost.region).toBe('us-east-1');
    },
  );

  it('prices an empty plan as the execution alone', () => {
    const cost = cycleCost({
      jobs: [],
      settings: settings('EXPRESS'),
      transitions: TRANSITIONS,
      planning: PLANNING,
    });
    expect(cost.tiers).toEqual([]);
    expect(cost.waves).toBe(0);
    expect(cost.total.totalUsd).toBeCloseTo(cost.execution.totalUsd, 15);
  });
});
