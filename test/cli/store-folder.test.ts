/**
 * A local --store folder that does not exist is an error (exit 2, naming the folder and the
 * fix), never an empty lake: `run --tier hourly --store /nonexistent/x` used to create the folder
 * and report success with 0 objects. Only `demo` makes a folder.
 */

import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { writeSampleParquet } from '../../functions/adapters/sample-data.ts';
import { runCli } from '../../functions/cli/compactor.ts';
import { useTempDir } from '../support/engine-fixture.ts';

let root: string;
useTempDir('store-folder-', (dir) => {
  root = dir;
});

async function cli(...argv: string[]): Promise<{ code: number; err: string; out: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(argv, { out: (l) => out.push(l), err: (l) => err.push(l) });
  return { code, err: err.join('\n'), out: out.join('\n') };
}

describe('a --store folder that does not exist', () => {
  it.each([['run', '--tier', 'hourly'], ['status'], ['plan', '--tier', 'hourly'], ['recover']])(
    '%s exits 2 naming the folder, and creates nothing',
    async (...command) => {
      const missing = join(root, 'nonexistent', 'x');
      const result = await cli(...command, '--store', missing);
      expect(result.code).toBe(2);
      expect(result.err).toContain(`--store ${missing}: no such folder`);
      expect(result.err).toContain('compactor demo --dir');
      expect(existsSync(join(root, 'nonexistent'))).toBe(false);
    },
  );

  it('a file given as --store is refused too', async () => {
    const file = join(root, 'a-file');
    await writeFile(file, 'x');
    const result = await cli('status', '--store', file);
    expect(result.code).toBe(2);
    expect(result.err).toContain('is a file, not a folder');
  });
});

describe('--partition-segments and --data-suffix', () => {
  it("set the layout's partition columns and input suffix: hive refuses the daily tier unless its readers map no segment", async () => {
    const store = join(root, 'hive-lake');
    await mkdir(store);
    const refused = await cli('plan', '--tier', 'daily', '--layout', 'hive', '--store', store);
    expect(refused.code).toBe(2);
    expect(refused.err).toMatch(/tiers\.daily\.enabled|daily/);
    const globOnly = await cli(
      'plan',
      '--tier',
      'daily',
      '--layout',
      'hive',
      '--partition-segments',
      '',
      '--store',
      store,
    );
    expect(globOnly).toMatchObject({ code: 0 });
    const bad = await cli(
      'plan',
      '--tier',
      'hourly',
      '--layout',
      'hive',
      '--partition-segments',
      'day={DD}',
      '--store',
      store,
    );
    expect(bad.code).toBe(2);
    expect(bad.err).toContain('day={DD}');
  });

  it('--data-suffix "" takes inputs of any name that are Parquet, and only those', async () => {
    const store = join(root, 'suffix-lake');
    const hour = join(store, 'db', 'cpu', '2025', '01', '15', '10');
    await mkdir(hour, { recursive: true });
    const engine = await DuckDbEngine.create({ threads: 1 });
    try {
      for (const name of ['cpu-1-2025-01-15-10-00-00-a', 'cpu-1-2025-01-15-10-05-00-b']) {
        await writeSampleParquet(engine, join(hour, name), {
          rows: 5,
          firstId: 1,
          startTimeMs: Date.UTC(2025, 0, 15, 10),
          spanMs: 60_000,
        });
      }
    } finally {
      await engine.close();
    }
    await writeFile(join(hour, 'notes'), 'not parquet');
    const args = [
      'plan',
      '--tier',
      'hourly',
      '--min-files',
      '2',
      '--quiet',
      '0',
      '--now',
      new Date(Date.now() + 3_600_000).toISOString(),
      '--store',
      store,
      '--json',
    ];
    const plan = (r: { out: string }) => JSON.parse(r.out) as { jobs: { inputs: { key: string }[] }[] };
    const anyName = await cli(...args, '--data-suffix', '');
    expect(anyName.code).toBe(0);
    expect(
      plan(anyName)
        .jobs.flatMap((j) => j.inputs.map((i) => i.key))
        .sort(),
    ).toEqual([
      'db/cpu/2025/01/15/10/cpu-1-2025-01-15-10-00-00-a',
      'db/cpu/2025/01/15/10/cpu-1-2025-01-15-10-05-00-b',
    ]);
    const byDefault = await cli(...args);
    expect(byDefault.code).toBe(0);
    expect(plan(byDefault).jobs).toEqual([]);
  });
});
