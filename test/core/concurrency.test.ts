/**
 * Overlapping owners: two jobs racing for one partition (exactly one owner, I9), two cycles
 * running at once, and zombie steps: an attempt paused at each of its store calls while its
 * retry finishes the whole job, then resumed. All must leave exact rows and nothing behind.
 */

import { rm } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import type { LocalFolderStore } from '../../functions/adapters/local-store/local-store.ts';
import type { TierName } from '../../functions/core/config.ts';
import { assignJobs, runCycle, runJob } from '../../functions/core/cycle.ts';
import { planTier } from '../../functions/core/planner/planner.ts';
import {
  type CompactDeps,
  clearManifestStep,
  compactStep,
  deleteInputsStep,
  type Job,
  publishStep,
  type StepResult,
  verifyStep,
} from '../../functions/core/protocol.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { FaultStore } from '../support/fault-store.ts';
import { HANG_GUARD_MS } from '../support/hang-guard.ts';
import {
  copyLake,
  dailyTemplate,
  hourlyTemplate,
  LakeChecker,
  recoverUntilQuiet,
  sweepDeps,
  type TemplateLake,
} from '../support/lake-harness.ts';
import { testStore } from '../support/test-store.ts';

let engine: DuckDbEngine;
let workDir: string;
const templates: Partial<Record<TierName, TemplateLake>> = {};

useEngineAndDir('concurrency-', async (e, dir) => {
  engine = e;
  workDir = dir;
  templates.hourly = await hourlyTemplate(engine);
  templates.daily = await dailyTemplate(engine);
});

async function withLake<T>(
  tier: TierName,
  fn: (ctx: {
    dir: string;
    store: LocalFolderStore;
    checker: LakeChecker;
    template: TemplateLake;
  }) => Promise<T>,
): Promise<T> {
  const template = templates[tier] as TemplateLake;
  const dir = await copyLake(template);
  try {
    const store = testStore(dir);
    const checker = new LakeChecker(engine, dir, store, template.config, template.totalRows);
    return await fn({ dir, store, checker, template });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

describe('two owners on one partition', () => {
  it('exactly one of two racing jobs owns the partition; rows stay exact (I9)', async () => {
    for (let round = 0; round < 10; round++) {
      await withLake('daily', async ({ store, checker, template }) => {
        const observed = new FaultStore(store, { beforeCall: checker.audit, afterCall: checker.observe });
        const alive = new Set(['a', 'b']);
        const a = sweepDeps(observed, template.config, engine, workDir, 'a', alive);
        const b = sweepDeps(observed, template.config, engine, workDir, 'b', alive);
        const plan = await planTier(store, template.config, a.clock, 'daily');
        const [jobA] = assignJobs(plan, a);
        const [jobB] = assignJobs(plan, b);
        if (!jobA || !jobB) throw new Error('the lake must plan one daily job');
        // Start order alternates so either may win the claim.
        const [first, second] = round % 2 === 0 ? [jobA, jobB] : [jobB, jobA];
        const outcomes = await Promise.all([
          runJob(first.executionId === 'a' ? a : b, first),
          runJob(second.executionId === 'a' ? a : b, second),
        ]);
        const statuses = outcomes.map((o) => o.status).sort();
        expect(statuses).toEqual(['compacted', 'skipped']);
        expect(checker.violations).toEqual([]);
        await checker.assertQuiescent({ levels: new Set([2]) });
      });
    }
  });

  it('two overlapping cycles compact every partition exactly once', async () => {
    for (const tier of ['hourly', 'daily'] as const) {
      await withLake(tier, async ({ store, checker, template }) => {
        const observed = new FaultStore(store, { beforeCall: checker.audit, afterCall: checker.observe });
        const alive = new Set(['one', 'two']);
        const [one, two] = await Promise.all([
          runCycle(
            { ...sweepDeps(observed, template.config, engine, workDir, 'one', alive), concurrency: 2 },
            tier,
          ),
          runCycle(
            { ...sweepDeps(observed, template.config, engine, workDir, 'two', alive), concurrency: 2 },
            tier,
          ),
        ]);
        const compacted = [...one.jobs, ...two.jobs].filter((j) => j.outcome.status === 'compacted');
        const failed = [...one.jobs, ...two.jobs].filter((j) => j.outcome.status === 'failed');
        expect(failed).toEqual([]);
        // Each partition compacted by exactly one of the two cycles.
        const partitions = compacted.map((j) => j.job.partition);
        expect(new Set(partitions).size).toBe(partitions.length);
        expect(partitions.length).toBe(tier === 'hourly' ? 2 : 1);
        expect(checker.violations).toEqual([]);
        await checker.assertQuiescent({ levels: new Set([tier === 'hourly' ? 1 : 2]) });
      });
    }
  });
});

const STEPS: readonly [string, (deps: CompactDeps, job: Job) => Promise<StepResult>][] = [
  ['compact', compactStep],
  ['publish', publishStep],
  ['verify', verifyStep],
  ['delete-inputs', deleteInputsStep],
  ['clear', clearManifestStep],
];

describe.each(['daily', 'hourly'] as const)('zombie steps, %s tier', (tier) => {
  it(
    'an attempt paused at any of its calls and resumed after its retry finished the job is harmless',
    async () => {
      let scenarios = 0;
      const outcomes = new Map<string, number>();
      for (const [s, [stepName, step]] of STEPS.entries()) {
        for (let pauseAt = 1; ; pauseAt++) {
          const reached = await withLake(tier, async ({ store, checker, template }) => {
            const alive = new Set(['owner']);
            const observed = new FaultStore(store, { beforeCall: checker.audit, afterCall: checker.observe });
            const deps = sweepDeps(observed, template.config, engine, workDir, 'owner', alive);
            const plan = await planTier(store, template.config, deps.clock, tier);
            const [job] = assignJobs(plan, deps);
            if (!job) throw new Error('nothing planned');
            for (const [, earlier] of STEPS.slice(0, s)) await earlier(deps, job);

            // The zombie: the same step with the same job and execution, paused before call `pauseAt`.
            let release: () => void = () => {};
            const released = new Promise<void>((resolve) => {
              release = resolve;
            });
            let paused: () => void = () => {};
            const pausedAt = new Promise<void>((resolve) => {
              paused = resolve;
            });
            const zombieStore = new FaultStore(store, {
              beforeCall: checker.audit,
              afterCall: checker.observe,
              gate: async (call) => {
                if (call.n !== pauseAt) return;
                paused();
                await released;
              },
            });
            const zombie = step({ ...deps, store: zombieStore }, job).then(
              (result) => result.status,
              (error: Error) => error.name,
            );
            const first = await Promise.race([pausedAt.then(() => 'paused' as const), zombie]);
            if (first !== 'paused') return false;

            // The retry runs the step and every later one to the end of the job.
            for (const [, later] of STEPS.slice(s)) await later(deps, job);
            release();
            const zombieOutcome = await zombie;
            outcomes.set(
              `${stepName}: ${zombieOutcome}`,
              (outcomes.get(`${stepName}: ${zombieOutcome}`) ?? 0) + 1,
            );

            await recoverUntilQuiet(deps, `zombie-rec-${stepName}-${pauseAt}`);
            await runCycle({ ...deps, executionId: 'after' }, tier);
            expect(checker.violations).toEqual([]);
            await checker.assertQuiescent({ levels: new Set([tier === 'hourly' ? 1 : 2]) });
            return true;
          });
          if (!reached) break;
          scenarios++;
        }
      }
      expect(scenarios).toBeGreaterThan(15);
      console.log(
        `${tier} zombies: ${scenarios} pause points; zombie outcomes: ${[...outcomes].map(([k, v]) => `${k} x${v}`).join(', ')}`,
      );
    },
    HANG_GUARD_MS,
  );
});

/**
 * Express child workflows are at-least-once
 * (https://docs.aws.amazon.com/step-functions/latest/dg/express-at-least-once-execution.html):
 * the same child (same job, same owner execution) may run again after it ended, or a duplicate
 * may start while it runs. Here the whole chain (runJob: the Map child's compact -> upload ->
 * verify -> delete inputs -> clear) runs a second time after the first, and then, for every store
 * call of the first, a duplicate starts at that call while the first runs on.
 */
describe.each(['daily', 'hourly'] as const)('a child chain delivered twice, %s tier', (tier) => {
  it(
    'run again after it ended, or started again at any of its calls while it runs, is harmless',
    async () => {
      const outcomes = new Map<string, number>();
      const count = (key: string) => outcomes.set(key, (outcomes.get(key) ?? 0) + 1);
      const settle = (p: Promise<{ status: string; error?: Error }>) =>
        p.then(
          (o) => (o.error ? `${o.status} (${o.error.name})` : o.status),
          (error: Error) => error.name,
        );
      let overlapping = 0;
      // startAt 0: the second delivery starts after the first ended.
      for (let startAt = 0; ; startAt++) {
        const reached = await withLake(tier, async ({ store, checker, template }) => {
          const alive = new Set(['owner']);
          const observed = new FaultStore(store, { beforeCall: checker.audit, afterCall: checker.observe });
          const deps = sweepDeps(observed, template.config, engine, workDir, 'owner', alive);
          const plan = await planTier(store, template.config, deps.clock, tier);
          const [job] = assignJobs(plan, deps);
          if (!job) throw new Error('nothing planned');
          let second: Promise<string> | undefined;
          const firstStore = new FaultStore(store, {
            beforeCall: checker.audit,
            afterCall: checker.observe,
            gate: async (call) => {
              if (call.n === startAt) second = settle(runJob(deps, job));
            },
          });
          const first = await settle(runJob({ ...deps, store: firstStore }, job));
          if (startAt > 0 && second === undefined) return false;
          const again = await (second ?? settle(runJob(deps, job)));
          count(`${startAt === 0 ? 'rerun' : 'overlapping'}: ${first} + ${again}`);
          // The first delivery always ends the job: no delivery may leave it unfinished.
          expect(['compacted', 'skipped']).toContain(first === 'compacted' ? first : again);
          // Nor may either fail: a delivery that loses a write to its twin finds the step done,
          // so the Map records no failed partition (and Summary alarms on none).
          expect([first, again].filter((o) => o.startsWith('failed'))).toEqual([]);
          await recoverUntilQuiet(deps, `twice-rec-${startAt}`);
          await runCycle({ ...deps, executionId: 'after' }, tier);
          expect(checker.violations).toEqual([]);
          await checker.assertQuiescent({ levels: new Set([tier === 'hourly' ? 1 : 2]) });
          return true;
        });
        if (!reached) break;
        if (startAt > 0) overlapping++;
      }
      expect(overlapping).toBeGreaterThan(15);
      console.log(
        `${tier} child delivered twice: ${overlapping} overlap points; outcomes: ${[...outcomes].map(([k, v]) => `${k} x${v}`).join(', ')}`,
      );
    },
    HANG_GUARD_MS,
  );
});
