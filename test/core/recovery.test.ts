/**
 * The design's recovery table, row by row, on real Parquet in a real LocalFolderStore. Each
 * state is built by running the real steps as execution `exec-A` (cut short where needed), then
 * `recover` runs as another execution. After recovery, a new cycle must reach the exact rows.
 */

import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { DescribeExecutionCommand, ExecutionDoesNotExist, SFNClient } from '@aws-sdk/client-sfn';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import type { LocalFolderStore } from '../../functions/adapters/local-store/local-store.ts';
import { readIds, writeSampleParquet } from '../../functions/adapters/sample-data.ts';
import { StepFunctionsOwners } from '../../functions/adapters/sfn-owners.ts';
import type { CompactorConfig } from '../../functions/core/config.ts';
import { assignJobs, runCycle } from '../../functions/core/cycle.ts';
import { type Clock, systemClock } from '../../functions/core/engine.ts';
import { TransientStoreError } from '../../functions/core/errors.ts';
import {
  type Manifest,
  type ManifestState,
  manifestKey,
  manifestsRoot,
  parseManifest,
  quarantineRoot,
  stagingPrefix,
  stagingRoot,
} from '../../functions/core/manifest/manifest.ts';
import type { ObjectStore } from '../../functions/core/object-store.ts';
import { planTier } from '../../functions/core/planner/planner.ts';
import {
  type CompactDeps,
  compactStep,
  deleteInputsStep,
  type Job,
  META_JOB_ID,
  publishStep,
  verifyStep,
} from '../../functions/core/protocol.ts';
import { type RecoveryDeps, type RecoveryReport, recover } from '../../functions/core/recovery.ts';
import { visibleFiles } from '../../functions/core/visible.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { type CallRecord, CrashedError, type FaultKind, FaultStore } from '../support/fault-store.ts';
import {
  copyLake,
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
const OWNER = 'exec-A';

let engine: DuckDbEngine;
let workDir: string;
let scratch: string;
let template: TemplateLake;
const lakes: string[] = [];

useEngineAndDir('recovery-', async (e, dir) => {
  engine = e;
  scratch = dir;
  workDir = join(dir, 'work');
  template = await hourlyTemplate(engine);
});

afterEach(async () => {
  for (const dir of lakes.splice(0)) await rm(dir, { recursive: true, force: true });
});

afterAll(async () => {
  await rm(template.dir, { recursive: true, force: true });
});

// ---- helpers ----

interface Lake {
  readonly dir: string;
  readonly store: LocalFolderStore;
  readonly config: CompactorConfig;
}

async function lake(): Promise<Lake> {
  const dir = await copyLake(template);
  lakes.push(dir);
  return { dir, store: testStore(dir), config: template.config };
}

const randomHex = () => randomBytes(4).toString('hex');

function stepDeps(l: Lake, store: ObjectStore = l.store): CompactDeps {
  return { store, config: l.config, clock: systemClock, engine, workDir };
}

interface RecoverOptions {
  readonly store?: ObjectStore;
  readonly executionId?: string;
  readonly clock?: Clock;
  readonly alive?: (executionId: string) => Promise<boolean>;
}

function recoveryDeps(l: Lake, options: RecoverOptions = {}): RecoveryDeps {
  return {
    store: options.store ?? l.store,
    config: l.config,
    clock: options.clock ?? systemClock,
    executionId: options.executionId ?? `exec-R-${randomHex()}`,
    isOwnerAlive: options.alive ?? (async () => false),
  };
}

async function jobFor(l: Lake, partition: string): Promise<Job> {
  const planned = await planTier(l.store, l.config, systemClock, 'hourly');
  const job = assignJobs(planned, { clock: systemClock, randomHex, executionId: OWNER }).find(
    (j) => j.partition === partition,
  );
  if (!job) throw new Error(`no job planned for ${partition}`);
  return job;
}

function at<T>(items: readonly T[], index: number): T {
  const item = items[index];
  if (item === undefined) throw new Error(`no item ${index}`);
  return item;
}

function mKey(l: Lake, partition = HOUR_10): string {
  return manifestKey(l.config.layout, 'hourly', partition);
}

async function manifestAt(l: Lake, partition = HOUR_10): Promise<{ manifest: Manifest; etag: string }> {
  const { body, etag } = await l.store.getBytes(mKey(l, partition));
  return { manifest: parseManifest(l.config, l.store.location, mKey(l, partition), body), etag };
}

function outputsOf(manifest: Manifest) {
  return manifest.outputs ?? [];
}

async function keys(store: ObjectStore, prefix: string): Promise<string[]> {
  const out: string[] = [];
  for await (const object of store.list(prefix)) out.push(object.key);
  return out;
}

/** Every object with its ETag: "changed nothing" is compared on this. */
async function snapshot(
  store: ObjectStore,
  filter: (key: string) => boolean = () => true,
): Promise<string[]> {
  const out: string[] = [];
  for await (const object of store.list('')) if (filter(object.key)) out.push(`${object.key} ${object.etag}`);
  return out;
}

async function etags(store: ObjectStore, list: readonly string[]): Promise<(string | undefined)[]> {
  return Promise.all(list.map(async (key) => (await store.head(key))?.etag));
}

function range(from: number, to: number): bigint[] {
  return Array.from({ length: to - from + 1 }, (_, i) => BigInt(from + i));
}

async function idsOf(l: Lake, objectKeys: readonly string[]): Promise<bigint[]> {
  return readIds(
    engine,
    objectKeys.map((k) => join(l.dir, k)),
  );
}

async function visibleIds(l: Lake): Promise<bigint[]> {
  const view = await visibleFiles(l.store, l.config);
  return idsOf(
    l,
    view.files.map((f) => f.key),
  );
}

async function putSample(store: ObjectStore, key: string, rows: number, firstId: number): Promise<void> {
  const local = join(scratch, `${randomHex()}.parquet`);
  await writeSampleParquet(engine, local, {
    rows,
    firstId,
    startTimeMs: Date.UTC(2025, 0, 15, 10),
    spanMs: HOUR,
  });
  await store.put(key, { file: local });
}

/** A store that dies (CrashedError, no further calls) at the first call `match` accepts. */
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

function dataDeletes(store: FaultStore, config: CompactorConfig): string[] {
  return store.calls.flatMap((c) =>
    (c.deletes ?? []).map((d) => d.key).filter((k) => config.layout.isDataKey(k)),
  );
}

/** A claim whose invocation died after uploading its staged outputs, before recording them. */
async function claimedWithStaging(l: Lake, partition = HOUR_10): Promise<Job> {
  const job = await jobFor(l, partition);
  let manifestPuts = 0;
  const dying = crashBefore(
    l.store,
    (call) => call.op === 'put' && call.key === mKey(l, partition) && manifestPuts++ === 1,
  );
  await expect(compactStep(stepDeps(l, dying), job)).rejects.toBeInstanceOf(CrashedError);
  expect((await manifestAt(l, partition)).manifest.state).toBe('claimed');
  expect(await keys(l.store, stagingPrefix(l.config.layout, job.jobId))).not.toEqual([]);
  return job;
}

/** Runs the job's steps as exec-A until the manifest is in `state`. */
async function runUpTo(l: Lake, state: Exclude<ManifestState, 'claimed'>, partition = HOUR_10): Promise<Job> {
  const job = await jobFor(l, partition);
  const d = stepDeps(l);
  expect((await compactStep(d, job)).state).toBe('staged');
  if (state !== 'staged') expect((await publishStep(d, job)).state).toBe('published');
  if (state === 'verified' || state === 'inputs-deleted')
    expect((await verifyStep(d, job)).state).toBe('verified');
  if (state === 'inputs-deleted') expect((await deleteInputsStep(d, job)).state).toBe('inputs-deleted');
  expect((await manifestAt(l, partition)).manifest.state).toBe(state);
  return job;
}

async function quarantineRecords(l: Lake): Promise<string[]> {
  return keys(l.store, `${quarantineRoot(l.config.layout)}manifests/`);
}

async function readJson(l: Lake, key: string): Promise<Record<string, unknown>> {
  return JSON.parse((await l.store.getBytes(key)).body.toString('utf8')) as Record<string, unknown>;
}

/** I2 and I4: exact rows in the data files, empty state root, nothing quarantined. */
async function expectQuiescent(l: Lake): Promise<void> {
  await new LakeChecker(engine, l.dir, l.store, l.config, TOTAL_ROWS).assertQuiescent({
    untouched: HOURLY_UNTOUCHED,
  });
}

/** The next cycle compacts whatever recovery gave back, and the lake ends exact. */
async function nextCycleIsExact(l: Lake): Promise<void> {
  const cycle = await runCycle(
    sweepDeps(l.store, l.config, engine, workDir, `exec-next-${randomHex()}`, new Set()),
    'hourly',
  );
  expect(cycle.jobs.filter((j) => j.outcome.status !== 'compacted')).toEqual([]);
  await expectQuiescent(l);
  for (const key of [...IN_10, ...IN_11]) expect(await l.store.head(key), key).toBeUndefined();
}

function entry(report: RecoveryReport, partition = HOUR_10) {
  const found = report.entries.find((e) => e.manifestKey.endsWith(`${partition.slice(0, -1)}.json`));
  if (!found) throw new Error(`no recovery entry for ${partition}: ${JSON.stringify(report.entries)}`);
  return found;
}

// ---- the table ----

describe('recovery: claimed', () => {
  it('rolls back: manifest and own staging deleted, inputs are candidates again', async () => {
    const l = await lake();
    const job = await claimedWithStaging(l);
    const tags = await etags(l.store, IN_10);
    const asked: string[] = [];
    const report = await recover(
      recoveryDeps(l, {
        alive: async (id) => {
          asked.push(id);
          return false;
        },
      }),
    );
    expect(asked).toEqual([OWNER]);
    expect(report.entries).toEqual([
      expect.objectContaining({ jobId: job.jobId, state: 'claimed', action: 'rolled-back' }),
    ]);
    expect(report.changed).toBe(true);
    expect(await keys(l.store, manifestsRoot(l.config.layout))).toEqual([]);
    expect(await keys(l.store, stagingRoot(l.config.layout))).toEqual([]);
    expect(await etags(l.store, IN_10)).toEqual(tags);
    const again = await jobFor(l, HOUR_10);
    expect(again.inputs.map((i) => [i.key, i.etag])).toEqual(IN_10.map((k, i) => [k, tags[i]]));
    await nextCycleIsExact(l);
  });
});

describe('recovery: whose job it takes', () => {
  it('leaves a job alone while its owner runs and its lease is live', async () => {
    const l = await lake();
    await runUpTo(l, 'staged');
    const before = await snapshot(l.store);
    const asked: string[] = [];
    const report = await recover(
      recoveryDeps(l, {
        alive: async (id) => {
          asked.push(id);
          return id === OWNER;
        },
      }),
    );
    expect(asked).toEqual([OWNER]);
    expect(entry(report)).toMatchObject({ action: 'left-alone', state: 'staged' });
    expect(report.changed).toBe(false);
    expect(await snapshot(l.store)).toEqual(before);
    expect((await manifestAt(l)).manifest.executionId).toBe(OWNER);
  });

  it('takes over when the owner is gone (lease still live): rolled forward', async () => {
    const l = await lake();
    await runUpTo(l, 'staged');
    const report = await recover(recoveryDeps(l, { alive: async () => false }));
    expect(entry(report)).toMatchObject({ action: 'rolled-forward', state: 'staged' });
    await expectQuiescent(l);
  });

  it('mocked Step Functions: an owner DescribeExecution does not find yet keeps its job while the lease is live, then loses it', async () => {
    const l = await lake();
    const owner = 'arn:aws:states:us-east-1:123456789012:execution:Compactor:just-started';
    const job = { ...(await jobFor(l, HOUR_10)), executionId: owner };
    expect((await compactStep(stepDeps(l), job)).state).toBe('staged');
    const sfn = mockClient(SFNClient);
    try {
      // Eventually consistent: an execution started moments ago may not be found yet.
      sfn
        .on(DescribeExecutionCommand)
        .rejects(new ExecutionDoesNotExist({ $metadata: {}, message: 'Execution Does Not Exist (mocked)' }));
      const owners = (clock: Clock) =>
        new StepFunctionsOwners({ client: new SFNClient({}), zombieGraceSeconds: 900, clock }).isAlive;
      const before = await snapshot(l.store);
      const live = await recover(recoveryDeps(l, { alive: owners(systemClock) }));
      expect(entry(live)).toMatchObject({ action: 'left-alone', state: 'staged' });
      expect(await snapshot(l.store)).toEqual(before);
      const { leaseExpiresAt } = (await manifestAt(l)).manifest;
      const later: Clock = { now: () => new Date(Date.parse(leaseExpiresAt) + 1000) };
      const expired = await recover(recoveryDeps(l, { clock: later, alive: owners(later) }));
      expect(entry(expired)).toMatchObject({ action: 'rolled-forward', state: 'staged' });
      await expectQuiescent(l);
    } finally {
      sfn.restore();
    }
  });

  // Regression (was a bug (recovery.ts resolveValid -> protocol.ts writeManifest)): the take-over write goes through
  // writeManifest, which first calls checkLease on the manifest being taken over. That lease has
  // expired (the reason for taking over), so it throws LeaseExpiredError, the entry is 'failed'
  // and recover throws RecoveryIncompleteError: a job whose lease expired can never be recovered.
  it('takes over when the owner still answers alive but its lease expired', async () => {
    const l = await lake();
    await runUpTo(l, 'staged');
    const later: Clock = { now: () => new Date(Date.now() + (l.config.leaseSeconds + 60) * 1000) };
    const report = await recover(recoveryDeps(l, { clock: later, alive: async () => true }));
    expect(entry(report)).toMatchObject({ action: 'rolled-forward', state: 'staged' });
    await expectQuiescent(l);
  });

  // Same bug, as an operator meets it: a cycle that starts after a crashed run's lease ran out
  // (every hourly schedule after a crash, with the 20-minute default lease) throws from its
  // recovery, so no cycle compacts anything again until someone deletes the manifest by hand.
  it('a cycle started after the crashed owner’s lease ran out recovers and compacts', async () => {
    const l = await lake();
    await claimedWithStaging(l);
    const later: Clock = { now: () => new Date(Date.now() + (l.config.leaseSeconds + 60) * 1000) };
    const deps = { ...sweepDeps(l.store, l.config, engine, workDir, 'exec-next', new Set()), clock: later };
    const cycle = await runCycle(deps, 'hourly');
    expect(entry(cycle.recovery)).toMatchObject({ action: 'rolled-back', state: 'claimed' });
    expect(cycle.jobs.map((j) => j.outcome.status)).toEqual(['compacted', 'compacted']);
    await expectQuiescent(l);
  });
});

describe('recovery: staged', () => {
  it('staged outputs intact: rolled forward to cleared, exact ids, inputs gone', async () => {
    const l = await lake();
    const job = await runUpTo(l, 'staged');
    const { manifest } = await manifestAt(l);
    const checker = new LakeChecker(engine, l.dir, l.store, l.config, TOTAL_ROWS);
    const observed = new FaultStore(l.store, { beforeCall: checker.audit, afterCall: checker.observe });
    const report = await recover(recoveryDeps(l, { store: observed }));
    expect(checker.violations).toEqual([]);
    expect(checker.auditedDeletes).toBe(IN_10.length);
    expect(entry(report)).toMatchObject({ jobId: job.jobId, action: 'rolled-forward', state: 'staged' });
    expect(await etags(l.store, IN_10)).toEqual([undefined, undefined, undefined]);
    const finals = outputsOf(manifest).map((o) => o.finalKey);
    await expect(idsOf(l, finals)).resolves.toEqual(range(1, 120));
    await expectQuiescent(l);
  });

  it('a publish cut short with its first output copied and its second not is rolled forward (the copy is ours)', async () => {
    const l = await lake();
    const job = await runUpTo(l, 'staged');
    const { manifest } = await manifestAt(l);
    expect(outputsOf(manifest).length).toBeGreaterThanOrEqual(2);
    // The copies go at once: the second is held until the first has landed, then the run dies.
    let firstLanded = () => {};
    const landed = new Promise<void>((resolve) => {
      firstLanded = resolve;
    });
    let copies = 0;
    const dying: FaultStore = new FaultStore(l.store, {
      afterCall: async (call) => {
        if (call.op === 'copy') firstLanded();
      },
      gate: async (call) => {
        if (call.op !== 'copy' || copies++ !== 1) return;
        await landed;
        dying.crashed = true;
        throw new CrashedError(`test crash before ${call.op} ${call.key}`);
      },
    });
    await expect(publishStep(stepDeps(l, dying), job)).rejects.toBeInstanceOf(CrashedError);
    expect(await l.store.head(at(outputsOf(manifest), 0).finalKey)).toBeDefined();
    expect(await l.store.head(at(outputsOf(manifest), 1).finalKey)).toBeUndefined();
    // Before recovery the consistent reader still sees the inputs only.
    await expect(visibleIds(l)).resolves.toEqual(range(1, 180));

    const report = await recover(recoveryDeps(l));
    expect(entry(report)).toMatchObject({ action: 'rolled-forward', state: 'staged' });
    await expect(
      idsOf(
        l,
        outputsOf(manifest).map((o) => o.finalKey),
      ),
    ).resolves.toEqual(range(1, 120));
    await expectQuiescent(l);
  });

  const damage: [string, (l: Lake, stagingKey: string) => Promise<void>][] = [
    [
      'missing',
      async (l, key) => {
        await l.store.deleteMany([{ key }]);
      },
    ],
    [
      'mismatched',
      async (l, key) => {
        await putSample(l.store, key, 10, 9001);
      },
    ],
  ];

  it.each(damage)('staged output %s: rolled back, retried next cycle with exact ids', async (_, harm) => {
    const l = await lake();
    const job = await runUpTo(l, 'staged');
    const { manifest } = await manifestAt(l);
    await harm(l, at(outputsOf(manifest), 0).stagingKey);
    const tags = await etags(l.store, IN_10);
    const observed = new FaultStore(l.store);
    const report = await recover(recoveryDeps(l, { store: observed }));
    expect(entry(report)).toMatchObject({ jobId: job.jobId, action: 'rolled-back', state: 'staged' });
    expect(entry(report).reason).toContain(at(outputsOf(manifest), 0).stagingKey);
    expect(dataDeletes(observed, l.config)).toEqual([]);
    expect(await keys(l.store, manifestsRoot(l.config.layout))).toEqual([]);
    expect(await keys(l.store, stagingRoot(l.config.layout))).toEqual([]);
    expect(await etags(l.store, IN_10)).toEqual(tags);
    await nextCycleIsExact(l);
  });

  it('rollback removes the finals a cut-short publish copied, since they are provably this job’s', async () => {
    const l = await lake();
    const job = await runUpTo(l, 'staged');
    const { manifest } = await manifestAt(l);
    const dying = crashBefore(l.store, (call) => call.op === 'put' && call.key === mKey(l));
    await expect(publishStep(stepDeps(l, dying), job)).rejects.toBeInstanceOf(CrashedError);
    const finals = outputsOf(manifest).map((o) => o.finalKey);
    for (const final of finals) expect((await l.store.head(final))?.metadata[META_JOB_ID]).toBe(job.jobId);
    // The staged copy of the second output is lost: recovery cannot roll forward.
    await l.store.deleteMany([{ key: at(outputsOf(manifest), 1).stagingKey }]);

    const checker = new LakeChecker(engine, l.dir, l.store, l.config, TOTAL_ROWS);
    const observed = new FaultStore(l.store, { beforeCall: checker.audit, afterCall: checker.observe });
    const report = await recover(recoveryDeps(l, { store: observed }));
    expect(checker.violations).toEqual([]);
    expect(entry(report)).toMatchObject({ action: 'rolled-back', state: 'staged' });
    expect(dataDeletes(observed, l.config).sort()).toEqual([...finals].sort());
    for (const final of finals) expect(await l.store.head(final)).toBeUndefined();
    await nextCycleIsExact(l);
  });

  it('rollback keeps an object at a final key that is not provably this job’s', async () => {
    const l = await lake();
    await runUpTo(l, 'staged');
    const { manifest } = await manifestAt(l);
    const first = at(outputsOf(manifest), 0);
    const foreign = Buffer.from('not written by this job');
    await l.store.put(first.finalKey, foreign);
    await putSample(l.store, first.stagingKey, 10, 9001);

    const observed = new FaultStore(l.store);
    const report = await recover(recoveryDeps(l, { store: observed }));
    expect(entry(report)).toMatchObject({ action: 'rolled-back', state: 'staged' });
    expect(dataDeletes(observed, l.config)).toEqual([]);
    expect((await l.store.getBytes(first.finalKey)).body.equals(foreign)).toBe(true);
    expect(await keys(l.store, manifestsRoot(l.config.layout))).toEqual([]);
    expect(await etags(l.store, IN_10)).not.toContain(undefined);
  });

  it('a foreign object at the final key during roll-forward quarantines the job; its staging is kept', async () => {
    const l = await lake();
    const job = await runUpTo(l, 'staged');
    const { manifest } = await manifestAt(l);
    const first = at(outputsOf(manifest), 0);
    await l.store.put(first.finalKey, Buffer.from('foreign'));
    const observed = new FaultStore(l.store);
    const report = await recover(recoveryDeps(l, { store: observed }));
    expect(entry(report)).toMatchObject({ action: 'quarantined', state: 'staged' });
    expect(dataDeletes(observed, l.config)).toEqual([]);
    const records = await quarantineRecords(l);
    expect(records).toHaveLength(1);
    expect(await readJson(l, at(records, 0))).toMatchObject({ jobId: job.jobId });
    const staging = await keys(l.store, stagingPrefix(l.config.layout, job.jobId));
    expect(staging.sort()).toEqual(
      outputsOf(manifest)
        .map((o) => o.stagingKey)
        .sort(),
    );

    // Later recoveries keep the quarantined job's staging as evidence.
    const second = await recover(recoveryDeps(l));
    expect(second).toMatchObject({ changed: false, orphanStagingDeleted: 0, entries: [] });
    expect((await keys(l.store, stagingPrefix(l.config.layout, job.jobId))).sort()).toEqual(staging.sort());
    await expect(visibleIds(l)).resolves.toEqual(range(1, 180));
  });
});

describe('recovery: published / verified', () => {
  it.each(['published', 'verified'] as const)('%s, finals intact: inputs deleted, cleared', async (state) => {
    const l = await lake();
    const job = await runUpTo(l, state);
    const { manifest } = await manifestAt(l);
    const report = await recover(recoveryDeps(l));
    expect(entry(report)).toMatchObject({ jobId: job.jobId, action: 'rolled-forward', state });
    expect(await etags(l.store, IN_10)).toEqual([undefined, undefined, undefined]);
    await expect(
      idsOf(
        l,
        outputsOf(manifest).map((o) => o.finalKey),
      ),
    ).resolves.toEqual(range(1, 120));
    await expectQuiescent(l);
  });

  const harms: [string, (l: Lake, finalKey: string) => Promise<void>][] = [
    [
      'missing',
      async (l, key) => {
        await l.store.deleteMany([{ key }]);
      },
    ],
    ['mismatched', (l, key) => putSample(l.store, key, 10, 7001)],
  ];

  async function finalHarmed(
    state: 'published' | 'verified',
    harm: (l: Lake, finalKey: string) => Promise<void>,
  ): Promise<void> {
    const l = await lake();
    const job = await runUpTo(l, state);
    const { manifest } = await manifestAt(l);
    const finals = outputsOf(manifest).map((o) => o.finalKey);
    await harm(l, at(finals, 0));
    const tags = await etags(l.store, IN_10);
    const observed = new FaultStore(l.store);
    const report = await recover(recoveryDeps(l, { store: observed }));
    expect(entry(report)).toMatchObject({ jobId: job.jobId, action: 'quarantined', state });
    expect(entry(report).reason).toContain(at(finals, 0));
    expect(dataDeletes(observed, l.config)).toEqual([]);
    expect(await etags(l.store, IN_10)).toEqual(tags);
    expect(await keys(l.store, manifestsRoot(l.config.layout))).toEqual([]);
    const records = await quarantineRecords(l);
    expect(records).toHaveLength(1);
    const record = await readJson(l, at(records, 0));
    expect(record).toMatchObject({ jobId: job.jobId, manifestKey: mKey(l) });
    expect(String(record.reason)).toContain(at(finals, 0));
    // The consistent reader sees the inputs, exactly once, and none of the untrusted outputs.
    const visible = (await visibleFiles(l.store, l.config)).files.map((f) => f.key);
    for (const input of IN_10) expect(visible).toContain(input);
    for (const final of finals) expect(visible).not.toContain(final);
    await expect(visibleIds(l)).resolves.toEqual(range(1, 180));
    // The quarantined job's inputs are not candidates: the next plan leaves hour 10 alone.
    const planned = await planTier(l.store, l.config, systemClock, 'hourly');
    expect(planned.jobs.map((j) => j.partition)).toEqual([HOUR_11]);
  }

  it.each(harms)(
    'published, final output %s: quarantined, nothing deleted, inputs visible',
    async (_, harm) => {
      await finalHarmed('published', harm);
    },
  );

  // Regression (was a bug (recovery.ts rollForward)): for a manifest already 'verified', rollForward calls
  // verifyStep, which returns 'already-done' without looking at the finals (loadForStep), and
  // then deleteInputsStep deletes the inputs. A final output that went missing (or was replaced)
  // after verification is never noticed: the inputs are deleted and its rows are lost (with one
  // of two outputs deleted, 60 of hour 10's 120 rows are gone from the lake and the view).
  it.each(harms)(
    'verified, final output %s: quarantined, nothing deleted, inputs visible',
    async (_, harm) => {
      await finalHarmed('verified', harm);
    },
  );
});

describe('recovery: inputs-deleted', () => {
  it('clears', async () => {
    const l = await lake();
    const job = await runUpTo(l, 'inputs-deleted');
    const observed = new FaultStore(l.store);
    const report = await recover(recoveryDeps(l, { store: observed }));
    expect(entry(report)).toMatchObject({ jobId: job.jobId, action: 'cleared', state: 'inputs-deleted' });
    expect(dataDeletes(observed, l.config)).toEqual([]);
    await expectQuiescent(l);
  });
});

// ---- manifests that must not be obeyed ----

type Json = Record<string, unknown>;

interface Invalid {
  readonly name: string;
  readonly body: (manifest: Json, l: Lake, text: string) => Promise<Buffer> | Buffer;
  readonly reason: RegExp;
}

const json = (value: unknown) => Buffer.from(JSON.stringify(value, null, 2));

function inputsOf(manifest: Json): Json[] {
  return manifest.inputs as Json[];
}

const INVALID: readonly Invalid[] = [
  {
    name: 'unreadable JSON',
    body: (_, __, text) => Buffer.from(text.slice(0, text.length / 2)),
    reason: /JSON/,
  },
  {
    name: 'a wrong schema (inputs without ETags)',
    body: (m) => json({ ...m, inputs: inputsOf(m).map((i) => ({ key: i.key, size: i.size })) }),
    reason: /etag/,
  },
  {
    name: 'an input outside its partition',
    body: async (m, l) => {
      const [victim] = await etags(l.store, [IN_11[0]]);
      return json({ ...m, inputs: [...inputsOf(m), { key: IN_11[0], size: 1, etag: victim }] });
    },
    reason: /outside partition/,
  },
  {
    name: 'an output outside its partition',
    body: (m) =>
      json({
        ...m,
        outputs: (m.outputs as Json[]).map((o) => ({
          ...o,
          finalKey: String(o.finalKey).replace('/10/', '/11/'),
        })),
      }),
    reason: /not an output of this job/,
  },
  {
    name: 'a key with ..',
    body: async (m, l) => {
      const [victim] = await etags(l.store, [IN_11[0]]);
      const key = IN_11[0].replace(HOUR_11, `${HOUR_10}../11/`);
      return json({ ...m, inputs: [...inputsOf(m), { key, size: 1, etag: victim }] });
    },
    reason: /not a plain object key/,
  },
  {
    name: 'another bucket',
    body: (m) => json({ ...m, location: 's3://someone-elses-bucket' }),
    reason: /belongs to s3:\/\/someone-elses-bucket/,
  },
  {
    name: '10,001 entries',
    body: (m) =>
      json({
        ...m,
        inputs: [
          ...inputsOf(m),
          ...Array.from({ length: 10_001 - inputsOf(m).length }, (_, i) => ({
            key: `${HOUR_10}cpu_20250115_100000_${i + 100}.parquet`,
            size: 1,
            etag: 'x',
          })),
        ],
      }),
    reason: /exceed the largest job bound/,
  },
];

/** A verified job (obeying it would delete inputs) whose manifest is then replaced by `invalid`. */
async function invalidManifest(l: Lake, invalid: Invalid): Promise<{ job: Job; body: Buffer }> {
  const job = await runUpTo(l, 'verified');
  const { body: original } = await l.store.getBytes(mKey(l));
  const text = original.toString('utf8');
  const body = await invalid.body(JSON.parse(text) as Json, l, text);
  await l.store.put(mKey(l), body);
  return { job, body };
}

describe('recovery: manifests it must not obey', () => {
  it.each(INVALID)('$name: quarantined with the reason, zero data deletes', async (invalid) => {
    const l = await lake();
    const { body } = await invalidManifest(l, invalid);
    const data = await snapshot(l.store, (k) => l.config.layout.isDataKey(k));
    const observed = new FaultStore(l.store);
    const report = await recover(recoveryDeps(l, { store: observed }));
    expect(entry(report).action).toBe('quarantined');
    expect(entry(report).reason).toMatch(invalid.reason);
    expect(report.changed).toBe(true);
    expect(dataDeletes(observed, l.config)).toEqual([]);
    expect(observed.calls.filter((c) => c.op === 'copy')).toEqual([]);
    expect(await snapshot(l.store, (k) => l.config.layout.isDataKey(k))).toEqual(data);
    expect(await keys(l.store, manifestsRoot(l.config.layout))).toEqual([]);
    const records = await quarantineRecords(l);
    expect(records).toHaveLength(1);
    const record = await readJson(l, at(records, 0));
    expect(String(record.reason)).toMatch(invalid.reason);
    expect(record).toMatchObject({ manifestKey: mKey(l), manifest: body.toString('utf8') });
    // Quarantined once: the next recovery has nothing to do.
    const second = await recover(recoveryDeps(l));
    expect(second).toMatchObject({ changed: false, entries: [] });
  });

  // Regression (was a bug (recovery.ts resolveOne -> quarantineManifest)): an invalid manifest is quarantined with
  // its body only, so the record carries no jobId; quarantinedJobId() then names no job and the
  // orphan sweep at the end of the same recover() deletes the job's staging objects, although
  // "quarantined jobs keep their staging as evidence" (recovery.ts) and the record says "nothing
  // of this job is deleted while it exists". The job id is readable in the body here.
  it('the staging of a job whose invalid manifest was quarantined is kept', async () => {
    const l = await lake();
    const invalid = INVALID.find((i) => i.name === 'an input outside its partition');
    if (!invalid) throw new Error('case missing');
    const { job } = await invalidManifest(l, invalid);
    const staging = await keys(l.store, stagingPrefix(l.config.layout, job.jobId));
    expect(staging.length).toBeGreaterThan(0);
    const report = await recover(recoveryDeps(l));
    expect(entry(report).action).toBe('quarantined');
    expect(report.orphanStagingDeleted).toBe(0);
    expect(await keys(l.store, stagingPrefix(l.config.layout, job.jobId))).toEqual(staging);
  });
  // Regression (was a bug (planner.ts readExclusions / readQuarantineRecord)): a quarantine record whose manifest
  // does not parse excludes nothing, so the next cycle plans the quarantined job's partition
  // again. Here the job had published and verified (finals in the lake) when its manifest became
  // invalid (location changed): the next cycle compacts and deletes its inputs, so hour 10's rows
  // end up in two outputs at rest (300 rows, 180 distinct ids) and the inputs, the evidence the
  // operator needs, are gone. The record names the inputs in readable JSON; "quarantined jobs'
  // inputs and outputs are never candidates and nothing of theirs is deleted" (protocol.ts).
  it('the partition of a quarantined invalid manifest is left alone by the next cycle', async () => {
    const l = await lake();
    const invalid = INVALID.find((i) => i.name === 'another bucket');
    if (!invalid) throw new Error('case missing');
    await invalidManifest(l, invalid);
    const tags = await etags(l.store, IN_10);
    expect(entry(await recover(recoveryDeps(l))).action).toBe('quarantined');
    const cycle = await runCycle(
      sweepDeps(l.store, l.config, engine, workDir, `exec-next-${randomHex()}`, new Set()),
      'hourly',
    );
    expect(cycle.jobs.map((j) => j.job.partition)).toEqual([HOUR_11]);
    expect(await etags(l.store, IN_10)).toEqual(tags);
  });
});

// ---- staging, idempotence, faults ----

describe('recovery: staging and convergence', () => {
  it('removes orphan staging (no manifest) and keeps a running job’s', async () => {
    const l = await lake();
    const live = await runUpTo(l, 'staged');
    const liveStaging = await keys(l.store, stagingPrefix(l.config.layout, live.jobId));
    const orphanJob = '20250115T120000Z-0badc0de';
    const orphan = `${stagingPrefix(l.config.layout, orphanJob)}a1b2c3d4/cpu_orphan_compacted.parquet`;
    await putSample(l.store, orphan, 5, 8001);
    const report = await recover(recoveryDeps(l, { alive: async (id) => id === OWNER }));
    expect(report.orphanStagingDeleted).toBe(1);
    expect(report.changed).toBe(true);
    expect(entry(report).action).toBe('left-alone');
    expect(await l.store.head(orphan)).toBeUndefined();
    expect(await keys(l.store, stagingRoot(l.config.layout))).toEqual(liveStaging);
  });

  // Regression (was a bug (recovery.ts recover/resolveOne)): when reading a manifest fails (a transient GET error),
  // resolveOne records 'failed' without the job id, so the job is missing from keepJobs, and the
  // orphan sweep, which runs before recover() throws RecoveryIncompleteError, deletes that job's
  // staging as if it had no manifest. Here the owner is alive and its lease live (the job must be
  // left alone): its staged outputs are destroyed and its next step (publish) fails. The design:
  // "A list or head error is an error, never 'nothing there'".
  it('a transient error reading a live job’s manifest does not delete that job’s staging', async () => {
    const l = await lake();
    const job = await runUpTo(l, 'staged');
    const staging = await keys(l.store, stagingPrefix(l.config.layout, job.jobId));
    let failed = false;
    const flaky = new FaultStore(l.store, {
      gate: async (call) => {
        if (!failed && call.op === 'getBytes' && call.key === mKey(l)) {
          failed = true;
          throw new TransientStoreError(`test: GET ${call.key} failed`);
        }
      },
    });
    await expect(
      recover(recoveryDeps(l, { store: flaky, alive: async (id) => id === OWNER })),
    ).rejects.toThrow(/could not resolve/);
    expect(failed).toBe(true);
    expect(await keys(l.store, stagingPrefix(l.config.layout, job.jobId))).toEqual(staging);
    expect(await publishStep(stepDeps(l), job)).toMatchObject({ status: 'done', state: 'published' });
  });

  it('twice equals once: the second run changes nothing', async () => {
    const l = await lake();
    await runUpTo(l, 'staged');
    await claimedWithStaging(l, HOUR_11);
    const first = await recover(recoveryDeps(l));
    expect(first.changed).toBe(true);
    expect(first.entries.map((e) => e.action).sort()).toEqual(['rolled-back', 'rolled-forward']);
    const after = await snapshot(l.store);
    const observed = new FaultStore(l.store);
    const second = await recover(recoveryDeps(l, { store: observed }));
    expect(second).toEqual({
      entries: [],
      orphanStagingDeleted: 0,
      uploadsAborted: 0,
      quarantinePruned: 0,
      changed: false,
      failures: 0,
    });
    expect(observed.calls.filter((c) => ['put', 'copy', 'deleteMany'].includes(c.op))).toEqual([]);
    expect(await snapshot(l.store)).toEqual(after);
    await nextCycleIsExact(l);
  });

  it('converges under a transient fault at each of its calls', async () => {
    /** Hour 10 staged (two outputs), hour 11 claimed with staging leftovers, one orphan. */
    const build = async (): Promise<Lake> => {
      const l = await lake();
      await runUpTo(l, 'staged');
      const job11 = await jobFor(l, HOUR_11);
      await expect(
        compactStep(
          stepDeps(
            l,
            crashBefore(l.store, (call) => call.op === 'getToFile'),
          ),
          job11,
        ),
      ).rejects.toBeInstanceOf(CrashedError);
      await l.store.put(
        `${stagingPrefix(l.config.layout, job11.jobId)}0000beef/leftover_compacted.parquet`,
        Buffer.from('x'),
      );
      await l.store.put(
        `${stagingPrefix(l.config.layout, '20250115T120000Z-0badc0de')}x/orphan.parquet`,
        Buffer.from('y'),
      );
      return l;
    };
    const settle = async (
      l: Lake,
      fault?: { at: number; kind: FaultKind },
    ): Promise<{ passes: number; calls: readonly CallRecord[] }> => {
      const checker = new LakeChecker(engine, l.dir, l.store, l.config, TOTAL_ROWS);
      const faulty = new FaultStore(l.store, { ...(fault ? { fault } : {}), beforeCall: checker.audit });
      let passes = 0;
      for (let pass = 1; ; pass++) {
        expect(pass, `no convergence with ${fault?.kind} at ${fault?.at}`).toBeLessThanOrEqual(4);
        try {
          await recover(recoveryDeps(l, { store: faulty }));
          passes = pass;
          break;
        } catch (error) {
          expect(['TransientStoreError', 'RecoveryIncompleteError']).toContain((error as Error).name);
        }
      }
      expect(checker.violations).toEqual([]);
      const last = await recover(recoveryDeps(l));
      expect(last.changed, `not at a fixed point with ${fault?.kind} at ${fault?.at}`).toBe(false);
      await expectQuiescent(l);
      return { passes, calls: faulty.calls };
    };

    const clean = await build();
    const { calls } = await settle(clean);
    expect(calls.length).toBeGreaterThan(20);
    // Every call fails before it is made; every write also fails after it is made (a lost
    // response). A lost read response is the same as a failed read: it has no effect.
    const faults = calls.flatMap((call) =>
      ['put', 'copy', 'deleteMany', 'abortIncompleteUpload'].includes(call.op)
        ? [
            { at: call.n, kind: 'fail-before' as const },
            { at: call.n, kind: 'fail-after' as const },
          ]
        : [{ at: call.n, kind: 'fail-before' as const }],
    );
    let retried = 0;
    // Four lakes at a time: each scenario is mostly file-system waits.
    const pending = [...faults];
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        for (let fault = pending.shift(); fault; fault = pending.shift()) {
          const l = await build();
          if ((await settle(l, fault)).passes > 1) retried++;
          await rm(l.dir, { recursive: true, force: true });
        }
      }),
    );
    // Nearly every fault makes a pass fail: the retry loop was exercised.
    expect(retried).toBeGreaterThan(calls.length);
  }, 120_000);
});
