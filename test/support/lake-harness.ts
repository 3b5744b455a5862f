/**
 * Test lakes and invariant checks shared by the protocol, sweep and CLI tests.
 * Every row carries a unique id, so "no row lost or duplicated" is checked exactly, by id.
 */

import { cp, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect } from 'vitest';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { isMissing } from '../../functions/adapters/local-store/durable-fs.ts';
import type { LocalFolderStore } from '../../functions/adapters/local-store/local-store.ts';
import { readIds, writeSampleParquet } from '../../functions/adapters/sample-data.ts';
import {
  type CompactorConfig,
  type ConfigInput,
  parseConfig,
  type TierName,
} from '../../functions/core/config.ts';
import { type CycleDeps, runCycle } from '../../functions/core/cycle.ts';
import { systemClock } from '../../functions/core/engine.ts';
import {
  isAtOrPast,
  jobIdOfOutput,
  type Manifest,
  manifestsRoot,
  parseManifest,
  quarantineRoot,
  receiptsRoot,
  stagingRoot,
} from '../../functions/core/manifest/manifest.ts';
import { getBytesIfExists, type ObjectStore } from '../../functions/core/object-store.ts';
import { listReceipts } from '../../functions/core/receipts.ts';
import { type RecoveryReport, recover } from '../../functions/core/recovery.ts';
import { visibleFiles } from '../../functions/core/visible.ts';
import { useEngineAndDir } from './engine-fixture.ts';
import { type CallRecord, MUTATING_OPS } from './fault-store.ts';
import { fileHash } from './linked-tree.ts';
import { testStore } from './test-store.ts';

const HOUR = 3_600_000;

export interface LakeFile {
  readonly key: string;
  readonly rows: number;
}

export interface TemplateLake {
  readonly dir: string;
  readonly totalRows: number;
  readonly config: CompactorConfig;
}

/** Writes files with consecutive ids starting at 1; returns the total. */
export async function writeLake(
  engine: DuckDbEngine,
  dir: string,
  files: readonly LakeFile[],
  firstId = 1,
): Promise<number> {
  const store = testStore(dir);
  const scratch = await mkdtemp(join(tmpdir(), 'lake-gen-'));
  let id = firstId;
  try {
    for (const [i, file] of files.entries()) {
      const local = join(scratch, `f${i}.parquet`);
      const hour = /(\d{4})\/(\d{2})\/(\d{2})\/(\d{2})\//.exec(file.key);
      const start = hour
        ? Date.UTC(Number(hour[1]), Number(hour[2]) - 1, Number(hour[3]), Number(hour[4]))
        : Date.UTC(2025, 0, 14);
      await writeSampleParquet(engine, local, {
        rows: file.rows,
        firstId: id,
        startTimeMs: start,
        spanMs: HOUR,
      });
      await store.put(file.key, { file: local });
      id += file.rows;
    }
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
  return id - firstId;
}

export const SWEEP_CONFIG: ConfigInput = {
  layout: 'arc',
  tiers: { hourly: { minFiles: 2, minAgeSeconds: 3600 }, daily: { minFiles: 2, minAgeSeconds: 3 * 3600 } },
  quietSeconds: 0,
  // Small enough that the first hourly partition splits into two outputs.
  targetFileBytes: 3000,
  rowGroupSize: 2048,
};

/** The hourly sweep's lake: two hour folders of raw files, plus objects that are never data. */
export async function hourlyTemplate(engine: DuckDbEngine): Promise<TemplateLake> {
  const dir = await mkdtemp(join(tmpdir(), 'tpl-hourly-'));
  const totalRows = await writeLake(engine, dir, [
    ...HOURLY_IN_10.map((key) => ({ key, rows: 40 })),
    ...HOURLY_IN_11.map((key) => ({ key, rows: 30 })),
  ]);
  const store = testStore(dir);
  await store.put('db/cpu/2025/01/15/10/_SUCCESS', Buffer.from(''));
  await store.put('db/cpu/2025/01/15/10/.cpu_20250115_100500_1.parquet.crc', Buffer.from('crc'));
  return { dir, totalRows, config: parseConfig(SWEEP_CONFIG) };
}

export const HOURLY_UNTOUCHED = [
  'db/cpu/2025/01/15/10/_SUCCESS',
  'db/cpu/2025/01/15/10/.cpu_20250115_100500_1.parquet.crc',
];

/** The daily sweep's lake: hourly outputs (Arc's names) of one day, plus a small daily file. */
export async function dailyTemplate(engine: DuckDbEngine): Promise<TemplateLake> {
  const dir = await mkdtemp(join(tmpdir(), 'tpl-daily-'));
  const totalRows = await writeLake(engine, dir, [
    { key: 'db/cpu/2025/01/14/01/cpu_20250114_010000_compacted.parquet', rows: 50 },
    { key: 'db/cpu/2025/01/14/02/cpu_20250114_020000_compacted.parquet', rows: 50 },
    { key: 'db/cpu/2025/01/14/03/cpu_20250114_030000_compacted.parquet', rows: 50 },
    { key: 'db/cpu/2025/01/14/cpu_20250114_daily.parquet', rows: 30 },
  ]);
  return { dir, totalRows, config: parseConfig({ ...SWEEP_CONFIG, targetFileBytes: 512 * 1024 * 1024 }) };
}

/**
 * The monthly sweep's lake: daily outputs of three days of January 2025 (one in an hour folder,
 * as Arc may leave it) and a small monthly file in the month folder.
 */
export async function monthlyTemplate(engine: DuckDbEngine): Promise<TemplateLake> {
  const dir = await mkdtemp(join(tmpdir(), 'tpl-monthly-'));
  const totalRows = await writeLake(engine, dir, [
    { key: 'db/cpu/2025/01/03/cpu_20250103_daily.parquet', rows: 40 },
    { key: 'db/cpu/2025/01/17/cpu_20250117_daily.parquet', rows: 40 },
    { key: 'db/cpu/2025/01/31/23/cpu_20250131_23_daily.parquet', rows: 20 },
    { key: 'db/cpu/2025/01/cpu_202501_monthly.parquet', rows: 30 },
  ]);
  return {
    dir,
    totalRows,
    config: parseConfig({
      ...SWEEP_CONFIG,
      tiers: { ...SWEEP_CONFIG.tiers, monthly: { enabled: true, minFiles: 2, minAgeSeconds: 86_400 } },
      targetFileBytes: 512 * 1024 * 1024,
    }),
  };
}

/**
 * A test file's hourly template lake, its engine and work folder, and fresh copies of the
 * template (`lake()`), each removed after its test. Read the fields inside tests: they are set
 * once the file's fixture has run.
 */
export function useHourlyTemplate(prefix: string): {
  readonly engine: DuckDbEngine;
  readonly workDir: string;
  readonly template: TemplateLake;
  lake(): Promise<{ dir: string; store: LocalFolderStore; config: CompactorConfig }>;
} {
  let engine: DuckDbEngine | undefined;
  let workDir: string | undefined;
  let template: TemplateLake | undefined;
  const lakes: string[] = [];
  useEngineAndDir(prefix, async (e, dir) => {
    engine = e;
    workDir = join(dir, 'work');
    template = await hourlyTemplate(e);
  });
  afterEach(async () => {
    for (const dir of lakes.splice(0)) await rm(dir, { recursive: true, force: true });
  });
  const ready = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error(`${prefix}: the template lake is not made yet`);
    return value;
  };
  return {
    get engine() {
      return ready(engine);
    },
    get workDir() {
      return ready(workDir);
    },
    get template() {
      return ready(template);
    },
    async lake() {
      const t = ready(template);
      const dir = await copyLake(t);
      lakes.push(dir);
      return { dir, store: testStore(dir), config: t.config };
    },
  };
}

export async function copyLake(template: TemplateLake): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'lake-'));
  await cp(template.dir, dir, { recursive: true });
  return dir;
}

/**
 * Row ids of the file at `path`, remembered by the hash of its bytes for the whole test file: the
 * sweeps give every scenario a fresh checker over a lake whose files are mostly the same bytes,
 * and reading those ids again with DuckDB was a sixth of a sweep's time. Keyed by content, not
 * by path or ETag, so a hit is the very bytes DuckDB read; a file replaced while DuckDB read it
 * (a concurrent writer) is read again next time rather than remembered.
 */
const IDS_BY_CONTENT = new Map<string, readonly bigint[]>();

async function idsByContent(engine: DuckDbEngine, path: string): Promise<readonly bigint[]> {
  const before = contentHash(path);
  const known = before === undefined ? undefined : IDS_BY_CONTENT.get(before);
  if (known) return known;
  const ids = await readIds(engine, [path]);
  if (before !== undefined && contentHash(path) === before) IDS_BY_CONTENT.set(before, ids);
  return ids;
}

function contentHash(path: string): string | undefined {
  try {
    return fileHash(path);
  } catch (error) {
    // Gone meanwhile: DuckDB's read reports it, as before.
    if (isMissing(error)) return undefined;
    throw error;
  }
}

/**
 * Checks the invariants against the real store after every call:
 * I1 every original id is present in some data or staged object;
 * the visible view holds every id exactly once (the exactly-once reader);
 * I3 every delete of a data key is conditioned on the ETag a valid manifest recorded.
 */
export class LakeChecker {
  readonly #engine: DuckDbEngine;
  readonly #dir: string;
  readonly #store: ObjectStore;
  readonly #config: CompactorConfig;
  readonly #totalRows: number;
  readonly #ids = new Map<string, readonly bigint[]>();
  observations = 0;
  /** Data-key deletes audited: a sweep that audited none proves nothing. */
  auditedDeletes = 0;
  checkVisible = true;
  /**
   * Row ids of expired files (retention): they may vanish at any time, are never visible twice,
   * and must be gone at quiescence. Every other id holds as always.
   */
  expired: ReadonlySet<number> = new Set();

  constructor(
    engine: DuckDbEngine,
    dir: string,
    store: ObjectStore,
    config: CompactorConfig,
    totalRows: number,
  ) {
    this.#engine = engine;
    this.#dir = dir;
    this.#store = store;
    this.#config = config;
    this.#totalRows = totalRows;
  }

  async #idsOf(key: string, etag: string): Promise<readonly bigint[]> {
    const cacheKey = `${key}\0${etag}`;
    let ids = this.#ids.get(cacheKey);
    if (!ids) {
      ids = await idsByContent(this.#engine, join(this.#dir, key));
      this.#ids.set(cacheKey, ids);
    }
    return ids;
  }

  #counts(): Uint32Array {
    return new Uint32Array(this.#totalRows + 1);
  }

  /**
   * Every invariant failure seen during a run. The failing call throws too, but the code under
   * test may catch that (a failed partition), so scenarios assert this list is empty.
   */
  readonly violations: string[] = [];

  observe = (call?: CallRecord): Promise<void> => this.#record(this.#observe(call));

  audit = (call: CallRecord): Promise<void> => this.#record(this.#audit(call));

  /**
   * `observe`, after only the calls that can change the store. Where one actor at a time uses
   * the store (the crash-point sweeps), a read leaves the lake exactly as the last write's
   * observation found it, so observing after it re-checks a state already checked; the sweeps
   * spent 70% of their time doing that. Observe once before the run too, for the state no write
   * led to. Runs with concurrent actors keep `observe`, which also looks mid-way through a write.
   */
  observeWrites = (call: CallRecord): Promise<void> =>
    MUTATING_OPS.has(call.op) ? this.observe(call) : Promise.resolve();

  async #record(check: Promise<void>): Promise<void> {
    try {
      await check;
    } catch (error) {
      this.violations.push((error as Error).message);
      throw error;
    }
  }

  /** Inputs (key + ETag) of every manifest seen at or past verified; finals of those seen before published. */
  readonly #deletable = new Set<string>();
  readonly #rollbackable = new Set<string>();

  /** Jobs seen in a manifest at or past published (committed), and every job seen at all. */
  readonly #committedJobs = new Set<string>();
  readonly #seenJobs = new Set<string>();

  #remember(manifests: readonly Manifest[]): void {
    for (const m of manifests) {
      this.#seenJobs.add(m.jobId);
      if (isAtOrPast(m, 'published')) this.#committedJobs.add(m.jobId);
      if (isAtOrPast(m, 'verified')) for (const i of m.inputs) this.#deletable.add(`${i.key}\0${i.etag}`);
      if (!isAtOrPast(m, 'published')) for (const o of m.outputs ?? []) this.#rollbackable.add(o.finalKey);
    }
  }

  async #observe(call?: CallRecord): Promise<void> {
    this.observations++;
    this.#remember(await this.liveManifests());
    const { layout } = this.#config;
    const present = this.#counts();
    for await (const object of this.#store.list(layout.dataPrefix)) {
      const isData = layout.isDataKey(object.key);
      const isStaged = object.key.startsWith(stagingRoot(layout));
      if (!isData && !isStaged) continue;
      for (const id of await this.#idsOf(object.key, object.etag)) present[Number(id)] = 1;
    }
    let missing = present.indexOf(0, 1);
    while (missing > 0 && this.expired.has(missing)) missing = present.indexOf(0, missing + 1);
    expect(missing, `I1: row id ${missing} missing after call ${call?.n} ${call?.op} ${call?.key}`).toBe(-1);
    if (!this.checkVisible) return;
    const view = await visibleFiles(this.#store, this.#config);
    const seen = this.#counts();
    for (const file of view.files)
      for (const id of await this.#idsOf(file.key, file.etag)) seen[Number(id)] = (seen[Number(id)] ?? 0) + 1;
    for (let id = 1; id <= this.#totalRows; id++) {
      if (seen[id] !== 1 && !(this.expired.has(id) && seen[id] === 0)) {
        expect.fail(
          `visible view holds row id ${id} ${seen[id]} times after call ${call?.n} ${call?.op} ${call?.key}`,
        );
      }
    }
  }

  async #audit(call: CallRecord): Promise<void> {
    if (call.op !== 'deleteMany' || !call.deletes) return;
    const { layout } = this.#config;
    for (const request of call.deletes) {
      if (request.key.startsWith(manifestsRoot(layout))) {
        expect(request.etag, `I3: manifest ${request.key} deleted without an ETag condition`).toBeDefined();
        continue;
      }
      if (!layout.isDataKey(request.key)) continue;
      this.auditedDeletes++;
      expect(request.etag, `I3: data key ${request.key} deleted without an ETag condition`).toBeDefined();
      const file = layout.parse(request.key);
      expect(file, `I3: deleted ${request.key} is not a data file of the layout`).toBeDefined();
      // Named by a valid manifest that allowed it when it existed: a zombie step may delete after
      // the job was cleared, which the ETag condition keeps harmless.
      this.#remember(await this.liveManifests());
      expect(
        this.#deletable.has(`${request.key}\0${request.etag}`) || this.#rollbackable.has(request.key),
        `I3: deleted ${request.key} is not named by a valid manifest in a state that allows it`,
      ).toBe(true);
    }
  }

  async #assertReceipts(): Promise<void> {
    const listed = await listReceipts(this.#store, this.#config);
    const receipts = listed.flatMap((r) => ('receipt' in r ? [r] : []));
    expect(listed.length - receipts.length, 'every receipt reads back').toBe(0);
    const { layout } = this.#config;
    const byJob = new Map(receipts.map(({ receipt }) => [receipt.jobId, receipt]));
    const mergedLater = new Set(receipts.flatMap(({ receipt }) => receipt.inputs.map((i) => i.key)));
    const lake = new Map<string, { readonly size: number; readonly etag: string }>();
    for await (const object of this.#store.list(layout.dataPrefix)) {
      if (!layout.isDataKey(object.key)) continue;
      lake.set(object.key, { size: object.size, etag: object.etag });
      const jobId = jobIdOfOutput(object.key);
      if (jobId === undefined) continue;
      const output = byJob.get(jobId)?.outputs.find((o) => o.key === object.key);
      expect(output?.size, `output ${object.key} has no receipt of job ${jobId} naming it`).toBe(object.size);
    }
    for (const { key, receipt } of receipts) {
      for (const output of receipt.outputs) {
        expect(
          lake.has(output.key) || mergedLater.has(output.key),
          `receipt ${key}: output ${output.key} is neither in the lake nor merged by a later job`,
        ).toBe(true);
      }
      const kept = new Set(
        [...(receipt.keptInputs ?? []), ...(receipt.quarantinedInputs ?? [])].map((k) => k.key),
      );
      for (const input of receipt.inputs) {
        if (!kept.has(input.key) && lake.get(input.key)?.etag === input.etag)
          expect.fail(`receipt ${key}: input ${input.key} is still in the lake at the version it read`);
      }
    }
    if (this.#seenJobs.size > 0) {
      const receipted = [...byJob.keys()].filter((id) => this.#seenJobs.has(id)).sort();
      expect(receipted, 'every committed job has one receipt, a rolled-back job none').toEqual(
        [...this.#committedJobs].sort(),
      );
    }
  }

  async liveManifests(): Promise<Manifest[]> {
    const out: Manifest[] = [];
    for await (const object of this.#store.list(manifestsRoot(this.#config.layout))) {
      // A manifest cleared between the listing and the read (a concurrent delivery of the same
      // job finished it) is no longer live; any other read error still fails the check.
      const read = await getBytesIfExists(this.#store, object.key);
      if (read !== undefined)
        out.push(parseManifest(this.#config, this.#store.location, object.key, read.body));
    }
    return out;
  }

  /** I2 and I4 at quiescence: exact rows in plain data files, nothing left in the state root. */
  async assertQuiescent(
    options: { readonly levels?: ReadonlySet<number>; readonly untouched?: readonly string[] } = {},
  ): Promise<void> {
    const expectLevels = options.levels;
    const { layout } = this.#config;
    const leftovers: string[] = [];
    for await (const object of this.#store.list(layout.stateRoot)) {
      // Failure counts are bookkeeping for backoff, not a job's state; a later success removes them.
      // Receipts are the record each committed job leaves: checked below.
      if (
        !object.key.startsWith(quarantineRoot(layout)) &&
        !object.key.startsWith(`${layout.stateRoot}failures/`) &&
        !object.key.startsWith(receiptsRoot(layout))
      ) {
        leftovers.push(object.key);
      }
    }
    expect(leftovers, 'I4: state root must be empty at quiescence').toEqual([]);
    const quarantined: string[] = [];
    for await (const object of this.#store.list(quarantineRoot(layout))) {
      const { body } = await this.#store.getBytes(object.key);
      quarantined.push(`${object.key}: ${(JSON.parse(body.toString('utf8')) as { reason?: string }).reason}`);
    }
    expect(quarantined, 'transient faults and crashes must never quarantine').toEqual([]);
    expect(await this.#store.listIncompleteUploads(''), 'I4: no incomplete upload').toEqual([]);
    const counts = this.#counts();
    for await (const object of this.#store.list(layout.dataPrefix)) {
      if (!layout.isDataKey(object.key)) continue;
      const file = layout.parse(object.key);
      if (expectLevels && file) {
        expect(expectLevels.has(file.level), `unexpected level ${file.level} file ${object.key}`).toBe(true);
      }
      for (const id of await this.#idsOf(object.key, object.etag))
        counts[Number(id)] = (counts[Number(id)] ?? 0) + 1;
    }
    for (let id = 1; id <= this.#totalRows; id++) {
      const want = this.expired.has(id) ? 0 : 1;
      if (counts[id] !== want)
        expect.fail(`I2: row id ${id} is present ${counts[id]} times at quiescence, not ${want}`);
    }
    await this.#assertReceipts();
    // Objects that are not data are never read, moved or deleted.
    for (const key of options.untouched ?? []) {
      expect(await this.#store.head(key), `${key} must be left alone`).toBeDefined();
    }
  }
}

/** Recovery until it changes nothing (I6: it must get there in a few passes). */
export async function recoverUntilQuiet(
  deps: Parameters<typeof recover>[0],
  executionPrefix: string,
  maxPasses = 4,
): Promise<RecoveryReport[]> {
  const reports: RecoveryReport[] = [];
  for (let pass = 1; pass <= maxPasses; pass++) {
    const report = await recover({ ...deps, executionId: `${executionPrefix}-${pass}` });
    reports.push(report);
    if (!report.changed) return reports;
  }
  throw new Error(`I6: recovery still changing things after ${maxPasses} passes`);
}

/** Job ids must be unique across every execution of a test run, as random ones are in production. */
let jobCounter = 0;

export function sweepDeps(
  store: ObjectStore,
  config: CompactorConfig,
  engine: DuckDbEngine,
  workDir: string,
  executionId: string,
  alive: ReadonlySet<string>,
): CycleDeps {
  return {
    store,
    config,
    clock: systemClock,
    engine,
    workDir,
    executionId,
    isOwnerAlive: async (id) => alive.has(id),
    concurrency: 1,
    randomHex: () => (++jobCounter).toString(16).padStart(8, '0'),
    sleep: async () => {},
  };
}

export { runCycle, type TierName };

/** The hourly template's hours and files, for tests that name them: ids 1..120 in hour 10, 121..180 in 11. */
export const HOURLY_HOUR_10 = 'db/cpu/2025/01/15/10/';
export const HOURLY_HOUR_11 = 'db/cpu/2025/01/15/11/';
export const HOURLY_IN_10 = [
  `${HOURLY_HOUR_10}cpu_20250115_100500_1.parquet`,
  `${HOURLY_HOUR_10}cpu_20250115_101500_2.parquet`,
  `${HOURLY_HOUR_10}cpu_20250115_103000_3.parquet`,
] as const;
export const HOURLY_IN_11 = [
  `${HOURLY_HOUR_11}cpu_20250115_110500_4.parquet`,
  `${HOURLY_HOUR_11}cpu_20250115_113000_5.parquet`,
] as const;
