/**
 * The sweeps' invariant checker itself: observing after writes only (observeWrites) must still
 * catch a write that breaks an invariant, at that write; a read never needs a new observation.
 */

import { rm } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { FaultStore, type FaultStoreOptions } from '../support/fault-store.ts';
import {
  copyLake,
  HOURLY_HOUR_10,
  HOURLY_IN_10,
  hourlyTemplate,
  LakeChecker,
} from '../support/lake-harness.ts';
import { testStore } from '../support/test-store.ts';

let engine: DuckDbEngine;

useEngineAndDir('lake-checker-', (e) => {
  engine = e;
});

const [SOURCE] = HOURLY_IN_10;
const TWIN = `${HOURLY_HOUR_10}cpu_20250115_104500_9.parquet`;

/** The hourly template's lake, a checker over it and a store the hooks tie them with. */
async function withCheckedLake(
  hooks: (checker: LakeChecker) => FaultStoreOptions,
  run: (store: FaultStore, checker: LakeChecker) => Promise<void>,
): Promise<void> {
  const template = await hourlyTemplate(engine);
  const dir = await copyLake(template);
  try {
    const inner = testStore(dir);
    const checker = new LakeChecker(engine, dir, inner, template.config, template.totalRows);
    await run(new FaultStore(inner, hooks(checker)), checker);
  } finally {
    await rm(dir, { recursive: true, force: true });
    await rm(template.dir, { recursive: true, force: true });
  }
}

describe('LakeChecker.observeWrites', () => {
  it('skips reads, and flags the write that duplicates rows in the visible view', async () => {
    await withCheckedLake(
      (checker) => ({ beforeCall: checker.audit, afterCall: checker.observeWrites }),
      async (store, checker) => {
        await checker.observe();
        expect(checker.violations).toEqual([]);
        for await (const _ of store.list('db/')) void _;
        await store.head(SOURCE);
        await store.getBytes(SOURCE);
        expect(checker.observations, 'reads change nothing: no observation').toBe(1);
        await expect(store.copy(SOURCE, TWIN)).rejects.toThrow(
          /visible view holds row id 1 2 times after call 4 copy/,
        );
        expect(checker.observations).toBe(2);
        expect(checker.violations).toHaveLength(1);
      },
    );
  });

  it('flags a write that loses rows (I1)', async () => {
    await withCheckedLake(
      (checker) => ({ afterCall: checker.observeWrites }),
      async (store, checker) => {
        await expect(store.deleteMany([{ key: SOURCE }])).rejects.toThrow(
          /I1: row id 1 missing after call 1 deleteMany/,
        );
        expect(checker.violations).toHaveLength(1);
      },
    );
  });
});
