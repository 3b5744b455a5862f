/**
 * The real CLI process (`node functions/cli/main.ts run ...`) killed with SIGKILL, then run again
 * to completion. Half the kills come at delays spread from 50 ms to a clean run's duration (the
 * early ones hit start-up); the other half as soon as the k-th partition reports done on stderr,
 * so they land mid-work whatever the machine's load. After every pair: exact row ids in
 * the data files, no manifest and no staging under `_compaction/`, every hour compacted into one
 * `_compacted.parquet`. Kills that land after the process exited do not count; several must land
 * mid-run, and several must interrupt actual work (the lake had changed when the kill hit).
 */

import type { ChildProcess } from 'node:child_process';
import { cp, mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { LocalFolderStore } from '../../functions/adapters/local-store/local-store.ts';
import { Layout } from '../../functions/core/layout.ts';
import { manifestsRoot, stagingRoot } from '../../functions/core/manifest/manifest.ts';
import {
  dataKeys,
  dayOfHours,
  hourFolderOf,
  idMismatch,
  lakeIds,
  spawnHourlyRun,
  stateKeys,
} from '../support/cli-lake.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { HANG_GUARD_MS } from '../support/hang-guard.ts';
import { writeLake } from '../support/lake-harness.ts';

const ARC = Layout.fromName('arc');
const HOURS = 12;
const FILES_PER_HOUR = 4;
const TIMED_KILLS = 5;
/** Kill as soon as this many partitions have reported done. */
const PROGRESS_KILLS = [1, 3, 6, 9, 11];
const PROGRESS = /^\[\d+\/\d+\] .* compacted /gm;

let engine: DuckDbEngine;
let root: string;
let template: { dir: string; total: number; hourFolders: string[] };

/** The run under test: two partitions at once, hours of two files or more. */
function runCompactor(dir: string, workDir: string, onStderr?: (all: string) => void) {
  return spawnHourlyRun(dir, workDir, ['--concurrency', '2', '--min-files', '2'], onStderr);
}

async function copyTemplate(name: string): Promise<string> {
  const dir = await mkdtemp(join(root, `${name}-`));
  await cp(template.dir, dir, { recursive: true });
  return dir;
}

/** The end state every run, killed or not, must reach after a completed run. */
async function assertCompacted(dir: string, label: string): Promise<void> {
  const ids = await lakeIds(engine, dir);
  expect(idMismatch(ids, template.total), `${label}: every row id exactly once`).toBeUndefined();
  const state = await stateKeys(dir);
  expect(
    state.filter((k) => k.startsWith(manifestsRoot(ARC))),
    `${label}: no manifest left`,
  ).toEqual([]);
  expect(
    state.filter((k) => k.startsWith(stagingRoot(ARC))),
    `${label}: no staging left`,
  ).toEqual([]);
  // A killed execution's run records (plans, Map results) stay for a redrive and expire later; a
  // store probe killed midway leaves its few bytes, which a later probe removes once they are old.
  const runRecords = (k: string) =>
    k.startsWith('_compaction/plans/') ||
    k.startsWith('_compaction/results/') ||
    k.startsWith('_compaction/probe/');
  expect(
    state.filter((k) => !runRecords(k)),
    `${label}: nothing else under _compaction/ (no quarantine either)`,
  ).toEqual([]);
  expect(
    await new LocalFolderStore(dir).listIncompleteUploads(stagingRoot(ARC)),
    `${label}: no incomplete staging upload`,
  ).toEqual([]);
  const keys = await dataKeys(dir);
  expect(
    keys.filter((k) => !k.endsWith('_compacted.parquet')),
    `${label}: only hourly outputs left`,
  ).toEqual([]);
  expect(keys.map(hourFolderOf), `${label}: one output per hour`).toEqual(template.hourFolders);
}

useEngineAndDir('cli-sigkill-', (e, dir) => {
  engine = e;
  root = dir;
});

beforeAll(async () => {
  const dir = join(root, 'template');
  const files = dayOfHours(HOURS, FILES_PER_HOUR, (f) => 50 + f);
  const total = await writeLake(engine, dir, files);
  const hourFolders = [...new Set(files.map((f) => hourFolderOf(f.key)))].sort();
  template = { dir, total, hourFolders };
});

/** A kill at a time after spawn, or as soon as the k-th partition reports done on stderr. */
type KillPlan = { readonly delayMs: number } | { readonly afterProgress: number };

describe('compactor run killed with SIGKILL', () => {
  it(
    `ends with exact rows and a fully compacted lake after ${TIMED_KILLS + PROGRESS_KILLS.length} kills and reruns`,
    async () => {
      expect(template.total).toBe(HOURS * (50 + 51 + 52 + 53));
      const workDir = join(root, 'work');
      const started = performance.now();

      // A clean run first: it must work, and it times the window the timed kills are spread over.
      const cleanDir = await copyTemplate('clean');
      const clean = await runCompactor(cleanDir, workDir).exit;
      expect(clean.code, clean.stderr).toBe(0);
      expect(clean.stderr.match(PROGRESS) ?? []).toHaveLength(HOURS);
      await assertCompacted(cleanDir, 'clean run');
      await rm(cleanDir, { recursive: true, force: true });

      // Timed kills spread from 50 ms to the clean run's duration (the early ones hit start-up, and
      // under a changing load some land after the process exited: those do not count). Progress
      // kills land while partitions are in flight whatever the machine's speed.
      const plans: KillPlan[] = [
        ...Array.from({ length: TIMED_KILLS }, (_, i) => ({
          delayMs: Math.round(50 + (i * (clean.ms - 50)) / (TIMED_KILLS - 1)),
        })),
        ...PROGRESS_KILLS.map((k) => ({ afterProgress: k })),
      ];
      const results: string[] = [];
      let midRun = 0;
      let midWork = 0;
      let strayUploads = 0;
      for (const [i, plan] of plans.entries()) {
        const dir = await copyTemplate(`kill-${i}`);
        let killed = false;
        const killNow = (child: ChildProcess) => {
          // Still running: no exit code and no signal yet.
          if (!killed && child.exitCode === null && child.signalCode === null) killed = child.kill('SIGKILL');
        };
        let timer: NodeJS.Timeout | undefined;
        const { child, exit } = runCompactor(
          dir,
          workDir,
          'afterProgress' in plan
            ? (stderr) => {
                if ((stderr.match(PROGRESS) ?? []).length >= plan.afterProgress) killNow(child);
              }
            : undefined,
        );
        if ('delayMs' in plan) timer = setTimeout(() => killNow(child), plan.delayMs);
        const first = await exit;
        clearTimeout(timer);
        const label =
          'delayMs' in plan ? `kill at ${plan.delayMs} ms` : `kill after ${plan.afterProgress} done`;
        let note: string;
        // A kill sent as the process was already exiting does not land: it exits 0 instead.
        if (killed && first.signal === 'SIGKILL') {
          midRun++;
          // Did the kill interrupt work? Either state is left or some hours were already compacted.
          const state = await stateKeys(dir);
          const compacted = (await dataKeys(dir)).filter((k) => k.endsWith('_compacted.parquet')).length;
          const manifests = state.filter((k) => k.startsWith(manifestsRoot(ARC))).length;
          const staging = state.filter((k) => k.startsWith(stagingRoot(ARC))).length;
          if (state.length > 0 || compacted > 0) midWork++;
          note = `killed mid-run at ${Math.round(first.ms)} ms: ${compacted}/${HOURS} hours compacted, ${manifests} manifest(s), ${staging} staging object(s) left`;
        } else {
          expect(first.code, `${label}: finished before the kill`).toBe(0);
          note = `finished before the kill (${Math.round(first.ms)} ms)`;
        }
        const rerun = runCompactor(dir, workDir);
        const second = await rerun.exit;
        expect(second.code, `${label}, rerun: ${second.stderr}`).toBe(0);
        await assertCompacted(dir, label);
        // Temp writes a kill interrupted (manifests, final outputs too): the rerun's recovery aborts them.
        const stray = (await new LocalFolderStore(dir).listIncompleteUploads('')).map(
          (u) => `${u.key || '(no key)'} [${u.uploadId}]`,
        );
        strayUploads += stray.length;
        expect(
          stray,
          `${label}: no incomplete upload left after the rerun (killed pid ${child.pid}, rerun pid ${rerun.child.pid})`,
        ).toEqual([]);
        results.push(
          `  #${i} ${label}: ${note}; rerun exit 0 in ${Math.round(second.ms)} ms` +
            (stray.length > 0 ? `; stray incomplete uploads: ${stray.join(', ')}` : ''),
        );
        await rm(dir, { recursive: true, force: true });
      }
      console.log(
        [
          `SIGKILL: clean run ${Math.round(clean.ms)} ms; ${midRun}/${plans.length} kills landed mid-run, ` +
            `${midWork} of them after work had started; ${strayUploads} stray incomplete upload(s) left; ` +
            `${Math.round((performance.now() - started) / 1000)} s in all`,
          ...results,
        ].join('\n'),
      );
      expect(midRun, 'several kills must land while the process runs').toBeGreaterThanOrEqual(6);
      expect(midWork, 'several kills must interrupt actual compaction work').toBeGreaterThanOrEqual(
        PROGRESS_KILLS.length - 1,
      );
      // A hang guard, not a budget: twelve whole runs set the time, which a loaded machine stretches.
    },
    HANG_GUARD_MS,
  );
});
