/**
 * Request accounting: every object-store call of one job (compact -> publish -> verify ->
 * delete inputs -> clear), counted by kind through the test harness's FaultStore, for both
 * tiers and 10, 100, 1,000 and 5,000 inputs (tiny files). The bench fails if the counts do not
 * follow the formula stated in the README:
 *
 *   calls per job = N inputs fetched + JOB_CONSTANT + ceil(N / 1000) delete calls
 *
 * (one output per job; each further output adds a staging PUT, a COPY and a HEAD).
 */

import { copyFile, mkdir, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { DuckDbEngine } from '../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { LocalFolderStore } from '../functions/adapters/local-store/local-store.ts';
import { writeSampleParquet } from '../functions/adapters/sample-data.ts';
import { parseConfig, type TierName } from '../functions/core/config.ts';
import { jobCalls, STORE_CALL_CLASS, type StoreCall } from '../functions/core/cost/index.ts';
import { assignJobs, runJob } from '../functions/core/cycle.ts';
import { systemClock } from '../functions/core/engine.ts';
import { planTier } from '../functions/core/planner/planner.ts';
import { FaultStore } from '../test/support/fault-store.ts';

/**
 * Calls of a job besides its input downloads and input-delete batches (one output): the cost
 * model's count of what each step does (functions/core/cost STEP_CALLS) for a job of no input.
 */
export const JOB_CONSTANT = Object.values(jobCalls({ inputs: 0, outputs: 1 }))
  .flatMap((calls) => Object.values(calls))
  .reduce((sum, n) => sum + n, 0);
export const FORMULA = `calls per job = N (inputs fetched, GET) + ${JOB_CONSTANT} + ceil(N / 1000) (DeleteObjects batches)`;

export interface RequestJob {
  readonly tier: TierName;
  readonly inputs: number;
  readonly calls: Readonly<Record<string, number>>;
  readonly total: number;
  readonly expected: number;
  readonly byClass: Readonly<Record<'get' | 'put' | 'list' | 'delete', number>>;
  /** The planning that found the job (per cycle, not per job): calls by kind. */
  readonly planCalls: Readonly<Record<string, number>>;
  readonly wallMs: number;
}

export interface RequestAccounting {
  readonly formula: string;
  readonly constant: number;
  readonly jobs: readonly RequestJob[];
}

export class RequestFormulaError extends Error {
  override readonly name = 'RequestFormulaError';
}

function countBy(ops: readonly string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const op of ops) counts[op] = (counts[op] ?? 0) + 1;
  return counts;
}

function inputKeys(tier: TierName, n: number): string[] {
  return Array.from({ length: n }, (_, i) => {
    const seq = String(i).padStart(9, '0');
    if (tier === 'hourly') return `db/cpu/2025/01/15/10/cpu_20250115_100000_${seq}.parquet`;
    const hh = String(i % 24).padStart(2, '0');
    return `db/cpu/2025/01/14/${hh}/cpu_20250114_${hh}_${seq}_compacted.parquet`;
  });
}

export async function runRequestAccounting(
  engine: DuckDbEngine,
  dir: string,
  options: { readonly sizes: readonly number[]; readonly log: (line: string) => void },
): Promise<RequestAccounting> {
  await mkdir(dir, { recursive: true });
  const template = join(dir, 'tiny.parquet');
  await writeSampleParquet(engine, template, {
    rows: 4,
    firstId: 1,
    startTimeMs: Date.UTC(2025, 0, 14, 10),
    spanMs: 3_600_000,
  });
  const config = parseConfig({
    quietSeconds: 0,
    tiers: { hourly: { minFiles: 1 }, daily: { minFiles: 2 } },
  });
  const jobs: RequestJob[] = [];
  let counter = 0;
  for (const tier of ['hourly', 'daily'] as const) {
    for (const n of options.sizes) {
      const lake = join(dir, `${tier}-${n}`);
      for (const key of inputKeys(tier, n)) {
        const path = join(lake, ...key.split('/'));
        await mkdir(dirname(path), { recursive: true });
        await copyFile(template, path);
      }
      const store = new FaultStore(new LocalFolderStore(lake));
      const plan = await planTier(store, config, systemClock, tier);
      const planCalls = countBy(store.calls.map((c) => c.op));
      const [job, ...rest] = assignJobs(plan, {
        clock: systemClock,
        randomHex: () => (++counter).toString(16).padStart(8, '0'),
        executionId: 'bench-requests',
      });
      if (!job || rest.length > 0 || job.inputs.length !== n) {
        throw new RequestFormulaError(
          `${tier}/${n}: expected one job of ${n} inputs, planned ${plan.jobs.map((j) => j.inputs.length).join(', ')}`,
        );
      }
      const before = store.calls.length;
      const start = performance.now();
      const outcome = await runJob(
        { store, config, clock: systemClock, engine, workDir: join(dir, 'work'), sleep: async () => {} },
        job,
      );
      const wallMs = performance.now() - start;
      if (outcome.status !== 'compacted') {
        const why = outcome.status === 'failed' ? outcome.error.message : outcome.status;
        throw new RequestFormulaError(`${tier}/${n}: the job did not complete: ${why}`);
      }
      const ops = store.calls.slice(before).map((c) => c.op);
      const calls = countBy(ops);
      const deleteBatches = Math.ceil(n / 1000);
      const expected = n + JOB_CONSTANT + deleteBatches;
      const byClass = { get: 0, put: 0, list: 0, delete: 0 };
      for (const op of ops) byClass[STORE_CALL_CLASS[op as StoreCall] ?? 'put']++;
      jobs.push({ tier, inputs: n, calls, total: ops.length, expected, byClass, planCalls, wallMs });
      options.log(
        `  ${tier.padEnd(6)} ${String(n).padStart(5)} inputs: ${ops.length} calls (expected ${expected}) ${JSON.stringify(calls)}`,
      );
      if (calls.getToFile !== n || ops.length !== expected || calls.deleteMany !== deleteBatches + 2) {
        throw new RequestFormulaError(
          `${tier} job of ${n} inputs made ${ops.length} store calls ${JSON.stringify(calls)}; ` +
            `the formula (${FORMULA}) says ${expected}, with ${n} getToFile and ${deleteBatches + 2} deleteMany`,
        );
      }
      await rm(lake, { recursive: true, force: true });
    }
  }
  return { formula: FORMULA, constant: JOB_CONSTANT, jobs };
}
