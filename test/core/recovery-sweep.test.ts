/**
 * Crash points inside recovery itself. A job is cut short after each of its writes (leaving a
 * manifest in every state, including mid-publish and mid-clear); then recovery runs with a
 * fault at each of its own calls, with all four fault kinds; then recovery until nothing
 * changes and a new cycle. Invariants are checked before recovery and after every write, as in
 * the job sweep.
 */

import { rename, rm } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import type { TierName } from '../../functions/core/config.ts';
import { runCycle } from '../../functions/core/cycle.ts';
import { manifestsRoot } from '../../functions/core/manifest/manifest.ts';
import { recover } from '../../functions/core/recovery.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { FAULT_KINDS, type FaultKind, FaultStore } from '../support/fault-store.ts';
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
import { changedFiles, filesUnder, hashFiles, linkFiles } from '../support/linked-tree.ts';
import { testStore } from '../support/test-store.ts';

let engine: DuckDbEngine;
let workDir: string;

useEngineAndDir('recovery-sweep-', (e, dir) => {
  engine = e;
  workDir = dir;
});

const WRITES = new Set(['put', 'copy', 'deleteMany']);

/** Cuts a clean cycle short right after its write number `write`; returns the lake folder. */
async function cutShort(template: TemplateLake, tier: TierName, crashAt: number): Promise<string> {
  const dir = await copyLake(template);
  const store = new FaultStore(testStore(dir), { fault: { at: crashAt, kind: 'crash' } });
  const alive = new Set<string>();
  await runCycle(sweepDeps(store, template.config, engine, workDir, `cut-${crashAt}`, alive), tier).catch(
    (error: Error) => expect(error.name).toBe('CrashedError'),
  );
  return dir;
}

/**
 * A cut's lake, made once and then lent to each of its recovery scenarios. Manifests name their
 * store's location, so every scenario runs at the folder the cut ran in; its files are hard links
 * to the kept copy (linked-tree.ts), so each object keeps its ETag: the very state the cut left;
 * `assertUnchanged` proves no scenario wrote through a link.
 */
interface CutState {
  readonly dir: string;
  readonly kept: string;
  readonly hashes: ReadonlyMap<string, string>;
}

async function keepCut(template: TemplateLake, tier: TierName, cut: number): Promise<CutState> {
  const dir = await cutShort(template, tier, cut);
  const kept = `${dir}.kept`;
  await rename(dir, kept);
  return { dir, kept, hashes: await hashFiles(kept) };
}

async function lendCut(state: CutState): Promise<void> {
  await linkFiles(state.kept, state.dir, state.hashes.keys());
}

async function assertUnchanged(state: CutState): Promise<void> {
  expect(await filesUnder(state.kept)).toEqual([...state.hashes.keys()]);
  expect(
    await changedFiles(state.kept, state.hashes),
    'files of the kept cut changed: a scenario wrote through a hard link',
  ).toEqual([]);
}

async function recoveryScenario(
  template: TemplateLake,
  tier: TierName,
  cut: CutState,
  fault?: { at: number; kind: FaultKind },
): Promise<number> {
  await lendCut(cut);
  const { dir } = cut;
  try {
    const inner = testStore(dir);
    const checker = new LakeChecker(engine, dir, inner, template.config, template.totalRows);
    const alive = new Set<string>();
    // The state the cut left, before recovery writes anything.
    await checker.observe();
    const faulty = new FaultStore(inner, {
      ...(fault ? { fault } : {}),
      beforeCall: checker.audit,
      afterCall: checker.observeWrites,
    });
    const deps = sweepDeps(
      faulty,
      template.config,
      engine,
      workDir,
      `rec-${fault?.kind}-${fault?.at}`,
      alive,
    );
    await recover(deps).catch((error: Error) => {
      expect(['TransientStoreError', 'CrashedError', 'RecoveryIncompleteError']).toContain(error.name);
    });
    const calls = faulty.calls.length;
    const observed = new FaultStore(inner, { beforeCall: checker.audit, afterCall: checker.observeWrites });
    const base = sweepDeps(observed, template.config, engine, workDir, 'unused', alive);
    await recoverUntilQuiet(base, `rec-again-${fault?.kind}-${fault?.at}`);
    const cycle = await runCycle({ ...base, executionId: `rec-cycle-${fault?.at}` }, tier);
    expect(cycle.jobs.filter((j) => j.outcome.status === 'failed')).toEqual([]);
    expect(checker.violations).toEqual([]);
    await checker.assertQuiescent({ levels: new Set([tier === 'hourly' ? 1 : 2]) });
    return calls;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

describe.each(['daily', 'hourly'] as const)('recovery crash-point sweep, %s tier', (tier) => {
  it(
    'resolves a job cut short after each of its writes, with a fault at every recovery call',
    async () => {
      const template = tier === 'daily' ? await dailyTemplate(engine) : await hourlyTemplate(engine);
      // The clean run's writes of its first job: a cut after each leaves every manifest state.
      const probe = new FaultStore(testStore(await copyLake(template)));
      await runCycle(sweepDeps(probe, template.config, engine, workDir, 'probe', new Set()), tier);
      const firstJobEnd = probe.calls.findIndex(
        (c) => c.op === 'deleteMany' && c.key.startsWith(manifestsRoot(template.config.layout)),
      );
      const cutPoints = probe.calls
        .slice(0, firstJobEnd + 1)
        .filter((c) => WRITES.has(c.op))
        .map((c) => c.n + 1);
      expect(cutPoints.length).toBeGreaterThanOrEqual(8);

      let scenarios = 0;
      const states = new Set<string>();
      for (const cutAt of cutPoints) {
        const cut = await keepCut(template, tier, cutAt);
        try {
          const manifests = testStore(cut.kept);
          for await (const m of manifests.list(manifestsRoot(template.config.layout))) {
            const { body } = await manifests.getBytes(m.key);
            states.add(JSON.parse(body.toString()).state as string);
          }
          const recoveryCalls = await recoveryScenario(template, tier, cut);
          for (let at = 1; at <= recoveryCalls; at++) {
            for (const kind of FAULT_KINDS) {
              await recoveryScenario(template, tier, cut, { at, kind });
              scenarios++;
            }
          }
          await assertUnchanged(cut);
        } finally {
          await rm(cut.kept, { recursive: true, force: true });
        }
      }
      // Every manifest state was left behind by some cut and resolved under faults.
      expect([...states].sort()).toEqual(['claimed', 'inputs-deleted', 'published', 'staged', 'verified']);
      console.log(
        `${tier} recovery sweep: ${cutPoints.length} cut points (states ${[...states].join(', ')}), ${scenarios} recovery crash points`,
      );
    },
    HANG_GUARD_MS,
  );
});
