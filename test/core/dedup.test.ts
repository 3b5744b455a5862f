/**
 * Dedup through the protocol, on real Parquet in a real LocalFolderStore with DuckDB: a lake with
 * three tables ('exact', 'last' on host + time, and one not listed) whose writers sent rows
 * twice. Output rows must equal the inputs' distinct rows (or keys) as counted apart from the
 * write: an engine whose output is off by one row is caught and nothing is published.
 */

import { randomBytes } from 'node:crypto';
import { mkdtemp, rename, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  type DuckDbEngine,
  parquetPath,
  quoteString,
} from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import type { LocalFolderStore } from '../../functions/adapters/local-store/local-store.ts';
import { readIds } from '../../functions/adapters/sample-data.ts';
import {
  type CompactorConfig,
  type ConfigInput,
  parseConfig,
  type TierName,
} from '../../functions/core/config.ts';
import { assignJobs, runCycle, runJob } from '../../functions/core/cycle.ts';
import {
  type CompactOutput,
  type CompactRequest,
  type DistinctCount,
  type DistinctRequest,
  type Engine,
  type InputInfo,
  systemClock,
} from '../../functions/core/engine.ts';
import { DedupError, RowCountMismatchError } from '../../functions/core/errors.ts';
import {
  type Manifest,
  manifestKey,
  parseManifest,
  stagingRoot,
} from '../../functions/core/manifest/manifest.ts';
import { planTier } from '../../functions/core/planner/planner.ts';
import { type CompactDeps, compactStep, type Job } from '../../functions/core/protocol.ts';
import { visibleFiles } from '../../functions/core/visible.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { recoverUntilQuiet, sweepDeps } from '../support/lake-harness.ts';
import { testStore } from '../support/test-store.ts';

const CPU_10 = 'mydb/cpu/2025/01/14/10/';
const CPU_11 = 'mydb/cpu/2025/01/14/11/';
const MEM_10 = 'mydb/mem/2025/01/14/10/';
/** Hour 10 of mem with dedup 'last' on host: 2018 shares 1020's time but not its host, so both stay. */
const MEM_10_LAST_IDS = [...range(1011, 1019), ...range(1021, 1030), ...range(2001, 2015), 2017, 2018];
const MEM_11 = 'mydb/mem/2025/01/14/11/';
const DISK_10 = 'mydb/disk/2025/01/14/10/';

const CONFIG: ConfigInput = {
  layout: 'arc',
  tiers: { hourly: { minFiles: 2, minAgeSeconds: 3600 }, daily: { minFiles: 2, minAgeSeconds: 3 * 3600 } },
  quietSeconds: 0,
  dedup: { 'mydb/cpu/': { mode: 'exact' }, 'mydb/mem/': { mode: 'last', keys: ['host'] } },
};

let engine: DuckDbEngine;
let workDir: string;
let scratch: string;
let fileCounter = 0;
const lakes: string[] = [];

useEngineAndDir('dedup-', (e, dir) => {
  engine = e;
  scratch = dir;
  workDir = join(dir, 'work');
});

afterEach(async () => {
  for (const dir of lakes.splice(0)) await rm(dir, { recursive: true, force: true });
});

// ---- the lake ----

interface Lake {
  readonly dir: string;
  readonly store: LocalFolderStore;
  readonly config: CompactorConfig;
}

/** Rows id, time, host, value: `count` ids from `first`, `stepSeconds` apart from `start`, host h<id % hosts>. */
function series(first: number, count: number, start: string, stepSeconds: number, hosts: number): string {
  return `SELECT (${first} + range)::BIGINT AS id, TIMESTAMP '${start}' + to_seconds(range * ${stepSeconds}) AS time,
                 'h' || ((${first} + range) % ${hosts}) AS host, ((${first} + range) * 1.5)::DOUBLE AS value
            FROM range(${count})`;
}

async function put(l: Lake, key: string, select: string): Promise<void> {
  const local = join(scratch, `f${fileCounter++}.parquet`);
  // ORDER BY id: the rows' order in the file is part of the test ('last' keeps the later row).
  await engine.query(
    `COPY (SELECT * FROM (${select}) ORDER BY id) TO ${quoteString(local)} (FORMAT parquet)`,
  );
  await l.store.put(key, { file: local });
}

/** A file of the lake, read in place (the folder store maps keys to paths). */
function at(l: Lake, key: string): string {
  return `read_parquet(${parquetPath(join(l.dir, key))})`;
}

function range(from: number, to: number): number[] {
  return Array.from({ length: to - from + 1 }, (_, i) => from + i);
}

/** Ids every table holds once its duplicates are dropped (the disk table is not deduplicated). */
const EXPECTED = {
  // 1..80 once, the row that differs from id 1 in value, the all-NULL row once.
  cpu: [...range(1, 80), 1, 999, ...range(101, 120)].sort((a, b) => a - b),
  // Per (host, time) the newest row: corrections 2001..2010 replace 1001..1010, 2017 (the later
  // of two rows in one file) replaces 1020 and 2016, 3006 (a later hour's folder) replaces 1030.
  mem: [...range(1011, 1019), ...range(1021, 1029), ...range(2001, 2015), 2017, 2018, ...range(3001, 3006)],
  disk: [...range(5001, 5010), ...range(5001, 5010)].sort((a, b) => a - b),
};

async function dupLake(config: ConfigInput = CONFIG): Promise<Lake> {
  const dir = await mkdtemp(join(tmpdir(), 'dedup-lake-'));
  lakes.push(dir);
  const l = { dir, store: testStore(dir), config: parseConfig(config) };
  // cpu ('exact'): a file sent twice, a partial re-send, a row differing in one column, NULLs.
  const cpu1 = `${CPU_10}cpu_20250114_100500_1.parquet`;
  const cpu2 = `${CPU_10}cpu_20250114_101500_2.parquet`;
  await put(l, cpu1, series(1, 40, '2025-01-14 10:00:00', 10, 3));
  await put(l, cpu2, series(41, 40, '2025-01-14 10:10:00', 10, 3));
  await put(l, `${CPU_10}cpu_20250114_102000_3.parquet`, `SELECT * FROM ${at(l, cpu1)}`);
  await put(
    l,
    `${CPU_10}cpu_20250114_103000_4.parquet`,
    `SELECT * FROM ${at(l, cpu2)} WHERE id <= 60
     UNION ALL SELECT id, time, host, value + 0.25 FROM ${at(l, cpu1)} WHERE id = 1
     UNION ALL SELECT 999, TIMESTAMP '2025-01-14 10:50:00', NULL, NULL
     UNION ALL SELECT 999, TIMESTAMP '2025-01-14 10:50:00', NULL, NULL`,
  );
  const cpu11 = `${CPU_11}cpu_20250114_110500_1.parquet`;
  await put(l, cpu11, series(101, 20, '2025-01-14 11:00:00', 10, 3));
  // Hour 11's folder also holds rows of hour 10 sent again: only the daily tier sees both.
  await put(
    l,
    `${CPU_11}cpu_20250114_111500_2.parquet`,
    `SELECT * FROM ${at(l, cpu11)} UNION ALL SELECT * FROM ${at(l, cpu1)} WHERE id <= 5`,
  );
  // mem ('last' on host + time): corrections in a newer file, two versions in one file.
  const mem1 = `${MEM_10}mem_20250114_100500_1.parquet`;
  await put(l, mem1, series(1001, 30, '2025-01-14 10:00:00', 60, 2));
  await put(
    l,
    `${MEM_10}mem_20250114_101500_2.parquet`,
    `SELECT id + 1000 AS id, time, host, value + 100 AS value FROM ${at(l, mem1)} WHERE id <= 1010
     UNION ALL ${series(2011, 5, '2025-01-14 10:40:00', 60, 2)}
     UNION ALL SELECT 2016, time, host, 0.0 FROM ${at(l, mem1)} WHERE id = 1020
     UNION ALL SELECT 2017, time, host, 1.0 FROM ${at(l, mem1)} WHERE id = 1020
     UNION ALL SELECT 2018, time, 'other', 2.0 FROM ${at(l, mem1)} WHERE id = 1020`,
  );
  await put(
    l,
    `${MEM_11}mem_20250114_110500_1.parquet`,
    `${series(3001, 5, '2025-01-14 11:00:00', 60, 2)}
     UNION ALL SELECT 3006, time, host, -1.0 FROM ${at(l, mem1)} WHERE id = 1030`,
  );
  // disk: not listed, so its duplicates stay.
  const disk1 = `${DISK_10}disk_20250114_100500_1.parquet`;
  await put(l, disk1, series(5001, 10, '2025-01-14 10:00:00', 10, 3));
  await put(l, `${DISK_10}disk_20250114_101500_2.parquet`, `SELECT * FROM ${at(l, disk1)}`);
  return l;
}

/** Every id in the table's data files, ascending (a multiset). */
async function idsOf(l: Lake, table: string): Promise<number[]> {
  const paths: string[] = [];
  for await (const object of l.store.list(table)) {
    if (l.config.layout.isDataKey(object.key)) paths.push(join(l.dir, object.key));
  }
  return (await readIds(engine, paths)).map(Number);
}

async function dataKeys(l: Lake, prefix: string): Promise<string[]> {
  const keys: string[] = [];
  for await (const object of l.store.list(prefix))
    if (l.config.layout.isDataKey(object.key)) keys.push(object.key);
  return keys.sort();
}

async function snapshot(l: Lake): Promise<string[]> {
  const all: string[] = [];
  for await (const object of l.store.list('')) all.push(`${object.key} ${object.etag}`);
  return all.sort();
}

async function manifestOf(l: Lake, job: Job): Promise<Manifest | undefined> {
  const key = manifestKey(l.config.layout, job.tier, job.partition);
  if (!(await l.store.head(key))) return undefined;
  const { body } = await l.store.getBytes(key);
  return parseManifest(l.config, l.store.location, key, body);
}

async function jobFor(l: Lake, partition: string, tier: TierName = 'hourly'): Promise<Job> {
  const plan = await planTier(l.store, l.config, systemClock, tier);
  const job = assignJobs(plan, {
    clock: systemClock,
    randomHex: () => randomBytes(4).toString('hex'),
    executionId: 'exec-dedup',
  }).find((j) => j.partition === partition);
  if (!job) throw new Error(`no ${tier} job planned for ${partition}`);
  return job;
}

function deps(l: Lake, using: Engine = engine): CompactDeps {
  return { store: l.store, config: l.config, clock: systemClock, engine: using, workDir };
}

// ---- engines that get it wrong ----

/** The real engine, with compact's outputs changed afterwards: what a bug in the merge would write. */
class TamperingEngine implements Engine {
  readonly #tamper: (outputs: CompactOutput[], request: CompactRequest) => Promise<CompactOutput[]>;

  constructor(tamper: (outputs: CompactOutput[], request: CompactRequest) => Promise<CompactOutput[]>) {
    this.#tamper = tamper;
  }

  inspect(file: string): Promise<InputInfo> {
    return engine.inspect(file);
  }

  async compact(request: CompactRequest): Promise<CompactOutput[]> {
    return this.#tamper(await engine.compact(request), request);
  }

  countDistinct(request: DistinctRequest): Promise<DistinctCount> {
    return engine.countDistinct(request);
  }

  async close(): Promise<void> {}
}

/** Rewrites the output's rows with `select` (over `out`), reporting its footer's row count as compact does. */
async function rewrite(output: CompactOutput, select: string): Promise<CompactOutput> {
  const temp = `${output.path}.tmp`;
  const source = `(SELECT * FROM read_parquet(${parquetPath(output.path)})) AS out`;
  await engine.query(`COPY (${select.replaceAll('$out', source)}) TO ${quoteString(temp)} (FORMAT parquet)`);
  await rename(temp, output.path);
  const [meta] = await engine.query(
    `SELECT num_rows FROM parquet_file_metadata(${parquetPath(output.path)})`,
  );
  return { ...output, rows: Number(meta?.num_rows) };
}

const dropsOneRow = new TamperingEngine(async ([first, ...rest]) => {
  if (!first) throw new Error('no output');
  return [await rewrite(first, `SELECT * FROM $out WHERE id <> (SELECT max(id) FROM $out)`), ...rest];
});

describe('dedup in the compact step', () => {
  it('"exact": the output holds the distinct rows; the manifest records raw and distinct counts', async () => {
    const l = await dupLake();
    const job = await jobFor(l, CPU_10);
    const staged = await compactStep(deps(l), job);
    // 40 + 40 + 40 + 23 rows in; 82 distinct: 1..80, the row differing in value, the NULL row once.
    expect(staged).toMatchObject({
      status: 'done',
      state: 'staged',
      inputRows: 143,
      distinctRows: 82,
      outputRows: 82,
    });
    const manifest = await manifestOf(l, job);
    expect(manifest).toMatchObject({ inputRows: 143, dedup: { mode: 'exact' }, distinctRows: 82 });
    expect(manifest?.outputs?.reduce((sum, o) => sum + o.rows, 0)).toBe(82);
    expect(await runJob(deps(l), job)).toMatchObject({ status: 'compacted' });
    expect(await idsOf(l, CPU_10)).toEqual([...range(1, 80), 1, 999].sort((a, b) => a - b));
  });

  it('"last": one row per host + time, the newest by input order and, within a file, the later row', async () => {
    const l = await dupLake();
    const job = await jobFor(l, MEM_10);
    const staged = await compactStep(deps(l), job);
    expect(staged).toMatchObject({ status: 'done', inputRows: 48, distinctRows: 36, outputRows: 36 });
    expect(await manifestOf(l, job)).toMatchObject({
      dedup: { mode: 'last', keys: ['host', 'time'] },
      distinctRows: 36,
    });
    expect(await runJob(deps(l), job)).toMatchObject({ status: 'compacted' });
    // 2018 shares 1020's time but not its host: another key, kept.
    expect(await idsOf(l, MEM_10)).toEqual(MEM_10_LAST_IDS);
  });

  it('a table not listed keeps its duplicates: rows out = rows in', async () => {
    const l = await dupLake();
    const job = await jobFor(l, DISK_10);
    const staged = await compactStep(deps(l), job);
    expect(staged).toMatchObject({ status: 'done', inputRows: 20, outputRows: 20 });
    expect(staged.distinctRows).toBeUndefined();
    const manifest = await manifestOf(l, job);
    expect(manifest?.dedup).toBeUndefined();
    expect(manifest?.distinctRows).toBeUndefined();
  });

  it('off by default: with no dedup setting every duplicate stays, rows out = rows in', async () => {
    const l = await dupLake({ ...CONFIG, dedup: undefined });
    const job = await jobFor(l, CPU_10);
    expect(await compactStep(deps(l), job)).toMatchObject({
      status: 'done',
      inputRows: 143,
      outputRows: 143,
    });
    expect(await runJob(deps(l), job)).toMatchObject({ status: 'compacted' });
    expect((await idsOf(l, CPU_10)).length).toBe(143);
  });
});

describe('dedup is verified, not assumed', () => {
  async function expectNothingPublished(l: Lake, job: Job, before: readonly string[]): Promise<void> {
    expect(await manifestOf(l, job), 'the claim is released').toBeUndefined();
    const staging: string[] = [];
    for await (const object of l.store.list(stagingRoot(l.config.layout))) staging.push(object.key);
    expect(staging).toEqual([]);
    // Every input as it was (same keys, same ETags), no output beside them.
    expect((await snapshot(l)).filter((k) => !k.startsWith('_compaction/failures/'))).toEqual(before);
    const view = await visibleFiles(l.store, l.config);
    expect(view.files.filter((f) => f.key.startsWith(job.partition)).map((f) => f.key)).toEqual(
      await dataKeys(l, job.partition),
    );
  }

  it.each([
    ['"exact"', CPU_10],
    ['"last"', MEM_10],
  ])(
    '%s: an engine that drops one row too many fails the step with RowCountMismatchError; nothing is published',
    async (_mode, partition) => {
      const l = await dupLake();
      const job = await jobFor(l, partition);
      const before = await snapshot(l);
      const failed = compactStep(deps(l, dropsOneRow), job);
      await expect(failed).rejects.toThrow(RowCountMismatchError);
      await expect(failed).rejects.toThrow(
        /distinct, but the output holds \d+ rows, .*nothing was published/,
      );
      await expectNothingPublished(l, job, before);
    },
  );

  it('without dedup, an engine that drops one row fails the step the same way; nothing is published', async () => {
    const l = await dupLake({ ...CONFIG, dedup: undefined });
    const job = await jobFor(l, CPU_10);
    const before = await snapshot(l);
    const failed = compactStep(deps(l, dropsOneRow), job);
    await expect(failed).rejects.toThrow(RowCountMismatchError);
    await expect(failed).rejects.toThrow(
      /inputs hold 143 rows but the output holds 14[0-2]; nothing was published/,
    );
    await expectNothingPublished(l, job, before);
  });

  it('an engine that does not dedup at all is caught the same way', async () => {
    const l = await dupLake();
    const job = await jobFor(l, MEM_10);
    const before = await snapshot(l);
    const ignoresDedup = new TamperingEngine(async (_outputs, request) => {
      const { dedup: _dedup, ...plain } = request;
      return engine.compact({ ...plain, outputDir: join(request.outputDir, 'plain') });
    });
    await expect(compactStep(deps(l, ignoresDedup), job)).rejects.toThrow(
      /inputs hold 48 rows, 36 distinct, but the output holds 48 rows/,
    );
    await expectNothingPublished(l, job, before);
  });

  it('an output with the right row count but a row twice and another missing is caught by its own distinct count', async () => {
    const l = await dupLake();
    const job = await jobFor(l, CPU_10);
    const before = await snapshot(l);
    const swapsARow = new TamperingEngine(async ([first, ...rest]) => {
      if (!first) throw new Error('no output');
      const swapped = await rewrite(
        first,
        `SELECT * FROM $out WHERE id <> 80 UNION ALL SELECT * FROM $out WHERE id = 79`,
      );
      return [swapped, ...rest];
    });
    await expect(compactStep(deps(l, swapsARow), job)).rejects.toThrow(
      /82 distinct, but the output holds 82 rows, 81 distinct/,
    );
    await expectNothingPublished(l, job, before);
  });

  it('a "last" key column the partition lacks fails it with DedupError and releases the claim', async () => {
    const l = await dupLake({ ...CONFIG, dedup: { 'mydb/mem/': { mode: 'last', keys: ['hostname'] } } });
    const job = await jobFor(l, MEM_10);
    const before = await snapshot(l);
    const failed = compactStep(deps(l), job);
    await expect(failed).rejects.toThrow(DedupError);
    await expect(failed).rejects.toThrow(/no column hostname; fix dedup\["mydb\/mem\/"\]\.keys/);
    await expectNothingPublished(l, job, before);
  });

  it('a "last" table whose data hides the row order (a file_row_number column) fails with DedupError, claim released', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'dedup-lake-'));
    lakes.push(dir);
    const l = { dir, store: testStore(dir), config: parseConfig(CONFIG) };
    for (const name of ['mem_20250114_100500_1', 'mem_20250114_101500_2']) {
      await put(
        l,
        `${MEM_10}${name}.parquet`,
        `SELECT *, id AS file_row_number FROM (${series(1, 3, '2025-01-14 10:00:00', 60, 2)})`,
      );
    }
    const job = await jobFor(l, MEM_10);
    const before = await snapshot(l);
    const failed = compactStep(deps(l), job);
    await expect(failed).rejects.toThrow(DedupError);
    await expect(failed).rejects.toThrow(/a column named "file_row_number"/);
    await expectNothingPublished(l, job, before);
  });
});

describe('dedup through whole cycles', () => {
  it('runCycle hourly then daily over a lake with duplicates leaves exactly the distinct rows', async () => {
    const l = await dupLake();
    const cycleDeps = sweepDeps(l.store, l.config, engine, workDir, 'exec-cycle', new Set());

    const hourly = await runCycle(cycleDeps, 'hourly');
    expect(hourly.jobs.map((j) => [j.job.partition, j.outcome.status])).toEqual([
      [CPU_10, 'compacted'],
      [CPU_11, 'compacted'],
      [DISK_10, 'compacted'],
      [MEM_10, 'compacted'],
      [MEM_11, 'compacted'],
    ]);
    // Each hour alone is distinct; rows sent again into another hour's folder are still there twice.
    const cpuHourly = await idsOf(l, 'mydb/cpu/');
    expect(cpuHourly).toEqual([...EXPECTED.cpu, ...range(1, 5)].sort((a, b) => a - b));
    expect(await idsOf(l, 'mydb/mem/')).toEqual([...EXPECTED.mem, 1030].sort((a, b) => a - b));

    const daily = await runCycle(cycleDeps, 'daily');
    expect(daily.jobs.map((j) => [j.job.partition, j.outcome.status])).toEqual([
      ['mydb/cpu/2025/01/14/', 'compacted'],
      ['mydb/mem/2025/01/14/', 'compacted'],
    ]);
    // The daily tier dedups again: across hours, each row (or key) once.
    expect(await idsOf(l, 'mydb/cpu/')).toEqual(EXPECTED.cpu);
    expect(await idsOf(l, 'mydb/mem/')).toEqual(EXPECTED.mem);
    expect(await idsOf(l, 'mydb/disk/')).toEqual(EXPECTED.disk);
    expect(await dataKeys(l, 'mydb/cpu/')).toEqual([
      expect.stringMatching(/^mydb\/cpu\/2025\/01\/14\/cpu_20250114_.*_daily\.parquet$/),
    ]);
    expect(await dataKeys(l, 'mydb/mem/')).toEqual([
      expect.stringMatching(/^mydb\/mem\/2025\/01\/14\/mem_.*_daily\.parquet$/),
    ]);
    // Nothing left in flight, and the visible view is the data.
    const state: string[] = [];
    for await (const object of l.store.list('_compaction/manifests/')) state.push(object.key);
    for await (const object of l.store.list(stagingRoot(l.config.layout))) state.push(object.key);
    expect(state).toEqual([]);
    expect((await visibleFiles(l.store, l.config)).files.length).toBe((await dataKeys(l, '')).length);
  });

  it('"last" in the daily tier: an hourly output beside a daily one is newer, whatever their keys sort as', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'dedup-lake-'));
    lakes.push(dir);
    const l = { dir, store: testStore(dir), config: parseConfig(CONFIG) };
    // A daily output from an earlier run (in the day folder, whose key sorts after the hour
    // folders), and an hourly output of late data compacted after it, for the same key.
    await put(
      l,
      'mydb/mem/2025/01/14/mem_20250114_20250115T033000Z-0000000a_000_daily.parquet',
      `SELECT 7001::BIGINT AS id, TIMESTAMP '2025-01-14 12:00:00' AS time, 'h1' AS host, 1.0::DOUBLE AS value`,
    );
    await put(
      l,
      'mydb/mem/2025/01/14/12/mem_20250114_12_20250115T051000Z-0000000b_000_compacted.parquet',
      `SELECT 7002::BIGINT AS id, TIMESTAMP '2025-01-14 12:00:00' AS time, 'h1' AS host, 2.0::DOUBLE AS value`,
    );
    const job = await jobFor(l, 'mydb/mem/2025/01/14/', 'daily');
    expect(await runJob(deps(l), job)).toMatchObject({ status: 'compacted' });
    expect(await idsOf(l, 'mydb/mem/2025/01/14/')).toEqual([7002]);
  });

  it('a staged dedup job whose owner died is rolled forward by recovery to the distinct rows', async () => {
    const l = await dupLake();
    const job = await jobFor(l, MEM_10);
    await compactStep(deps(l), job);
    const recovered = await recoverUntilQuiet(
      {
        store: l.store,
        config: l.config,
        clock: systemClock,
        executionId: 'exec-recover',
        isOwnerAlive: async () => false,
      },
      'exec-recover',
    );
    expect(recovered[0]?.entries).toMatchObject([{ action: 'rolled-forward' }]);
    expect(await idsOf(l, MEM_10)).toEqual(MEM_10_LAST_IDS);
  });
});
