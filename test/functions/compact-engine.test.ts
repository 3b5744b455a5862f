/**
 * The compact Lambda's engine from its environment: DuckDB with polars for merges, polars sized
 * by the same memory limit and threads the stack gives DuckDB.
 */

import { afterEach, describe, expect, it } from 'vitest';
import { MEMORY_PER_INPUT_BYTE } from '../../functions/adapters/polars-engine/polars-engine.ts';
import { ENV } from '../../functions/contract.ts';
import type { Column } from '../../functions/core/engine.ts';
import { compactEngine, megabytes } from '../../functions/lambda/compact-engine.ts';
import { useTempDir } from '../support/engine-fixture.ts';

let dir: string;
useTempDir('compact-engine-', (d) => {
  dir = d;
});

const savedEnv = { ...process.env };
afterEach(() => {
  process.env = { ...savedEnv };
});

const COLUMNS: Column[] = [
  { name: 'time', type: 'TIMESTAMP' },
  { name: 'value', type: 'DOUBLE' },
];

describe('megabytes', () => {
  it('reads the stack form of a memory limit, and nothing else', () => {
    expect(megabytes('2200MB')).toBe(2_200_000_000);
    expect(megabytes('1GB')).toBeUndefined();
    expect(megabytes(undefined)).toBeUndefined();
  });
});

describe('compactEngine', () => {
  it('offers polars for merges that fit the DuckDB memory limit the stack sets', async () => {
    process.env[ENV.duckDbMemoryLimit] = '100MB';
    process.env[ENV.duckDbThreads] = '1';
    const engine = await compactEngine(dir);
    try {
      const shape = { columns: COLUMNS, inputColumns: [COLUMNS] };
      const fits = Math.floor(100_000_000 / MEMORY_PER_INPUT_BYTE);
      expect(engine.mergeEngines({ ...shape, inputBytes: fits })).toEqual(['duckdb', 'polars']);
      expect(engine.mergeEngines({ ...shape, inputBytes: fits + 1 })).toEqual(['duckdb']);
    } finally {
      await engine.close();
    }
  });
});
