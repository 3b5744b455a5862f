/**
 * Helpers for the CLI tests: run the CLI in-process capturing its lines, or `compactor run` as a
 * child process of its own (to kill it), build Arc keys, list a local lake and read its row ids
 * with DuckDB.
 */

import { type ChildProcess, spawn } from 'node:child_process';
import { join, resolve } from 'node:path';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { LocalFolderStore } from '../../functions/adapters/local-store/local-store.ts';
import { readIds } from '../../functions/adapters/sample-data.ts';
import { runCli } from '../../functions/cli/compactor.ts';
import { Layout } from '../../functions/core/layout.ts';
import { receiptsRoot } from '../../functions/core/manifest/manifest.ts';
import type { LakeFile } from './lake-harness.ts';

export interface CliResult {
  readonly code: number;
  readonly out: string[];
  readonly err: string[];
  /** stdout joined with newlines. */
  readonly text: string;
}

/** Runs one CLI command in this process; every out/err call is one (possibly multi-line) entry. */
export async function cli(...argv: string[]): Promise<CliResult> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(argv, { out: (line) => out.push(line), err: (line) => err.push(line) });
  return { code, out, err, text: out.join('\n') };
}

const REPO = resolve(import.meta.dirname, '../..');
const MAIN = join(REPO, 'functions/cli/main.ts');

export interface RunExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly ms: number;
  readonly stderr: string;
}

/**
 * `compactor run --tier hourly --store DIR --quiet 0 --work-dir WORK ...extra` as a process of its
 * own (the CLI's entry on this Node), so a test can signal it; `onStderr` sees all stderr so far.
 */
export function spawnHourlyRun(
  dir: string,
  workDir: string,
  extra: readonly string[],
  onStderr?: (all: string) => void,
): { child: ChildProcess; exit: Promise<RunExit> } {
  const started = performance.now();
  const args = ['run', '--tier', 'hourly', '--store', dir, '--quiet', '0', '--work-dir', workDir, ...extra];
  const child = spawn(process.execPath, [MAIN, ...args], { cwd: REPO, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8');
    onStderr?.(stderr);
  });
  const exit = new Promise<RunExit>((resolveExit, reject) => {
    child.once('error', reject);
    child.once('close', (code, signal) =>
      resolveExit({ code, signal, ms: performance.now() - started, stderr }),
    );
  });
  return { child, exit };
}

/**
 * Raw Arc files of db/cpu on 2025-01-15: `hours` hours from 00 of `perHour` files each, file `f`
 * of an hour holding `rows(f)` rows.
 */
export function dayOfHours(hours: number, perHour: number, rows: (f: number) => number): LakeFile[] {
  const files: LakeFile[] = [];
  for (let h = 0; h < hours; h++) {
    const hh = String(h).padStart(2, '0');
    for (let f = 0; f < perHour; f++) {
      files.push({
        key: `db/cpu/2025/01/15/${hh}/cpu_20250115_${hh}${String(f * 10 + 5).padStart(2, '0')}00_${h * perHour + f + 1}.parquet`,
        rows: rows(f),
      });
    }
  }
  return files;
}

const pad = (n: number) => String(n).padStart(2, '0');

/** An Arc raw-file key in the hour starting at `hourStartMs`, file number `n` of that hour. */
export function arcRawKey(hourStartMs: number, n: number, measurement = 'cpu', db = 'db'): string {
  const d = new Date(hourStartMs);
  const yyyy = d.getUTCFullYear();
  const mm = pad(d.getUTCMonth() + 1);
  const dd = pad(d.getUTCDate());
  const hh = pad(d.getUTCHours());
  const minute = pad((n * 7) % 60);
  return `${db}/${measurement}/${yyyy}/${mm}/${dd}/${hh}/${measurement}_${yyyy}${mm}${dd}_${hh}${minute}00_${n}.parquet`;
}

/** The Arc hour folder of a key (`db/cpu/2025/01/15/10/`). */
export function hourFolderOf(key: string): string {
  return key.slice(0, key.lastIndexOf('/') + 1);
}

const ARC = Layout.fromName('arc');

/** Every key in the folder store (data, state root, anything else), sorted. */
export async function listAll(dir: string): Promise<string[]> {
  const keys: string[] = [];
  for await (const object of new LocalFolderStore(dir).list('')) keys.push(object.key);
  return keys.sort();
}

/** Data keys (`*.parquet` outside `_compaction/`) of the folder store, sorted. */
export async function dataKeys(dir: string): Promise<string[]> {
  return (await listAll(dir)).filter((k) => ARC.isDataKey(k));
}

/**
 * Keys under the state root `_compaction/`, but the receipts: what committed jobs leave there on
 * purpose (receiptKeys), so a lake at rest has none of these.
 */
export async function stateKeys(dir: string): Promise<string[]> {
  return (await listAll(dir)).filter((k) => k.startsWith(ARC.stateRoot) && !k.startsWith(receiptsRoot(ARC)));
}

/** The receipts committed jobs left (`_compaction/receipts/`). */
export async function receiptKeys(dir: string): Promise<string[]> {
  return (await listAll(dir)).filter((k) => k.startsWith(receiptsRoot(ARC)));
}

/** Every row id of every data file in the folder, ascending (duplicates kept). */
export async function lakeIds(engine: DuckDbEngine, dir: string): Promise<bigint[]> {
  const keys = await dataKeys(dir);
  return readIds(
    engine,
    keys.map((k) => join(dir, k)),
  );
}

/** Finds the first id that is missing or duplicated, for a short failure message. */
export function idMismatch(ids: readonly bigint[], total: number): string | undefined {
  if (ids.length !== total) {
    for (let i = 0; i < ids.length; i++) {
      if (ids[i] !== BigInt(i + 1))
        return `${ids.length} rows instead of ${total}; first wrong at id ${i + 1}`;
    }
    return `${ids.length} rows instead of ${total}`;
  }
  for (let i = 0; i < ids.length; i++) {
    if (ids[i] !== BigInt(i + 1)) return `id ${i + 1} missing or duplicated (found ${ids[i]})`;
  }
  return undefined;
}
