/**
 * Every dry run the CLI offers changes nothing: `plan` (the dry run of `run`), `repair --dry-run`,
 * `release --dry-run` and `retention --dry-run` over one small folder lake holding compactable
 * hours, raw files an output already holds (what repair removes), expired days (what retention
 * removes), quarantine records (what release removes) and state under `_compaction/`. Every file's bytes and the list of files and folders (the state root and
 * the store's hidden folder included) are the same before and after; `run --dry-run` is refused
 * (exit 2) and changes nothing either.
 */

import { createHash } from 'node:crypto';
import { cp, readdir, readFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { cli } from '../support/cli-lake.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { writeLake } from '../support/lake-harness.ts';
import { testStore } from '../support/test-store.ts';

const NOW = '2025-03-01T12:00:00Z';
const RULES = 'db/mem/=30';

let engine: DuckDbEngine;
let root: string;
let template: string;
let workDir: string;

/** Every file and folder under `dir` with its bytes' hash, sorted: equal means nothing changed. */
async function fingerprint(dir: string): Promise<string[]> {
  const entries: string[] = [];
  const walk = async (folder: string): Promise<void> => {
    for (const entry of await readdir(folder, { withFileTypes: true })) {
      const path = join(folder, entry.name);
      const name = relative(dir, path);
      if (entry.isDirectory()) {
        entries.push(`${name}/`);
        await walk(path);
      } else {
        entries.push(
          `${name} ${createHash('sha256')
            .update(await readFile(path))
            .digest('hex')}`,
        );
      }
    }
  };
  await walk(dir);
  return entries.sort();
}

useEngineAndDir('cli-dry-runs-', async (e, dir) => {
  engine = e;
  root = dir;
  workDir = join(root, 'work');
  template = join(root, 'template');
  await writeLake(engine, template, [
    // Hours 10 and 11: compactable raw files; hour 10 also gets an output holding its rows.
    { key: 'db/cpu/2025/01/15/10/cpu_20250115_100500_1.parquet', rows: 20 },
    { key: 'db/cpu/2025/01/15/10/cpu_20250115_101500_2.parquet', rows: 20 },
    { key: 'db/cpu/2025/01/15/11/cpu_20250115_110500_3.parquet', rows: 20 },
    { key: 'db/cpu/2025/01/15/11/cpu_20250115_111500_4.parquet', rows: 20 },
    // Expired under RULES at NOW.
    { key: 'db/mem/2025/01/10/03/mem_20250110_030500_5.parquet', rows: 10 },
    { key: 'db/mem/2025/01/10/04/mem_20250110_040500_6.parquet', rows: 10 },
    // Quarantined below (what release re-admits), readable now.
    { key: 'db/disk/2025/01/15/10/disk_20250115_100500_7.parquet', rows: 5 },
  ]);
  const store = testStore(template);
  const output = join(root, 'hour-10.parquet');
  await engine.query(
    `COPY (SELECT * FROM read_parquet('${template}/db/cpu/2025/01/15/10/*.parquet') ORDER BY time) TO '${output}' (FORMAT parquet)`,
  );
  await store.put('db/cpu/2025/01/15/10/cpu_20250115_100000_compacted.parquet', { file: output });
  // Quarantine records (what release re-admits and prunes): one of a file there, one of a file gone.
  const disk = 'db/disk/2025/01/15/10/disk_20250115_100500_7.parquet';
  for (const key of [disk, 'db/disk/2025/01/15/10/disk_20250115_101500_8.parquet']) {
    await store.put(
      `_compaction/quarantine/inputs/${key}.json`,
      Buffer.from(JSON.stringify({ key, partition: 'db/disk/2025/01/15/10/', reason: 'not Parquet' })),
    );
  }
  // State under the state root (visible --format athena writes such manifests).
  await store.put(
    '_compaction/views/athena/db_cpu/manifest',
    Buffer.from('db/cpu/2025/01/15/11/cpu_20250115_110500_3.parquet\n'),
  );
});

async function lake(name: string): Promise<string> {
  const dir = join(root, name);
  await cp(template, dir, { recursive: true });
  return dir;
}

describe('dry runs change nothing', () => {
  it('the lake has what each dry run would act on, the state root and the hidden store folder', async () => {
    const files = await fingerprint(template);
    expect(files.some((f) => f.startsWith('_compaction/'))).toBe(true);
    expect(files.some((f) => f.startsWith('.compactor-store/'))).toBe(true);
  });

  it.each([
    ['plan --tier hourly', ['plan', '--tier', 'hourly', '--quiet', '0', '--min-files', '2'], /compact\s+2/],
    ['plan --tier daily', ['plan', '--tier', 'daily', '--quiet', '0'], /daily plan at/],
    ['plan --tier retention', ['plan', '--tier', 'retention', '--retention', RULES, '--now', NOW], /expire/],
    ['repair --dry-run', ['repair', '--dry-run', '--work-dir', 'WORK'], /dry run: 40 duplicated rows/],
    [
      'release --all --dry-run',
      ['release', '--all', '--dry-run', '--work-dir', 'WORK'],
      /dry run: 1 input\(s\) would be re-admitted, 1 record\(s\) pruned; nothing changed/,
    ],
    [
      'retention --dry-run',
      ['retention', '--dry-run', '--retention', RULES, '--now', NOW],
      /dry run: 2 file\(s\).*nothing changed/,
    ],
  ])('%s', async (name, argv, shows) => {
    const dir = await lake(name.replaceAll(/[^a-z]+/g, '-'));
    const before = await fingerprint(dir);
    const result = await cli(...argv.map((a) => (a === 'WORK' ? workDir : a)), '--store', dir);
    expect(result.code, result.err.join('\n')).toBe(0);
    // It did find work, so "unchanged" is not an empty plan's.
    expect(result.text).toMatch(shows);
    expect(await fingerprint(dir)).toEqual(before);
  });

  it('run --dry-run is refused with the way to a dry run, and changes nothing', async () => {
    const dir = await lake('run-dry-run');
    const before = await fingerprint(dir);
    const result = await cli('run', '--tier', 'hourly', '--dry-run', '--quiet', '0', '--store', dir);
    expect(result.code).toBe(2);
    expect(result.err).toEqual(['compactor: run has no --dry-run; `compactor plan --tier T` is the dry run']);
    expect(await fingerprint(dir)).toEqual(before);
  });
});
