/**
 * The lake the `compactor audit` tests start from: ten raw files of one hour of `db/cpu`, five rows
 * each, written by a real DuckDB into a fresh folder, and a backup of one of them taken before any
 * run, to restore over the lake later.
 */

import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { arcRawKey } from './cli-lake.ts';
import { useEngineAndDir } from './engine-fixture.ts';
import { writeLake } from './lake-harness.ts';

/** The hour the lake's files are in: 2025-01-15 10:00 UTC. */
export const AUDIT_HOUR = Date.UTC(2025, 0, 15, 10);
/** The raw file whose backup `backup` holds. */
export const RESTORED = arcRawKey(AUDIT_HOUR, 3);

export interface AuditLake {
  /** The lake's folder. */
  readonly dir: string;
  /** RESTORED's bytes as written, before any run. */
  readonly backup: Buffer;
  readonly engine: DuckDbEngine;
}

/** Registers the lake's hooks (in a describe block or file, with useEngineAndDir's lifetime). */
export function useAuditLake(prefix: string): AuditLake {
  let lake: AuditLake | undefined;
  useEngineAndDir(prefix, async (engine, root) => {
    const dir = join(root, 'lake');
    await writeLake(
      engine,
      dir,
      Array.from({ length: 10 }, (_, i) => ({ key: arcRawKey(AUDIT_HOUR, i), rows: 5 })),
    );
    lake = { dir, backup: await readFile(join(dir, RESTORED)), engine };
  });
  const ready = (): AuditLake => {
    if (lake === undefined) throw new Error('the audit lake is ready only once its beforeAll ran');
    return lake;
  };
  return {
    get dir() {
      return ready().dir;
    },
    get backup() {
      return ready().backup;
    },
    get engine() {
      return ready().engine;
    },
  };
}
