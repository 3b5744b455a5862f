/**
 * The DuckDB engine and scratch folder most test files share: made before the file's tests,
 * closed and removed after them.
 */

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { DuckDbEngine } from '../../functions/adapters/duckdb-engine.ts';

/** Registers the hooks; `ready` receives the engine (one thread) and an empty folder named `prefix...`. */
export function useEngineAndDir(prefix: string, ready: (engine: DuckDbEngine, dir: string) => void): void {
  let engine: DuckDbEngine | undefined;
  let dir: string | undefined;
  beforeAll(async () => {
    engine = await DuckDbEngine.create({ threads: 1 });
    dir = await mkdtemp(join(tmpdir(), prefix));
    ready(engine, dir);
  });
  afterAll(async () => {
    await engine?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });
}
