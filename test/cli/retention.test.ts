/**
 * `compactor retention [--dry-run]`, `compactor plan --tier retention` and `compactor run --tier
 * retention` (the synthesized state machine run locally) over a real folder lake: the dry run
 * changes nothing and names exactly what the real run then removes.
 */

import { cp } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { LocalFolderStore } from '../../functions/adapters/local-store/local-store.ts';
import { cli, dataKeys, lakeIds, listAll, stateKeys } from '../support/cli-lake.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { writeLake } from '../support/lake-harness.ts';

const NOW = '2025-03-01T12:00:00Z';
const RULES = 'db/cpu/=30,db/=90';
const EXPIRED = [
  'db/cpu/2025/01/28/05/cpu_20250128_050500_1.parquet',
  'db/cpu/2025/01/28/05/cpu_20250128_051500_2.parquet',
  'db/cpu/2025/01/28/cpu_20250128_daily.parquet',
  'db/cpu/2025/01/29/11/cpu_20250129_110500_3.parquet',
  'db/mem/2024/11/29/03/mem_20241129_030500_4.parquet',
];
const KEPT = [
  'db/cpu/2025/01/29/12/cpu_20250129_120500_5.parquet',
  'db/mem/2025/01/10/03/mem_20250110_030500_6.parquet',
  'other/disk/2024/01/01/00/disk_20240101_000500_7.parquet',
];

let engine: DuckDbEngine;
let root: string;
let template: string;

useEngineAndDir('cli-retention-', async (e, dir) => {
  engine = e;
  root = dir;
  template = join(root, 'template');
  // 10 rows per file, ids in the order above: the kept files hold ids 51..80.
  await writeLake(
    engine,
    template,
    [...EXPIRED, ...KEPT].map((key) => ({ key, rows: 10 })),
  );
  await new LocalFolderStore(template).put('db/cpu/2025/01/28/05/_SUCCESS', Buffer.from(''));
});

async function lake(name: string): Promise<string> {
  const dir = join(root, name);
  await cp(template, dir, { recursive: true });
  return dir;
}

const keptIds = Array.from({ length: 30 }, (_, i) => BigInt(51 + i));

describe('compactor retention', () => {
  it('--dry-run reports per day the files, bytes and cutoff, changes nothing, and names exactly what the real run removes', async () => {
    const dir = await lake('dry');
    const before = await listAll(dir);
    const dry = await cli(
      'retention',
      '--dry-run',
      '--store',
      dir,
      '--retention',
      RULES,
      '--now',
      NOW,
      '--json',
    );
    expect(dry.code, dry.err.join('\n')).toBe(0);
    const report = JSON.parse(dry.text) as {
      dryRun: boolean;
      partitions: { partition: string; rule: string; cutoff: string; files: string[]; bytes: number }[];
    };
    expect(report.dryRun).toBe(true);
    // --now advances with real time from the given instant: compare to the second.
    expect(
      report.partitions.map((p) => [p.partition, p.rule, p.cutoff.slice(0, 19), p.files.length]),
    ).toEqual([
      ['db/cpu/2025/01/28/', 'db/cpu/', '2025-01-29T12:00:00', 3],
      ['db/cpu/2025/01/29/', 'db/cpu/', '2025-01-29T12:00:00', 1],
      ['db/mem/2024/11/29/', 'db/', '2024-11-30T12:00:00', 1],
    ]);
    expect(report.partitions.every((p) => p.bytes > 0)).toBe(true);
    expect(await listAll(dir)).toEqual(before);

    const text = await cli('retention', '--dry-run', '--store', dir, '--retention', RULES, '--now', NOW);
    expect(text.text).toContain('db/cpu/2025/01/28/');
    expect(text.text).toContain('2025-01-29T12:00:00');
    expect(text.text).toMatch(/dry run: 5 file\(s\), .* in 3 day\(s\) would be removed; nothing changed/);

    const applied = await cli('retention', '--store', dir, '--retention', RULES, '--now', NOW);
    expect(applied.code, applied.err.join('\n')).toBe(0);
    // Applied, it is `run --tier retention`: the synthesized state machine, as deployed.
    expect(applied.text).toContain('the synthesized state machine run locally');
    expect(applied.text).toMatch(
      /summary: 3 day\(s\) expired \(5 files, .* removed\), 0 skipped, 0 superseded, 0 failed/,
    );
    const after = new Set(await listAll(dir));
    const removed = before.filter((k) => !after.has(k));
    expect(removed.sort()).toEqual(report.partitions.flatMap((p) => p.files).sort());
    expect(await dataKeys(dir)).toEqual([...KEPT].sort());
    expect(await lakeIds(engine, dir)).toEqual(keptIds);
    expect(await stateKeys(dir)).toEqual([]);
    expect(await listAll(dir)).toContain('db/cpu/2025/01/28/05/_SUCCESS');
    // Nothing left to do.
    const again = await cli('retention', '--store', dir, '--retention', RULES, '--now', NOW);
    expect(again.text).toMatch(/0 job\(s\) planned/);
    expect(again.text).toMatch(/summary: 0 day\(s\) expired/);
  });

  it('without a rule, or with a malformed one, exits 2 naming the option', async () => {
    const dir = await lake('norule');
    const none = await cli('retention', '--dry-run', '--store', dir);
    expect(none.code).toBe(2);
    expect(none.err.join('\n')).toMatch(/no retention rule: pass --retention TABLE=DAYS/);
    const bad = await cli('retention', '--store', dir, '--retention', 'db/cpu/30');
    expect(bad.code).toBe(2);
    expect(bad.err.join('\n')).toMatch(/--retention db\/cpu\/30: use TABLE=DAYS/);
    const deep = await cli('retention', '--store', dir, '--retention', 'db/cpu/2025/=30');
    expect(deep.code).toBe(2);
    expect(deep.err.join('\n')).toMatch(/retention\.rules\["db\/cpu\/2025\/"\]/);
    expect(await dataKeys(dir)).toEqual([...EXPIRED, ...KEPT].sort());
  });

  it('warns about a rule that matches no data file (a mistyped table path), naming tables it found', async () => {
    const dir = await lake('unmatched');
    const retention = (rules: string, ...extra: string[]) =>
      cli('retention', ...extra, '--store', dir, '--retention', rules, '--now', NOW);
    const warning =
      'warning: retention rule "telemetry/" matches no data file, so it expires nothing; a rule names a table path under the data prefix (tables here include db/cpu/, db/mem/, other/disk/)';
    const run = await retention('db/cpu/=30,telemetry/=7', '--dry-run');
    expect(run.code).toBe(0);
    expect(run.text).toContain(warning);
    expect(run.text).not.toContain('rule "db/cpu/" matches no');
    const json = await retention('telemetry/=7', '--dry-run', '--json');
    expect((JSON.parse(json.text) as { unmatchedRules: string[] }).unmatchedRules).toEqual(['telemetry/']);
    // The applied run (the plan step, as deployed) warns the same way, and still expires what matches.
    const applied = await retention('db/cpu/=30,telemetry/=7');
    expect(applied.code, applied.err.join('\n')).toBe(0);
    expect(applied.err).toContain(warning);
    expect(applied.text).toMatch(/summary: 2 day\(s\) expired/);
  }, 120_000);

  it('plan --tier retention lists the days it would expire and changes nothing', async () => {
    const dir = await lake('plan');
    const before = await listAll(dir);
    const plan = await cli('plan', '--tier', 'retention', '--store', dir, '--retention', RULES, '--now', NOW);
    expect(plan.code).toBe(0);
    expect(plan.text).toMatch(/db\/cpu\/2025\/01\/28\/\s+expire\s+3/);
    expect(plan.text).toContain('rule "db/cpu/": 30 day(s) + 24 h buffer');
    const off = await cli('plan', '--tier', 'retention', '--store', dir);
    expect(off.text).toContain('nothing to do: no retention rule');
    expect(await listAll(dir)).toEqual(before);
  });

  it('run --tier retention runs the synthesized state machine locally and removes exactly the expired files', async () => {
    const dir = await lake('run');
    const run = await cli(
      'run',
      '--tier',
      'retention',
      '--store',
      dir,
      '--retention',
      RULES,
      '--now',
      NOW,
      '--concurrency',
      '1',
    );
    expect(run.code, `${run.text}\n${run.err.join('\n')}`).toBe(0);
    expect(run.text).toMatch(
      /summary: 3 day\(s\) expired \(5 files, .* removed\), 0 skipped, 0 superseded, 0 failed/,
    );
    // Each day's row says what happened to it: expired, not compacted.
    expect(run.text).toMatch(/db\/cpu\/2025\/01\/28\/\s+expired\s+3/);
    expect(run.text).not.toContain('compacted');
    expect(await dataKeys(dir)).toEqual([...KEPT].sort());
    expect(await lakeIds(engine, dir)).toEqual(keptIds);
    expect(await stateKeys(dir)).toEqual([]);
  }, 120_000);
});
