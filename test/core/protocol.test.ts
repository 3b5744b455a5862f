/**
 * The job protocol one step at a time, on real Parquet in a real LocalFolderStore with DuckDB:
 * claim, stage (changed, corrupt and conflicting inputs), publish, verify, delete inputs, clear;
 * every step's idempotence, the lease check, and the outputs' names and contents.
 */

import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import {
  type DuckDbEngine,
  parquetPath,
  quoteString,
} from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import type { LocalFolderStore } from '../../functions/adapters/local-store/local-store.ts';
import { readIds, writeSampleParquet } from '../../functions/adapters/sample-data.ts';
import type { CompactorConfig, TierName } from '../../functions/core/config.ts';
import { assignJobs, runCycle, runJob } from '../../functions/core/cycle.ts';
import { type Clock, type CompactRequest, type Engine, systemClock } from '../../functions/core/engine.ts';
import {
  FinalKeyConflictError,
  InputUnreadableError,
  LeaseExpiredError,
  PreconditionFailedError,
  SchemaConflictError,
  VerificationFailedError,
} from '../../functions/core/errors.ts';
import {
  type InputRef,
  type Manifest,
  manifestKey,
  type OutputRef,
  parseManifest,
  quarantineRoot,
  serializeManifest,
  stagingRoot,
} from '../../functions/core/manifest/manifest.ts';
import { ForwardingStore, type ObjectStore } from '../../functions/core/object-store.ts';
import { planTier } from '../../functions/core/planner/planner.ts';
import {
  type CompactDeps,
  clearManifestStep,
  compactStep,
  deleteInputsStep,
  downloadConcurrency,
  inputPaths,
  type Job,
  type JobEvent,
  META_JOB_ID,
  publishStep,
  type StepResult,
  verifyStep,
} from '../../functions/core/protocol.ts';
import { visibleFiles } from '../../functions/core/visible.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { type CallRecord, CrashedError, FaultStore } from '../support/fault-store.ts';
import {
  copyLake,
  dailyTemplate,
  HOURLY_HOUR_10,
  HOURLY_HOUR_11,
  HOURLY_IN_10,
  HOURLY_IN_11,
  HOURLY_UNTOUCHED,
  hourlyTemplate,
  LakeChecker,
  sweepDeps,
  type TemplateLake,
} from '../support/lake-harness.ts';
import { testStore } from '../support/test-store.ts';

const HOUR = 3_600_000;
// The hourly template: hour 10 holds ids 1..120 in three files, hour 11 ids 121..180 in two.
const HOUR_10 = HOURLY_HOUR_10;
const HOUR_11 = HOURLY_HOUR_11;
const IN_10 = HOURLY_IN_10;
const IN_11 = HOURLY_IN_11;
const TOTAL_ROWS = 180;
const WRITES = new Set(['put', 'copy', 'deleteMany', 'abortIncompleteUpload']);

let engine: DuckDbEngine;
let workDir: string;
let scratch: string;
let hourly: TemplateLake;
let daily: TemplateLake;
const lakes: string[] = [];

useEngineAndDir('protocol-', async (e, dir) => {
  engine = e;
  scratch = dir;
  workDir = join(dir, 'work');
  hourly = await hourlyTemplate(engine);
  daily = await dailyTemplate(engine);
});

afterEach(async () => {
  for (const dir of lakes.splice(0)) await rm(dir, { recursive: true, force: true });
});

afterAll(async () => {
  for (const dir of [hourly.dir, daily.dir]) await rm(dir, { recursive: true, force: true });
});

// ---- helpers ----

interface Lake {
  readonly dir: string;
  readonly store: LocalFolderStore;
  readonly config: CompactorConfig;
}

async function lake(template: TemplateLake = hourly): Promise<Lake> {
  const dir = await copyLake(template);
  lakes.push(dir);
  return { dir, store: testStore(dir), config: template.config };
}

function deps(l: Lake, store: ObjectStore = l.store, clock: Clock = systemClock): CompactDeps {
  return { store, config: l.config, clock, engine, workDir };
}

const randomHex = () => randomBytes(4).toString('hex');

async function plan(l: Lake, tier: TierName = 'hourly', executionId = 'exec-A'): Promise<Job[]> {
  const planned = await planTier(l.store, l.config, systemClock, tier);
  return assignJobs(planned, { clock: systemClock, randomHex, executionId });
}

async function jobFor(l: Lake, partition: string, tier: TierName = 'hourly'): Promise<Job> {
  const job = (await plan(l, tier)).find((j) => j.partition === partition);
  if (!job) throw new Error(`no ${tier} job planned for ${partition}`);
  return job;
}

function at<T>(items: readonly T[], index: number): T {
  const item = items[index];
  if (item === undefined) throw new Error(`no item ${index}`);
  return item;
}

async function manifestOf(l: Lake, job: Job): Promise<Manifest | undefined> {
  const key = manifestKey(l.config.layout, job.tier, job.partition);
  const head = await l.store.head(key);
  if (!head) return undefined;
  const { body } = await l.store.getBytes(key);
  return parseManifest(l.config, l.store.location, key, body);
}

async function requireManifest(l: Lake, job: Job): Promise<Manifest> {
  const manifest = await manifestOf(l, job);
  if (!manifest) throw new Error(`no manifest for ${job.partition}`);
  return manifest;
}

/** Every object (data and state root) with its ETag: "changed nothing" is compared on this. */
async function snapshot(store: ObjectStore): Promise<string[]> {
  const out: string[] = [];
  for await (const object of store.list('')) out.push(`${object.key} ${object.etag}`);
  return out;
}

async function keys(store: ObjectStore, prefix: string): Promise<string[]> {
  const out: string[] = [];
  for await (const object of store.list(prefix)) out.push(object.key);
  return out;
}

async function etags(store: ObjectStore, list: readonly string[]): Promise<(string | undefined)[]> {
  return Promise.all(list.map(async (key) => (await store.head(key))?.etag));
}

function range(from: number, to: number): bigint[] {
  return Array.from({ length: to - from + 1 }, (_, i) => BigInt(from + i));
}

function sorted(ids: readonly bigint[]): bigint[] {
  return [...ids].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

async function idsOf(l: Lake, objectKeys: readonly string[]): Promise<bigint[]> {
  return readIds(
    engine,
    objectKeys.map((k) => join(l.dir, k)),
  );
}

/** Ids of every data file (plain glob reader), minus the named non-Parquet ones. */
async function dataIds(l: Lake, except: readonly string[] = []): Promise<bigint[]> {
  const data = (await keys(l.store, '')).filter((k) => l.config.layout.isDataKey(k) && !except.includes(k));
  return idsOf(l, data);
}

/** Ids the consistent reader sees (the visible-files view). */
async function visibleIds(l: Lake): Promise<bigint[]> {
  const view = await visibleFiles(l.store, l.config);
  return idsOf(
    l,
    view.files.map((f) => f.key),
  );
}

/** Writes sample rows to `key` (new object or replacement), timed inside its hour. */
async function putSample(
  store: ObjectStore,
  key: string,
  spec: { rows: number; firstId: number; countType?: 'INTEGER' | 'BIGINT' },
): Promise<string> {
  const local = join(scratch, `${randomHex()}.parquet`);
  const hour = /(\d{4})\/(\d{2})\/(\d{2})\/(\d{2})\//.exec(key);
  const start = hour ? Date.UTC(Number(hour[1]), Number(hour[2]) - 1, Number(hour[3]), Number(hour[4])) : 0;
  await writeSampleParquet(engine, local, {
    rows: spec.rows,
    firstId: spec.firstId,
    startTimeMs: start,
    spanMs: HOUR,
    ...(spec.countType ? { countType: spec.countType } : {}),
  });
  return (await store.put(key, { file: local })).etag;
}

/** A store whose calls stop (CrashedError) at the first call `match` accepts: the invocation dies there. */
function crashBefore(inner: ObjectStore, match: (call: CallRecord) => boolean): FaultStore {
  const store: FaultStore = new FaultStore(inner, {
    gate: async (call) => {
      if (!store.crashed && match(call)) {
        store.crashed = true;
        throw new CrashedError(`test crash before ${call.op} ${call.key}`);
      }
    },
  });
  return store;
}

function writesOf(store: FaultStore): CallRecord[] {
  return store.calls.filter((c) => WRITES.has(c.op));
}

function dataDeletes(store: FaultStore, config: CompactorConfig): string[] {
  return store.calls.flatMap((c) =>
    (c.deletes ?? []).map((d) => d.key).filter((k) => config.layout.isDataKey(k)),
  );
}

function claimOf(job: Job, location: string, inputs: readonly InputRef[] = job.inputs): Manifest {
  const now = new Date();
  return {
    version: 1,
    jobId: job.jobId,
    executionId: job.executionId,
    tier: job.tier,
    partition: job.partition,
    location,
    state: 'claimed',
    inputs,
    createdAt: now.toISOString(),
    updatedAt: now.toISOString(),
    leaseExpiresAt: new Date(now.getTime() + 600_000).toISOString(),
  };
}

async function quarantineRecords(l: Lake, kind: 'inputs' | 'manifests'): Promise<string[]> {
  return keys(l.store, `${quarantineRoot(l.config.layout)}${kind}/`);
}

async function readJson(l: Lake, key: string): Promise<Record<string, unknown>> {
  return JSON.parse((await l.store.getBytes(key)).body.toString('utf8')) as Record<string, unknown>;
}

async function quiescent(l: Lake): Promise<void> {
  await new LakeChecker(engine, l.dir, l.store, l.config, TOTAL_ROWS).assertQuiescent({
    untouched: HOURLY_UNTOUCHED,
  });
}

async function nextCycle(l: Lake, tier: TierName = 'hourly') {
  return runCycle(sweepDeps(l.store, l.config, engine, workDir, `exec-next-${randomHex()}`, new Set()), tier);
}

/** The bytes of hour 10's one output when compacted whole, on a lake of its own. */
async function oneOutputBytes(): Promise<number> {
  const other = await lake();
  return (await compactStep(deps(other), await jobFor(other, HOUR_10))).outputBytes ?? 0;
}

/** Hour 10 compacted into several outputs (each about 0.4 of the one it would be), staged. */
async function stagedInSeveral(l: Lake): Promise<{ job: Job; outputs: readonly OutputRef[] }> {
  const job = await jobFor(l, HOUR_10);
  const targetFileBytes = Math.floor((await oneOutputBytes()) * 0.4);
  await compactStep({ ...deps(l), config: { ...l.config, targetFileBytes } }, job);
  const outputs = (await requireManifest(l, job)).outputs ?? [];
  expect(outputs.length).toBeGreaterThan(1);
  return { job, outputs };
}

/**
 * Holds the first put (or copy) to a key under `root` until a second one starts (or `wait` ms
 * pass), and counts the most at once.
 */
class OverlapStore extends ForwardingStore {
  readonly #method: 'put' | 'copy';
  readonly #root: string;
  readonly #wait: number;
  inFlight = 0;
  most = 0;
  #arrived: (() => void) | undefined;
  #held = false;
  constructor(inner: ObjectStore, method: 'put' | 'copy', root: string, wait: number) {
    super(inner);
    this.#method = method;
    this.#root = root;
    this.#wait = wait;
  }
  override put(
    key: string,
    body: Parameters<ObjectStore['put']>[1],
    options?: Parameters<ObjectStore['put']>[2],
  ) {
    return this.#overlapping('put', key, () => super.put(key, body, options));
  }
  override copy(source: string, target: string, options?: Parameters<ObjectStore['copy']>[2]) {
    return this.#overlapping('copy', target, () => super.copy(source, target, options));
  }
  async #overlapping<T>(method: 'put' | 'copy', key: string, call: () => Promise<T>): Promise<T> {
    if (method !== this.#method || !key.startsWith(this.#root)) return call();
    this.inFlight++;
    this.most = Math.max(this.most, this.inFlight);
    this.#arrived?.();
    if (!this.#held) {
      this.#held = true;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, this.#wait);
        this.#arrived = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.#arrived = undefined;
    }
    try {
      return await call();
    } finally {
      this.inFlight--;
    }
  }
}

// ---- claim ----

describe('compact step: the claim', () => {
  it('a second job on a leased partition is skipped and touches nothing', async () => {
    const l = await lake();
    const job = await jobFor(l, HOUR_10);
    expect(await compactStep(deps(l), job)).toMatchObject({ status: 'done', state: 'staged' });
    const before = await snapshot(l.store);

    const faulty = new FaultStore(l.store);
    const other: Job = {
      ...job,
      jobId: `${job.jobId.slice(0, 17)}${randomHex()}`,
      executionId: 'exec-B',
    };
    const second = await compactStep(deps(l, faulty), other);
    expect(second).toMatchObject({ status: 'skipped', state: 'none', jobId: other.jobId });
    expect(second.reason).toContain(job.jobId);
    expect(writesOf(faulty)).toEqual([]);
    expect(await snapshot(l.store)).toEqual(before);
    expect((await requireManifest(l, job)).jobId).toBe(job.jobId);
  });

  it('a claim that lands while we look (another owner) is skipped and left alone', async () => {
    const l = await lake();
    const job = await jobFor(l, HOUR_10);
    const other: Job = {
      ...job,
      jobId: `${job.jobId.slice(0, 17)}${randomHex()}`,
      executionId: 'exec-B',
    };
    const mKey = manifestKey(l.config.layout, 'hourly', HOUR_10);
    let raced = false;
    const racing = new FaultStore(l.store, {
      gate: async (call) => {
        if (!raced && call.op === 'put' && call.key === mKey) {
          raced = true;
          await l.store.put(mKey, serializeManifest(claimOf(other, l.store.location)));
        }
      },
    });
    const result = await compactStep(deps(l, racing), job);
    expect(raced).toBe(true);
    expect(result).toMatchObject({ status: 'skipped', state: 'none' });
    expect(result.reason).toContain(other.jobId);
    expect((await requireManifest(l, job)).jobId).toBe(other.jobId);
    expect(await keys(l.store, stagingRoot(l.config.layout))).toEqual([]);
    expect(await etags(l.store, IN_10)).not.toContain(undefined);
  });

  it('a retry of the same job after its claim write landed (lost response) continues and stages', async () => {
    const l = await lake();
    const job = await jobFor(l, HOUR_10);
    const mKey = manifestKey(l.config.layout, 'hourly', HOUR_10);
    const lossy = new FaultStore(l.store, { fault: { at: 2, kind: 'fail-after' } });
    await expect(compactStep(deps(l, lossy), job)).rejects.toThrow(/lost response/);
    expect(at(lossy.calls, 1)).toMatchObject({ op: 'put', key: mKey });
    expect(await requireManifest(l, job)).toMatchObject({ state: 'claimed', jobId: job.jobId });

    const retried = await compactStep(deps(l), job);
    expect(retried).toMatchObject({ status: 'done', state: 'staged', inputRows: 120, outputRows: 120 });
    const manifest = await requireManifest(l, job);
    await expect(
      idsOf(
        l,
        (manifest.outputs ?? []).map((o) => o.stagingKey),
      ),
    ).resolves.toEqual(range(1, 120));
  });

  it('our own claim found by the conditional create (412 on our retried write) is ours: it stages', async () => {
    const l = await lake();
    const job = await jobFor(l, HOUR_10);
    const mKey = manifestKey(l.config.layout, 'hourly', HOUR_10);
    let landed = false;
    const racing = new FaultStore(l.store, {
      gate: async (call) => {
        if (!landed && call.op === 'put' && call.key === mKey) {
          landed = true;
          // The earlier invocation's identical claim lands first.
          await l.store.put(mKey, serializeManifest(claimOf(job, l.store.location)));
        }
      },
    });
    const result = await compactStep(deps(l, racing), job);
    expect(landed).toBe(true);
    expect(result).toMatchObject({ status: 'done', state: 'staged', outputRows: 120 });
    const manifest = await requireManifest(l, job);
    await expect(
      idsOf(
        l,
        (manifest.outputs ?? []).map((o) => o.stagingKey),
      ),
    ).resolves.toEqual(range(1, 120));
  });
});

// ---- stage: changed, corrupt and conflicting inputs ----

describe('compact step: staging', () => {
  /** The same store, declaring a one-copy limit as S3Store does (5 GB on AWS, tiny here). */
  class CopyLimitStore extends ForwardingStore {
    readonly #limit: number;
    constructor(inner: ObjectStore, limit: number) {
      super(inner);
      this.#limit = limit;
    }
    override get maxCopyBytes(): number {
      return this.#limit;
    }
  }

  it("an output over the store's one-copy limit is re-split below it before anything is staged", async () => {
    const l = await lake();
    const job = await jobFor(l, HOUR_10);
    // One output would hold all 120 rows; the limit is well under that file's size.
    const limit = Math.floor((await oneOutputBytes()) * 0.6);
    expect(limit).toBeGreaterThan(0);
    // The first merge misses its size estimate (one output, as if the inputs had promised a small
    // one), so the step merges again with a smaller target. Each attempt must find its output
    // folder empty, as CompactRequest.outputDir promises the engine.
    const found: string[][] = [];
    const watching: Engine = Object.assign(Object.create(engine) as Engine, {
      compact: async (request: CompactRequest) => {
        found.push(await readdir(request.outputDir));
        const missed = found.length === 1 ? { targetFileBytes: Number.MAX_SAFE_INTEGER } : {};
        return engine.compact({ ...request, ...missed });
      },
    });
    const result = await compactStep(
      { ...deps(l, new CopyLimitStore(l.store, limit)), engine: watching },
      job,
    );
    expect(result).toMatchObject({ status: 'done', state: 'staged', outputRows: 120 });
    expect(result.outputs).toBeGreaterThan(1);
    expect(found).toEqual([[], []]);
    const manifest = await requireManifest(l, job);
    for (const output of manifest.outputs ?? []) expect(output.size).toBeLessThanOrEqual(limit);
    expect(
      await idsOf(
        l,
        (manifest.outputs ?? []).map((o) => o.stagingKey),
      ),
    ).toEqual(range(1, 120));
  });

  it('a job of several outputs stages them at once, each under its own index', async () => {
    const l = await lake();
    const job = await jobFor(l, HOUR_10);
    const targetFileBytes = Math.floor((await oneOutputBytes()) * 0.4);
    // Sequential uploads would hold the first for the whole wait and never see a second.
    const store = new OverlapStore(l.store, 'put', stagingRoot(l.config.layout), 5_000);
    const result = await compactStep({ ...deps(l, store), config: { ...l.config, targetFileBytes } }, job);
    expect(result).toMatchObject({ status: 'done', state: 'staged', outputRows: 120 });
    expect(result.outputs).toBeGreaterThan(1);
    expect(store.most).toBeGreaterThan(1);
    const outputs = (await requireManifest(l, job)).outputs ?? [];
    expect(outputs.map((o) => o.stagingKey.slice(-'000.parquet'.length))).toEqual(
      outputs.map((_, i) => `${String(i).padStart(3, '0')}.parquet`),
    );
    expect(outputs.map((o) => o.finalKey)).toEqual([...new Set(outputs.map((o) => o.finalKey))]);
    expect(
      await idsOf(
        l,
        outputs.map((o) => o.stagingKey),
      ),
    ).toEqual(range(1, 120));
  });

  it('an output that cannot get under the copy limit fails closed: OutputTooLargeError, nothing staged, inputs kept', async () => {
    const l = await lake();
    const job = await jobFor(l, HOUR_10);
    const before = await etags(l.store, IN_10);
    await expect(compactStep(deps(l, new CopyLimitStore(l.store, 64)), job)).rejects.toMatchObject({
      name: 'OutputTooLargeError',
      message: expect.stringContaining('lower targetFileBytes'),
    });
    expect(await keys(l.store, stagingRoot(l.config.layout))).toEqual([]);
    expect(await manifestOf(l, job)).toBeUndefined();
    expect(await etags(l.store, IN_10)).toEqual(before);
  });

  it('an input changed after planning ends the job cleanly; the next cycle takes the new content', async () => {
    const l = await lake();
    const job = await jobFor(l, HOUR_10);
    const replaced = IN_10[1];
    await putSample(l.store, replaced, { rows: 10, firstId: 1001 });
    const before = await snapshot(l.store);

    const observed = new FaultStore(l.store);
    const result = await compactStep(deps(l, observed), job);
    expect(result).toMatchObject({ status: 'skipped', state: 'none' });
    expect(result.reason).toContain(replaced);
    expect(await manifestOf(l, job)).toBeUndefined();
    expect(await keys(l.store, stagingRoot(l.config.layout))).toEqual([]);
    expect(dataDeletes(observed, l.config)).toEqual([]);
    expect(await snapshot(l.store)).toEqual(before);

    const cycle = await nextCycle(l);
    expect(cycle.jobs.map((j) => [j.job.partition, j.outcome.status])).toEqual([
      [HOUR_10, 'compacted'],
      [HOUR_11, 'compacted'],
    ]);
    const expected = sorted([...range(1, 40), ...range(81, 180), ...range(1001, 1010)]);
    await expect(dataIds(l)).resolves.toEqual(expected);
    await expect(visibleIds(l)).resolves.toEqual(expected);
    const hour10 = (await keys(l.store, HOUR_10)).filter((k) => k.endsWith('.parquet'));
    expect(hour10.length).toBeGreaterThan(0);
    for (const key of hour10) expect(key).toMatch(/_compacted\.parquet$/);
  });

  const corruptions: [string, (good: Buffer) => Buffer][] = [
    ['a truncated Parquet file', (good) => good.subarray(0, good.length - 20)],
    ['a zero-byte object', () => Buffer.alloc(0)],
    ['text named .parquet', () => Buffer.from('time,host,value\n2025-01-15T10:00:00Z,web-01,1.5\n')],
  ];

  it.each(corruptions)(
    '%s is quarantined and left in place; the rest of the partition compacts',
    async (_, make) => {
      const l = await lake();
      const corruptKey = `${HOUR_10}cpu_20250115_104500_9.parquet`;
      const good = await readFile(join(l.dir, IN_10[0]));
      const { etag: corruptEtag } = await l.store.put(corruptKey, make(good));
      const job = await jobFor(l, HOUR_10);
      expect(job.inputs.map((i) => i.key)).toContain(corruptKey);

      const events: JobEvent[] = [];
      const observed = new FaultStore(l.store);
      const outcome = await runJob(
        { ...deps(l, observed), onEvent: (e) => events.push(e), sleep: async () => {} },
        job,
      );
      expect(outcome.status).toBe('compacted');
      expect(at(outcome.steps, 0)).toMatchObject({
        state: 'staged',
        quarantinedInputs: 1,
        inputs: 3,
        outputRows: 120,
      });

      // Left in place, byte for byte, never deleted.
      expect((await l.store.head(corruptKey))?.etag).toBe(corruptEtag);
      expect(dataDeletes(observed, l.config)).not.toContain(corruptKey);
      const recordKey = `${quarantineRoot(l.config.layout)}inputs/${corruptKey}.json`;
      expect(await quarantineRecords(l, 'inputs')).toEqual([recordKey]);
      const record = await readJson(l, recordKey);
      expect(record).toMatchObject({
        key: corruptKey,
        partition: HOUR_10,
        jobId: job.jobId,
        etag: corruptEtag,
      });
      expect(String(record.reason)).toMatch(/magic bytes|too small/i);
      expect(events).toContainEqual(
        expect.objectContaining({ type: 'input-quarantined', key: corruptKey, partition: HOUR_10 }),
      );

      // The good inputs compacted: their rows are in the output, they are gone.
      expect(await etags(l.store, IN_10)).toEqual([undefined, undefined, undefined]);
      await expect(dataIds(l, [corruptKey])).resolves.toEqual(range(1, 180));
      // The corrupt file stays visible (it is not ours to hide); every other row is seen exactly once.
      const visible = (await visibleFiles(l.store, l.config)).files.map((f) => f.key);
      expect(visible).toContain(corruptKey);
      await expect(
        idsOf(
          l,
          visible.filter((k) => k !== corruptKey),
        ),
      ).resolves.toEqual(range(1, 180));

      // Never planned again, whatever the day's age.
      const again = await plan(l);
      expect(again.map((j) => j.partition)).toEqual([HOUR_11]);
      const cycle = await nextCycle(l);
      expect(cycle.jobs.map((j) => j.job.partition)).toEqual([HOUR_11]);
      expect((await l.store.head(corruptKey))?.etag).toBe(corruptEtag);
      await expect(dataIds(l, [corruptKey])).resolves.toEqual(range(1, 180));
    },
  );

  it('a partition whose inputs are all corrupt releases its claim and quarantines each', async () => {
    const l = await lake();
    for (const key of IN_11) await l.store.put(key, Buffer.from('not parquet at all'));
    const job = await jobFor(l, HOUR_11);
    const result = await compactStep(deps(l), job);
    expect(result).toMatchObject({ status: 'skipped', state: 'none', quarantinedInputs: 2 });
    expect(await manifestOf(l, job)).toBeUndefined();
    expect(await keys(l.store, stagingRoot(l.config.layout))).toEqual([]);
    expect(await quarantineRecords(l, 'inputs')).toEqual(
      IN_11.map((k) => `${quarantineRoot(l.config.layout)}inputs/${k}.json`),
    );
    expect(await etags(l.store, IN_11)).not.toContain(undefined);
    expect((await plan(l)).map((j) => j.partition)).toEqual([HOUR_10]);
  });

  /** A real Parquet file (ids 901..1100) with its data pages scrambled and its footer intact. */
  async function pageDamaged(): Promise<Buffer> {
    const local = join(scratch, `${randomHex()}.parquet`);
    await writeSampleParquet(engine, local, { rows: 200, firstId: 901, startTimeMs: 0, spanMs: HOUR });
    const bytes = Buffer.from(await readFile(local));
    for (let i = 8; i < Math.floor(bytes.length / 2); i++) bytes[i] = ((bytes[i] ?? 0) * 31 + 7) & 0xff;
    return bytes;
  }

  it('(precondition) a page-damaged file passes the footer check and fails only when compacted', async () => {
    const local = join(scratch, `${randomHex()}.parquet`);
    await writeFile(local, await pageDamaged());
    await expect(engine.inspect(local)).resolves.toMatchObject({ rows: 200 });
    const good = join(scratch, `${randomHex()}.parquet`);
    await writeSampleParquet(engine, good, { rows: 10, firstId: 1, startTimeMs: 0, spanMs: HOUR });
    const { columns } = await engine.inspect(good);
    await expect(
      engine.compact({
        inputs: [good, local],
        columns,
        sortBy: ['time'],
        outputDir: join(scratch, randomHex()),
        targetFileBytes: 1 << 30,
        rowGroupSize: 2048,
      }),
    ).rejects.toBeInstanceOf(InputUnreadableError);
  });

  it('an input whose footer is valid but whose data pages are damaged is quarantined, not retried forever', async () => {
    // Regression (was a bug): inspect() reads footers only; the damaged page surfaces in engine.compact() as
    // InputUnreadableError, which stage() (protocol.ts, the engine.compact call) neither catches
    // nor quarantines, and the claim is not released: the job fails, recovery rolls it back, the
    // next plan takes the same file, and the partition fails on every cycle.
    const l = await lake();
    const corruptKey = `${HOUR_10}cpu_20250115_104500_9.parquet`;
    const { etag } = await l.store.put(corruptKey, await pageDamaged());
    const job = await jobFor(l, HOUR_10);
    await runJob({ ...deps(l), sleep: async () => {} }, job);
    expect(await manifestOf(l, job), 'the claim must not be left behind').toBeUndefined();
    await nextCycle(l);
    expect(await quarantineRecords(l, 'inputs')).toEqual([
      `${quarantineRoot(l.config.layout)}inputs/${corruptKey}.json`,
    ]);
    expect((await l.store.head(corruptKey))?.etag).toBe(etag);
    await expect(dataIds(l, [corruptKey])).resolves.toEqual(range(1, 180));
  });

  it('a schema conflict fails that partition only, names it and the column, and releases the claim', async () => {
    const l = await lake();
    // Hour 10's third file with count as VARCHAR (same ids, 81..120).
    const odd = IN_10[2];
    const local = join(scratch, `${randomHex()}.parquet`);
    await engine.query(
      `COPY (SELECT * REPLACE ('x' AS "count") FROM read_parquet(${parquetPath(join(l.dir, odd))})) TO ${quoteString(local)} (FORMAT parquet)`,
    );
    await l.store.put(odd, { file: local });
    const described = await engine.query(
      `DESCRIBE SELECT * FROM read_parquet(${parquetPath(join(l.dir, odd))})`,
    );
    expect(described.find((c) => c.column_name === 'count')?.column_type).toBe('VARCHAR');
    const tags10 = await etags(l.store, IN_10);

    const cycle = await nextCycle(l);
    const failed = cycle.jobs.find((j) => j.job.partition === HOUR_10)?.outcome;
    if (failed?.status !== 'failed') throw new Error(`hour 10 should fail, got ${failed?.status}`);
    expect(failed.error).toBeInstanceOf(SchemaConflictError);
    expect(failed.error).toMatchObject({ partition: HOUR_10, column: 'count' });
    expect(failed.error.message).toContain(HOUR_10);
    expect(failed.error.message).toContain('VARCHAR');
    expect(cycle.jobs.find((j) => j.job.partition === HOUR_11)?.outcome.status).toBe('compacted');

    // Hour 10: claim released, nothing staged, nothing deleted; hour 11 compacted exactly.
    expect(await keys(l.store, `${l.config.layout.stateRoot}manifests/`)).toEqual([]);
    expect(await keys(l.store, stagingRoot(l.config.layout))).toEqual([]);
    expect(await etags(l.store, IN_10)).toEqual(tags10);
    expect(await etags(l.store, IN_11)).toEqual([undefined, undefined]);
    const outputs11 = (await keys(l.store, HOUR_11)).filter((k) => k.endsWith('_compacted.parquet'));
    expect(outputs11.length).toBeGreaterThan(0);
    await expect(idsOf(l, outputs11)).resolves.toEqual(range(121, 180));
  });

  it('downloads a few inputs into the job folder itself, thousands over up to 16 folders', async () => {
    const root = await mkdtemp(join(tmpdir(), 'input-paths-'));
    try {
      /** The folders made under the job folder, each holding some of the paths. */
      const subfolders = async (count: number) => {
        const dir = join(root, String(count));
        await mkdir(dir);
        const paths = inputPaths(dir, count);
        expect(new Set(paths).size).toBe(count);
        const made = await readdir(dir);
        const used = new Set(paths.map((p) => dirname(p)));
        expect(used).toEqual(made.length === 0 ? new Set([dir]) : new Set(made.map((f) => join(dir, f))));
        return made.length;
      };
      expect(await subfolders(1)).toBe(0);
      expect(await subfolders(10)).toBe(0);
      expect(await subfolders(128)).toBe(0);
      expect(await subfolders(129)).toBe(2);
      expect(await subfolders(2_000)).toBe(16);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });

  it('downloads small inputs up to 32 at a time (S3 latency-bound), large ones 8 at a time', async () => {
    const sized = (count: number, size: number) => Array.from({ length: count }, () => ({ size }));
    expect(downloadConcurrency(sized(2_000, 10_000))).toBe(32);
    expect(downloadConcurrency(sized(200, 785_000))).toBe(11);
    expect(downloadConcurrency(sized(40, 50_000_000))).toBe(8);
    expect(downloadConcurrency([])).toBe(1);

    const l = await lake();
    for (let i = 0; i < 40; i++) {
      await putSample(l.store, `${HOUR_10}cpu_20250115_104000_${100 + i}.parquet`, {
        rows: 3,
        firstId: 1000 + i * 3,
      });
    }
    let inFlight = 0;
    let most = 0;
    class Counting extends ForwardingStore {
      override async getToFile(key: string, path: string, options?: { readonly ifMatch?: string }) {
        inFlight++;
        most = Math.max(most, inFlight);
        try {
          // Long enough for every allowed download to start before one ends.
          await new Promise((resolve) => setTimeout(resolve, 5));
          return await this.inner.getToFile(key, path, options);
        } finally {
          inFlight--;
        }
      }
    }
    const job = await jobFor(l, HOUR_10);
    expect(job.inputs).toHaveLength(43);
    const outcome = await runJob({ ...deps(l, new Counting(l.store)), sleep: async () => {} }, job);
    expect(outcome.status).toBe('compacted');
    expect(most).toBe(32);
  });

  it('a safe widening (INTEGER and BIGINT count) compacts to BIGINT with exact ids', async () => {
    const l = await lake();
    await putSample(l.store, IN_10[2], { rows: 40, firstId: 81, countType: 'BIGINT' });
    const job = await jobFor(l, HOUR_10);
    const outcome = await runJob({ ...deps(l), sleep: async () => {} }, job);
    expect(outcome.status).toBe('compacted');
    const outputs = (await keys(l.store, HOUR_10)).filter((k) => k.endsWith('_compacted.parquet'));
    expect(outputs.length).toBeGreaterThan(0);
    await expect(idsOf(l, outputs)).resolves.toEqual(range(1, 120));
    for (const output of outputs) {
      const described = await engine.query(
        `DESCRIBE SELECT * FROM read_parquet(${parquetPath(join(l.dir, output))})`,
      );
      expect(described.find((c) => c.column_name === 'count')?.column_type).toBe('BIGINT');
    }
    expect(await etags(l.store, IN_10)).toEqual([undefined, undefined, undefined]);
  });
});

// ---- publish ----

describe('publish step', () => {
  it('a job of several outputs publishes them at once, every row once at the final keys', async () => {
    const l = await lake();
    const { job, outputs } = await stagedInSeveral(l);
    // Sequential copies would hold the first for the whole wait and never see a second.
    const store = new OverlapStore(l.store, 'copy', HOUR_10, 5_000);
    expect(await publishStep(deps(l, store), job)).toMatchObject({ status: 'done', state: 'published' });
    expect(store.most).toBeGreaterThan(1);
    await expect(
      idsOf(
        l,
        outputs.map((o) => o.finalKey),
      ),
    ).resolves.toEqual(range(1, 120));
  });

  it('foreign objects at two final keys of one job: quarantined once, nothing deleted', async () => {
    const l = await lake();
    const { job, outputs } = await stagedInSeveral(l);
    for (const output of outputs.slice(0, 2)) await l.store.put(output.finalKey, Buffer.from('not ours'));
    const tags10 = await etags(l.store, IN_10);
    const observed = new FaultStore(l.store);
    await expect(publishStep(deps(l, observed), job)).rejects.toBeInstanceOf(FinalKeyConflictError);
    expect(dataDeletes(observed, l.config)).toEqual([]);
    expect(await manifestOf(l, job)).toBeUndefined();
    expect(await quarantineRecords(l, 'manifests')).toHaveLength(1);
    expect(await etags(l.store, IN_10)).toEqual(tags10);
  });

  it('a foreign object at the final key fails closed: quarantined, nothing deleted', async () => {
    const l = await lake();
    const job = await jobFor(l, HOUR_10);
    await compactStep(deps(l), job);
    const manifest = await requireManifest(l, job);
    const finalKey = at(manifest.outputs ?? [], 0).finalKey;
    const foreign = Buffer.from('somebody else wrote this');
    await l.store.put(finalKey, foreign);
    const tags10 = await etags(l.store, IN_10);

    const observed = new FaultStore(l.store);
    await expect(publishStep(deps(l, observed), job)).rejects.toBeInstanceOf(FinalKeyConflictError);
    expect(dataDeletes(observed, l.config)).toEqual([]);
    expect(await manifestOf(l, job)).toBeUndefined();
    const records = await quarantineRecords(l, 'manifests');
    expect(records).toHaveLength(1);
    expect(at(records, 0).startsWith(`${quarantineRoot(l.config.layout)}manifests/hourly/${HOUR_10}`)).toBe(
      true,
    );
    const record = await readJson(l, at(records, 0));
    expect(record).toMatchObject({ jobId: job.jobId });
    expect(String(record.reason)).toContain(finalKey);
    // Inputs intact, the foreign object intact, staging kept as evidence.
    expect(await etags(l.store, IN_10)).toEqual(tags10);
    expect((await l.store.getBytes(finalKey)).body.equals(foreign)).toBe(true);
    expect(await keys(l.store, stagingRoot(l.config.layout))).toEqual(
      (manifest.outputs ?? []).map((o) => o.stagingKey).sort(),
    );
    // The quarantined job's inputs are not candidates.
    expect((await plan(l)).map((j) => j.partition)).toEqual([HOUR_11]);
  });

  it('a publish retried after a lost copy response finds its own object and publishes', async () => {
    const l = await lake();
    const job = await jobFor(l, HOUR_10);
    await compactStep(deps(l), job);
    const lossy = new FaultStore(l.store, { fault: { at: 2, kind: 'fail-after' } });
    await expect(publishStep(deps(l, lossy), job)).rejects.toThrow(/lost response/);
    const manifest = await requireManifest(l, job);
    const firstOutput = at(manifest.outputs ?? [], 0);
    expect(at(lossy.calls, 1)).toMatchObject({ op: 'copy', key: firstOutput.finalKey });
    expect(manifest.state).toBe('staged');
    expect((await l.store.head(firstOutput.finalKey))?.metadata[META_JOB_ID]).toBe(job.jobId);

    expect(await publishStep(deps(l), job)).toMatchObject({ status: 'done', state: 'published' });
    expect(await quarantineRecords(l, 'manifests')).toEqual([]);
    const finals = (manifest.outputs ?? []).map((o) => o.finalKey);
    await expect(idsOf(l, finals)).resolves.toEqual(range(1, 120));
    // Published: the consistent reader switches to the outputs, exactly once.
    await expect(visibleIds(l)).resolves.toEqual(range(1, 180));
  });
});

// ---- verify ----

describe('verify step', () => {
  it('a tampered final object is quarantined; inputs stay and the view shows them, not the output', async () => {
    const l = await lake();
    const job = await jobFor(l, HOUR_10);
    await compactStep(deps(l), job);
    await publishStep(deps(l), job);
    const manifest = await requireManifest(l, job);
    const finals = (manifest.outputs ?? []).map((o) => o.finalKey);
    // Same key, other rows (ids 5001..5010): the view must not show them.
    await putSample(l.store, at(finals, 0), { rows: 10, firstId: 5001 });
    const tags10 = await etags(l.store, IN_10);

    const observed = new FaultStore(l.store);
    await expect(verifyStep(deps(l, observed), job)).rejects.toBeInstanceOf(VerificationFailedError);
    expect(dataDeletes(observed, l.config)).toEqual([]);
    expect(await manifestOf(l, job)).toBeUndefined();
    const records = await quarantineRecords(l, 'manifests');
    expect(records).toHaveLength(1);
    expect(String((await readJson(l, at(records, 0))).reason)).toContain(at(finals, 0));
    expect(await etags(l.store, IN_10)).toEqual(tags10);

    const view = await visibleFiles(l.store, l.config);
    const visible = view.files.map((f) => f.key);
    for (const input of IN_10) expect(visible).toContain(input);
    for (const final of finals) expect(visible).not.toContain(final);
    await expect(visibleIds(l)).resolves.toEqual(range(1, 180));
  });
});

// ---- delete inputs ----

describe('delete-inputs step', () => {
  it('keeps an input replaced after staging, deletes the rest; twice equals once', async () => {
    const l = await lake();
    const job = await jobFor(l, HOUR_10);
    await compactStep(deps(l), job);
    await publishStep(deps(l), job);
    await verifyStep(deps(l), job);
    const replaced = IN_10[1];
    const newEtag = await putSample(l.store, replaced, { rows: 10, firstId: 2001 });

    // The first attempt's response is lost after the deletes happened; the retry finishes.
    const lossy = new FaultStore(l.store, {
      fault: { at: 2, kind: 'fail-after' },
    });
    await expect(deleteInputsStep(deps(l, lossy), job)).rejects.toThrow(/lost response/);
    expect(at(lossy.calls, 1).op).toBe('deleteMany');
    for (const request of at(lossy.calls, 1).deletes ?? []) expect(request.etag).toBeDefined();
    expect(await etags(l.store, IN_10)).toEqual([undefined, newEtag, undefined]);

    const done = await deleteInputsStep(deps(l), job);
    expect(done).toMatchObject({ status: 'done', state: 'inputs-deleted', keptInputs: 1 });
    const manifest = await requireManifest(l, job);
    expect(manifest.keptInputs).toEqual([{ key: replaced, reason: expect.stringContaining('replaced') }]);
    const before = await snapshot(l.store);
    expect(await deleteInputsStep(deps(l), job)).toMatchObject({
      status: 'already-done',
      state: 'inputs-deleted',
    });
    expect(await snapshot(l.store)).toEqual(before);

    // The replaced input is new data: both readers see it next to the output, nothing twice.
    const expected = sorted([...range(1, 180), ...range(2001, 2010)]);
    await expect(visibleIds(l)).resolves.toEqual(expected);
    expect(await clearManifestStep(deps(l), job)).toMatchObject({ status: 'done', state: 'cleared' });
    await expect(dataIds(l)).resolves.toEqual(expected);
    await expect(visibleIds(l)).resolves.toEqual(expected);
    expect(await etags(l.store, [replaced])).toEqual([newEtag]);
  });
});

// ---- idempotence and leases ----

describe('every step', () => {
  it('run twice in a row is already done the second time and changes nothing', async () => {
    const l = await lake();
    const job = await jobFor(l, HOUR_10);
    const steps: [string, () => Promise<StepResult>, StepResult['state']][] = [
      ['compact', () => compactStep(deps(l), job), 'staged'],
      ['publish', () => publishStep(deps(l), job), 'published'],
      ['verify', () => verifyStep(deps(l), job), 'verified'],
      ['delete inputs', () => deleteInputsStep(deps(l), job), 'inputs-deleted'],
      ['clear', () => clearManifestStep(deps(l), job), 'cleared'],
    ];
    for (const [name, step, state] of steps) {
      expect(await step(), name).toMatchObject({ status: 'done', state });
      const before = await snapshot(l.store);
      expect(await step(), `${name} again`).toMatchObject({ status: 'already-done', state });
      expect(await snapshot(l.store), `${name} again changed the store`).toEqual(before);
    }
    // An earlier step run after the job finished (a late redrive) changes nothing either: it finds
    // no manifest but the job's receipt, written by this execution, and reports the job done.
    const before = await snapshot(l.store);
    for (const step of [publishStep, verifyStep, deleteInputsStep]) {
      expect(await step(deps(l), job)).toMatchObject({
        status: 'already-done',
        state: 'cleared',
        inputs: job.inputs.length,
      });
    }
    // A whole-job redrive (a Map item run again for another of its jobs): the inputs are gone, so
    // it claims, finds that and lets go; the receipt says this execution committed it.
    expect((await runJob({ ...deps(l), sleep: async () => {} }, job)).status).toBe('compacted');
    // The same redrive with its claim refused and no manifest there after (S3 answers 409 to a
    // conditional write racing another): its receipt still says so, not "leased by another job".
    const mKey = manifestKey(l.config.layout, 'hourly', HOUR_10);
    const refusing = new FaultStore(l.store, {
      beforeCall: async (call) => {
        if (call.op === 'put' && call.key === mKey) throw new PreconditionFailedError(mKey);
      },
    });
    expect(await compactStep(deps(l, refusing), job)).toMatchObject({
      status: 'already-done',
      state: 'cleared',
    });
    // Another execution's job of this partition finds nothing of its own done.
    const other = { ...job, executionId: 'another-execution' };
    expect((await publishStep(deps(l), other)).status).toBe('superseded');
    expect(await snapshot(l.store)).toEqual(before);
    await quiescent(l);
  });

  it('every manifest write whose response was lost (the SDK retry answered 412) is recognised as ours', async () => {
    // The SDK re-sends a Buffer-bodied PUT after a lost response; when the first attempt landed,
    // S3 answers the retry 412 because the ETag moved on (conditional-writes.html). The step must
    // carry on, not report a conflict and drop what it staged.
    const l = await lake();
    const job = await jobFor(l, HOUR_10);
    const mKey = manifestKey(l.config.layout, 'hourly', HOUR_10);
    const steps: [string, (d: CompactDeps) => Promise<StepResult>, StepResult['state']][] = [
      ['compact', (d) => compactStep(d, job), 'staged'],
      ['publish', (d) => publishStep(d, job), 'published'],
      ['verify', (d) => verifyStep(d, job), 'verified'],
      ['delete inputs', (d) => deleteInputsStep(d, job), 'inputs-deleted'],
    ];
    for (const [name, step, state] of steps) {
      // Each step's If-Match write of the manifest (compact's claim is an If-None-Match create).
      let refused = 0;
      const lossy = new FaultStore(l.store, {
        fault: {
          at: (call) => call.op === 'put' && call.key === mKey && call.ifMatch === true,
          kind: 'lost-response',
        },
        afterCall: async (call) => {
          if (call.op === 'put' && call.key === mKey) refused++;
        },
      });
      const result = await step(deps(l, lossy));
      expect(result, name).toMatchObject({ status: 'done', state });
      expect(refused, `${name}: the write and its retry both reached the store`).toBe(
        name === 'compact' ? 3 : 2,
      );
      expect((await requireManifest(l, job)).state, name).toBe(state);
    }
    const manifest = await requireManifest(l, job);
    expect(await clearManifestStep(deps(l), job)).toMatchObject({ status: 'done', state: 'cleared' });
    expect(
      await idsOf(
        l,
        (manifest.outputs ?? []).map((o) => o.finalKey),
      ),
    ).toEqual(range(1, 120));
    await quiescent(l);
  });

  it('refuses to act once its lease expired, before any side effect', async () => {
    const l = await lake();
    const job = await jobFor(l, HOUR_10);
    const future: Clock = { now: () => new Date(Date.now() + 24 * HOUR) };
    const mKey = manifestKey(l.config.layout, 'hourly', HOUR_10);

    // A claim whose invocation died before it downloaded anything.
    const dying = crashBefore(l.store, (call) => call.op === 'getToFile');
    await expect(compactStep(deps(l, dying), job)).rejects.toBeInstanceOf(CrashedError);
    expect((await requireManifest(l, job)).state).toBe('claimed');

    const late = async (name: string, step: (d: CompactDeps) => Promise<StepResult>) => {
      const before = await snapshot(l.store);
      const observed = new FaultStore(l.store);
      await expect(step(deps(l, observed, future)), name).rejects.toBeInstanceOf(LeaseExpiredError);
      expect(writesOf(observed), `${name} wrote after its lease`).toEqual([]);
      expect(
        observed.calls.some((c) => c.op === 'getToFile'),
        `${name} downloaded`,
      ).toBe(false);
      expect(await snapshot(l.store), name).toEqual(before);
    };
    await late('compact', (d) => compactStep(d, job));
    expect(await compactStep(deps(l), job)).toMatchObject({ status: 'done', state: 'staged' });
    await late('publish', (d) => publishStep(d, job));
    expect(await publishStep(deps(l), job)).toMatchObject({ status: 'done', state: 'published' });
    await late('verify', (d) => verifyStep(d, job));
    expect(await verifyStep(deps(l), job)).toMatchObject({ status: 'done', state: 'verified' });
    await late('delete inputs', (d) => deleteInputsStep(d, job));
    expect(await deleteInputsStep(deps(l), job)).toMatchObject({ status: 'done', state: 'inputs-deleted' });
    await late('clear', (d) => clearManifestStep(d, job));
    expect(await clearManifestStep(deps(l), job)).toMatchObject({ status: 'done', state: 'cleared' });
    expect(await l.store.head(mKey)).toBeUndefined();
    await quiescent(l);
  });
});

// ---- outputs ----

async function inversions(path: string): Promise<number> {
  const [row] = await engine.query(
    `SELECT count(*)::INTEGER AS n FROM (SELECT time, lag(time) OVER (ORDER BY file_row_number) AS prev
       FROM read_parquet(${parquetPath(path)}, file_row_number = true)) WHERE prev > time`,
  );
  return Number(row?.n);
}

async function timeRange(path: string): Promise<[bigint, bigint]> {
  const [row] = await engine.query(
    `SELECT min(epoch_us(time))::BIGINT AS lo, max(epoch_us(time))::BIGINT AS hi FROM read_parquet(${parquetPath(path)})`,
  );
  return [BigInt(row?.lo as bigint), BigInt(row?.hi as bigint)];
}

/** Local copies of objects, kept after the job deleted them. */
async function keepCopies(l: Lake, objectKeys: readonly string[]): Promise<string[]> {
  const paths: string[] = [];
  for (const key of objectKeys) {
    const path = join(scratch, `${randomHex()}.parquet`);
    await l.store.getToFile(key, path);
    paths.push(path);
  }
  return paths;
}

/** The inputs are not sorted by time (so a sorted output proves the sort). */
async function expectUnsorted(paths: readonly string[]): Promise<void> {
  let total = 0;
  for (const path of paths) total += await inversions(path);
  expect(total).toBeGreaterThan(0);
}

/** ZSTD everywhere, sorted by time inside each file and across the files in order. */
async function expectSortedZstd(paths: readonly string[]): Promise<void> {
  let previousHi: bigint | undefined;
  for (const path of paths) {
    const codecs = await engine.query(
      `SELECT DISTINCT compression FROM parquet_metadata(${parquetPath(path)})`,
    );
    expect(codecs.map((c) => c.compression)).toEqual(['ZSTD']);
    expect(await inversions(path), `${path} is not sorted by time`).toBe(0);
    const [lo, hi] = await timeRange(path);
    if (previousHi !== undefined)
      expect(lo >= previousHi, `${path} starts before the previous output ends`).toBe(true);
    previousHi = hi;
  }
}

describe('outputs', () => {
  it('hourly: named with the job id and _compacted, ZSTD, sorted by time across parts, rows = inputs', async () => {
    const l = await lake();
    const job = await jobFor(l, HOUR_10);
    const inputs = await keepCopies(l, IN_10);
    await expectUnsorted(inputs);
    await expect(readIds(engine, inputs)).resolves.toEqual(range(1, 120));

    const staged = await compactStep(deps(l), job);
    const manifest = await requireManifest(l, job);
    const outputs = manifest.outputs ?? [];
    // SWEEP_CONFIG's small target splits this partition: the order across files is checked too.
    expect(outputs.length).toBeGreaterThanOrEqual(2);
    outputs.forEach((o, i) => {
      expect(o.finalKey).toBe(
        `${HOUR_10}cpu_20250115_10_${job.jobId}_${String(i).padStart(3, '0')}_compacted.parquet`,
      );
    });
    expect(manifest.inputRows).toBe(120);
    expect(outputs.reduce((sum, o) => sum + o.rows, 0)).toBe(120);
    expect(staged).toMatchObject({ inputRows: 120, outputRows: 120, outputs: outputs.length });

    const outcome = await runJob({ ...deps(l), sleep: async () => {} }, job);
    expect(outcome.status).toBe('compacted');
    const finals = outputs.map((o) => o.finalKey);
    expect((await keys(l.store, HOUR_10)).filter((k) => k.endsWith('.parquet'))).toEqual(finals);
    await expectSortedZstd(finals.map((k) => join(l.dir, k)));
    for (const [i, final] of finals.entries()) {
      const [row] = await engine.query(
        `SELECT count(*)::INTEGER AS n FROM read_parquet(${parquetPath(join(l.dir, final))})`,
      );
      expect(Number(row?.n)).toBe(at(outputs, i).rows);
      expect((await l.store.head(final))?.metadata[META_JOB_ID]).toBe(job.jobId);
    }
    await expect(idsOf(l, finals)).resolves.toEqual(range(1, 120));
  });

  it('daily: one _daily file in the day folder with the job id, ZSTD, sorted, rows = inputs', async () => {
    const l = await lake(daily);
    const day = 'db/cpu/2025/01/14/';
    const job = await jobFor(l, day, 'daily');
    expect(job.inputs).toHaveLength(4);
    await expectUnsorted(
      await keepCopies(
        l,
        job.inputs.map((i) => i.key),
      ),
    );

    const outcome = await runJob({ ...deps(l), sleep: async () => {} }, job);
    expect(outcome.status).toBe('compacted');
    expect(at(outcome.steps, 0)).toMatchObject({ inputRows: 180, outputRows: 180, outputs: 1 });
    const expectedKey = `${day}cpu_20250114_${job.jobId}_000_daily.parquet`;
    const data = (await keys(l.store, day)).filter((k) => l.config.layout.isDataKey(k));
    expect(data).toEqual([expectedKey]);
    await expectSortedZstd([join(l.dir, expectedKey)]);
    await expect(idsOf(l, [expectedKey])).resolves.toEqual(range(1, 180));
  });
});
