/**
 * The crash-point sweep through what AWS runs: the state machine that CDK synthesizes, executed
 * by the local runner with every Lambda handler bound in-process. For every store call of a clean
 * hourly execution (run records, the Lambdas' store probe and the protocol alike), with the fault
 * kinds in turn, the execution runs with the fault at that call; then recovery until nothing
 * changes, then a second execution. After every write: I1 and the visible view holds every row
 * once; every delete is audited (I3). At the end: I2, I4 and nothing quarantined. The in-process
 * sweep (crash-sweep.test.ts) covers every kind at every call for each tier; this one shows the
 * deployed definition keeps the same guarantees. Its jobs take at most two files, so the hour of
 * three is a backlog of two jobs, run in two waves (two Map runs): the sweep crosses the loop
 * between them too. The first wave's two jobs (one of each hour) are small jobs of one table, so
 * they share one Map item, one child running both.
 */

import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { STATES } from '../../cdk/constructs/compaction-workflow.ts';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { LocalOwners } from '../../functions/adapters/local-owner.ts';
import { systemClock } from '../../functions/core/engine.ts';
import { MAX_DELETE_BATCH, type ObjectStore } from '../../functions/core/object-store.ts';
import { TIER_SPECS } from '../../functions/core/tiers.ts';
import {
  runWorkflowLocally,
  type SynthesizedWorkflow,
  synthesizeWorkflow,
} from '../../functions/local-runner/run.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { FAULT_KINDS, type FaultKind, FaultStore } from '../support/fault-store.ts';
import { HANG_GUARD_MS } from '../support/hang-guard.ts';
import {
  copyLake,
  HOURLY_UNTOUCHED,
  hourlyTemplate,
  LakeChecker,
  recoverUntilQuiet,
  sweepDeps,
  type TemplateLake,
} from '../support/lake-harness.ts';
import { testStore } from '../support/test-store.ts';

let engine: DuckDbEngine;
let workDir: string;
let template: TemplateLake;
let workflow: SynthesizedWorkflow;

useEngineAndDir('definition-sweep-', async (e, dir) => {
  engine = e;
  workDir = dir;
  template = await hourlyTemplate(engine);
  workflow = await synthesizeWorkflow({ map: { maxConcurrency: 1 } });
});

/** Two files a job: hour 10's three are two jobs, one wave after the other. */
const BACKLOG_BOUND = 2;

async function execute(store: ObjectStore, name: string) {
  return runWorkflowLocally(
    workflow,
    {
      store,
      config: { ...template.config, maxJobFiles: BACKLOG_BOUND },
      clock: systemClock,
      engine: async () => engine,
      workDir: join(workDir, name),
      owners: new LocalOwners(),
    },
    { tier: 'hourly', retryIntervalMs: 0 },
  );
}

/**
 * What time removes: a failed execution keeps its plan and Map results for a redrive until S3's
 * lifecycle rule expires them, and a store probe cut short leaves its object until a later probe,
 * ten minutes on, removes it (store-probe-cleanup.ts). Neither is a job's state (I4).
 */
async function expireByTime(store: ObjectStore): Promise<void> {
  const { stateRoot } = template.config.layout;
  const keys: { key: string }[] = [];
  for (const prefix of [`${stateRoot}plans/`, `${stateRoot}results/`, `${stateRoot}probe/`]) {
    for await (const o of store.list(prefix)) keys.push({ key: o.key });
  }
  for (let i = 0; i < keys.length; i += MAX_DELETE_BATCH)
    await store.deleteMany(keys.slice(i, i + MAX_DELETE_BATCH));
}

async function scenario(fault?: { at: number; kind: FaultKind }): Promise<number> {
  const dir = await copyLake(template);
  try {
    const inner = testStore(dir);
    const checker = new LakeChecker(engine, dir, inner, template.config, template.totalRows);
    await checker.observe();
    const faulty = new FaultStore(inner, {
      ...(fault ? { fault } : {}),
      beforeCall: checker.audit,
      afterCall: checker.observeWrites,
    });
    const first = await execute(faulty, 'first').then(
      (run) => {
        if (!fault) {
          expect(run.execution.statesEntered.filter((s) => s === STATES.map)).toHaveLength(2);
          // The first wave's two small jobs (hours 10 and 11 of one table) share one Map item:
          // the sweep crosses a child running several jobs, each with its own manifest.
          const [firstWave] = run.execution.mapRunResults;
          expect(firstWave?.map((r) => (r.Item as { jobs: unknown[] }).jobs.length)).toEqual([2]);
        }
        return run.execution.status;
      },
      (error: Error) => {
        // Only the injected fault may stop the runner itself (e.g. removing its run records).
        expect(['TransientStoreError', 'CrashedError']).toContain(error.name);
        return 'THREW';
      },
    );
    if (!fault) expect(first).toBe('SUCCEEDED');
    expect(checker.violations).toEqual([]);
    const calls = faulty.calls.length;

    const observed = new FaultStore(inner, { beforeCall: checker.audit, afterCall: checker.observeWrites });
    await recoverUntilQuiet(
      sweepDeps(observed, template.config, engine, workDir, 'unused', new Set()),
      `exec-recover-${fault?.kind}-${fault?.at}`,
    );
    const second = await execute(observed, 'second');
    expect(
      second.execution.status,
      `after ${fault?.kind} at ${fault?.at}: ${second.execution.error}: ${second.execution.cause}`,
    ).toBe('SUCCEEDED');
    expect(second.output?.summary.failed).toBe(0);
    await expireByTime(inner);
    expect(checker.violations).toEqual([]);
    await checker.assertQuiescent({
      levels: new Set([TIER_SPECS.hourly.output]),
      untouched: HOURLY_UNTOUCHED,
    });
    return calls;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

describe('crash-point sweep through the synthesized state machine, hourly tier', () => {
  it(
    'covers every store call of a clean execution, the fault kinds in turn',
    async () => {
      const calls = await scenario();
      expect(calls).toBeGreaterThan(20);
      for (let at = 1; at <= calls; at++) {
        await scenario({ at, kind: FAULT_KINDS[at % FAULT_KINDS.length] as FaultKind });
      }
      console.log(`definition sweep: ${calls} calls, each with one of ${FAULT_KINDS.length} fault kinds`);
    },
    HANG_GUARD_MS,
  );
});
