/**
 * Repair of a lake seeded with the seed bug's 2x duplication: Arc `_compacted.parquet` outputs
 * left next to the raw files they were made from. Repair must find them by content (row
 * containment), report the duplicated rows, end with exact rows, refuse where containment
 * fails, and stay exact when crashed or faulted at any of its store calls.
 */

import { cp, mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { readIds } from '../../functions/adapters/sample-data.ts';
import { runCli } from '../../functions/cli/compactor.ts';
import { parseConfig } from '../../functions/core/config.ts';
import { findRepairs, repairPartition } from '../../functions/core/repair.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { FAULT_KINDS, FaultStore } from '../support/fault-store.ts';
import { HANG_GUARD_MS } from '../support/hang-guard.ts';
import { LakeChecker, recoverUntilQuiet, sweepDeps, writeLake } from '../support/lake-harness.ts';
import { testStore } from '../support/test-store.ts';

const config = parseConfig({ quietSeconds: 0 });
let engine: DuckDbEngine;
let root: string;
let template: string;
const TOTAL = 200;

/** Raw files of hours 10 and 11 with a compacted copy of each hour beside them; hour 12 raw only. */
async function duplicatedLake(dir: string, extraRaw = false): Promise<void> {
  await writeLake(engine, dir, [
    { key: 'db/cpu/2025/01/15/10/cpu_20250115_100500_1.parquet', rows: 30 },
    { key: 'db/cpu/2025/01/15/10/cpu_20250115_101500_2.parquet', rows: 30 },
    { key: 'db/cpu/2025/01/15/10/cpu_20250115_103000_3.parquet', rows: 30 },
    { key: 'db/cpu/2025/01/15/11/cpu_20250115_110500_4.parquet', rows: 30 },
    { key: 'db/cpu/2025/01/15/11/cpu_20250115_111500_5.parquet', rows: 30 },
    { key: 'db/cpu/2025/01/15/12/cpu_20250115_120500_6.parquet', rows: 25 },
    { key: 'db/cpu/2025/01/15/12/cpu_20250115_121500_7.parquet', rows: 25 },
  ]);
  const store = testStore(dir);
  for (const hour of ['10', '11']) {
    const out = join(root, `${hour}-${Math.random().toString(36).slice(2)}.parquet`);
    await engine.query(
      `COPY (SELECT * FROM read_parquet('${dir}/db/cpu/2025/01/15/${hour}/*.parquet') ORDER BY time) TO '${out}' (FORMAT parquet, COMPRESSION zstd)`,
    );
    // Arc's hourly output name, written after the raw files, as the seed bug left it.
    await store.put(`db/cpu/2025/01/15/${hour}/cpu_20250115_${hour}0000_compacted.parquet`, { file: out });
  }
  if (extraRaw) {
    // A raw file whose rows no output holds (ids above TOTAL): it must stay.
    await writeLake(
      engine,
      dir,
      [{ key: 'db/cpu/2025/01/15/10/cpu_20250115_104500_8.parquet', rows: 10 }],
      TOTAL + 1,
    );
  }
}

async function allIds(dir: string): Promise<bigint[]> {
  const files: string[] = [];
  for await (const o of testStore(dir).list('db/'))
    if (config.layout.isDataKey(o.key)) files.push(join(dir, o.key));
  return readIds(engine, files);
}

function range(from: number, to: number): bigint[] {
  return Array.from({ length: to - from + 1 }, (_, i) => BigInt(from + i));
}

async function cli(...args: string[]) {
  const out: string[] = [];
  const code = await runCli(args, { out: (l) => out.push(l), err: () => {} });
  return { code, text: out.join('\n') };
}

useEngineAndDir('repair-', async (e, dir) => {
  engine = e;
  root = dir;
  template = join(root, 'template');
  await duplicatedLake(template);
});

describe('compactor repair', () => {
  it('dry run reports the duplicated rows per partition and changes nothing', async () => {
    const dir = join(root, 'dry');
    await cp(template, dir, { recursive: true });
    const before = (await allIds(dir)).length;
    expect(before).toBe(TOTAL + 150);
    const result = await cli('repair', '--dry-run', '--store', dir, '--json');
    expect(result.code).toBe(0);
    const report = JSON.parse(result.text) as {
      candidates: { partition: string; duplicatedRows: number; inputs: unknown[] }[];
    };
    expect(report.candidates.map((c) => [c.partition, c.inputs.length, c.duplicatedRows])).toEqual([
      ['db/cpu/2025/01/15/10/', 3, 90],
      ['db/cpu/2025/01/15/11/', 2, 60],
    ]);
    expect((await allIds(dir)).length).toBe(before);
  });

  it('turns a 2x duplicated lake into exact rows, removing only raw files the outputs hold', async () => {
    const dir = join(root, 'fix');
    await cp(template, dir, { recursive: true });
    const result = await cli('repair', '--store', dir);
    expect(result.code, result.text).toBe(0);
    expect(result.text).toContain('repaired 2 partition(s), 150 duplicated rows removed');
    expect(await allIds(dir)).toEqual(range(1, TOTAL));
    const keys: string[] = [];
    for await (const o of testStore(dir).list('')) keys.push(o.key);
    expect(keys.filter((k) => k.startsWith('db/cpu/2025/01/15/10/'))).toEqual([
      'db/cpu/2025/01/15/10/cpu_20250115_100000_compacted.parquet',
    ]);
    expect(keys.filter((k) => k.startsWith('db/cpu/2025/01/15/12/'))).toHaveLength(2);
    expect(keys.filter((k) => k.startsWith('_compaction/manifests/'))).toEqual([]);
    // Running it again finds nothing.
    expect((await cli('repair', '--store', dir)).text).toContain('no output coexists');
  });

  it('refuses a file whose rows are not all in the outputs, and still repairs the rest', async () => {
    const dir = join(root, 'refuse');
    await duplicatedLake(dir, true);
    const result = await cli('repair', '--store', dir, '--json');
    expect(result.code).toBe(1);
    const report = JSON.parse(result.text) as {
      candidates: { partition: string; kept: { key: string; reason: string }[] }[];
    };
    const hour10 = report.candidates.find((c) => c.partition === 'db/cpu/2025/01/15/10/');
    expect(hour10?.kept).toEqual([
      {
        key: 'db/cpu/2025/01/15/10/cpu_20250115_104500_8.parquet',
        reason: '10 of its rows are in no output of the folder',
      },
    ]);
    expect(await allIds(dir)).toEqual(range(1, TOTAL + 10));
  });
});

describe('repair under faults', () => {
  it(
    'stays exact with a fault at every store call, with all three fault kinds',
    async () => {
      // The calls of a clean repair of the whole lake.
      const cleanDir = join(root, 'clean');
      await cp(template, cleanDir, { recursive: true });
      const probe = new FaultStore(testStore(cleanDir));
      const probeDeps = {
        ...sweepDeps(probe, config, engine, join(root, 'work'), 'probe', new Set()),
        engine,
      };
      for (const c of await findRepairs(probeDeps)) await repairPartition(probeDeps, c);
      const calls = probe.calls.length;
      expect(calls).toBeGreaterThan(20);

      let scenarios = 0;
      for (let at = 1; at <= calls; at++) {
        for (const kind of FAULT_KINDS) {
          const dir = await mkdtemp(join(root, 'fault-'));
          await cp(template, dir, { recursive: true });
          const inner = testStore(dir);
          const checker = new LakeChecker(engine, dir, inner, config, TOTAL);
          checker.checkVisible = false; // the lake starts duplicated: only "no row lost" holds throughout
          await checker.observe();
          const store = new FaultStore(inner, {
            fault: { at, kind },
            beforeCall: checker.audit,
            afterCall: checker.observeWrites,
          });
          const deps = {
            ...sweepDeps(store, config, engine, join(root, 'work'), `repair-${at}-${kind}`, new Set()),
            engine,
          };
          try {
            for (const c of await findRepairs(deps)) await repairPartition(deps, c);
          } catch (error) {
            expect(['TransientStoreError', 'CrashedError', 'ManifestConflictError']).toContain(
              (error as Error).name,
            );
          }
          const clean = new FaultStore(inner, {
            beforeCall: checker.audit,
            afterCall: checker.observeWrites,
          });
          const base = {
            ...sweepDeps(clean, config, engine, join(root, 'work'), 'unused', new Set()),
            engine,
          };
          await recoverUntilQuiet(base, `repair-recover-${at}-${kind}`);
          const again = { ...base, executionId: `repair-again-${at}-${kind}` };
          for (const c of await findRepairs(again)) await repairPartition(again, c);
          expect(checker.violations).toEqual([]);
          expect(await allIds(dir), `fault ${kind} at call ${at}`).toEqual(range(1, TOTAL));
          await rm(dir, { recursive: true, force: true });
          scenarios++;
        }
      }
      console.log(
        `repair sweep: ${calls} calls x ${FAULT_KINDS.length} fault kinds = ${scenarios} crash points`,
      );
    },
    HANG_GUARD_MS,
  );
});
