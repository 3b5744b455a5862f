/**
 * `compactor release`'s table: each row's why column tells what the release did to that record.
 * A released input's old quarantine reason no longer holds, so its row says what happens next
 * and keeps the old reason only as `was:`; a still-bad input shows why it still fails; a pruned
 * record says its object is gone. Dry run and real release over one small folder lake.
 */

import { cp } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { cli } from '../support/cli-lake.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { writeLake } from '../support/lake-harness.ts';
import { testStore } from '../support/test-store.ts';

const PARTITION = 'db/disk/2025/01/15/10/';
/** Readable now: the cause its record names is fixed. */
const FIXED = `${PARTITION}disk_20250115_100500_1.parquet`;
/** Still not Parquet. */
const BAD = `${PARTITION}disk_20250115_101500_2.parquet`;
/** Its record outlived it. */
const GONE = `${PARTITION}disk_20250115_103000_3.parquet`;
const recordOf = (key: string) => `_compaction/quarantine/inputs/${key}.json`;

let root: string;
let template: string;
let workDir: string;

useEngineAndDir('cli-release-', async (engine: DuckDbEngine, dir) => {
  root = dir;
  workDir = join(dir, 'work');
  template = join(dir, 'template');
  await writeLake(engine, template, [{ key: FIXED, rows: 5 }]);
  const store = testStore(template);
  await store.put(BAD, Buffer.from('PAR1 this is not parquet PAR1'));
  for (const key of [FIXED, BAD, GONE]) {
    await store.put(
      recordOf(key),
      Buffer.from(JSON.stringify({ key, partition: PARTITION, reason: 'not readable as Parquet' })),
    );
  }
});

/** The table row of a record: its columns after the record key, spaces collapsed. */
function rowOf(text: string, key: string): string {
  const line = text.split('\n').find((l) => l.startsWith(`${recordOf(key)} `));
  expect(line, `a row for ${recordOf(key)} in:\n${text}`).toBeDefined();
  return (line ?? '').replace(/\s+/g, ' ');
}

describe('release: what each row says happened', () => {
  it.each([
    ['the dry run', true],
    ['the release', false],
  ] as const)(
    '%s: released rows say what comes next, still-bad rows why, pruned rows that the input is gone',
    async (name, dryRun) => {
      const dir = join(root, dryRun ? 'dry' : 'real');
      await cp(template, dir, { recursive: true });
      const result = await cli(
        'release',
        '--partition',
        PARTITION,
        ...(dryRun ? ['--dry-run'] : []),
        '--work-dir',
        workDir,
        '--store',
        dir,
      );
      expect(result.code, `${name}: ${result.err.join('\n')}`).toBe(1);

      const fixed = rowOf(result.text, FIXED);
      expect(fixed).toContain(` ${FIXED} released `);
      expect(fixed).toMatch(
        dryRun
          ? /released passes the re-check; the next run would check it in full \(was: not readable as Parquet\)$/
          : /released passed the re-check; the next run checks it in full \(was: not readable as Parquet\)$/,
      );

      const bad = rowOf(result.text, BAD);
      expect(bad).toMatch(/ still-bad still unreadable: /);
      expect(bad).not.toContain('was:');

      expect(rowOf(result.text, GONE)).toMatch(/ pruned the input is gone$/);
    },
  );
});

describe('release --partition', () => {
  it('takes the folder as visible prints it (a path inside the store) and refuses one outside', async () => {
    const dir = join(root, 'absolute');
    await cp(template, dir, { recursive: true });
    const run = (partition: string) =>
      cli('release', '--partition', partition, '--dry-run', '--work-dir', workDir, '--store', dir);
    const relative = await run(PARTITION);
    const absolute = await run(join(dir, PARTITION));
    expect(absolute.code).toBe(relative.code);
    expect(absolute.text).toBe(relative.text);
    expect(absolute.text).toContain(FIXED);
    const outside = await run(join(root, 'elsewhere', PARTITION));
    expect(outside.code).toBe(2);
    expect(outside.err[0]).toContain("not inside the store's folder");
  });
});
