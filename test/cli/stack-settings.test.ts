/**
 * The local commands take the stack's settings as the deployed Lambdas do: `--context` (over
 * cdk.json's `compactor` context) reaches `plan` and `run`, not only the flags. A 12-file hour
 * with the context's hourly minFiles 20 is left alone; the context's retention rules expire.
 */

import { cp, mkdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { arcRawKey, cli, dataKeys } from '../support/cli-lake.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { writeLake } from '../support/lake-harness.ts';

// Two hours ago: past hourly's minAge, too recent for the daily tier's straggler flush.
const HOUR = Math.floor(Date.now() / 3_600_000) * 3_600_000 - 2 * 3_600_000;
const RAW = Array.from({ length: 12 }, (_, i) => arcRawKey(HOUR, i + 1));

let engine: DuckDbEngine;
let root: string;
let template: string;

useEngineAndDir('cli-stack-settings-', async (e, dir) => {
  engine = e;
  root = dir;
  template = join(root, 'template');
  await writeLake(
    engine,
    template,
    RAW.map((key) => ({ key, rows: 5 })),
  );
});

async function lake(name: string): Promise<string> {
  const dir = join(root, name);
  await cp(template, dir, { recursive: true });
  return dir;
}

const MIN_FILES_20 = JSON.stringify({ tiers: { hourly: { minFiles: 20 } } });

describe('--context reaches the local commands', () => {
  it('plan and run leave a 12-file hour alone with tiers.hourly.minFiles 20, and compact it without', async () => {
    const dir = await lake('min-files');
    const common = ['--tier', 'hourly', '--store', dir, '--quiet', '0'];
    const plan = await cli('plan', ...common, '--context', MIN_FILES_20, '--json');
    expect(plan.code, plan.err.join('\n')).toBe(0);
    expect((JSON.parse(plan.text) as { jobs: unknown[] }).jobs, plan.text).toEqual([]);
    const run = await cli('run', ...common, '--context', MIN_FILES_20);
    expect(run.code, run.err.join('\n')).toBe(0);
    expect(await dataKeys(dir)).toEqual([...RAW].sort());
    // A flag goes over the context: --min-files 10 compacts the hour.
    const flagged = await cli('run', ...common, '--context', MIN_FILES_20, '--min-files', '10');
    expect(flagged.code, flagged.err.join('\n')).toBe(0);
    expect(await dataKeys(dir)).toHaveLength(1);
  });

  it('run --tier retention expires by the context retention.rules', async () => {
    const dir = await lake('retention');
    // An hour of a day ended over a day + 24 h buffer ago goes; this lake's hour is too recent.
    const old = join(dir, arcRawKey(Date.parse('2025-01-15T10:00:00Z'), 1));
    await mkdir(dirname(old), { recursive: true });
    await cp(join(dir, RAW[0] ?? ''), old);
    const run = await cli(
      'run',
      '--tier',
      'retention',
      '--store',
      dir,
      '--context',
      JSON.stringify({ retention: { rules: { '*': 1 } } }),
    );
    expect(run.code, run.err.join('\n')).toBe(0);
    expect(await dataKeys(dir)).toEqual([...RAW].sort());
  });

  it('names the flag whose key the stack parser refuses', async () => {
    const dir = await lake('refused');
    const plan = await cli('plan', '--tier', 'hourly', '--store', dir, '--max-job-bytes', '20GiB');
    expect(plan.code).toBe(2);
    expect(plan.err.join('\n')).toMatch(/compactor\.maxJobBytes .*\(set by --max-job-bytes\)/);
    // A key the parser names after `context compactor:` (a table-path map's entry).
    const rule = await cli('plan', '--tier', 'retention', '--store', dir, '--retention', 'db/cpu=1');
    expect(rule.code).toBe(2);
    expect(rule.err.join('\n')).toMatch(/retention\.rules\["db\/cpu"\].*\(set by --retention\)$/);
  });
});
