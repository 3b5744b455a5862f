/**
 * The cost model's request counts (functions/core/cost/requests.ts STEP_CALLS) against real jobs:
 * hourly and daily jobs of 3 and 1,200 inputs run through the protocol's steps on the local store,
 * each store call recorded (test/support/fault-store.ts) and grouped by the step that made it. The
 * model must name exactly those calls, so a step that gains or drops a call fails here.
 */

import { copyFile, mkdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { DuckDbEngine } from '../../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { LocalFolderStore } from '../../../functions/adapters/local-store/local-store.ts';
import { DEFAULT_PART_SIZE } from '../../../functions/adapters/s3-store/s3-store.ts';
import { writeSampleParquet } from '../../../functions/adapters/sample-data.ts';
import { parseConfig } from '../../../functions/core/config.ts';
import {
  jobCalls,
  outputSizes,
  PART_BYTES,
  RequestCountingStore,
  type StoreCalls,
} from '../../../functions/core/cost/index.ts';
import { assignJobs, runJob } from '../../../functions/core/cycle.ts';
import { systemClock } from '../../../functions/core/engine.ts';
import { planTier } from '../../../functions/core/planner/planner.ts';
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

describe('the requests of a job, step by step', () => {
  it.each([
    ['hourly', 3],
    ['hourly', 1200],
    ['daily', 3],
  ] as const)('%s job of %i inputs makes the calls the model counts', async (tier, n) => {
    const lake = join(dir, `${tier}-${n}`);
    for (let i = 0; i < n; i++) {
      const path = join(lake, ...inputKey(tier, i).split('/'));
      await mkdir(dirname(path), { recursive: true });
      await copyFile(template, path);
    }
    const store = new FaultStore(new LocalFolderStore(lake));
    const config = parseConfig({
      quietSeconds: 0,
      tiers: { hourly: { minFiles: 1 }, daily: { minFiles: 2 } },
    });
    // The planning's listing, counted as S3 would bill it: one request per 1,000 keys.
    const planning = new RequestCountingStore(store);
    const plan = await planTier(planning, config, systemClock, tier);
    expect(planning.requests.list).toBeGreaterThanOrEqual(Math.ceil(n / 1000));
    let next = 0;
    const [job, ...rest] = assignJobs(plan, {
      clock: systemClock,
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
        clock: systemClock,
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
    expect(outcome.status).toBe('compacted');
    const bytes = job.inputs.reduce((s, i) => s + i.size, 0);
    expect(measured).toEqual(
      jobCalls({ inputs: n, outputs: outputSizes(bytes, config.targetFileBytes).length }),
    );
  });
});

describe('the multipart part size', () => {
  it("is the S3 adapter's, which the Lambdas' store uses", () => {
    expect(PART_BYTES).toBe(DEFAULT_PART_SIZE);
  });
});
