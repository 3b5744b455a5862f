/**
 * The sweeps' invariant checker itself: observing after writes only (observeWrites) must still
 * catch a write that breaks an invariant, at that write; a read never needs a new observation.
 */

import { rm } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { FaultStore } from '../support/fault-store.ts';
import { copyLake, hourlyTemplate, LakeChecker } from '../support/lake-harness.ts';
import { testStore } from '../support/test-store.ts';

let engine: DuckDbEngine;

useEngineAndDir('lake-checker-', (e) => {
  engine = e;
});

const SOURCE = 'db/cpu/2025/01/15/10/cpu_20250115_100500_1.parquet';
const TWIN = 'db/cpu/2025/01/15/10/cpu_20250115_104500_9.parquet';

describe('LakeChecker.observeWrites', () => {
  it('skips reads, and flags the write that duplicates rows in the visible view', async () => {
    const template = await hourlyTemplate(engine);
    const dir = await copyLake(template);
    try {
      const inner = testStore(dir);
      const checker = new LakeChecker(engine, dir, inner, template.config, template.totalRows);
      const store = new FaultStore(inner, { beforeCall: checker.audit, afterCall: checker.observeWrites });
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
    } finally {
      await rm(dir, { recursive: true, force: true });
      await rm(template.dir, { recursive: true, force: true });
    }
  });

  it('flags a write that loses rows (I1)', async () => {
    const template = await hourlyTemplate(engine);
    const dir = await copyLake(template);
    try {
      const inner = testStore(dir);
      const checker = new LakeChecker(engine, dir, inner, template.config, template.totalRows);
      const store = new FaultStore(inner, { afterCall: checker.observeWrites });
      await expect(store.deleteMany([{ key: SOURCE }])).rejects.toThrow(
        /I1: row id 1 missing after call 1 deleteMany/,
      );
      expect(checker.violations).toHaveLength(1);
    } finally {
      await rm(dir, { recursive: true, force: true });
      await rm(template.dir, { recursive: true, force: true });
    }
  });
});
