/**
 * The cost model's request counts (functions/core/cost/requests.ts STEP_CALLS) against real jobs:
 * hourly and daily jobs of 3 and 1,200 inputs, and retention jobs of 3 and 30, run through the
 * protocol's steps on the local store, each store call recorded (test/support/fault-store.ts) and
 * grouped by the step that made it. The model must name exactly those calls, so a step that gains
 * or drops a call fails here.
 */

import { copyFile, mkdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { DuckDbEngine } from '../../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { LocalFolderStore } from '../../../functions/adapters/local-store/local-store.ts';
import { DEFAULT_PART_SIZE } from '../../../functions/adapters/s3-store/s3-store.ts';
import { writeSampleParquet } from '../../../functions/adapters/sample-data.ts';
import { type CompactorConfig, parseConfig } from '../../../functions/core/config.ts';
import {
  jobCalls,
  outputSizes,
  PART_BYTES,
  RECOVER_CALLS,
  RequestCountingStore,
  type StoreCalls,
} from '../../../functions/core/cost/index.ts';
import { assignJobs, planCycle, runJob } from '../../../functions/core/cycle.ts';
import { type Clock, systemClock } from '../../../functions/core/engine.ts';
import type { Plan } from '../../../functions/core/planner/planner.ts';
import { planTier } from '../../../functions/core/planner/planner.ts';
import { recover } from '../../../functions/core/recovery.ts';
import { useEngineAndDir } from '../../support/engine-fixture.ts';
import { FaultStore } from '../../support/fault-store.ts';

let engine: DuckDbEngine;
let dir: string;
let template: string;

useEngineAndDir('cost-requests-', async (e, d) => {
  engine = e;
  dir = d;
  template = join(dir, 'tiny.parquet');
  await writeSampleParquet(engine, template, {
    rows: 4,
    firstId: 1,
    startTimeMs: Date.UTC(2025, 0, 14, 10),
    spanMs: 3_600_000,
  });
});

function inputKey(tier: 'hourly' | 'daily', i: number): string {
  const seq = String(i).padStart(9, '0');
  if (tier === 'hourly') return `db/cpu/2025/01/15/10/cpu_20250115_100000_${seq}.parquet`;
  const hh = String(i % 24).padStart(2, '0');
  return `db/cpu/2025/01/14/${hh}/cpu_20250114_${hh}_${seq}_compacted.parquet`;
}

function counted(ops: readonly string[]): StoreCalls {
  const calls: Record<string, number> = {};
  for (const op of ops) calls[op] = (calls[op] ?? 0) + 1;
  return calls;
}

/** Each step's store calls as the job ran them through `store`. */
async function callsByStep(store: FaultStore, config: CompactorConfig, clock: Clock, plan: Plan) {
  let next = 0;
  const [job, ...rest] = assignJobs(plan, {
    clock,
    randomHex: () => (++next).toString(16).padStart(8, '0'),
    executionId: 'cost-requests',
  });
  if (!job) throw new Error('no job planned');
  expect(rest).toEqual([]);
  const measured: Record<string, StoreCalls> = {};
  let at = store.calls.length;
  const outcome = await runJob(
    {
      store,
      config,
      clock,
      engine,
      workDir: join(dir, 'work'),
      sleep: async () => {},
      onStep: (step) => {
        measured[step] = counted(store.calls.slice(at).map((c) => c.op));
        at = store.calls.length;
      },
    },
    job,
  );
  return { job, outcome, measured };
}

async function lakeOf(name: string, keys: readonly string[]): Promise<FaultStore> {
  const lake = join(dir, name);
  for (const key of keys) {
    const path = join(lake, ...key.split('/'));
    await mkdir(dirname(path), { recursive: true });
    await copyFile(template, path);
  }
  return new FaultStore(new LocalFolderStore(lake));
}

describe('the requests of a job, step by step', () => {
  it.each([
    ['hourly', 3],
    ['hourly', 1200],
    ['daily', 3],
  ] as const)('%s job of %i inputs makes the calls the model counts', async (tier, n) => {
    const store = await lakeOf(
      `${tier}-${n}`,
      Array.from({ length: n }, (_, i) => inputKey(tier, i)),
    );
    const config = parseConfig({
      quietSeconds: 0,
      tiers: { hourly: { minFiles: 1 }, daily: { minFiles: 2 } },
    });
    // The planning's listing, counted as S3 would bill it: one request per 1,000 keys.
    const planning = new RequestCountingStore(store);
    const plan = await planTier(planning, config, systemClock, tier);
    expect(planning.requests.list).toBeGreaterThanOrEqual(Math.ceil(n / 1000));
    const { job, outcome, measured } = await callsByStep(store, config, systemClock, plan);
    expect(outcome.status).toBe('compacted');
    const bytes = job.inputs.reduce((s, i) => s + i.size, 0);
    expect(measured).toEqual(
      jobCalls({ inputs: n, outputs: outputSizes(bytes, config.targetFileBytes).length }),
    );
  });

  it.each([3, 30])('a retention job of %i expired inputs makes the calls the model counts', async (n) => {
    // Raw files of a January day, expired under a 30-day rule in June.
    const store = await lakeOf(
      `retention-${n}`,
      Array.from({ length: n }, (_, i) => inputKey('daily', i).replace('_compacted.parquet', '.parquet')),
    );
    const config = parseConfig({ quietSeconds: 0, retention: { rules: { '*': 30 } } });
    const clock: Clock = { now: () => new Date('2025-06-01T00:00:00Z') };
    const plan = await planCycle(store, config, clock, 'retention');
    const { outcome, measured } = await callsByStep(store, config, clock, plan);
    expect(outcome.status).toBe('expired');
    expect(measured).toEqual(jobCalls({ inputs: n, outputs: 0 }, 'retention'));
  });
});

describe('the multipart part size', () => {
  it("is the S3 adapter's, which the Lambdas' store uses", () => {
    expect(PART_BYTES).toBe(DEFAULT_PART_SIZE);
  });
});

describe("the execution's own requests", () => {
  it('recover on a lake with nothing to resolve lists what the model counts for it', async () => {
    const store = await lakeOf('recover', [inputKey('hourly', 0)]);
    const config = parseConfig({ quietSeconds: 0 });
    await recover({
      store,
      config,
      clock: systemClock,
      executionId: 'cost-recover',
      isOwnerAlive: async () => false,
    });
    expect(counted(store.calls.map((c) => c.op))).toEqual(RECOVER_CALLS);
  });
});
