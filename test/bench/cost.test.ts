/**
 * The cost model's arithmetic (bench/cost.ts jobCost) on a hand-made S3 bench run: each term is
 * checked against the prices worked out here by hand, so a changed price, a dropped term or a
 * Standard transition billed to an Express child fails.
 */

import { describe, expect, it } from 'vitest';
import {
  billedSeconds,
  type ChildType,
  CYCLE_PARTITIONS,
  cycleCost,
  cycleItems,
  type JobCost,
  jobCost,
  requestsAtLambdaParts,
} from '../../bench/cost.ts';
import type { CostJobId, S3Job } from '../../bench/s3-latency.ts';
import type { StepTiming } from '../../bench/s3-worker.ts';

const step = (name: StepTiming['step'], wallMs: number, cpuMs: number): StepTiming => ({
  step: name,
  status: 'done/x',
  wallMs,
  cpuMs,
  s3BusyMs: wallMs / 2,
  engineBusyMs: 0,
  s3OnlyMs: wallMs / 2,
});

function job(
  costJob: CostJobId,
  files: number,
  bytes: number,
  rawDuckDb?: S3Job['rawDuckDb'],
): S3Job & { costJob: CostJobId } {
  return {
    ...(rawDuckDb ? { rawDuckDb } : {}),
    id: costJob,
    title: costJob,
    costJob,
    scale: 1,
    files,
    bytes,
    rows: 1,
    compactWallMs: [2000],
    shaper: {
      connections: 1,
      maxOpenConnections: 1,
      responses: 1,
      maxAwaitingRequests: 1,
      bytesToServer: 1,
      bytesToClient: 1,
    },
    run: {
      // compact: 2 s wall, 4 s CPU -> 4 / (3008 / 1769) = 2.3524 s billed (CPU-bound on 1.70 vCPUs).
      steps: [
        step('compact', 2000, 4000),
        step('publish', 100, 10),
        step('verify', 50, 10),
        step('delete', 60, 10),
        step('clear', 40, 10),
      ],
      maxConcurrentDownloads: 32,
      plannedConcurrency: 32,
      commands: {
        GetObject: files + 2,
        HeadObject: 3,
        PutObject: 4,
        CopyObject: 1,
        ListObjectsV2: 2,
        DeleteObjects: 2,
      },
      downloadMs: 1000,
      downloadedBytes: bytes,
      stagingPutMs: 100,
      outputBytes: 1,
      outputRows: 1,
      outputKeys: ['k'],
      outputSizes: [1],
      partSizeBytes: 8 * 2 ** 20,
      maxRssBytes: 1,
    },
  };
}

const price = (
  childType: ChildType,
  costJob: CostJobId = 'arc-hour',
  files = 120,
  bytes = 24e6,
  jobsPerItem = 1,
  rawDuckDb?: S3Job['rawDuckDb'],
): JobCost =>
  jobCost({
    job: job(costJob, files, bytes, rawDuckDb),
    childType,
    transitionsPerItem: 3,
    transitionsPerPartition: 7,
    transitionsPerExecution: 9,
    lambdaMemoryMb: 3008,
    jobsPerItem,
  });

const termUsd = (cost: JobCost, name: string) => {
  const term = cost.terms.find((t) => t.name === name);
  if (!term) throw new Error(`no term ${name}`);
  return term.usd;
};

describe('the cost model of one job (bench/cost.ts)', () => {
  it('bills a Lambda its wall time, or its CPU time over the vCPUs its memory buys if longer', () => {
    expect(billedSeconds(step('compact', 2000, 4000), 3008)).toBeCloseTo(4 / (3008 / 1769), 6);
    expect(billedSeconds(step('publish', 100, 10), 512)).toBeCloseTo(0.1, 6);
  });

  it('prices a Standard child of its own: 1 child start + 3 item states + 7 job states + 9/100 of the execution, $0.025 per 1,000', () => {
    const cost = price('STANDARD');
    expect(termUsd(cost, 'Step Functions transitions')).toBeCloseTo((11.09 * 0.025) / 1000, 12);
    expect(cost.terms.some((t) => t.name.startsWith('Express'))).toBe(false);
  });

  it("shares a Map item's child among its jobs: Standard its start and states, Express its start, request and duration", () => {
    const alone = price('STANDARD', 'small-partition', 10, 120_000);
    const shared = price('STANDARD', 'small-partition', 10, 120_000, 8);
    expect(termUsd(shared, 'Step Functions transitions')).toBeCloseTo(((4 / 8 + 7.09) * 0.025) / 1000, 12);
    expect(shared.total).toBeLessThan(alone.total);
    const express = price('EXPRESS', 'small-partition', 10, 120_000, 8);
    const expressAlone = price('EXPRESS', 'small-partition', 10, 120_000);
    for (const name of ['Express child request', 'Express child duration']) {
      expect(termUsd(express, name)).toBeCloseTo(termUsd(expressAlone, name) / 8, 15);
    }
    expect(termUsd(express, 'Step Functions transitions')).toBeCloseTo(((1 / 8 + 0.09) * 0.025) / 1000, 12);
    // Its Lambdas and requests are its own.
    expect(termUsd(express, 'compact Lambda duration')).toBe(
      termUsd(expressAlone, 'compact Lambda duration'),
    );
  });

  it('prices an Express child: the child start and execution share, $1 per million, 64 MB x the chain rounded up to 100 ms', () => {
    const cost = price('EXPRESS');
    expect(termUsd(cost, 'Step Functions transitions')).toBeCloseTo((1.09 * 0.025) / 1000, 12);
    expect(termUsd(cost, 'Express child request')).toBeCloseTo(1e-6, 12);
    // A 24 MB job runs on the small compact function (1,024 MB): 4 s CPU / (1024 / 1769) vCPU
    // = 6.910 s billed; the chain 6.910 + 0.1 + 0.05 + 0.06 + 0.04 = 7.16 s -> 7.2 s x 0.0625 GB
    // x $0.06 / 3600.
    const compactSeconds = 4 / (1024 / 1769);
    expect(termUsd(cost, 'compact Lambda duration')).toBeCloseTo(compactSeconds * 0.0000133334, 12);
    expect(termUsd(cost, 'Express child duration')).toBeCloseTo((7.2 * 0.0625 * 0.06) / 3600, 12);
  });

  it('prices a job past the small function’s limit, and every Standard child’s, at lambda.compact’s memory', () => {
    const large = price('EXPRESS', 'full-job', 2733, 2 * 2 ** 30);
    // 2 s wall, 4 s CPU on 1.70 vCPUs: 2.3524 s at 3008 MB; the chain 2.3524 + 0.25 s -> 2.7 s.
    const seconds = 4 / (3008 / 1769);
    expect(termUsd(large, 'compact Lambda duration')).toBeCloseTo((3008 / 1024) * seconds * 0.0000133334, 12);
    expect(termUsd(large, 'Express child duration')).toBeCloseTo((2.7 * 0.0625 * 0.06) / 3600, 12);
    expect(termUsd(price('STANDARD'), 'compact Lambda duration')).toBeCloseTo(
      (3008 / 1024) * seconds * 0.0000133334,
      12,
    );
  });

  it('prices the Lambdas and S3 requests from the measured run, term by term, and totals them', () => {
    const cost = price('STANDARD');
    const compactSeconds = 4 / (3008 / 1769);
    expect(termUsd(cost, 'compact Lambda duration')).toBeCloseTo(
      (3008 / 1024) * compactSeconds * 0.0000133334,
      12,
    );
    // The 512 MB Lambdas get 0.289 vCPU: 10 ms of CPU bills 34.6 ms, less than each wall time here.
    expect(termUsd(cost, 'publish, verify, delete, clear Lambdas')).toBeCloseTo(
      0.5 * 0.25 * 0.0000133334,
      12,
    );
    expect(termUsd(cost, 'Lambda requests')).toBeCloseTo(5.03 * 0.2e-6, 12);
    // 122 GetObject + 3 HeadObject; 4 PUT + 1 COPY + 2 LIST, and 2 listings x 120 keys / 1,000.
    expect(termUsd(cost, 'S3 GET/HEAD (measured on the wire)')).toBeCloseTo((125 * 0.0004) / 1000, 12);
    expect(termUsd(cost, 'S3 PUT/COPY/POST/LIST (measured on the wire, + planning)')).toBeCloseTo(
      ((7 + 0.24) * 0.005) / 1000,
      12,
    );
    expect(cost.total).toBeCloseTo(
      cost.terms.reduce((sum, t) => sum + t.usd, 0),
      15,
    );
    for (const t of cost.terms) expect(t.arithmetic).toMatch(/x \$/);
  });

  it("recounts outputs the bench's store sent in parts as the Lambda's 64 MiB parts send them", () => {
    const MiB = 2 ** 20;
    // Two outputs of 103 MiB in 8 MiB parts: each uploaded and copied as 1 + 13 + 1 requests, the
    // copy after a HEAD; 6 PUTs (manifests, receipt) and a LIST besides.
    const commands = {
      GetObject: 17,
      HeadObject: 4,
      PutObject: 6,
      CreateMultipartUpload: 4,
      UploadPart: 26,
      UploadPartCopy: 26,
      CompleteMultipartUpload: 4,
      DeleteObjects: 3,
      ListObjectsV2: 1,
    };
    const big = 103 * MiB;
    // At 64 MiB: each 1 + 2 + 1 to upload and to copy, the copy after a HEAD.
    expect(requestsAtLambdaParts({ commands, outputSizes: [big, big], partSizeBytes: 8 * MiB })).toEqual({
      get: 17 + 2 + 2,
      put: 6 + 1 + 2 * 8,
      recounted: 2,
    });
    // One output of 20 MiB: in parts here (1 + 3 + 1 twice, a HEAD), one PUT and one CopyObject there.
    const mid = {
      GetObject: 10,
      HeadObject: 2,
      PutObject: 6,
      CreateMultipartUpload: 2,
      UploadPart: 3,
      UploadPartCopy: 3,
      CompleteMultipartUpload: 2,
      ListObjectsV2: 1,
    };
    expect(requestsAtLambdaParts({ commands: mid, outputSizes: [20 * MiB], partSizeBytes: 8 * MiB })).toEqual(
      {
        get: 10 + 1,
        put: 6 + 1 + 2,
        recounted: 1,
      },
    );
    // Outputs below the bench's part size, or a run that recorded no sizes: as measured.
    expect(requestsAtLambdaParts({ commands: mid, outputSizes: [MiB], partSizeBytes: 8 * MiB })).toEqual({
      get: 12,
      put: 17,
      recounted: 0,
    });
    expect(requestsAtLambdaParts({ commands: mid })).toEqual({ get: 12, put: 17, recounted: 0 });
  });

  it('holds the Arc hour to 1.5x its floor and 1/3 of S3 Tables binpack, the full job to 1/10 of sort', () => {
    const arc = price('EXPRESS');
    const gb = 24e6 / 2 ** 30;
    expect(arc.s3Tables.strategy).toBe('binpack');
    expect(arc.s3Tables.total).toBeCloseTo(gb * 0.005 + (120 * 0.002) / 1000, 12);
    // The floor: 120 GETs and the one output's PUT.
    expect(arc.floor).toBeCloseTo((120 * 0.0004 + 0.005) / 1000, 12);
    expect(arc.target.limit).toBeCloseTo(Math.min(arc.s3Tables.total / 3, 1.5 * arc.floor), 12);
    expect(arc.target.text).toBe('<= 1.5x its floor and <= 1/3 of S3 Tables binpack');
    expect(arc.target.met).toBe(arc.total <= arc.target.limit);

    const full = price('EXPRESS', 'full-job', 2700, 2 * 2 ** 30);
    expect(full.s3Tables.strategy).toBe('sort');
    expect(full.s3Tables.total).toBeCloseTo(2 * 0.01 + (2700 * 0.002) / 1000, 12);
    expect(full.target.limit).toBeCloseTo(full.s3Tables.total / 10, 12);
    expect(full.target.text).toBe('<= 1/10 of S3 Tables sort');
  });

  it("adds raw DuckDB's CPU time for the same merge to the floor, at one vCPU's price (1,769 MB)", () => {
    const requestsOnly = price('EXPRESS');
    expect(requestsOnly.floorTerms).toHaveLength(1);
    // 0.9 CPU s at 1,769 MB: 1.5548 GB-s at $0.0000133334.
    const arc = price('EXPRESS', 'arc-hour', 120, 24e6, 1, { wallMs: 500, cpuMs: 900 });
    const compute = (1769 / 1024) * 0.9 * 0.0000133334;
    expect(arc.floorTerms).toHaveLength(2);
    expect(arc.floorTerms[1]?.usd).toBeCloseTo(compute, 12);
    expect(arc.floor).toBeCloseTo((120 * 0.0004 + 0.005) / 1000 + compute, 12);
    expect(arc.target.limit).toBeCloseTo(Math.min(arc.s3Tables.total / 3, 1.5 * arc.floor), 12);
    // The bill does not change with the floor.
    expect(arc.total).toBe(requestsOnly.total);
  });

  it('names the cause of a missed target: the largest terms, and those that alone exceed the limit', () => {
    const arc = price('STANDARD');
    // $0.000202 of transitions alone is above 1.5x the floor ($0.000080) for 120 x 200 KB.
    expect(arc.target.met).toBe(false);
    expect(arc.cause).toContain('Step Functions transitions');
    expect(arc.cause).toContain('alone exceed');
  });
});

describe('a cycle of many small partitions (bench/cost.ts cycleCost)', () => {
  it('is 2,400 partitions of the measured one in the Map items the plan gives them, beside one GET per input and one PUT per output, timed at the Map concurrency', () => {
    // 100 tables of 24 hours, 10 small jobs an item at most: 10 + 10 + 4 a table.
    const items = cycleItems(10);
    expect(items).toBe(300);
    expect(cycleItems(1)).toBe(CYCLE_PARTITIONS);
    const partition = price('EXPRESS', 'small-partition', 10, 120_000, CYCLE_PARTITIONS / items);
    const cycle = cycleCost(partition, 2.25, 10, items);
    expect(cycle.partitions).toBe(CYCLE_PARTITIONS);
    expect(cycle.items).toBe(300);
    expect(cycle.total).toBeCloseTo(partition.total * 2400, 12);
    // 10 GETs at $0.0004 and 1 PUT at $0.005 per 1,000, each partition.
    expect(cycle.floor).toBeCloseTo(2400 * ((10 * 0.0004 + 0.005) / 1000), 12);
    // An item runs its jobs at once: 300 items, 10 at a time.
    expect(cycle.seconds).toBeCloseTo(30 * 2.25, 9);
    expect(cycle.largest).toHaveLength(3);
    expect(cycle.largest[0]?.usd).toBe(Math.max(...partition.terms.map((t) => t.usd)));
    // The issue sets no target of its own for this job: it is held to the Arc hour's, and says so.
    expect(partition.target.text).toContain("the Arc hour's target");
  });
});
