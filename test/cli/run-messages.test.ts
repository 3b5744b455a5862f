/**
 * What `run` and `plan` say of the partitions they do not compact, over real local-folder lakes
 * and a real DuckDB: every skip with its reason (the plan's too), the flag behind a setting that
 * made a partition skip, quarantined inputs and the way back, days already one file, a retention
 * run without a rule, and the one-time synthesis notice.
 */

import { cp, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { NO_RETENTION_RULE } from '../../functions/cli/context.ts';
import { arcRawKey, cli, dataKeys, hourFolderOf, lakeIds, stateKeys } from '../support/cli-lake.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { type LakeFile, writeLake } from '../support/lake-harness.ts';

/** Three old hours of one table, two of them with two files. */
const FILES: readonly LakeFile[] = [
  { key: 'db/cpu/2025/01/15/10/cpu_20250115_100500_1.parquet', rows: 40 },
  { key: 'db/cpu/2025/01/15/10/cpu_20250115_101500_2.parquet', rows: 40 },
  { key: 'db/cpu/2025/01/15/11/cpu_20250115_110500_3.parquet', rows: 30 },
  { key: 'db/cpu/2025/01/15/11/cpu_20250115_113000_4.parquet', rows: 30 },
  { key: 'db/cpu/2025/01/15/12/cpu_20250115_120500_5.parquet', rows: 20 },
];

let engine: DuckDbEngine;
let root: string;
let template: string;
let total: number;

useEngineAndDir('run-messages-', async (e, folder) => {
  engine = e;
  root = folder;
  template = join(root, 'template');
  total = await writeLake(engine, template, FILES);
});

/** `compactor run --tier hourly` on `dir` with the quiet time off, in this process. */
function hourly(dir: string, ...extra: string[]) {
  return cli('run', '--tier', 'hourly', '--store', dir, '--quiet', '0', ...extra);
}

async function lake(name: string): Promise<string> {
  const dir = await mkdtemp(join(root, `${name}-`));
  await cp(template, dir, { recursive: true });
  return dir;
}

describe('run names what made a partition skip', () => {
  it('a wrong --time-column: each hour says so and names the flag, exit 1, nothing quarantined; the right one compacts', async () => {
    const dir = await lake('time-column');
    const work = join(dir, '..', 'work-time-column');
    const wrong = await hourly(dir, '--work-dir', work, '--time-column', 'ts');
    expect(wrong.code, wrong.text).toBe(1);
    expect(wrong.text).toMatch(
      /db\/cpu\/2025\/01\/15\/10\/\s+skipped .*no input has the time column "ts" .*; here timeColumn is --time-column ts/,
    );
    expect(await stateKeys(dir)).toEqual([]);
    const right = await hourly(dir, '--work-dir', work);
    expect(right.code, right.text).toBe(0);
    expect(right.text).toMatch(/summary: 3 compacted \(5 files -> 3\), 0 skipped/);
    expect((await lakeIds(engine, dir)).length).toBe(total);
  }, 120_000);

  it('a quarantined input: its row and the summary say so, with the fix; exit 1', async () => {
    const dir = await lake('quarantine');
    const empty = 'db/cpu/2025/01/15/11/cpu_20250115_115900_9.parquet';
    await writeFile(join(dir, empty), Buffer.alloc(0));
    const run = await hourly(dir, '--work-dir', join(dir, '..', 'work-quarantine'));
    expect(run.code, run.text).toBe(1);
    expect(run.text).toMatch(/db\/cpu\/2025\/01\/15\/11\/\s+compacted .*1 input\(s\) quarantined/);
    expect(run.text).toContain(
      '1 input(s) quarantined, left in place and never merged: `compactor status` gives each reason',
    );
    // Left in place; every row of the others compacted.
    await rm(join(dir, empty));
    expect((await lakeIds(engine, dir)).length).toBe(total);
  }, 120_000);

  it('a daily plan over raw files alone says the daily tier merges hourly outputs', async () => {
    const dir = await lake('daily-first');
    const plan = await cli('plan', '--tier', 'daily', '--store', dir, '--quiet', '0');
    expect(plan.code, plan.text).toBe(0);
    expect(plan.text).toContain(
      'nothing to do: no finished day holds hourly outputs to merge; the daily tier merges what `compactor run --tier hourly` writes',
    );
  });

  it('a partition of several job bounds: the header counts its jobs and the waves they run in, a row each', async () => {
    const dir = await lake('waves');
    const run = await hourly(dir, '--work-dir', join(dir, '..', 'work-waves'), '--max-job-files', '1');
    expect(run.code, run.text).toBe(0);
    expect(run.text).toMatch(
      /5 job\(s\) planned \(a partition's several jobs one after another: 2 waves\), 0 skipped/,
    );
    expect(run.text.match(/db\/cpu\/2025\/01\/15\/10\/\s+compacted/g)).toHaveLength(2);
    expect(run.text).toMatch(/summary: 5 compacted \(5 files -> 5\), 0 skipped/);
    expect((await lakeIds(engine, dir)).length).toBe(total);
  }, 120_000);

  it('the plan’s skips are rows of run’s table with their reasons, and the summary counts them', async () => {
    const dir = await lake('plan-skips');
    // Files written just now: every hour waits for the quiet time (300 s by default).
    const run = await cli('run', '--tier', 'hourly', '--store', dir);
    expect(run.code, run.text).toBe(0);
    expect(run.text).toMatch(/0 job\(s\) planned, 3 skipped/);
    for (const hour of ['10', '11', '12']) {
      expect(run.text).toMatch(
        new RegExp(
          `db/cpu/2025/01/15/${hour}/\\s+skipped\\s+not planned: a file was written less than quietSeconds \\(300s\\) ago.* \\(\\d+ candidate file\\(s\\)\\)$`,
          'm',
        ),
      );
    }
    expect(run.text).toMatch(/^summary: 0 compacted \(0 files -> 0\), 3 skipped \(3 by the plan\), /m);
  }, 120_000);

  it('the first run in a work dir says it is synthesizing the state machine; the next does not', async () => {
    const dir = await lake('synth-notice');
    const work = join(dir, '..', 'work-synth-notice');
    // plan synthesizes too (to count transitions), in its own default work dir.
    const first = await cli('plan', '--tier', 'hourly', '--store', dir);
    // Besides the notice, only the warning that this old lake's hourly tier is behind.
    expect(
      first.err.filter(
        (l) =>
          !l.startsWith('synthesizing the state machine') &&
          !l.startsWith('warning: the hourly tier is behind'),
      ),
    ).toEqual([]);
    const run = await hourly(dir, '--work-dir', work);
    expect(run.err.filter((l) => l.startsWith('synthesizing the state machine'))).toHaveLength(1);
    const again = await hourly(dir, '--work-dir', work);
    expect(again.err.filter((l) => l.startsWith('synthesizing'))).toEqual([]);
  }, 120_000);
});

describe('a failed job', () => {
  it('counts once when recovery rolls it back, and keeps the cause the run reported', async () => {
    const dir = await lake('oom');
    const run = await hourly(dir, '--memory-limit', '1MB');
    expect(run.code).toBe(1);
    type Failing = { failing: { partition: string; failures: number; lastError: string }[] };
    const failing = async () =>
      (JSON.parse((await cli('status', '--store', dir, '--json')).text) as Failing).failing;
    const before = await failing();
    expect(before.length).toBeGreaterThan(0);
    expect(before.every((f) => f.failures === 1 && /Out of Memory/.test(f.lastError))).toBe(true);
    // The jobs the out-of-memory run left claimed are rolled back: the same failures, not new ones.
    const recover = await cli('recover', '--store', dir);
    expect(recover.text).toMatch(/rolled-back/);
    expect(await failing()).toEqual(before);
  }, 120_000);
});

describe('quarantined inputs are listed by plan with the way back', () => {
  it('a folder whose inputs are all quarantined is a skip row naming release; a partly quarantined one plans the rest', async () => {
    const dir = await lake('quarantined');
    // Not Parquet: quarantined by the hourly run.
    await writeFile(join(dir, 'db/cpu/2025/01/15/12/cpu_20250115_121500_9.parquet'), 'not parquet');
    const run = await hourly(dir);
    expect(run.code, run.text).toBe(1);
    // Hour 12 kept its good file (the job took it) and quarantined the bad one.
    await writeFile(join(dir, 'db/cpu/2025/01/15/12/cpu_20250115_122000_10.parquet'), 'not parquet either');
    await cp(
      join(template, 'db/cpu/2025/01/15/10/cpu_20250115_100500_1.parquet'),
      join(dir, 'db/cpu/2025/01/15/13/cpu_20250115_130500_11.parquet'),
    );
    const again = await hourly(dir);
    expect(again.code, again.text).toBe(1);
    const plan = await cli('plan', '--tier', 'hourly', '--store', dir, '--quiet', '0');
    expect(plan.code).toBe(0);
    expect(plan.text).toMatch(
      /db\/cpu\/2025\/01\/15\/12\/\s+skip .*2 quarantined input\(s\) set aside \(compactor status says why\): once the cause is fixed, `compactor release --partition db\/cpu\/2025\/01\/15\/12\/` re-admits them/,
    );
    expect(await dataKeys(dir)).toContain('db/cpu/2025/01/15/12/cpu_20250115_121500_9.parquet');
  }, 120_000);
});

describe('a tier that falls behind', () => {
  it('run and plan warn, naming the oldest eligible partition, its age and the threshold; --json carries the figures', async () => {
    // Hours of a day long past: every one eligible (flushed as stragglers) since that day ended.
    const dir = await lake('behind');
    const work = join(dir, '..', 'work-behind');
    // One file per job and one job per partition: hours 10 and 11 keep a file for a later run.
    const bounded = ['--max-job-files', '1', '--max-jobs-per-partition', '1'];
    // Planned as at a fixed time, so the age the warning prints (days and hours) is the same at any
    // hour of the day the test runs.
    const now = '2030-01-01T12:30:00Z';
    const asRun = ['--now', now, ...bounded];
    const plan = await cli('plan', '--tier', 'hourly', '--store', dir, '--quiet', '0', ...asRun);
    expect(plan.code).toBe(0);
    const warning =
      /^warning: the hourly tier is behind: partition db\/cpu\/2025\/01\/15\/10\/ has been eligible for \d+d \d+h \(\d+ s\), longer than tiers\.hourly\.behindAfterSeconds \(3h\); 3 partition\(s\) eligible; this run leaves files of 2 of them for later: .*maxJobsPerPartition/;
    expect(plan.err).toEqual([expect.stringMatching(warning)]);
    const run = await hourly(dir, '--work-dir', work, '--json', ...asRun);
    expect(run.code, run.text).toBe(0);
    expect(run.err).toContainEqual(expect.stringMatching(warning));
    const { plan: planned } = JSON.parse(run.text) as {
      plan: { jobs: number; backlog: Record<string, unknown> };
    };
    expect(planned.jobs).toBe(3);
    // The day 2025-01-15 became flushable at 03:00 the day after (the daily tier's minAge).
    const age = (Date.parse(now) - Date.parse('2025-01-16T03:00:00Z')) / 1000;
    expect(planned.backlog).toMatchObject({
      eligiblePartitions: 3,
      leftForLater: 2,
      oldestEligiblePartition: 'db/cpu/2025/01/15/10/',
      behindAfterSeconds: 10_800,
      behind: true,
    });
    expect(planned.backlog.oldestEligibleAgeSeconds).toBeGreaterThan(age - 600);
    expect(planned.backlog.oldestEligibleAgeSeconds).toBeLessThanOrEqual(age);
    // The threshold is a setting: past it by years, still behind; the next run drains the rest.
    const next = await hourly(dir, '--work-dir', work, '--behind-after', String(366 * 86_400));
    expect(next.code, next.text).toBe(0);
    expect(next.err.join('\n')).toMatch(
      /tiers\.hourly\.behindAfterSeconds \(366d\); 2 partition\(s\) eligible/,
    );
    expect((await lakeIds(engine, dir)).length).toBe(total);
  }, 120_000);

  it('runs between sweeps (planning.listing "windowed") still see the backlog the last run left, until it drains', async () => {
    const dir = await lake('behind-windowed');
    const work = join(dir, '..', 'work-behind-windowed');
    const windowed = ['--context', JSON.stringify({ planning: { listing: 'windowed' } })];
    const bounded = ['--max-job-files', '1', '--max-jobs-per-partition', '1'];
    const run = async (...extra: string[]) => {
      const result = await hourly(dir, '--work-dir', work, '--json', ...windowed, ...extra);
      expect(result.code, result.text).toBe(0);
      const { plan } = JSON.parse(result.text) as {
        plan: { listing: string; listingReason: string; jobs: number; backlog: Record<string, unknown> };
      };
      return { plan, warnings: result.err.filter((line) => line.startsWith('warning')) };
    };
    // The first sweeps (none recorded yet) and leaves a file in hours 10 and 11 for later.
    const first = await run(...bounded);
    expect(first.plan).toMatchObject({
      listing: 'sweep',
      jobs: 3,
      backlog: { eligiblePartitions: 3, behind: true },
    });
    // The next lists only the last days' windows, which 2025 is far before: the three hours the
    // sweep's backlog record carries are listed again, so it still warns of the two left, and
    // compacts them; hour 12, compacted by the first run, is no longer eligible.
    const second = await run();
    expect(second.plan).toMatchObject({
      listing: 'windows',
      jobs: 2,
      backlog: { eligiblePartitions: 2, oldestEligiblePartition: 'db/cpu/2025/01/15/10/', behind: true },
    });
    expect(second.plan.listingReason).toContain(
      "3 partition(s) of the last plan's backlog record before the window listed again",
    );
    expect(second.warnings).toEqual([
      expect.stringMatching(
        /^warning: the hourly tier is behind: partition db\/cpu\/2025\/01\/15\/10\/ .*; 2 partition\(s\) eligible; this run plans all of them/,
      ),
    ]);
    // Drained: the run after finds the tier caught up, with no sweep in between.
    const third = await run();
    expect(third.plan).toMatchObject({
      listing: 'windows',
      jobs: 0,
      backlog: { eligiblePartitions: 0, behind: false },
    });
    expect(third.warnings).toEqual([]);
    expect((await lakeIds(engine, dir)).length).toBe(total);
  }, 180_000);

  it('status shows each tier’s backlog as plan counts and judges it, in text and --json', async () => {
    const dir = await lake('status-backlog');
    const now = ['--now', '2025-02-01T00:00:00Z'];
    const plan = await cli('plan', '--tier', 'hourly', '--store', dir, '--json', ...now);
    const { backlog: planned } = JSON.parse(plan.text) as { backlog: Record<string, unknown> };
    const status = await cli('status', '--store', dir, '--json', ...now);
    // Behind is a warning, as for run: the exit code is the manifests' and failures'.
    expect(status.code, status.text).toBe(0);
    const { backlog } = JSON.parse(status.text) as { backlog: Record<string, Record<string, unknown>> };
    // The tiers that run (the monthly tier is off), each with plan's own figures and verdict.
    expect(Object.keys(backlog)).toEqual(['hourly', 'daily']);
    expect(backlog.hourly).toEqual(planned);
    expect(backlog.hourly).toMatchObject({ eligiblePartitions: 3, behind: true });
    expect(backlog.daily).toMatchObject({
      eligiblePartitions: 0,
      oldestEligibleAgeSeconds: 0,
      behind: false,
    });
    const text = await cli('status', '--store', dir, ...now);
    // Flushable since 2025-01-16 03:00 (the day old enough for the daily tier): 15 days 21 hours.
    expect(text.text).toMatch(/^hourly\s+3\s+db\/cpu\/2025\/01\/15\/10\/\s+15d 21h\s+3h\s+BEHIND$/m);
    expect(text.text).toMatch(/^daily\s+0\s+3d\s+keeps up$/m);
    expect(text.text).toContain('a tier BEHIND: `compactor plan --tier <tier>`');
    // The threshold is the setting plan judges by: past it, the same partitions keep up.
    const patient = JSON.stringify({ tiers: { hourly: { behindAfterSeconds: 366 * 86_400 } } });
    const relaxed = await cli('status', '--store', dir, '--context', patient, ...now);
    expect(relaxed.text).toMatch(/^hourly\s+3\s+db\/cpu\/2025\/01\/15\/10\/\s+15d 21h\s+366d\s+keeps up$/m);
    expect(relaxed.text).not.toContain('a tier BEHIND');
  }, 120_000);

  it('a tier that keeps up: no warning, and --json says how far it is from behind', async () => {
    const dir = await mkdtemp(join(root, 'keeps-up-'));
    // The hour that ended an hour before this one began: due (minAge 1 h) less than an hour ago.
    const hourStart = Math.floor(Date.now() / 3_600_000) * 3_600_000 - 2 * 3_600_000;
    const files = [1, 2].map((n) => ({ key: arcRawKey(hourStart, n), rows: 10 }));
    const rows = await writeLake(engine, dir, files);
    const run = await hourly(
      dir,
      '--work-dir',
      join(dir, '..', 'work-keeps-up'),
      '--min-files',
      '2',
      '--json',
    );
    expect(run.code, run.text).toBe(0);
    expect(run.err.filter((line) => line.startsWith('warning'))).toEqual([]);
    const { plan } = JSON.parse(run.text) as { plan: { jobs: number; backlog: Record<string, unknown> } };
    expect(plan.jobs).toBe(1);
    expect(plan.backlog).toMatchObject({
      eligiblePartitions: 1,
      leftForLater: 0,
      oldestEligiblePartition: hourFolderOf(files[0]?.key ?? ''),
      behind: false,
    });
    expect(plan.backlog.oldestEligibleAgeSeconds).toBeLessThan(10_800);
    expect((await lakeIds(engine, dir)).length).toBe(rows);
  }, 120_000);
});

describe('days already one file', () => {
  it('a daily plan right after the daily run counts them as settled, not as waiting for quiet time', async () => {
    const dir = await lake('settled');
    expect((await hourly(dir)).code).toBe(0);
    expect((await cli('run', '--tier', 'daily', '--store', dir, '--quiet', '0')).code).toBe(0);
    // The daily file was written just now: within the default quiet time.
    const plan = await cli('plan', '--tier', 'daily', '--store', dir);
    expect(plan.text).not.toContain('written less than');
    expect(plan.text).toContain('nothing to do: 1 partition(s) already one daily file');
    const json = JSON.parse((await cli('plan', '--tier', 'daily', '--store', dir, '--json')).text) as {
      settled: number;
      skipped: unknown[];
      listing: { reason: string };
    };
    expect(json).toMatchObject({ settled: 1, skipped: [] });
    // A setting the user never made is said to be the local default.
    expect(json.listing.reason).toMatch(/commands run by hand default to it, the stack to "windowed"/);
  }, 120_000);
});

describe('a retention run', () => {
  it('without a rule exits 2 with the fix, as `retention` does, and changes nothing', async () => {
    const dir = await lake('no-rule');
    const run = await cli('run', '--tier', 'retention', '--store', dir);
    expect(run.code).toBe(2);
    expect(run.err).toEqual([`compactor run: ${NO_RETENTION_RULE}`]);
    expect(await dataKeys(dir)).toHaveLength(FILES.length);
    // `--retention none` turns a rule from --context off, as its help says: the same refusal.
    const off = await cli(
      'run',
      '--tier',
      'retention',
      '--store',
      dir,
      '--context',
      '{"retention":{"rules":{"*":1}}}',
      '--retention',
      'none',
    );
    expect(off.err).toEqual([`compactor run: ${NO_RETENTION_RULE}`]);
    expect(await dataKeys(dir)).toHaveLength(FILES.length);
  });

  it('shows no row count for an expired day, and counts no state object as listed', async () => {
    const dir = await lake('expire');
    // An Athena view under the state root is not data.
    expect((await cli('visible', '--store', dir, '--format', 'athena')).code).toBe(0);
    const run = await cli('run', '--tier', 'retention', '--store', dir, '--retention', '*=30');
    expect(run.code, run.text).toBe(0);
    expect(run.text).toMatch(new RegExp(`${FILES.length} objects listed`));
    const row = run.text.split('\n').find((l) => l.startsWith('db/cpu/2025/01/15/'));
    expect(row).toMatch(/expired\s+5\s+[\d.]+ KiB\s+0\s+0 B\s*$/);
  }, 120_000);
});
