/**
 * The `compactor` CLI in-process (runCli), over real local-folder lakes and a real DuckDB:
 * usage errors, plan, run (hourly then daily), status, verify (clean and the seed bug),
 * visible (paths and a DuckDB view), recover after a crashed cycle, and the demo lake generator.
 * Row counts are checked exactly, by id.
 */

import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cp, mkdtemp, readdir, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  type DuckDbEngine,
  parquetPath,
  quoteString,
} from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { LocalOwners, newLocalExecutionId } from '../../functions/adapters/local-owner.ts';
import { LocalFolderStore } from '../../functions/adapters/local-store/local-store.ts';
import { readIds, writeSampleParquet } from '../../functions/adapters/sample-data.ts';
import { generateDemoLake } from '../../functions/cli/demo-lake.ts';
import { commandsTaking, OPTIONS, type OptionName } from '../../functions/cli/options.ts';
import { parseConfig } from '../../functions/core/config.ts';
import { runCycle } from '../../functions/core/cycle.ts';
import { systemClock } from '../../functions/core/engine.ts';
import { recordFailure } from '../../functions/core/failures.ts';
import { Layout } from '../../functions/core/layout.ts';
import { manifestKey, manifestsRoot, stagingRoot } from '../../functions/core/manifest/manifest.ts';
import {
  arcRawKey,
  cli,
  dataKeys,
  hourFolderOf,
  idMismatch,
  lakeIds,
  listAll,
  stateKeys,
} from '../support/cli-lake.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { CrashedError, FaultStore } from '../support/fault-store.ts';
import { type LakeFile, writeLake } from '../support/lake-harness.ts';

const HOUR = 3_600_000;
const ARC = Layout.fromName('arc');
const MAIN = fileURLToPath(new URL('../../functions/cli/main.ts', import.meta.url));

let engine: DuckDbEngine;
let root: string;
let workDir: string;
/** An old lake (January 2025): every folder is past minAge, and hours are past the straggler age. */
let oldLake: { dir: string; total: number };

/** 8 raw files in 4 hours of two days; day 15 has 3 hours, day 14 one. */
const OLD_FILES: readonly LakeFile[] = [
  { key: 'db/cpu/2025/01/14/05/cpu_20250114_050500_1.parquet', rows: 25 },
  { key: 'db/cpu/2025/01/14/05/cpu_20250114_053000_2.parquet', rows: 25 },
  { key: 'db/cpu/2025/01/15/10/cpu_20250115_100500_3.parquet', rows: 40 },
  { key: 'db/cpu/2025/01/15/10/cpu_20250115_101500_4.parquet', rows: 40 },
  { key: 'db/cpu/2025/01/15/10/cpu_20250115_103000_5.parquet', rows: 40 },
  { key: 'db/cpu/2025/01/15/11/cpu_20250115_110500_6.parquet', rows: 30 },
  { key: 'db/cpu/2025/01/15/11/cpu_20250115_113000_7.parquet', rows: 30 },
  { key: 'db/cpu/2025/01/15/12/cpu_20250115_120500_8.parquet', rows: 20 },
];

async function freshDir(name: string): Promise<string> {
  return mkdtemp(join(root, `${name}-`));
}

async function copyOldLake(name: string): Promise<string> {
  const dir = await freshDir(name);
  await cp(oldLake.dir, dir, { recursive: true });
  return dir;
}

/** Keys with their ETags: equal snapshots mean nothing was written, replaced or deleted. */
async function snapshot(dir: string): Promise<string[]> {
  const out: string[] = [];
  for await (const o of new LocalFolderStore(dir).list('')) out.push(`${o.key} ${o.etag} ${o.size}`);
  return out.sort();
}

async function expectExactIds(dir: string, total: number): Promise<void> {
  const ids = await lakeIds(engine, dir);
  expect(idMismatch(ids, total), 'every row id exactly once').toBeUndefined();
  expect(ids.length).toBe(total);
}

/** The one-line error contract for usage problems. */
function expectUsageError(result: Awaited<ReturnType<typeof cli>>, ...mentions: string[]): void {
  expect(result.code).toBe(2);
  expect(result.out).toEqual([]);
  expect(result.err).toHaveLength(1);
  const line = result.err[0] ?? '';
  expect(line).not.toContain('\n');
  for (const m of mentions) expect(line).toContain(m);
}

useEngineAndDir('cli-test-', async (e, folder) => {
  engine = e;
  root = folder;
  workDir = join(root, 'work');
  const dir = await freshDir('old-template');
  oldLake = { dir, total: await writeLake(engine, dir, OLD_FILES) };
});

describe('usage', () => {
  it('--help marks each option one command takes with that command, from the commands’ own tables', async () => {
    const help = (await cli('--help')).text;
    for (const name of Object.keys(OPTIONS) as OptionName[]) {
      const commands = commandsTaking(name);
      if (name === 'help' || commands.length !== 1) continue;
      // The option's block: its line, then the lines indented under it.
      const block = help.split('\n').findIndex((l) => new RegExp(`^ {2}--${name}(\\s|$)`).test(l));
      expect(block, `--${name} is listed`).toBeGreaterThan(0);
      const lines = help
        .split('\n')
        .slice(block, block + 4)
        .join('\n');
      expect(lines, `--${name}`).toContain(`${commands[0]} only`);
    }
    expect(help).toMatch(/--time-column NAME[^\n]*\n[^\n]*run only/);
  });

  it('--help exits 0 and lists every command', async () => {
    const result = await cli('--help');
    expect(result.code).toBe(0);
    expect(result.err).toEqual([]);
    // Every command the CLI dispatches, as its unknown-command error names them.
    const unknown = await cli('no-such-command');
    const listed = /Commands: ([a-z, -]+)\./.exec(unknown.err[0] ?? '')?.[1]?.split(', ') ?? [];
    expect(listed).toEqual(
      expect.arrayContaining(['demo', 'run', 'plan', 'recover', 'status', 'verify', 'visible']),
    );
    for (const command of listed) {
      expect(result.text, `--help lists ${command}`).toMatch(new RegExp(`^ {2}${command}\\b`, 'm'));
    }
    expect((await cli('-h')).code).toBe(0);
    expect((await cli('help')).code).toBe(0);
  });

  it('no command prints the usage and exits 2', async () => {
    const result = await cli();
    expect(result.code).toBe(2);
    expect(result.text).toContain('Usage: compactor <command>');
  });

  it('rejects an unknown command, an unknown option, a missing --store, a bad --tier and a bad --now', async () => {
    const dir = oldLake.dir;
    expectUsageError(await cli('compact', '--store', dir), 'unknown command', '"compact"');
    expectUsageError(await cli('run', '--tier', 'hourly', '--store', dir, '--bogus'), '--bogus');
    expectUsageError(await cli('status'), '--store');
    expectUsageError(await cli('run', '--tier', 'weekly', '--store', dir), '--tier', 'weekly');
    expectUsageError(await cli('run', '--store', dir), '--tier');
    expectUsageError(await cli('plan', '--tier', 'hourly', '--store', dir, '--now', 'yesterday'), '--now');
    expectUsageError(
      await cli('plan', '--tier', 'hourly', '--store', dir, '--min-files', 'ten'),
      '--min-files',
    );
    expectUsageError(await cli('plan', '--store', dir, '--min-files', '3'), '--tier');
    expectUsageError(await cli('status', '--store', dir, 'extra'), '"extra"');
    expectUsageError(await cli('status', '--store', dir, '--endpoint', 'http://127.0.0.1:1'), '--endpoint');
    // None of that touched the lake.
    expect(await stateKeys(dir)).toEqual([]);
  });

  it('an AWS command without credentials says how to provide them (the real SDK, nothing to find)', () => {
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      HOME: root,
      // The chain's files and instance metadata, pointed at nothing.
      AWS_SHARED_CREDENTIALS_FILE: join(root, 'no-credentials'),
      AWS_CONFIG_FILE: join(root, 'no-config'),
      AWS_EC2_METADATA_DISABLED: 'true',
    };
    const machine = 'arn:aws:states:eu-west-1:123456789012:stateMachine:Compaction';
    const run = spawnSync(process.execPath, [MAIN, 'start', '--tier', 'hourly', '--state-machine', machine], {
      env,
      encoding: 'utf8',
    });
    expect(run.status).toBe(2);
    const lines = run.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('CredentialsProviderError');
    expect(lines[0]).toContain('run `aws configure` or `aws sso login`, or set AWS_PROFILE');
  });

  it('names the option and the fix for a bad engine or run option, before anything is written', async () => {
    const dir = oldLake.dir;
    const before = await listAll(dir);
    const run = (...extra: string[]) =>
      cli('run', '--tier', 'hourly', '--store', dir, '--work-dir', workDir, ...extra);
    // DuckDB's own parser judges the memory limit; its words reach the user with the option's name.
    expectUsageError(
      await run('--memory-limit', '1XB'),
      '--memory-limit',
      'DuckDB refuses memory limit "1XB"',
      'KiB',
    );
    expectUsageError(await run('--threads', '0'), '--threads 0: use a whole number from 1');
    expectUsageError(await run('--concurrency', '0'), '--concurrency 0: use a whole number from 1');
    const file = join(root, 'not-a-folder');
    await writeFile(file, 'x');
    expectUsageError(
      await cli('run', '--tier', 'hourly', '--store', dir, '--work-dir', file),
      `--work-dir ${file} is not a folder`,
    );
    expect(await listAll(dir)).toEqual(before);
  });
});

describe('plan', () => {
  it('lists what it would compact and why it skips the rest, and changes nothing', async () => {
    // Recent hours, so the straggler flush does not apply and minFiles decides.
    const hour = Math.floor(Date.now() / HOUR) * HOUR;
    const due = hour - 3 * HOUR;
    const few = hour - 2 * HOUR;
    const current = hour;
    const dir = await freshDir('plan');
    const total = await writeLake(engine, dir, [
      { key: arcRawKey(due, 1), rows: 10 },
      { key: arcRawKey(due, 2), rows: 10 },
      { key: arcRawKey(due, 3), rows: 10 },
      { key: arcRawKey(few, 4), rows: 10 },
      { key: arcRawKey(current, 5), rows: 10 },
      { key: arcRawKey(current, 6), rows: 10 },
    ]);
    const before = await snapshot(dir);
    const args = ['plan', '--tier', 'hourly', '--store', dir, '--quiet', '0', '--min-files', '2'];
    const result = await cli(...args);
    expect(result.code, result.err.join('\n')).toBe(0);
    const rows = result.text.split('\n');
    const rowOf = (key: string) => rows.find((r) => r.startsWith(hourFolderOf(key)));
    expect(rowOf(arcRawKey(due, 1))).toMatch(/\bcompact\s+3\s+3\b/);
    expect(rowOf(arcRawKey(few, 4))).toMatch(/\bskip\b.*1 file\(s\), fewer than minFiles 2/);
    expect(rowOf(arcRawKey(current, 5))).toMatch(/\bskip\b.*period not older than minAge \(3600s\)/);
    // A skipped folder takes no input, and shows the files it holds, not "0 0".
    expect(rowOf(arcRawKey(current, 5))).toMatch(/\bskip\s+2\s+period not older/);
    expect(result.text).toMatch(/^hourly plan at .* \(dry run\): 6 objects listed$/m);

    const json = await cli(...args, '--json');
    expect(json.code).toBe(0);
    const plan = JSON.parse(json.text) as {
      jobs: { partition: string; inputs: unknown[] }[];
      skipped: { partition: string; reason: string }[];
    };
    expect(plan.jobs.map((j) => [j.partition, j.inputs.length])).toEqual([
      [hourFolderOf(arcRawKey(due, 1)), 3],
    ]);
    expect(plan.skipped.map((s) => s.partition).sort()).toEqual(
      [hourFolderOf(arcRawKey(few, 4)), hourFolderOf(arcRawKey(current, 5))].sort(),
    );

    // Without --quiet 0 the files are too fresh (default 300 s): every folder is skipped for that.
    const quiet = await cli('plan', '--tier', 'hourly', '--store', dir, '--min-files', '2');
    expect(quiet.code).toBe(0);
    expect(quiet.text).not.toMatch(/\bcompact\b\s+\d/);
    expect(quiet.text).toContain('a file was written less than quietSeconds (300s) ago');

    // A dry run: nothing written, replaced or deleted, not even state.
    expect(await snapshot(dir)).toEqual(before);
    await expectExactIds(dir, total);
  });
});

describe('run, status, verify, visible on a compacted lake', () => {
  let dir: string;

  beforeAll(async () => {
    dir = await copyOldLake('run');
  });

  it('status on a lake with no manifests exits 0 and shows 0', async () => {
    const result = await cli('status', '--store', dir);
    expect(result.code).toBe(0);
    expect(result.text).toMatch(/^live manifests: 0$/m);
    expect(result.text).toMatch(/^quarantined: 0$/m);
  });

  it('run --tier hourly then --tier daily compact the lake with exact rows', async () => {
    expect(await dataKeys(dir)).toHaveLength(8);
    const ownWorkDir = join(root, 'work-run');
    const hourly = await cli(
      'run',
      '--tier',
      'hourly',
      '--store',
      dir,
      '--quiet',
      '0',
      '--work-dir',
      ownWorkDir,
    );
    expect(hourly.code, hourly.err.join('\n')).toBe(0);
    // No scratch left behind in the work folder (DuckDB removes the spill folders it made); the
    // synthesized definition is kept there, one entry under its key, with the markers of the
    // definitions the ASL validator accepted (the root and the Map's child).
    expect(await readdir(ownWorkDir)).toEqual(['definitions']);
    expect(await readdir(join(ownWorkDir, 'definitions'))).toEqual([
      expect.stringMatching(/^[0-9a-f]{32}\.json$/),
      'validated',
    ]);
    expect(await readdir(join(ownWorkDir, 'definitions', 'validated'))).toEqual([
      expect.stringMatching(/^[0-9a-f]{32}$/),
      expect.stringMatching(/^[0-9a-f]{32}$/),
    ]);
    // Straggler flush: the days are old, so even the one-file hour is compacted (minFiles 10).
    expect(hourly.text).toMatch(
      /^summary: 4 compacted \(8 files -> 4\), 0 skipped, 0 superseded, 0 failed$/m,
    );
    expect(hourly.text).toMatch(
      /^partition\s+result\s+inputs\s+in bytes\s+outputs\s+out bytes\s+rows\s+note$/m,
    );
    expect(hourly.text).toMatch(/^db\/cpu\/2025\/01\/15\/10\/\s+compacted\s+3\s.*\s1\s.*\s120\b/m);
    expect(hourly.text).toMatch(/^recovery: 0 manifest\(s\) examined/m);
    // One progress line per partition on err.
    expect(hourly.err.filter((l) => /^\[\d\/4\] db\/cpu\/.* compacted/.test(l))).toHaveLength(4);
    let keys = await dataKeys(dir);
    expect(keys).toHaveLength(4);
    expect(keys.every((k) => k.endsWith('_compacted.parquet'))).toBe(true);
    await expectExactIds(dir, oldLake.total);

    const daily = await cli(
      'run',
      '--tier',
      'daily',
      '--store',
      dir,
      '--quiet',
      '0',
      '--json',
      '--work-dir',
      workDir,
    );
    expect(daily.code, daily.err.join('\n')).toBe(0);
    expect(daily.out).toHaveLength(1);
    const report = JSON.parse(daily.text) as {
      tier: string;
      plan: { jobs: number };
      partitions: { partition: string; inputs: number; result: string }[];
    };
    expect(report.tier).toBe('daily');
    // Day 15 has three hourly outputs; day 14 only one, which the daily tier leaves alone.
    expect(report.partitions.map((p) => [p.partition, p.inputs, p.result])).toEqual([
      ['db/cpu/2025/01/15/', 3, 'compacted'],
    ]);
    keys = await dataKeys(dir);
    expect(keys).toHaveLength(2);
    expect(
      keys.filter((k) => k.startsWith('db/cpu/2025/01/15/') && k.endsWith('_daily.parquet')),
    ).toHaveLength(1);
    expect(
      keys.filter((k) => k.startsWith('db/cpu/2025/01/14/05/') && k.endsWith('_compacted.parquet')),
    ).toHaveLength(1);
    await expectExactIds(dir, oldLake.total);
    expect(await stateKeys(dir)).toEqual([]);

    // A second run finds nothing to do and changes nothing (I5).
    const before = await snapshot(dir);
    const again = await cli('run', '--tier', 'daily', '--store', dir, '--quiet', '0', '--work-dir', workDir);
    expect(again.code).toBe(0);
    // The compacted day is counted as settled; the lone hour waits for minFiles, and says so.
    expect(again.text).toMatch(/0 job\(s\) planned, 1 skipped, 1 already one daily file/);
    expect(again.text).toMatch(
      /db\/cpu\/2025\/01\/14\/\s+skipped\s+not planned: 1 file\(s\), fewer than minFiles 2 \(1 candidate file\(s\)\)/,
    );
    expect(again.text).toMatch(
      /^summary: 0 compacted \(0 files -> 0\), 1 skipped \(1 by the plan\), 0 superseded, 0 failed$/m,
    );
    expect(await snapshot(dir)).toEqual(before);
  });

  it('status still shows 0 after the runs', async () => {
    const result = await cli('status', '--store', dir, '--json');
    expect(result.code).toBe(0);
    expect(JSON.parse(result.text)).toMatchObject({
      live: [],
      quarantined: [],
      failing: [],
      backlog: {
        hourly: { eligiblePartitions: 0, behind: false },
        daily: { eligiblePartitions: 0, behind: false },
      },
    });
  });

  it('verify exits 0 on the compacted lake and visible rows equal the total', async () => {
    const result = await cli('verify', '--store', dir);
    expect(result.code, result.err.join('\n')).toBe(0);
    expect(result.text).not.toContain('SUSPECT');
    const total = new RegExp(
      `^total: ${oldLake.total.toLocaleString('en-US')} visible rows in 2 files; 0 live and 0 quarantined manifest\\(s\\), 0 quarantined input\\(s\\); 0 partition\\(s\\) need attention$`,
      'm',
    );
    expect(result.text).toMatch(total);

    const json = JSON.parse((await cli('verify', '--store', dir, '--json')).text) as {
      partitions: { partition: string; rows: number; visibleRows: number }[];
      problems: number;
    };
    expect(json.problems).toBe(0);
    expect(json.partitions.map((p) => [p.partition, p.rows, p.visibleRows]).sort()).toEqual([
      ['db/cpu/2025/01/14/', 50, 50],
      ['db/cpu/2025/01/15/', 200, 200],
    ]);
  });

  it('visible lists the data files, and visible --sql is a DuckDB view reading exactly the total', async () => {
    const paths = await cli('visible', '--store', dir);
    expect(paths.code).toBe(0);
    expect(paths.text.split('\n').sort()).toEqual((await dataKeys(dir)).map((k) => join(dir, k)).sort());

    const sql = await cli('visible', '--sql', '--store', dir);
    expect(sql.code).toBe(0);
    expect(sql.text).toMatch(/^CREATE OR REPLACE VIEW lake AS/);
    await engine.query(sql.text);
    const [row] = await engine.query(
      'SELECT count(*)::BIGINT AS n, count(DISTINCT id)::BIGINT AS d, min(id) AS lo, max(id) AS hi FROM lake',
    );
    expect(row).toEqual({
      n: BigInt(oldLake.total),
      d: BigInt(oldLake.total),
      lo: 1n,
      hi: BigInt(oldLake.total),
    });
  });

  it('visible --sql on an empty lake is an empty view that still executes', async () => {
    const empty = await freshDir('empty');
    const sql = await cli('visible', '--sql', '--store', empty);
    expect(sql.code).toBe(0);
    await engine.query(sql.text);
    const [row] = await engine.query('SELECT count(*)::BIGINT AS n FROM lake');
    expect(row).toEqual({ n: 0n });
  });
});

describe('the opt-in monthly tier', () => {
  it('plan --tier monthly without --monthly exits 2 naming the setting', async () => {
    const dir = await copyOldLake('monthly-off');
    const result = await cli('plan', '--tier', 'monthly', '--store', dir);
    expect(result.code).toBe(2);
    expect(result.err.join('\n')).toMatch(/the monthly tier is off: set tiers\.monthly\.enabled/);
    expect(result.err.join('\n')).toContain('a local command also takes --monthly');
  });

  it('run hourly, daily and monthly with --monthly leave one monthly file with exact rows', async () => {
    const dir = await copyOldLake('monthly');
    const run = (tier: string) =>
      cli('run', '--tier', tier, '--monthly', '--store', dir, '--quiet', '0', '--work-dir', workDir);
    for (const tier of ['hourly', 'daily', 'monthly']) {
      const result = await run(tier);
      expect(result.code, `${tier}: ${result.err.join('\n')}`).toBe(0);
    }
    // Day 14's lone hourly output was flushed by the daily tier, so January reached one level.
    expect(await dataKeys(dir)).toEqual([
      expect.stringMatching(/^db\/cpu\/2025\/01\/cpu_202501_\d{8}T\d{6}Z-[0-9a-f]+_000_monthly\.parquet$/),
    ]);
    await expectExactIds(dir, oldLake.total);
    expect(await stateKeys(dir)).toEqual([]);
  });
});

describe('verify on the seed bug', () => {
  it('flags an hour whose _compacted.parquet sits next to the older raw files it was made from', async () => {
    const dir = await freshDir('seed-bug');
    const raw: LakeFile[] = [
      { key: 'db/cpu/2025/01/15/10/cpu_20250115_100500_1.parquet', rows: 30 },
      { key: 'db/cpu/2025/01/15/10/cpu_20250115_101500_2.parquet', rows: 30 },
      { key: 'db/cpu/2025/01/15/10/cpu_20250115_103000_3.parquet', rows: 30 },
    ];
    // Another day, raw files only: it must not be flagged.
    const clean: LakeFile[] = [
      { key: 'db/cpu/2025/01/16/10/cpu_20250116_100500_4.parquet', rows: 10 },
      { key: 'db/cpu/2025/01/16/10/cpu_20250116_101500_5.parquet', rows: 10 },
    ];
    const total = await writeLake(engine, dir, [...raw, ...clean]);
    // What the seed's compactor left: the output uploaded, the inputs' delete never happened.
    const scratch = join(root, `seed-${randomBytes(4).toString('hex')}.parquet`);
    await engine.query(
      `COPY (SELECT * FROM read_parquet([${raw.map((f) => parquetPath(join(dir, f.key))).join(', ')}]) ORDER BY time) TO ${parquetPath(scratch)} (FORMAT parquet)`,
    );
    await sleep(20);
    const outputKey = 'db/cpu/2025/01/15/10/cpu_20250115_100000_compacted.parquet';
    await new LocalFolderStore(dir).put(outputKey, { file: scratch });
    const rawMtime = (await stat(join(dir, raw[2]?.key ?? ''))).mtimeMs;
    expect((await stat(join(dir, outputKey))).mtimeMs).toBeGreaterThan(rawMtime);

    const result = await cli('verify', '--store', dir);
    expect(result.code).toBe(1);
    const rows = result.text.split('\n');
    const day15 = rows.find((r) => r.startsWith('db/cpu/2025/01/15/'));
    const day16 = rows.find((r) => r.startsWith('db/cpu/2025/01/16/'));
    expect(day15).toContain('SUSPECT');
    // Four files, 90 rows counted twice: the plain glob and the view both see the duplicate.
    expect(day15).toMatch(/^db\/cpu\/2025\/01\/15\/\s+4\s+180\s+4\s+180\s/);
    expect(day16).toBeDefined();
    expect(day16).not.toContain('SUSPECT');
    expect(result.text).toMatch(/1 partition\(s\) need attention$/m);
    expect(total).toBe(110);
    const json = JSON.parse((await cli('verify', '--store', dir, '--json')).text) as { problems: number };
    expect(json.problems).toBe(1);
  });
});

describe('status with failing partitions', () => {
  it('says a partition is held back only once the planner holds it back, and when it tries again', async () => {
    const dir = await copyOldLake('failing');
    const config = parseConfig({});
    const store = new LocalFolderStore(dir);
    const partition = 'db/cpu/2025/01/15/10/';
    const fail = () =>
      recordFailure({ store, config, clock: systemClock }, 'hourly', partition, 'SchemaConflictError: x');
    await fail();
    const once = await cli('status', '--store', dir);
    expect(once.text).toContain('failing partitions: 1 (0 held back: after 3 failures in a row');
    expect(once.text).toMatch(/db\/cpu\/2025\/01\/15\/10\/\s+hourly\s+1\s+next run/);
    await fail();
    const record = await fail();
    const thrice = await cli('status', '--store', dir);
    expect(thrice.text).toContain('failing partitions: 1 (1 held back');
    expect(thrice.text).toContain(record.nextAttemptAt);
  });
});

describe('status and recover with a quarantine', () => {
  it('recover quarantines an unreadable manifest; status then exits 1 and shows the reason', async () => {
    const dir = await copyOldLake('quarantine');
    const store = new LocalFolderStore(dir);
    const key = manifestKey(ARC, 'hourly', 'db/cpu/2025/01/15/10/');
    await store.put(key, Buffer.from('{ this is not a manifest'));

    const status = await cli('status', '--store', dir);
    expect(status.code).toBe(0);
    expect(status.text).toMatch(/^live manifests: 1$/m);
    expect(status.text).toContain('INVALID');

    const recovered = await cli('recover', '--store', dir);
    expect(recovered.code).toBe(1);
    expect(recovered.text).toMatch(/quarantined/);
    expect(recovered.err.some((l) => l.startsWith(`QUARANTINED ${key}:`))).toBe(true);
    const reason = (recovered.err.find((l) => l.startsWith('QUARANTINED')) ?? '').slice(
      `QUARANTINED ${key}: `.length,
    );
    expect(reason.length).toBeGreaterThan(0);

    const after = await cli('status', '--store', dir);
    expect(after.code).toBe(1);
    expect(after.text).toMatch(/^live manifests: 0$/m);
    expect(after.text).toMatch(/^quarantined: 1$/m);
    expect(after.text).toContain(reason);
    const json = JSON.parse((await cli('status', '--store', dir, '--json')).text) as {
      quarantined: { key: string; reason: string }[];
    };
    expect(json.quarantined).toHaveLength(1);
    expect(json.quarantined[0]?.reason).toBe(reason);
    // Nothing was deleted.
    await expectExactIds(dir, oldLake.total);
  });
});

describe('run reports quarantines', () => {
  it('exits 1 when its recovery quarantines an unreadable manifest, holds that partition, and compacts the rest', async () => {
    const dir = await copyOldLake('run-quarantine');
    const key = manifestKey(ARC, 'hourly', 'db/cpu/2025/01/15/10/');
    await new LocalFolderStore(dir).put(key, Buffer.from('not json'));
    const result = await cli(
      'run',
      '--tier',
      'hourly',
      '--store',
      dir,
      '--quiet',
      '0',
      '--work-dir',
      workDir,
    );
    expect(result.code, result.text).toBe(1);
    expect(result.err.some((l) => l.startsWith(`QUARANTINED ${key}:`))).toBe(true);
    // Nothing the unreadable manifest may cover is merged again until an operator resolves it.
    expect(result.text).toMatch(
      /^summary: 3 compacted \(5 files -> 3\), 1 skipped \(1 by the plan\), 0 superseded, 0 failed$/m,
    );
    // The held partition is a row of run's table with the plan's reason, as in plan's.
    expect(result.text).toMatch(
      /db\/cpu\/2025\/01\/15\/10\/\s+skipped\s+not planned: held by a quarantined manifest.* \(3 candidate file\(s\)\)/,
    );
    const plan = await cli('plan', '--tier', 'hourly', '--store', dir, '--quiet', '0');
    expect(plan.text).toMatch(/db\/cpu\/2025\/01\/15\/10\/\s+skip.*held by a quarantined manifest/);
    expect((await cli('status', '--store', dir)).code).toBe(1);
    await expectExactIds(dir, oldLake.total);
  });

  it('exits 1 when it quarantines a corrupt input, which stays in place while the others are compacted', async () => {
    const dir = await copyOldLake('run-corrupt');
    const corrupt = 'db/cpu/2025/01/15/10/cpu_20250115_104500_9.parquet';
    await new LocalFolderStore(dir).put(corrupt, Buffer.from('PAR1 this is not parquet PAR1'));
    const result = await cli(
      'run',
      '--tier',
      'hourly',
      '--store',
      dir,
      '--quiet',
      '0',
      '--work-dir',
      workDir,
    );
    expect(result.code, result.text).toBe(1);
    expect(
      result.err.some((l) => l.startsWith(`QUARANTINED input ${corrupt} (partition db/cpu/2025/01/15/10/)`)),
    ).toBe(true);
    expect(result.text).toMatch(
      /^summary: 4 compacted \(8 files -> 4\), 0 skipped, 0 superseded, 0 failed$/m,
    );
    const keys = await dataKeys(dir);
    expect(keys).toContain(corrupt);
    const good = keys.filter((k) => k !== corrupt);
    expect(good).toHaveLength(4);
    expect(good.every((k) => k.endsWith('_compacted.parquet'))).toBe(true);
    const ids = await readIds(
      engine,
      good.map((k) => join(dir, k)),
    );
    expect(idMismatch(ids, oldLake.total)).toBeUndefined();
    const status = await cli('status', '--store', dir);
    expect(status.code).toBe(1);
    expect(status.text).toContain(`_compaction/quarantine/inputs/${corrupt}.json`);
    // verify counts it as unreadable.
    const verify = await cli('verify', '--store', dir);
    expect(verify.code).toBe(1);
    expect(verify.text).toContain('1 unreadable file(s)');
  });
});

describe('sort keys the data lacks', () => {
  it('compacts, and says which sort key no input has instead of ignoring it silently', async () => {
    const dir = await copyOldLake('sort-keys-missing');
    const args = ['--tier', 'hourly', '--store', dir, '--quiet', '0', '--work-dir', workDir];
    const result = await cli('run', ...args, '--sort-keys', 'nosuch,host');
    expect(result.code, result.text).toBe(0);
    const lines = result.text.split('\n').filter((l) => l.startsWith('db/cpu/'));
    expect(lines).toHaveLength(4);
    for (const line of lines)
      expect(line).toMatch(/compacted.*not sorted by nosuch: no input has it \(sortKeys\)$/);
    await expectExactIds(dir, oldLake.total);
  });
});

describe('release: the way back out of quarantine', () => {
  const corrupt = 'db/cpu/2025/01/15/10/cpu_20250115_104500_9.parquet';
  const record = `_compaction/quarantine/inputs/${corrupt}.json`;

  async function quarantinedLake(name: string): Promise<string> {
    const dir = await copyOldLake(name);
    await new LocalFolderStore(dir).put(corrupt, Buffer.from('PAR1 this is not parquet PAR1'));
    const run = await cli('run', '--tier', 'hourly', '--store', dir, '--quiet', '0', '--work-dir', workDir);
    expect(run.code, run.text).toBe(1);
    expect(await dataKeys(dir)).toContain(corrupt);
    return dir;
  }

  it('re-admits a replaced input: the dry run lists it and changes nothing, the release lets the next run compact it', async () => {
    const dir = await quarantinedLake('release-replaced');
    // The cause fixed: the writer's file re-sent whole.
    const local = join(root, `${randomBytes(6).toString('hex')}.parquet`);
    await writeSampleParquet(engine, local, {
      rows: 15,
      firstId: oldLake.total + 1,
      startTimeMs: Date.UTC(2025, 0, 15, 10, 45),
      spanMs: 60_000,
    });
    await new LocalFolderStore(dir).put(corrupt, { file: local });

    const before = await snapshot(dir);
    const dry = await cli('release', '--partition', 'db/cpu/2025/01/15/10', '--dry-run', '--store', dir);
    expect(dry.code, dry.err.join('\n')).toBe(0);
    expect(dry.text).toContain(record);
    expect(dry.text).toMatch(
      /dry run: 1 input\(s\) would be re-admitted, 0 record\(s\) pruned; nothing changed/,
    );
    expect(await snapshot(dir)).toEqual(before);
    // Another partition's release touches nothing of this one.
    const other = await cli('release', '--partition', 'db/cpu/2025/01/15/11/', '--store', dir);
    expect(other.text).toContain('no quarantined input matches');
    expect(await snapshot(dir)).toEqual(before);

    const released = await cli('release', '--partition', 'db/cpu/2025/01/15/10', '--store', dir);
    expect(released.code, released.err.join('\n')).toBe(0);
    expect(released.text).toMatch(/^1 input\(s\) re-admitted: the next run checks and compacts them/m);
    const run = await cli('run', '--tier', 'hourly', '--store', dir, '--quiet', '0', '--work-dir', workDir);
    expect(run.code, run.text).toBe(0);
    expect(run.text).toMatch(/^summary: 1 compacted \(1 files -> 1\)/m);
    expect(await dataKeys(dir)).not.toContain(corrupt);
    await expectExactIds(dir, oldLake.total + 15);
    expect((await cli('status', '--store', dir)).code).toBe(0);
  });

  it('a record whose input is gone is pruned by the next run, and status is clean again', async () => {
    const dir = await quarantinedLake('release-gone');
    await new LocalFolderStore(dir).deleteMany([{ key: corrupt }]);
    expect((await cli('status', '--store', dir)).code).toBe(1);
    const run = await cli('run', '--tier', 'hourly', '--store', dir, '--quiet', '0', '--work-dir', workDir);
    expect(run.code, run.text).toBe(0);
    expect(run.text).toContain('1 quarantine record(s) of objects that are gone pruned');
    const status = await cli('status', '--store', dir);
    expect(status.code, status.text).toBe(0);
    expect(status.text).not.toContain(record);
  });

  it('needs --partition or --all, and says where to find them', async () => {
    const dir = await copyOldLake('release-usage');
    const none = await cli('release', '--store', dir);
    expect(none.code).toBe(2);
    expect(none.err.join('\n')).toContain('release needs --partition P');
    const both = await cli('release', '--all', '--partition', 'db/', '--store', dir);
    expect(both.code).toBe(2);
    expect(both.err.join('\n')).toContain('not both');
  });
});

describe('read-only commands while a run is in progress', () => {
  it('verify never reports files the run deleted as unreadable, and its visible rows stay exact', async () => {
    const files: LakeFile[] = [];
    for (let h = 0; h < 12; h++) {
      const hh = String(h).padStart(2, '0');
      for (let f = 0; f < 4; f++) {
        files.push({
          key: `db/mem/2025/01/16/${hh}/mem_20250116_${hh}${f}000_${h * 4 + f}.parquet`,
          rows: 25,
        });
      }
    }
    const template = await freshDir('race-template');
    const total = await writeLake(engine, template, files);
    const seen: Record<string, number[]> = { status: [], verify: [], visible: [] };
    let verifiedDuringRun = 0;
    for (let round = 0; round < 2; round++) {
      const dir = await freshDir(`race-${round}`);
      await cp(template, dir, { recursive: true });
      let done = false;
      const run = cli('run', '--tier', 'hourly', '--store', dir, '--quiet', '0', '--min-files', '2').finally(
        () => {
          done = true;
        },
      );
      while (!done) {
        const status = await cli('status', '--store', dir);
        seen.status?.push(status.code);
        expect(status.code, status.err.join('\n')).toBe(0);
        const verify = await cli('verify', '--store', dir);
        seen.verify?.push(verify.code);
        expect(verify.text).not.toContain('unreadable');
        expect(verify.code, `${verify.err.join('\n')}\n${verify.text}`).not.toBe(1);
        if (verify.code === 0) {
          if (!done) verifiedDuringRun++;
          expect(verify.text).toContain(`total: ${total.toLocaleString('en-US')} visible rows`);
        } else {
          expect(verify.err.join('\n')).toContain('the lake changed while it was read');
        }
        const visible = await cli('visible', '--store', dir);
        seen.visible?.push(visible.code);
        expect(visible.code).toBe(0);
      }
      expect((await run).code).toBe(0);
      await expectExactIds(dir, total);
    }
    console.log(
      `during runs: ${JSON.stringify(seen)}; ${verifiedDuringRun} verify passes while a run was in flight`,
    );
    expect(seen.verify?.length).toBeGreaterThan(0);
  });
});

describe('recover after a crashed cycle', () => {
  it.each([
    { op: 'copy', action: 'rolled-forward' },
    { op: 'deleteMany', action: 'cleared' },
  ])('resolves the manifest left by a run that died at its first $op', async ({ op, action }) => {
    const dir = await copyOldLake(`crash-${op}`);
    const config = parseConfig({ quietSeconds: 0 });
    const owners = new LocalOwners();
    const executionId = newLocalExecutionId();
    const end = owners.begin(executionId);
    const faulty: FaultStore = new FaultStore(new LocalFolderStore(dir), {
      gate: async (call) => {
        if (call.op === op) faulty.crashed = true;
      },
    });
    let counter = 0;
    const report = await runCycle(
      {
        store: faulty,
        config,
        clock: systemClock,
        engine,
        workDir: join(workDir, `crash-${op}`),
        executionId,
        isOwnerAlive: owners.isAlive,
        concurrency: 1,
        randomHex: () => `${randomBytes(4).toString('hex')}${(++counter).toString(16).padStart(4, '0')}`,
        sleep: async () => {},
      },
      'hourly',
    );
    end(); // the owner is gone, as a killed process is
    expect(faulty.crashed).toBe(true);
    expect(report.jobs.length).toBeGreaterThan(0);
    expect(report.jobs.every((j) => j.outcome.status === 'failed')).toBe(true);
    for (const j of report.jobs) {
      if (j.outcome.status === 'failed') expect(j.outcome.error).toBeInstanceOf(CrashedError);
    }
    const manifests = (await stateKeys(dir)).filter((k) => k.startsWith(manifestsRoot(ARC)));
    expect(manifests).toHaveLength(1);

    // Mid-job, the visible view already holds every row exactly once.
    const midVerify = await cli('verify', '--store', dir);
    expect(midVerify.code, midVerify.text).toBe(0);
    expect(midVerify.text).toContain(`total: ${oldLake.total} visible rows`);
    // Published but its inputs not yet deleted: the glob sees more, and the note says why and who
    // owns the job (this process, whose pid cannot tell; a killed one: interrupted-run.test.ts).
    if (op === 'deleteMany') {
      expect(midVerify.text).toContain(
        'a manifest holds the partition: a job in flight, or one a stopped run left); hourly job on ',
      );
      expect(midVerify.text).toContain(`: owner pid ${process.pid} is this process, which cannot tell`);
    }
    const status = await cli('status', '--store', dir);
    expect(status.code).toBe(0);
    expect(status.text).toMatch(/^live manifests: 1$/m);
    expect(status.text).toMatch(op === 'copy' ? /\bstaged\b/ : /\bverified\b/);
    // plan shows the held partition (its files all named by the manifest), and what the next run does.
    const plan = JSON.parse(
      (await cli('plan', '--tier', 'hourly', '--store', dir, '--quiet', '0', '--json')).text,
    ) as {
      skipped: { partition: string; reason: string }[];
    };
    const state = op === 'copy' ? 'staged' : 'verified';
    expect(plan.skipped.map((s) => s.reason)).toContainEqual(
      expect.stringMatching(
        new RegExp(
          `^held by job \\S+ \\(${state} since \\S+, owner ${executionId}, lease until \\S+\\): .*finishes it from ${state}$`,
        ),
      ),
    );

    const recovered = await cli('recover', '--store', dir);
    expect(recovered.code, recovered.err.join('\n')).toBe(0);
    expect(recovered.text).toMatch(/^recovery: 1 manifest\(s\) examined/m);
    expect(recovered.text).toMatch(new RegExp(`\\b${action}\\b`));
    expect(await stateKeys(dir)).toEqual([]);
    await expectExactIds(dir, oldLake.total);

    const run = await cli('run', '--tier', 'hourly', '--store', dir, '--quiet', '0', '--work-dir', workDir);
    expect(run.code, run.err.join('\n')).toBe(0);
    expect(await stateKeys(dir)).toEqual([]);
    const keys = await dataKeys(dir);
    expect(keys).toHaveLength(4);
    expect(keys.every((k) => k.endsWith('_compacted.parquet'))).toBe(true);
    await expectExactIds(dir, oldLake.total);
    expect(await new LocalFolderStore(dir).listIncompleteUploads('')).toEqual([]);
    expect((await listAll(dir)).filter((k) => k.startsWith(stagingRoot(ARC)))).toEqual([]);
  });
});

describe('demo lake', () => {
  it('generateDemoLake writes an Arc lake of unique ids that the CLI compacts exactly', async () => {
    const dir = await freshDir('demo');
    const store = new LocalFolderStore(dir);
    const progress: [number, number][] = [];
    const firstDay = new Date(Date.UTC(2025, 0, 14));
    const summary = await generateDemoLake(
      engine,
      store,
      {
        database: 'telemetry',
        measurements: ['cpu', 'mem'],
        firstDay,
        days: 1,
        filesPerHour: (h) => (h < 3 ? h + 1 : 0),
        rowsPerFile: 20,
        dataPrefix: '',
      },
      (written, total) => progress.push([written, total]),
    );
    expect(summary.files).toBe(12);
    expect(summary.rows).toBe(240);
    expect(progress).toEqual(Array.from({ length: 12 }, (_, i) => [i + 1, 12]));
    const listed: { key: string; size: number }[] = [];
    for await (const o of store.list('')) listed.push({ key: o.key, size: o.size });
    expect(listed).toHaveLength(12);
    expect(summary.bytes).toBe(listed.reduce((s, o) => s + o.size, 0));
    const perHour = new Map<string, number>();
    for (const { key } of listed) {
      const file = ARC.parse(key);
      expect(file, key).toBeDefined();
      expect(file?.level).toBe(0);
      expect(key).toMatch(
        /^telemetry\/(cpu|mem)\/2025\/01\/14\/0[0-2]\/(cpu|mem)_20250114_0[0-2]\d{4}_\d+\.parquet$/,
      );
      // The measurement in the name matches the folder.
      expect(key.split('/')[1]).toBe(key.split('/').at(-1)?.split('_')[0]);
      perHour.set(hourFolderOf(key), (perHour.get(hourFolderOf(key)) ?? 0) + 1);
    }
    expect([...perHour.entries()].sort()).toEqual([
      ['telemetry/cpu/2025/01/14/00/', 1],
      ['telemetry/cpu/2025/01/14/01/', 2],
      ['telemetry/cpu/2025/01/14/02/', 3],
      ['telemetry/mem/2025/01/14/00/', 1],
      ['telemetry/mem/2025/01/14/01/', 2],
      ['telemetry/mem/2025/01/14/02/', 3],
    ]);
    // Rows fall inside their hour.
    const [bounds] = await engine.query(
      `SELECT count(*)::BIGINT AS bad FROM read_parquet(${quoteString(join(dir, 'telemetry/cpu/2025/01/14/02/*.parquet'))})
       WHERE time < TIMESTAMP '2025-01-14 02:00:00' OR time >= TIMESTAMP '2025-01-14 03:00:00'`,
    );
    expect(bounds).toEqual({ bad: 0n });
    await expectExactIds(dir, 240);

    for (const tier of ['hourly', 'daily']) {
      const result = await cli('run', '--tier', tier, '--store', dir, '--quiet', '0', '--work-dir', workDir);
      expect(result.code, result.err.join('\n')).toBe(0);
    }
    const keys = await dataKeys(dir);
    expect(keys.map((k) => k.replace(/_[^/]*$/, ''))).toEqual([
      'telemetry/cpu/2025/01/14/cpu',
      'telemetry/mem/2025/01/14/mem',
    ]);
    expect(keys.every((k) => k.endsWith('_daily.parquet'))).toBe(true);
    expect(
      idMismatch(
        await readIds(
          engine,
          keys.map((k) => join(dir, k)),
        ),
        240,
      ),
    ).toBeUndefined();
    expect(await stateKeys(dir)).toEqual([]);
  });

  it('demo refuses a folder holding anything but an earlier demo lake, and leaves it alone', async () => {
    const dir = await freshDir('demo-guard');
    await new LocalFolderStore(dir).put('precious/data.parquet', Buffer.from('keep me'));
    const before = await snapshot(dir);
    const result = await cli('demo', '--dir', dir);
    expectUsageError(result, `--dir ${dir} holds precious`);
    expect(await snapshot(dir)).toEqual(before);
  });
});
