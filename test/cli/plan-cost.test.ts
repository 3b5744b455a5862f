/**
 * `compactor plan`'s price block: on a generated lake the text prints it after the plan table,
 * naming the region and the list prices, and `--json` carries a `cost` whose numbers are the cost
 * model's for that plan, recomputed here from the job counts and the price table (and, for the
 * chain's Lambdas, from the settings plan was given: memory and child type).
 */

import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import {
  CHILD_START_TRANSITIONS,
  type CycleCost,
  compactSecondsAt,
  expressDurationUsd,
  lambdaDurationUsd,
  PRICES,
  STATED_SECONDS,
} from '../../functions/core/cost/index.ts';
import { cli } from '../support/cli-lake.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { writeLake } from '../support/lake-harness.ts';

let root: string;

useEngineAndDir('cli-plan-cost-', async (engine: DuckDbEngine, dir) => {
  root = join(dir, 'lake');
  await writeLake(engine, root, [
    // Two hours of three raw files each: two hourly jobs.
    ...[1, 2, 3].map((n) => ({ key: `db/cpu/2025/01/15/10/cpu_20250115_10${n}500_${n}.parquet`, rows: 20 })),
    ...[4, 5, 6].map((n) => ({ key: `db/cpu/2025/01/15/11/cpu_20250115_11${n}500_${n}.parquet`, rows: 20 })),
  ]);
});

const plan = (...more: string[]) =>
  cli('plan', '--store', root, '--tier', 'hourly', '--quiet', '0', '--min-files', '2', ...more);

interface JsonPlan {
  readonly jobs: readonly { readonly inputs: readonly unknown[]; readonly inputBytes: number }[];
  readonly cost: CycleCost;
}

/** Each job's Lambdas and requests, from its counts and the price table, as the model should price them. */
function expectedJobs(
  jobs: JsonPlan['jobs'],
  memory: { compact: number; steps: number },
  jobsPerItem: number,
) {
  return jobs.map((j) => {
    const n = j.inputs.length;
    const compact = compactSecondsAt(memory.compact, j.inputBytes, n);
    const seconds = compact + 4 * STATED_SECONDS.partitionStep;
    const lambda =
      lambdaDurationUsd(memory.compact, compact) +
      4 * lambdaDurationUsd(memory.steps, STATED_SECONDS.partitionStep) +
      5 * PRICES.lambdaPerRequest;
    // One output: manifest reads (5) + inputs + verify's HEAD + the job record's read; PUT class:
    // manifest writes (5) + staging PUT + COPY + the receipt + the staging LIST + its share of its
    // Map item's record (one put an item).
    const gets = 5 + n + 1 + 1;
    const puts = 5 + 1 + 1 + 1 + 1 + 1 / jobsPerItem;
    const s3 = (gets * PRICES.s3GetHeadPer1000 + puts * PRICES.s3PutCopyListPer1000) / 1000;
    return { lambda, s3, seconds, gets, puts };
  });
}

/**
 * Step Functions for one Map item carrying `jobs` at once: its start, and as Express its request
 * and its duration (its longest job), as Standard its own states and each job's chain.
 */
function expectedItem(
  child: 'EXPRESS' | 'STANDARD',
  seconds: readonly number[],
  states: { perItem: number; perPartition: number },
): number {
  const transition = PRICES.sfnTransitionPer1000 / 1000;
  return child === 'EXPRESS'
    ? CHILD_START_TRANSITIONS * transition +
        PRICES.sfnExpressPerRequest +
        expressDurationUsd(Math.max(...seconds))
    : (CHILD_START_TRANSITIONS + states.perItem + seconds.length * states.perPartition) * transition;
}

describe('compactor plan prices the cycle it plans', () => {
  it('prints the price block after the plan table, naming the region and the list prices', async () => {
    const result = await plan();
    expect(result.code).toBe(0);
    const [table, block] = result.text.split('estimated cost of this cycle');
    expect(table).toContain('compact');
    expect(block).toContain('us-east-1 list prices');
    expect(block).toContain('EXPRESS children, Map concurrency 10');
    for (const column of ['Lambda', 'S3 requests', 'Step Functions', 'total', 'time']) {
      expect(block).toContain(column);
    }
    expect(block).toMatch(/\nhourly\s+2\s+6\s/);
    expect(block).toMatch(/\ntotal\s+2\s+6\s/);
    expect(block).toContain('floor: what any compactor pays for the same jobs');
    // Each job's cost beside its floor (3 GETs and 1 PUT: $0.000006), in the plan table.
    expect(table).toMatch(/cost\s+floor\s+why/);
    expect(table).toMatch(
      /db\/cpu\/2025\/01\/15\/10\/\s+compact\s+3\s+\d+\s+\S+ \S+\s+\$0\.\d{6}\s+\$0\.000006\s/,
    );
  });

  it.each([
    // Express: these small jobs run on the small compact function (functions/core/lambda-sizing.ts).
    ['EXPRESS', { compact: 1024, steps: 512 }, []],
    [
      'STANDARD',
      { compact: 1769, steps: 1024 },
      [
        '--context',
        JSON.stringify({
          map: { childExecutionType: 'STANDARD', maxConcurrency: 1 },
          lambda: { compact: { memoryMb: 1769 }, partitionSteps: { memoryMb: 1024 } },
        }),
      ],
    ],
  ] as const)('--json carries the model’s numbers for the plan: %s children', async (child, memory, args) => {
    const result = await plan('--json', ...args);
    expect(result.code).toBe(0);
    const { jobs, cost } = JSON.parse(result.text) as JsonPlan;
    expect(jobs).toHaveLength(2);
    expect(cost.childExecutionType).toBe(child);
    const tier = cost.tiers[0];
    if (!tier) throw new Error('no tier line');
    expect(cost.tiers).toHaveLength(1);
    // The two hours are small jobs of one table: with Express children one Map item, one child;
    // Standard children default to one job an item, each child one job's chain, no item states.
    // A job's states as counted on the synthesized definition (billed to Standard children only):
    // compact, the Choice, four steps and the end state (Standard children have no Choice of
    // compact function).
    const expected = expectedJobs(jobs, memory, child === 'EXPRESS' ? 2 : 1);
    const sum = (f: (e: (typeof expected)[number]) => number) => expected.reduce((s, e) => s + f(e), 0);
    expect(tier).toMatchObject({ tier: 'hourly', jobs: 2, inputFiles: 6 });
    expect(tier.inputBytes).toBe(jobs.reduce((s, j) => s + j.inputBytes, 0));
    expect(tier.requests).toMatchObject({ get: sum((e) => e.gets), put: sum((e) => e.puts) - 2, list: 2 });
    expect(tier.lambdaUsd).toBeCloseTo(
      sum((e) => e.lambda),
      12,
    );
    expect(tier.s3Usd).toBeCloseTo(
      sum((e) => e.s3),
      12,
    );
    const times = expected.map((e) => e.seconds);
    expect(tier.stepFunctionsUsd).toBeCloseTo(
      child === 'EXPRESS'
        ? expectedItem(child, times, { perItem: 3, perPartition: 7 })
        : times.reduce((s, t) => s + expectedItem(child, [t], { perItem: 0, perPartition: 7 }), 0),
      12,
    );
    expect(tier.totalUsd).toBeCloseTo(tier.lambdaUsd + tier.s3Usd + tier.stepFunctionsUsd, 12);
    // The floor: one GET per input, one PUT per output, per job and per tier.
    expect(cost.jobs.map((j) => j.floorUsd)).toEqual(
      jobs.map((j) => (j.inputs.length * PRICES.s3GetHeadPer1000 + PRICES.s3PutCopyListPer1000) / 1000),
    );
    expect(tier.floorUsd).toBeCloseTo(
      cost.jobs.reduce((s, j) => s + j.floorUsd, 0),
      15,
    );
    // EXPRESS: one item runs its jobs at once; STANDARD: two items at concurrency 1, one by one.
    expect(tier.seconds).toBeCloseTo(child === 'EXPRESS' ? Math.max(...times) : sum((e) => e.seconds), 9);
    // The execution: recover, plan and summary, and the parent's states, once and per wave.
    expect(cost.execution.lambdaUsd).toBeCloseTo(
      lambdaDurationUsd(512, 3 * STATED_SECONDS.executionStep) + 3 * PRICES.lambdaPerRequest,
      12,
    );
    expect(cost.execution.transitions).toBe(8 + 4 * cost.waves);
    expect(cost.total.totalUsd).toBeCloseTo(tier.totalUsd + cost.execution.totalUsd, 12);
    expect(cost.total.seconds).toBeCloseTo(tier.seconds + cost.execution.seconds, 9);
  });
});
