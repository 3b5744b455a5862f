/**
 * The price of the audit's fix (functions/core/cost/fix.ts): repair's store calls against a real
 * repair on the local store (each call recorded), and the dollars from the counts and the price
 * table, never from a stated total.
 */

import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { DuckDbEngine } from '../../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { parseConfig } from '../../../functions/core/config.ts';
import {
  cycleCost,
  fixCost,
  PRICES,
  repairCalls,
  type StoreCalls,
} from '../../../functions/core/cost/index.ts';
import { runCycle } from '../../../functions/core/cycle.ts';
import { findRepairs, repairPartition } from '../../../functions/core/repair.ts';
import { costSettings, TRANSITIONS } from '../../support/cost-fixture.ts';
import { useEngineAndDir } from '../../support/engine-fixture.ts';
import { FaultStore } from '../../support/fault-store.ts';
import { SWEEP_CONFIG, sweepDeps, writeLake } from '../../support/lake-harness.ts';
import { testStore } from '../../support/test-store.ts';

let engine: DuckDbEngine;
let root: string;

useEngineAndDir('cost-fix-', async (e, dir) => {
  engine = e;
  root = dir;
});

const SETTINGS = costSettings('STANDARD');

function counted(ops: readonly string[]): StoreCalls {
  const calls: Record<string, number> = {};
  for (const op of ops) calls[op] = (calls[op] ?? 0) + 1;
  return calls;
}

describe('the price of the fix', () => {
  it('counts the calls a real repair makes: its content check, then its job', async () => {
    // An hour compacted into one output, then three of its four raw files restored beside it.
    const dir = join(root, 'lake');
    const hour = 'db/cpu/2025/01/15/10/';
    const raw = [1, 2, 3, 4].map((n) => ({ key: `${hour}cpu_20250115_100${n}00_${n}.parquet`, rows: 5 }));
    await writeLake(engine, dir, raw);
    const originals = await Promise.all(raw.map((f) => readFile(join(dir, f.key))));
    const inner = testStore(dir);
    const config = parseConfig({ ...SWEEP_CONFIG, targetFileBytes: 512 * 2 ** 20 });
    await runCycle(sweepDeps(inner, config, engine, join(root, 'work'), 'exec-1', new Set()), 'hourly');
    for (const i of [0, 1, 2]) await inner.put(raw[i]?.key ?? '', originals[i] ?? Buffer.alloc(0));

    const store = new FaultStore(inner);
    const deps = { ...sweepDeps(store, config, engine, join(root, 'work'), 'repair', new Set()), engine };
    const [candidate, ...rest] = await findRepairs(deps);
    expect(rest).toEqual([]);
    if (!candidate) throw new Error('no repair candidate');
    const folder = { outputs: candidate.evidence.length, inputs: 3, duplicates: candidate.inputs.length };
    expect(folder).toEqual({ outputs: 1, inputs: 3, duplicates: 3 });
    // The listings (data root, manifests) are priced by keys listed, not here.
    const check = counted(store.calls.map((c) => c.op).filter((op) => op !== 'list'));
    const at = store.calls.length;
    expect((await repairPartition(deps, candidate)).status).toBe('done');
    const job = counted(store.calls.slice(at).map((c) => c.op));
    const both: Record<string, number> = { ...check };
    for (const [op, n] of Object.entries(job)) both[op] = (both[op] ?? 0) + n;
    expect(both).toEqual(repairCalls(folder));
  }, 60_000);

  it('prices repair by its requests and the left-over compaction as a cycle, at list prices', () => {
    const folders = [
      { outputs: 1, inputs: 3, duplicates: 3 },
      { outputs: 2, inputs: 5, duplicates: 0 },
    ];
    const compactions = [{ tier: 'hourly', inputs: 4, inputBytes: 4000, wave: 0 }];
    const cost = fixCost({
      listedObjects: 2500,
      repairs: folders,
      compactions,
      cycle: { settings: SETTINGS, transitions: TRANSITIONS },
    });
    // From the counts: repair lists 2,500 keys (3 pages); it downloads 1 + 3 and 2 + 5 files, then
    // in the first folder claims (put, get), downloads 1 + 3 again, commits (put), deletes (get, 1
    // DeleteObjects, put) and clears (get, receipt put, list, 2 DeleteObjects).
    const get = 1 + 3 + (2 + 5) + 1 + (1 + 3) + 1 + 1;
    const put = 1 + 1 + 1 + 1;
    const list = 3 + 1;
    expect(cost.repair.requests).toEqual({ get, put, list, delete: 1 + 2 });
    const repairUsd = (get * PRICES.s3GetHeadPer1000 + (put + list) * PRICES.s3PutCopyListPer1000) / 1000;
    expect(cost.repair.usd).toBeCloseTo(repairUsd, 12);
    expect(cost.repair).toMatchObject({ folders: 2, duplicates: 3 });
    const cycle = cycleCost({
      jobs: compactions,
      settings: SETTINGS,
      transitions: TRANSITIONS,
      planning: { get: 0, put: 0, list: 3, delete: 0 },
    });
    expect(cost.compaction).toEqual(cycle);
    expect(cost.totalUsd).toBeCloseTo(repairUsd + cycle.total.totalUsd, 12);
    expect(cost.requests.get).toBe(get + cycle.total.requests.get);
    expect(cost.basis).toContain('us-east-1 list prices');
  });

  it('needs no cycle when nothing is left to compact, and costs nothing on a clean lake', () => {
    const cost = fixCost({ listedObjects: 10, repairs: [], compactions: [] });
    expect(cost.compaction).toBeUndefined();
    expect(cost.totalUsd).toBe(0);
    expect(() =>
      fixCost({
        listedObjects: 10,
        repairs: [],
        compactions: [{ tier: 'hourly', inputs: 1, inputBytes: 1, wave: 0 }],
      }),
    ).toThrow(/settings and transitions/);
  });
});
