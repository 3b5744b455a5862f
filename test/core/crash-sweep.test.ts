/**
 * The crash-point sweep. For every store call N of a clean run, and for each fault kind
 * (fail before the call, apply it then lose the response, crash and never call again), run the
 * cycle with the fault at N, then recovery until nothing changes, then a new cycle. After every
 * single call: I1 (no row lost) and the visible view holds every row exactly once; every delete
 * is audited (I3). At the end: I2 (exact multiset of row ids), I4 (empty state root, no
 * incomplete upload), nothing quarantined, non-data objects untouched.
 */

import { rm } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import type { TierName } from '../../functions/core/config.ts';
import { runCycle } from '../../functions/core/cycle.ts';
import { TIER_SPECS } from '../../functions/core/tiers.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { FAULT_KINDS, type FaultKind, FaultStore } from '../support/fault-store.ts';
import { HANG_GUARD_MS } from '../support/hang-guard.ts';
import {
  copyLake,
  dailyTemplate,
  HOURLY_UNTOUCHED,
  hourlyTemplate,
  LakeChecker,
  monthlyTemplate,
  recoverUntilQuiet,
  sweepDeps,
  type TemplateLake,
} from '../support/lake-harness.ts';
import { testStore } from '../support/test-store.ts';

let engine: DuckDbEngine;
let workDir: string;
const templates: Partial<Record<TierName, TemplateLake>> = {};

useEngineAndDir('sweep-work-', async (e, dir) => {
  engine = e;
  workDir = dir;
  templates.hourly = await hourlyTemplate(engine);
  templates.daily = await dailyTemplate(engine);
  templates.monthly = await monthlyTemplate(engine);
});

interface ScenarioResult {
  readonly calls: number;
  readonly observations: number;
}

async function scenario(tier: TierName, fault?: { at: number; kind: FaultKind }): Promise<ScenarioResult> {
  const template = templates[tier] as TemplateLake;
  const dir = await copyLake(template);
  try {
    const inner = testStore(dir);
    const checker = new LakeChecker(engine, dir, inner, template.config, template.totalRows);
    const alive = new Set<string>();
    await checker.observe();
    const faulty = new FaultStore(inner, {
      ...(fault ? { fault } : {}),
      beforeCall: checker.audit,
      afterCall: checker.observeWrites,
    });
    const first = `exec-${tier}-${fault?.kind}-${fault?.at}-1`;
    alive.add(first);
    const cycle = await runCycle(
      sweepDeps(faulty, template.config, engine, workDir, first, alive),
      tier,
    ).then(
      (report) => report,
      (error: Error) => {
        // Only the injected fault may stop a cycle (e.g. a failed first listing).
        expect(['TransientStoreError', 'CrashedError', 'RecoveryIncompleteError']).toContain(error.name);
        return undefined;
      },
    );
    expect(checker.violations).toEqual([]);
    // Without a fault, the cycle compacts everything in one go.
    if (!fault) {
      expect(
        cycle?.jobs.map((j) => (j.outcome.status === 'failed' ? j.outcome.error.message : j.outcome.status)),
      ).toEqual(cycle?.jobs.map(() => 'compacted'));
      expect(cycle?.jobs.length).toBeGreaterThan(0);
    }
    alive.delete(first); // the execution ended (or crashed): its owner is gone
    const calls = faulty.calls.length;

    const observed = new FaultStore(inner, { beforeCall: checker.audit, afterCall: checker.observeWrites });
    const base = sweepDeps(observed, template.config, engine, workDir, 'unused', alive);
    await recoverUntilQuiet(base, `exec-recover-${fault?.kind}-${fault?.at}`);
    const second = await runCycle({ ...base, executionId: `exec-${tier}-again-${fault?.at}` }, tier);
    expect(second.jobs.filter((j) => j.outcome.status === 'failed')).toEqual([]);
    expect(checker.violations).toEqual([]);
    await checker.assertQuiescent({
      levels: new Set([TIER_SPECS[tier].output]),
      untouched: tier === 'hourly' ? HOURLY_UNTOUCHED : [],
    });
    expect(checker.auditedDeletes, 'the delete audit must have seen the input deletes').toBeGreaterThan(0);
    return { calls, observations: checker.observations };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

describe.each(['hourly', 'daily', 'monthly'] as const)('crash-point sweep, %s tier', (tier) => {
  it(
    'covers every call of a clean cycle with every fault kind',
    async () => {
      const clean = await scenario(tier);
      expect(clean.calls).toBeGreaterThan(10);
      let covered = 0;
      let observations = clean.observations;
      for (let at = 1; at <= clean.calls; at++) {
        for (const kind of FAULT_KINDS) {
          const result = await scenario(tier, { at, kind });
          observations += result.observations;
          covered++;
        }
      }
      expect(covered).toBe(clean.calls * FAULT_KINDS.length);
      console.log(
        `${tier} sweep: ${clean.calls} calls x ${FAULT_KINDS.length} fault kinds = ${covered} crash points, ${observations} invariant checks`,
      );
    },
    HANG_GUARD_MS,
  );
});
