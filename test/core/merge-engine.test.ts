/**
 * The merge engine rule, and the compact step with polars writing the merge: on real Parquet in
 * a real LocalFolderStore, the outputs pass the same verification as DuckDB's, and an output a
 * row short is caught the same way, nothing published.
 */

import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rename, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  type DuckDbEngine,
  parquetPath,
  quoteString,
} from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import type { LocalFolderStore } from '../../functions/adapters/local-store/local-store.ts';
import { loadPolarsWriter } from '../../functions/adapters/polars-engine/polars-engine.ts';
import { readIds, writeSampleParquet } from '../../functions/adapters/sample-data.ts';
import { type CompactorConfig, type ConfigInput, parseConfig } from '../../functions/core/config.ts';
import { assignJobs, runJob } from '../../functions/core/cycle.ts';
import type {
  CompactOutput,
  CompactRequest,
  DistinctCount,
  DistinctRequest,
  Engine,
  InputInfo,
  MergeEngineName,
  MergeShape,
  MergeWriter,
} from '../../functions/core/engine.ts';
import { systemClock } from '../../functions/core/engine.ts';
import { RowCountMismatchError } from '../../functions/core/errors.ts';
import { manifestKey, stagingRoot } from '../../functions/core/manifest/manifest.ts';
import {
  chooseMergeEngine,
  POLARS_MAX_INPUT_BYTES,
  POLARS_MIN_AVERAGE_INPUT_BYTES,
  POLARS_MIN_COLUMNS,
} from '../../functions/core/merge-engine.ts';
import { planTier } from '../../functions/core/planner/planner.ts';
import { type CompactDeps, compactStep, type Job } from '../../functions/core/protocol.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { testStore } from '../support/test-store.ts';

const MiB = 1024 * 1024;
const BOTH: readonly MergeEngineName[] = ['duckdb', 'polars'];

describe('chooseMergeEngine', () => {
  const wide = { columns: 50, inputs: 100, inputBytes: 111 * 1e6, dedup: undefined };
  it.each([
    ['a wide table of 1 MB inputs (the bench case)', wide, BOTH, 'polars'],
    ['at the column threshold', { ...wide, columns: POLARS_MIN_COLUMNS }, BOTH, 'polars'],
    ['one column fewer', { ...wide, columns: POLARS_MIN_COLUMNS - 1 }, BOTH, 'duckdb'],
    ['a narrow table (6 columns)', { ...wide, columns: 6 }, BOTH, 'duckdb'],
    [
      'small inputs (below the average size)',
      { ...wide, inputs: 2000, inputBytes: 2000 * (POLARS_MIN_AVERAGE_INPUT_BYTES - 1) },
      BOTH,
      'duckdb',
    ],
    [
      'over the input bytes polars holds',
      { ...wide, inputBytes: POLARS_MAX_INPUT_BYTES + 1 },
      BOTH,
      'duckdb',
    ],
    ['dedup "exact"', { ...wide, dedup: { mode: 'exact' as const } }, BOTH, 'duckdb'],
    ['dedup "last"', { ...wide, dedup: { mode: 'last' as const, keys: ['host', 'time'] } }, BOTH, 'duckdb'],
    ['polars not offered (not loaded, or a type it does not write)', wide, ['duckdb'] as const, 'duckdb'],
  ])('%s', (_name, job, able, expected) => {
    expect(chooseMergeEngine(job, () => able)).toBe(expected);
  });

  it('asks which engines can write only for a wide job: asking may load polars', () => {
    let asked = 0;
    const able = () => {
      asked++;
      return BOTH;
    };
    expect(chooseMergeEngine({ ...wide, columns: 6 }, able)).toBe('duckdb');
    expect(chooseMergeEngine({ ...wide, inputs: 2000, inputBytes: 2000 * 1024 }, able)).toBe('duckdb');
    expect(asked).toBe(0);
    expect(chooseMergeEngine(wide, able)).toBe('polars');
    expect(asked).toBe(1);
  });

  it('the input bytes bound is well above the bench case', () => {
    expect(POLARS_MAX_INPUT_BYTES).toBeGreaterThan(111 * MiB);
  });
});

// ---- the compact step on a real lake ----

const reasons: string[] = [];
const polars = (await loadPolarsWriter({ onUnavailable: (reason) => reasons.push(reason) })) as MergeWriter;

const PARTITION = 'mydb/cpu/2025/01/14/10/';
const CONFIG: ConfigInput = {
  layout: 'arc',
  tiers: { hourly: { minFiles: 2, minAgeSeconds: 3600 }, daily: { minFiles: 2, minAgeSeconds: 3 * 3600 } },
  quietSeconds: 0,
};
const FILES = 3;
const ROWS = 3000;

let engine: DuckDbEngine;
let scratch: string;
const lakes: string[] = [];

useEngineAndDir(
  'merge-engine-',
  (e, dir) => {
    engine = e;
    scratch = dir;
  },
  { engine: () => ({ threads: 2, mergeWriters: [polars] }) },
);

afterEach(async () => {
  for (const dir of lakes.splice(0)) await rm(dir, { recursive: true, force: true });
});

interface Lake {
  readonly dir: string;
  readonly store: LocalFolderStore;
  readonly config: CompactorConfig;
}

/** FILES inputs of ROWS rows (ids 1..FILES*ROWS) with `extraColumns` DOUBLE columns beside the sample's six. */
async function lake(extraColumns: number, config: ConfigInput = CONFIG): Promise<Lake> {
  const dir = await mkdtemp(join(tmpdir(), 'merge-engine-lake-'));
  lakes.push(dir);
  const l = { dir, store: testStore(dir), config: parseConfig(config) };
  for (let i = 0; i < FILES; i++) {
    const local = join(scratch, `${randomBytes(4).toString('hex')}.parquet`);
    await writeSampleParquet(engine, local, {
      rows: ROWS,
      firstId: i * ROWS + 1,
      startTimeMs: Date.UTC(2025, 0, 14, 10),
      spanMs: 3_600_000,
      extraColumns,
    });
    await l.store.put(`${PARTITION}cpu_20250114_10${i}500_${i}.parquet`, { file: local });
  }
  return l;
}

async function jobOf(l: Lake): Promise<Job> {
  const plan = await planTier(l.store, l.config, systemClock, 'hourly');
  const job = assignJobs(plan, {
    clock: systemClock,
    randomHex: () => randomBytes(4).toString('hex'),
    executionId: 'exec-merge-engine',
  }).find((j) => j.partition === PARTITION);
  if (!job) throw new Error(`no job planned for ${PARTITION}`);
  return job;
}

function deps(l: Lake, using: Engine = engine): CompactDeps {
  return {
    store: l.store,
    config: l.config,
    clock: systemClock,
    engine: using,
    workDir: join(scratch, 'work'),
  };
}

async function ids(l: Lake): Promise<number[]> {
  const paths: string[] = [];
  for await (const object of l.store.list(PARTITION)) {
    if (l.config.layout.isDataKey(object.key)) paths.push(join(l.dir, object.key));
  }
  return (await readIds(engine, paths)).map(Number);
}

const ALL_IDS = Array.from({ length: FILES * ROWS }, (_, i) => i + 1);

/**
 * The real engine, recording which merge engine each compact asked for; with `dropRow`, the first
 * output is a row short after compact: what a bug in the merge would write.
 */
class Watched implements Engine {
  readonly engines: MergeEngineName[] = [];
  readonly #dropRow: boolean;

  constructor({ dropRow }: { readonly dropRow: boolean }) {
    this.#dropRow = dropRow;
  }

  inspect(file: string): Promise<InputInfo> {
    return engine.inspect(file);
  }

  mergeEngines(shape: MergeShape): readonly MergeEngineName[] {
    return engine.mergeEngines(shape);
  }

  async compact(request: CompactRequest): Promise<CompactOutput[]> {
    this.engines.push(request.mergeEngine ?? 'duckdb');
    const outputs = await engine.compact(request);
    if (!this.#dropRow) return outputs;
    const [first, ...rest] = outputs;
    if (!first) throw new Error('no output');
    const temp = `${first.path}.tmp`;
    const source = `read_parquet(${parquetPath(first.path)})`;
    await engine.query(
      `COPY (SELECT * FROM ${source} WHERE id <> (SELECT max(id) FROM ${source})) TO ${quoteString(temp)} (FORMAT parquet)`,
    );
    await rename(temp, first.path);
    const [meta] = await engine.query(
      `SELECT num_rows FROM parquet_file_metadata(${parquetPath(first.path)})`,
    );
    return [{ ...first, rows: Number(meta?.num_rows) }, ...rest];
  }

  countDistinct(request: DistinctRequest): Promise<DistinctCount> {
    return engine.countDistinct(request);
  }

  async close(): Promise<void> {}
}

describe('the compact step picks the merge engine by the job', () => {
  it('polars loads here', () => {
    expect(reasons).toEqual([]);
  });

  it(`a wide table (${6 + POLARS_MIN_COLUMNS} columns, inputs over the average size) merges on polars and passes verification`, async () => {
    const l = await lake(POLARS_MIN_COLUMNS);
    const job = await jobOf(l);
    const staged = await compactStep(deps(l), job);
    expect(staged).toMatchObject({
      status: 'done',
      state: 'staged',
      mergeEngine: 'polars',
      inputRows: FILES * ROWS,
      outputRows: FILES * ROWS,
    });
    expect(await runJob(deps(l), job)).toMatchObject({ status: 'compacted' });
    expect(await ids(l)).toEqual(ALL_IDS);
  });

  it('a narrow table merges on DuckDB', async () => {
    const l = await lake(0);
    const staged = await compactStep(deps(l), await jobOf(l));
    expect(staged).toMatchObject({ status: 'done', mergeEngine: 'duckdb', outputRows: FILES * ROWS });
  });

  it('a wide table with dedup merges on DuckDB, its distinct rows verified', async () => {
    const l = await lake(POLARS_MIN_COLUMNS, { ...CONFIG, dedup: { 'mydb/cpu/': { mode: 'exact' } } });
    const staged = await compactStep(deps(l), await jobOf(l));
    expect(staged).toMatchObject({ status: 'done', mergeEngine: 'duckdb', distinctRows: FILES * ROWS });
  });

  it('a polars output a row short fails the step with RowCountMismatchError; nothing is published', async () => {
    const l = await lake(POLARS_MIN_COLUMNS);
    const job = await jobOf(l);
    const before: string[] = [];
    for await (const object of l.store.list('')) before.push(`${object.key} ${object.etag}`);
    const dropping = new Watched({ dropRow: true });
    const failed = compactStep(deps(l, dropping), job);
    await expect(failed).rejects.toThrow(RowCountMismatchError);
    await expect(failed).rejects.toThrow(
      new RegExp(
        `inputs hold ${FILES * ROWS} rows but the output holds ${FILES * ROWS - 1}; nothing was published`,
      ),
    );
    expect(dropping.engines).toEqual(['polars']);
    expect(await l.store.head(manifestKey(l.config.layout, job.tier, job.partition))).toBeUndefined();
    const after: string[] = [];
    for await (const object of l.store.list('')) {
      if (!object.key.startsWith('_compaction/failures/')) after.push(`${object.key} ${object.etag}`);
    }
    expect(after.sort()).toEqual(before.sort());
    const staging: string[] = [];
    for await (const object of l.store.list(stagingRoot(l.config.layout))) staging.push(object.key);
    expect(staging).toEqual([]);
  });

  it('an input damaged past its footer fails the polars merge and is quarantined, as on DuckDB', async () => {
    const l = await lake(POLARS_MIN_COLUMNS);
    const local = join(scratch, `${randomBytes(4).toString('hex')}.parquet`);
    await writeSampleParquet(engine, local, {
      rows: ROWS,
      firstId: 100_001,
      startTimeMs: Date.UTC(2025, 0, 14, 10),
      spanMs: 3_600_000,
      extraColumns: POLARS_MIN_COLUMNS,
    });
    const bytes = Buffer.from(await readFile(local));
    // Data pages scrambled, the footer intact: only reading the data shows it.
    for (let i = 8; i < Math.floor(bytes.length / 2); i++) bytes[i] = ((bytes[i] ?? 0) * 31 + 7) & 0xff;
    const damaged = `${PARTITION}cpu_20250114_109500_9.parquet`;
    await l.store.put(damaged, bytes);
    const watched = new Watched({ dropRow: false });
    const result = await compactStep(deps(l, watched), await jobOf(l));
    expect(watched.engines).toEqual(['polars']);
    expect(result).toMatchObject({ status: 'skipped', quarantinedInputs: 1 });
    expect(result.reason).toContain(`input ${damaged} is unreadable past its footer: quarantined`);
  });
});
