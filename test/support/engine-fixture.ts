/**
 * The DuckDB engine and scratch folder most test files share (or the folder alone): made before
 * the file's tests, closed and removed after them.
 */

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import {
  DuckDbEngine,
  type DuckDbEngineOptions,
} from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';

export interface EngineFixtureOptions {
  /** The engine's options, given the folder (to spill into it, say). Default: one thread. */
  readonly engine?: (dir: string) => DuckDbEngineOptions;
}

/**
 * Registers the hooks (in a describe block, around its tests only); `ready` receives the engine
 * and an empty folder named `prefix...`, and is awaited, so a file's own setup can go in it.
 */
export function useEngineAndDir(
  prefix: string,
  ready: (engine: DuckDbEngine, dir: string) => void | Promise<void>,
  options: EngineFixtureOptions = {},
): void {
  let engine: DuckDbEngine | undefined;
  useTempDir(prefix, async (dir) => {
    engine = await DuckDbEngine.create(options.engine?.(dir) ?? { threads: 1 });
    await ready(engine, dir);
  });
  // After-hooks run in reverse order: the engine closes before its folder is removed.
  afterAll(async () => {
    await engine?.close();
  });
}

/** The folder alone, for files with no engine: `ready` receives it, empty, and is awaited. */
export function useTempDir(prefix: string, ready: (dir: string) => void | Promise<void>): void {
  let dir: string | undefined;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), prefix));
    await ready(dir);
  });
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });
}
