/**
 * The state machine CDK synthesizes, executed by a real ASL interpreter (aws-local-stepfunctions)
 * with every Lambda bound in-process:
 * - over fauxqs (an in-process S3 server, the real SDK and S3Store), which ignores conditional
 *   writes, copies and deletes, `compactor run` is refused by the store probe, naming each missing
 *   guarantee, with nothing written; with the single-writer opt-out it compacts a generated lake
 *   hourly then daily with exact row ids, warning on every run;
 * - partitions failing past the tolerance fail the execution in the Map; the stack's EventBridge
 *   rule runs Summary on the failure, and a redrive re-runs exactly the failed partitions;
 *   a failure before the Map is replayed by a redrive from the failed state;
 * - `compactor run` executes the synthesized definition: changing the definition (the Map's
 *   tolerated failure percentage, through --context) changes what the run does; a table's
 *   dedup in --context reaches the steps.
 */

import { mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAP_FAILED_ERROR, STATES } from '../../cdk/constructs/compaction-workflow.ts';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { LocalOwners } from '../../functions/adapters/local-owner.ts';
import { LocalFolderStore } from '../../functions/adapters/local-store/local-store.ts';
import { S3Store } from '../../functions/adapters/s3-store/s3-store.ts';
import { readIds } from '../../functions/adapters/sample-data.ts';
import { runCli } from '../../functions/cli/compactor.ts';
import { type CompactorConfig, parseConfig } from '../../functions/core/config.ts';
import { systemClock } from '../../functions/core/engine.ts';
import type { InputRef } from '../../functions/core/manifest/manifest.ts';
import { newClaim } from '../../functions/core/manifest/manifest-cas.ts';
import type { ObjectStore } from '../../functions/core/object-store.ts';
import {
  runWorkflowLocally,
  type SynthesizedWorkflow,
  synthesizeWorkflow,
} from '../../functions/local-runner/run.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { type CallRecord, FaultStore } from '../support/fault-store.ts';
import { type FauxqsS3, startFauxqsS3 } from '../support/fauxqs-server.ts';
import { type LakeFile, writeLake } from '../support/lake-harness.ts';

const FILES: readonly LakeFile[] = [
  { key: 'db/cpu/2025/01/14/01/cpu_20250114_010500_1.parquet', rows: 31 },
  { key: 'db/cpu/2025/01/14/01/cpu_20250114_012000_2.parquet', rows: 32 },
  { key: 'db/cpu/2025/01/14/02/cpu_20250114_020500_3.parquet', rows: 33 },
  { key: 'db/cpu/2025/01/14/02/cpu_20250114_022000_4.parquet', rows: 34 },
  { key: 'db/cpu/2025/01/14/03/cpu_20250114_030500_5.parquet', rows: 35 },
  { key: 'db/cpu/2025/01/14/03/cpu_20250114_032000_6.parquet', rows: 36 },
];

let engine: DuckDbEngine;
let root: string;
let template: string;
let total: number;
let workflow: SynthesizedWorkflow;
let strict: SynthesizedWorkflow;
const config: CompactorConfig = parseConfig({ tiers: { hourly: { minFiles: 2 } }, quietSeconds: 0 });

useEngineAndDir('local-workflow-', async (e, dir) => {
  engine = e;
  root = dir;
  template = join(root, 'template');
  total = await writeLake(engine, template, FILES);
  workflow = await synthesizeWorkflow({});
  strict = await synthesizeWorkflow({ map: { toleratedFailurePercentage: 0 } });
});

async function ids(store: ObjectStore): Promise<bigint[]> {
  const scratch = await mkdtemp(join(root, 'ids-'));
  const paths: string[] = [];
  for await (const o of store.list('')) {
    if (!config.layout.isDataKey(o.key)) continue;
    const path = join(scratch, `${paths.length}.parquet`);
    await store.getToFile(o.key, path);
    paths.push(path);
  }
  return readIds(engine, paths);
}

function range(n: number): bigint[] {
  return Array.from({ length: n }, (_, i) => BigInt(i + 1));
}

async function stateKeys(store: ObjectStore, under: string): Promise<string[]> {
  const keys: string[] = [];
  for await (const o of store.list(`_compaction/${under}`)) keys.push(o.key);
  return keys;
}

describe('the synthesized state machine run locally over fauxqs (in-process S3 server, real SDK)', () => {
  let s3: FauxqsS3;
  beforeAll(async () => {
    s3 = await startFauxqsS3('workflow-lake');
  });
  afterAll(async () => {
    await s3.stop();
  });

  it('compacts a generated lake hourly then daily with exact row ids', async () => {
    const store = new S3Store({ client: s3.client, bucket: s3.bucket });
    const local = new LocalFolderStore(template);
    for await (const o of local.list('')) {
      await store.put(o.key, { file: join(template, o.key) });
    }
    const deps = {
      store,
      // fauxqs ignores the conditions: only the single-writer opt-out lets the Recover step run.
      config: { ...config, unsafeSingleWriterStore: true },
      clock: systemClock,
      engine: async () => engine,
      workDir: join(root, 'work'),
    };

    const hourly = await runWorkflowLocally(workflow, deps, { tier: 'hourly', retryIntervalMs: 0 });
    expect(hourly.execution.status, hourly.execution.cause).toBe('SUCCEEDED');
    expect(hourly.output?.summary).toMatchObject({
      partitions: 3,
      compacted: 3,
      failed: 0,
      filesIn: 6,
      filesOut: 3,
    });
    expect(hourly.output?.summary.rows).toBe(total);
    expect(hourly.execution.statesEntered).toContain('Compact partitions');

    const daily = await runWorkflowLocally(workflow, deps, { tier: 'daily', retryIntervalMs: 0 });
    expect(daily.execution.status, daily.execution.cause).toBe('SUCCEEDED');
    expect(daily.output?.summary).toMatchObject({ partitions: 1, compacted: 1, filesIn: 3, filesOut: 1 });

    expect(await ids(store)).toEqual(range(total));
    const data: string[] = [];
    for await (const o of store.list('')) if (config.layout.isDataKey(o.key)) data.push(o.key);
    expect(data).toHaveLength(1);
    expect(data[0]).toMatch(/^db\/cpu\/2025\/01\/14\/cpu_20250114_.*_daily\.parquet$/);
    expect(await stateKeys(store, 'manifests/')).toEqual([]);
    expect(await stateKeys(store, 'staging/')).toEqual([]);
  });
});

/**
 * A store on which the calls `match` picks fail with an error the state machine does not retry,
 * until repair(); with the deps a local run needs.
 */
function failingStore(inner: ObjectStore, match: (call: CallRecord) => boolean) {
  let broken = true;
  const store = new FaultStore(inner, {
    beforeCall: async (call) => {
      if (broken && match(call)) {
        const error = new Error(`injected failure: ${call.op} ${call.key}`);
        error.name = 'InjectedStepFailure';
        throw error;
      }
    },
  });
  return {
    deps: { store, config, clock: systemClock, engine: async () => engine, workDir: join(root, 'work') },
    repair: () => {
      broken = false;
    },
  };
}

/** Ten hours of db/cpu on 2025-01-14, two files each: ten partitions. */
const TEN_HOURS: readonly LakeFile[] = Array.from({ length: 10 }, (_, h) => [
  {
    key: `db/cpu/2025/01/14/${String(h).padStart(2, '0')}/cpu_20250114_${String(h).padStart(2, '0')}0500_a.parquet`,
    rows: 10 + h,
  },
  {
    key: `db/cpu/2025/01/14/${String(h).padStart(2, '0')}/cpu_20250114_${String(h).padStart(2, '0')}2000_b.parquet`,
    rows: 20 + h,
  },
]).flat();

describe('partitions failing past the tolerance: the Map fails the execution, a rule runs Summary, a redrive replays them', () => {
  it('3 of 10 fail; Summary counts them from the rule; the cause fixed, a redrive compacts those 3 and Summary counts 10', async () => {
    const dir = join(root, 'redrive');
    await rm(dir, { recursive: true, force: true });
    const rows = await writeLake(engine, dir, TEN_HOURS);
    const inner = new LocalFolderStore(dir);
    const failingHours = ['03', '05', '08'].map((h) => `db/cpu/2025/01/14/${h}/`);
    // The publish step of three hours fails with an error the state machine does not retry.
    const failing = failingStore(
      inner,
      (call) => call.op === 'copy' && failingHours.some((hour) => call.key.startsWith(hour)),
    );
    const deps = failing.deps;
    const compacted: string[] = [];
    const compactStatus = new Map<string, string>();
    const summaries: unknown[] = [];
    const onStep = (step: string, payload: unknown, result: unknown) => {
      if (step === 'compact') {
        const { partition } = payload as { partition: string };
        compacted.push(partition);
        const { status, state } = result as { status: string; state: string };
        compactStatus.set(partition, `${status} ${state}`);
      }
      if (step === 'summary') summaries.push(result);
    };
    // The stack's default tolerance, 5%: 3 of 10 is past it.
    const first = await runWorkflowLocally(workflow, deps, { tier: 'hourly', retryIntervalMs: 0, onStep });
    expect(first.execution.status).toBe('FAILED');
    expect(first.execution.error).toBe(MAP_FAILED_ERROR);
    // The execution fails in the Map, which a redrive re-runs: no state after it ran.
    expect(first.execution.failedState?.name).toContain(STATES.map);
    expect(first.execution.statesEntered).not.toContain(STATES.summary);
    // The stack's EventBridge rule ran Summary on the failure, from the Map Run's results.
    expect(first.stoppedSummary).toMatchObject({
      partitions: 10,
      compacted: 7,
      failed: 3,
      withinTolerance: false,
      executionStatus: 'FAILED',
      toleratedFailurePercentage: 5,
    });
    expect(first.stoppedSummary?.failures.map((f) => f.partition).sort()).toEqual(failingHours);
    expect(JSON.stringify(first.stoppedSummary?.failures)).toContain('InjectedStepFailure');
    expect(compacted).toHaveLength(10);
    // Nothing lost meanwhile: the three hours are staged, their inputs still there.
    expect(await ids(inner)).toEqual(range(rows));
    expect(await stateKeys(inner, 'manifests/')).toHaveLength(3);

    failing.repair();
    compacted.length = 0;
    summaries.length = 0;
    const redrive = await runWorkflowLocally(workflow, deps, {
      tier: 'hourly',
      retryIntervalMs: 0,
      redriveOf: first.execution,
      onStep,
    });
    expect(redrive.execution.status, redrive.execution.cause).toBe('SUCCEEDED');
    // The ten small hours of one table are one Map item: the failed item ran again, all its jobs.
    // The seven this execution committed found their receipts and did nothing; the three finished.
    expect(redrive.output?.plan).toMatchObject({ jobs: 10, mapItems: 1 });
    expect(compacted).toHaveLength(10);
    for (const [partition, status] of compactStatus) {
      expect(status, partition).toBe(
        failingHours.includes(partition) ? 'already-done staged' : 'already-done cleared',
      );
    }
    expect(redrive.execution.statesEntered).not.toContain(STATES.recover);
    expect(redrive.output?.summary).toMatchObject({ partitions: 10, compacted: 10, failed: 0 });
    expect(redrive.stoppedSummary).toBeUndefined();
    expect(summaries).toHaveLength(1);
    expect(await ids(inner)).toEqual(range(rows));
    expect(await stateKeys(inner, 'manifests/')).toEqual([]);
    expect(await stateKeys(inner, 'staging/')).toEqual([]);
    const data: string[] = [];
    for await (const o of inner.list('')) if (config.layout.isDataKey(o.key)) data.push(o.key);
    expect(data).toHaveLength(10);
  });

  it('a failure before the Map (Plan) is what a redrive replays: from Plan, with the same input, ending exact', async () => {
    const dir = join(root, 'redrive-plan');
    await rm(dir, { recursive: true, force: true });
    await writeLake(engine, dir, FILES);
    const inner = new LocalFolderStore(dir);
    const failing = failingStore(
      inner,
      (call) => call.op === 'put' && call.key.startsWith('_compaction/plans/'),
    );
    const deps = failing.deps;
    const first = await runWorkflowLocally(strict, deps, { tier: 'hourly', retryIntervalMs: 0 });
    expect(first.execution.status).toBe('FAILED');
    expect(first.execution.failedState?.name).toBe(STATES.plan);
    failing.repair();
    const redrive = await runWorkflowLocally(strict, deps, {
      tier: 'hourly',
      retryIntervalMs: 0,
      redriveOf: first.execution,
    });
    expect(redrive.execution.status, redrive.execution.cause).toBe('SUCCEEDED');
    expect(redrive.execution.statesEntered).not.toContain(STATES.recover);
    expect(redrive.output?.summary).toMatchObject({ partitions: 3, compacted: 3, failed: 0 });
    expect(await ids(inner)).toEqual(range(total));
    expect(await stateKeys(inner, 'manifests/')).toEqual([]);
  });
});

/** One hour of db/cpu holding eleven files (a backlog of four jobs of three), and an hour of two. */
const BACKLOG: readonly LakeFile[] = [
  ...Array.from({ length: 11 }, (_, i) => ({
    key: `db/cpu/2025/01/14/01/cpu_20250114_01${String(i).padStart(2, '0')}00_${i}.parquet`,
    rows: 5 + i,
  })),
  { key: 'db/cpu/2025/01/14/02/cpu_20250114_020500_a.parquet', rows: 7 },
  { key: 'db/cpu/2025/01/14/02/cpu_20250114_022000_b.parquet', rows: 8 },
];
const BACKLOG_HOUR = 'db/cpu/2025/01/14/01/';

async function dataKeys(store: ObjectStore): Promise<string[]> {
  const keys: string[] = [];
  for await (const o of store.list('')) if (config.layout.isDataKey(o.key)) keys.push(o.key);
  return keys;
}

describe('a backlog of many job bounds drains in one execution, one job of a partition after another', () => {
  const jobBound = { ...config, maxJobFiles: 3 };

  it('four jobs of one hour run in four waves, each after the last cleared; rows exact, nothing left', async () => {
    const dir = join(root, 'backlog');
    await rm(dir, { recursive: true, force: true });
    const rows = await writeLake(engine, dir, BACKLOG);
    const store = new LocalFolderStore(dir);
    const steps: { step: string; partition: string; jobId: string }[] = [];
    const onStep = (step: string, payload: unknown) => {
      const job = payload as { partition?: string; jobId?: string };
      if (job.partition && job.jobId) steps.push({ step, partition: job.partition, jobId: job.jobId });
    };
    const deps = {
      store,
      config: jobBound,
      clock: systemClock,
      engine: async () => engine,
      workDir: join(root, 'work'),
    };
    const run = await runWorkflowLocally(workflow, deps, { tier: 'hourly', retryIntervalMs: 0, onStep });
    expect(run.execution.status, run.execution.cause).toBe('SUCCEEDED');
    expect(run.output?.plan).toMatchObject({ jobs: 5, waves: 4 });
    expect(run.execution.statesEntered.filter((s) => s === STATES.map)).toHaveLength(4);
    // Summary counts every wave's jobs.
    expect(run.output?.summary).toMatchObject({
      partitions: 5,
      compacted: 5,
      failed: 0,
      filesIn: 13,
      filesOut: 5,
    });
    expect(run.output?.summary.rows).toBe(rows);
    // One partition's jobs never overlap: each job's steps end before the next job's start.
    const hourJobs = steps.filter((s) => s.partition === BACKLOG_HOUR).map((s) => s.jobId);
    const blocks = hourJobs.filter((id, i) => id !== hourJobs[i - 1]);
    expect(blocks).toHaveLength(4);
    expect(new Set(blocks).size).toBe(4);
    // As in AWS, a Map's items and results never enter the execution's state: what Summary gets
    // names no job, however many ran (the interpreter copies each state's whole input).
    const summaryInput = JSON.stringify(run.execution.inputs.get(STATES.summary));
    for (const { jobId } of steps) expect(summaryInput).not.toContain(jobId);
    expect(await ids(store)).toEqual(range(rows));
    const keys = await dataKeys(store);
    expect(keys.filter((k) => k.startsWith(BACKLOG_HOUR))).toHaveLength(4);
    expect(keys.every((k) => config.layout.parse(k)?.level === 1)).toBe(true);
    expect(await stateKeys(store, 'manifests/')).toEqual([]);
    expect(await stateKeys(store, 'staging/')).toEqual([]);
  });

  it('maxJobsPerPartition bounds the jobs one run takes; the next run takes the rest', async () => {
    const dir = join(root, 'backlog-bounded');
    await rm(dir, { recursive: true, force: true });
    const rows = await writeLake(engine, dir, BACKLOG);
    const store = new LocalFolderStore(dir);
    const deps = {
      store,
      // Listed whole each run, as local runs do: a windowed second run would not look back to 2025.
      config: {
        ...jobBound,
        maxJobsPerPartition: 2,
        planning: { ...jobBound.planning, listing: 'full' as const },
      },
      clock: systemClock,
      engine: async () => engine,
      workDir: join(root, 'work'),
    };
    const first = await runWorkflowLocally(workflow, deps, { tier: 'hourly', retryIntervalMs: 0 });
    expect(first.output?.summary).toMatchObject({ partitions: 3, compacted: 3, filesIn: 8 });
    expect((await dataKeys(store)).filter((k) => config.layout.parse(k)?.level === 0)).toHaveLength(5);
    const second = await runWorkflowLocally(workflow, deps, { tier: 'hourly', retryIntervalMs: 0 });
    expect(second.output?.summary).toMatchObject({ partitions: 2, compacted: 2, filesIn: 5 });
    expect(await ids(store)).toEqual(range(rows));
    expect((await dataKeys(store)).filter((k) => config.layout.parse(k)?.level === 0)).toEqual([]);
  });

  it("a job failing in the second wave fails that wave's Map; the rule's Summary counts both waves; a redrive runs it and the waves after", async () => {
    const dir = join(root, 'backlog-redrive');
    await rm(dir, { recursive: true, force: true });
    const rows = await writeLake(engine, dir, BACKLOG);
    const inner = new LocalFolderStore(dir);
    // The hour's second publish (its second job's, in the second wave) fails, not retried.
    let copies = 0;
    const failing = failingStore(
      inner,
      (call) => call.op === 'copy' && call.key.startsWith(BACKLOG_HOUR) && ++copies === 2,
    );
    const deps = { ...failing.deps, config: jobBound };
    const compacted: string[] = [];
    const onStep = (step: string, payload: unknown) => {
      if (step === 'compact') compacted.push((payload as { jobId: string }).jobId);
    };
    const first = await runWorkflowLocally(strict, deps, { tier: 'hourly', retryIntervalMs: 0, onStep });
    expect(first.execution.status).toBe('FAILED');
    expect(first.execution.error).toBe(MAP_FAILED_ERROR);
    expect(first.execution.statesEntered.filter((s) => s === STATES.map)).toHaveLength(2);
    // Wave one: both hours' first jobs; wave two: the backlog's second job, failed.
    expect(first.stoppedSummary).toMatchObject({ partitions: 3, compacted: 2, failed: 1 });
    expect(await ids(inner)).toEqual(range(rows));

    failing.repair();
    compacted.length = 0;
    const redrive = await runWorkflowLocally(strict, deps, {
      tier: 'hourly',
      retryIntervalMs: 0,
      redriveOf: first.execution,
      onStep,
    });
    expect(redrive.execution.status, redrive.execution.cause).toBe('SUCCEEDED');
    // The failed job, then the two waves after it: nothing that succeeded ran again.
    expect(compacted).toHaveLength(3);
    expect(redrive.output?.summary).toMatchObject({ partitions: 5, compacted: 5, failed: 0, filesIn: 13 });
    expect(await ids(inner)).toEqual(range(rows));
    expect(await stateKeys(inner, 'manifests/')).toEqual([]);
    expect((await dataKeys(inner)).filter((k) => config.layout.parse(k)?.level === 0)).toEqual([]);
  });
});

describe('a manifest recovery cannot resolve', () => {
  it('is reported and its partition skipped; the rest of the lake is planned and compacted exactly', async () => {
    const dir = join(root, 'unresolvable');
    await rm(dir, { recursive: true, force: true });
    await writeLake(engine, dir, FILES);
    const store = new LocalFolderStore(dir);
    // A job of an execution of an older stack, lease still running: asking Step Functions about
    // it is denied (the recover role may describe only this state machine's executions).
    const hour = 'db/cpu/2025/01/14/01/';
    const inputs: InputRef[] = [];
    for (const file of FILES.filter((f) => f.key.startsWith(hour))) {
      const head = await store.head(file.key);
      if (!head) throw new Error(`no ${file.key}`);
      inputs.push({ key: file.key, size: head.size, etag: head.etag });
    }
    const oldExecution = 'arn:aws:states:eu-west-1:123456789012:execution:OldCompactor:run-1';
    const claim = newClaim(
      { store, config, clock: systemClock },
      { tier: 'hourly', partition: hour, jobId: '20250114T010000Z-0bad0bad', executionId: oldExecution },
      inputs,
    );
    await store.put(claim.key, claim.body, { ifNoneMatch: '*' });
    class DeniedOwners extends LocalOwners {
      override isAlive = async (executionId: string): Promise<boolean> => {
        if (executionId !== oldExecution) return false;
        const error = new Error(`not authorized to perform states:DescribeExecution on ${executionId}`);
        error.name = 'AccessDeniedException';
        throw error;
      };
    }
    const errors: string[] = [];
    const result = await runWorkflowLocally(
      workflow,
      {
        store,
        config,
        clock: systemClock,
        engine: async () => engine,
        workDir: join(root, 'work'),
        owners: new DeniedOwners(),
      },
      {
        tier: 'hourly',
        retryIntervalMs: 0,
        onLog: (level, message) => level === 'error' && errors.push(message),
      },
    );
    expect(result.execution.status, result.execution.cause).toBe('SUCCEEDED');
    expect(result.output?.recovery).toMatchObject({ unresolved: 1 });
    const recovery = result.output?.recovery as unknown as {
      unresolvedManifests: { manifestKey: string; reason: string }[];
    };
    expect(recovery.unresolvedManifests[0]?.manifestKey).toBe(claim.key);
    expect(recovery.unresolvedManifests[0]?.reason).toContain('AccessDeniedException');
    expect(errors.some((m) => m.includes('could not resolve'))).toBe(true);
    // The other two hours compacted; hour 01 waits under its manifest, its inputs untouched.
    expect(result.output?.summary).toMatchObject({ compacted: 2, failed: 0 });
    expect(await ids(store)).toEqual(range(total));
    expect(await stateKeys(store, 'manifests/')).toEqual([claim.key]);
    for (const input of inputs) expect((await store.head(input.key))?.etag).toBe(input.etag);
  });
});

describe('compactor run executes the synthesized definition', () => {
  async function lakeWithBadHour(name: string): Promise<string> {
    const dir = join(root, name);
    await rm(dir, { recursive: true, force: true });
    await writeLake(engine, dir, FILES);
    // Hour 03 gains a file whose `count` is text: a schema conflict fails that partition.
    const bad = join(root, `${name}-bad.parquet`);
    await engine.query(
      `COPY (SELECT 999999 AS id, TIMESTAMP '2025-01-14 03:30:00' AS time, 'x' AS host, 'r' AS region, 1.0 AS value, 'text' AS count) TO '${bad}' (FORMAT parquet)`,
    );
    await new LocalFolderStore(dir).put('db/cpu/2025/01/14/03/cpu_20250114_034000_bad.parquet', {
      file: bad,
    });
    return dir;
  }

  const run = async (dir: string, ...extra: string[]) => {
    const out: string[] = [];
    const err: string[] = [];
    const code = await runCli(
      ['run', '--tier', 'hourly', '--store', dir, '--quiet', '0', '--min-files', '2', '--json', ...extra],
      { out: (l) => out.push(l), err: (l) => err.push(l) },
    );
    return { code, json: JSON.parse(out.join('\n')) as Record<string, unknown>, err: err.join('\n') };
  };

  it('with the deployed tolerance (5%), one failed partition in three fails its Map item and the execution; the rule runs Summary', async () => {
    const dir = await lakeWithBadHour('default-tolerance');
    const result = await run(dir);
    expect(result.code).toBe(1);
    // The three small hours ride in one Map item: the failed job fails the item, and the item's
    // cause carries its other jobs' outcomes, which Summary counts.
    expect(result.json).toMatchObject({
      status: 'FAILED',
      error: MAP_FAILED_ERROR,
      failedState: `${STATES.map} (ResultWriter)`,
      summary: { partitions: 3, items: 1, failedItems: 1, compacted: 2, failed: 1, withinTolerance: false },
    });
    expect(JSON.stringify(result.json.summary)).toContain('SchemaConflictError');
    expect(result.json.states).toContain('Compact partitions (ItemReader)');
  });

  it('the same run with one job an item and the definition changed to tolerate 50% succeeds and reports the failure', async () => {
    const dir = await lakeWithBadHour('changed-tolerance');
    const result = await run(
      dir,
      '--context',
      '{"map":{"toleratedFailurePercentage":50},"smallJobsPerItem":1}',
    );
    expect(result.code).toBe(1); // a failed partition is still a problem found
    expect(result.json.error).toBeUndefined();
    expect(result.json).toMatchObject({
      summary: { partitions: 3, items: 3, failedItems: 1, compacted: 2, failed: 1, withinTolerance: true },
    });
    const partitions = result.json.partitions as { partition: string; result: string; note: string }[];
    expect(partitions.find((p) => p.partition === 'db/cpu/2025/01/14/03/')).toMatchObject({
      result: 'failed',
    });
    expect(partitions.find((p) => p.result === 'failed')?.note).toContain('SchemaConflictError');
  });

  it('--context dedup reaches the steps, as COMPACTOR_CONFIG does in AWS: a file sent twice is compacted once', async () => {
    const dir = join(root, 'dedup-context');
    await rm(dir, { recursive: true, force: true });
    const firstTwo = FILES.slice(0, 2);
    const rows = await writeLake(engine, dir, firstTwo);
    const store = new LocalFolderStore(dir);
    // The writer of hour 01 retried: its first file landed again under another name.
    const { body } = await store.getBytes(FILES[0]?.key ?? '');
    await store.put('db/cpu/2025/01/14/01/cpu_20250114_013000_1-retry.parquet', body);
    const result = await run(dir, '--context', '{"dedup":{"db/cpu/":{"mode":"exact"}}}');
    expect(result.code, result.err).toBe(0);
    expect(result.json).toMatchObject({ summary: { partitions: 1, compacted: 1, rows } });
    // The row says what dedup dropped: the retried file's rows.
    const dropped = FILES[0]?.rows ?? 0;
    expect(result.json).toMatchObject({
      partitions: [
        {
          note: `dedup: ${(rows + dropped).toLocaleString('en-US')} rows in, ${dropped.toLocaleString('en-US')} duplicate(s) dropped`,
        },
      ],
    });
    expect(await ids(store)).toEqual(range(rows));
  });

  it('a bad dedup in --context fails with exit 2 naming the setting', async () => {
    const err: string[] = [];
    const code = await runCli(
      ['run', '--tier', 'hourly', '--store', template, '--context', '{"dedup":{"db/cpu":{"mode":"exact"}}}'],
      { out: () => {}, err: (l) => err.push(l) },
    );
    expect(code).toBe(2);
    expect(err.join('\n')).toContain('context compactor: dedup["db/cpu"]: "db/cpu" is not a table of layout');
  });

  it('a bad --context fails with exit 2 naming the problem', async () => {
    const out: string[] = [];
    const err: string[] = [];
    const code = await runCli(['run', '--tier', 'hourly', '--store', template, '--context', '[1]'], {
      out: (l) => out.push(l),
      err: (l) => err.push(l),
    });
    expect(code).toBe(2);
    expect(err.join('\n')).toContain('--context must be a JSON object');
  });
});

describe('compactor run over fauxqs (in-process S3 server, real SDK), which ignores the conditions', () => {
  let s3: FauxqsS3;
  const savedEnv = { ...process.env };
  beforeAll(async () => {
    s3 = await startFauxqsS3('refused-lake');
    // The CLI builds its own S3 client, with the environment's credentials.
    process.env.AWS_ACCESS_KEY_ID = 'test';
    process.env.AWS_SECRET_ACCESS_KEY = 'test';
    const store = new S3Store({ client: s3.client, bucket: s3.bucket });
    for await (const o of new LocalFolderStore(template).list('')) {
      await store.put(`lake/${o.key}`, { file: join(template, o.key) });
    }
  });
  afterAll(async () => {
    process.env = savedEnv;
    await s3.stop();
  });

  const cli = async (...extra: string[]) => {
    const out: string[] = [];
    const err: string[] = [];
    const code = await runCli(
      [
        'run',
        '--tier',
        'hourly',
        '--store',
        `s3://${s3.bucket}/lake`,
        '--endpoint',
        s3.endpoint,
        '--region',
        'us-east-1',
        '--quiet',
        '0',
        '--min-files',
        '2',
        '--work-dir',
        join(root, 'refused-work'),
        ...extra,
      ],
      { out: (l) => out.push(l), err: (l) => err.push(l) },
    );
    return { code, out: out.join('\n'), err: err.join('\n') };
  };
  const everything = async () => {
    const out: string[] = [];
    for await (const o of new S3Store({ client: s3.client, bucket: s3.bucket }).list('')) {
      out.push(`${o.key} ${o.etag}`);
    }
    return out;
  };

  it('is refused by default: one error names the store and each missing guarantee, and nothing is written', async () => {
    const before = await everything();
    expect(before.filter((k) => k.startsWith('lake/db/'))).toHaveLength(FILES.length);
    const result = await cli();
    expect(result.code, result.out).toBe(2);
    const lines = result.err.split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /^compactor run: StoreGuaranteesError: the store s3:\/\/refused-lake does not honour/,
    );
    for (const guarantee of ['put-if-absent', 'compare-and-swap', 'conditional-copy', 'conditional-delete']) {
      expect(lines[0]).toContain(`${guarantee} (`);
    }
    // fauxqs does keep and return checksums.
    expect(lines[0]).not.toContain('checksums (');
    expect(lines[0]).toContain('--unsafe-single-writer-store');
    // Nothing under the data prefix, nor anywhere else (the probe removed its own objects).
    expect(await everything()).toEqual(before);
  });

  it('--unsafe-single-writer-store runs it, with a loud warning on every run', async () => {
    const first = await cli('--unsafe-single-writer-store', '--json');
    expect(first.code, first.err).toBe(0);
    expect(JSON.parse(first.out)).toMatchObject({ summary: { partitions: 3, compacted: 3, failed: 0 } });
    expect(first.err).toMatch(
      /^WARNING \(--unsafe-single-writer-store\): UNSAFE: the store s3:\/\/refused-lake is not probed/m,
    );
    const second = await cli('--unsafe-single-writer-store', '--json');
    expect(second.code, second.err).toBe(0);
    expect(JSON.parse(second.out)).toMatchObject({ summary: { partitions: 0 } });
    expect(second.err).toContain('WARNING (--unsafe-single-writer-store): UNSAFE');
  });
});

/**
 * Express children on the synthesized definition (ExecutionType EXPRESS by default): the local
 * runner runs each child as its own execution with the Express limit as its timeout, and can
 * deliver each twice, as at-least-once Express may
 * (https://docs.aws.amazon.com/step-functions/latest/dg/express-at-least-once-execution.html).
 */
describe('Express children delivered twice, and past their five minutes, on the real protocol', () => {
  async function freshLake(name: string): Promise<LocalFolderStore> {
    const dir = join(root, name);
    await rm(dir, { recursive: true, force: true });
    await writeLake(engine, dir, FILES);
    return new LocalFolderStore(dir);
  }
  const depsOf = (store: ObjectStore) => ({
    store,
    config,
    clock: systemClock,
    engine: async () => engine,
    workDir: join(root, 'work'),
  });

  it('the synthesized Map runs EXPRESS children; STANDARD children run exactly once', async () => {
    const processorConfig = (w: SynthesizedWorkflow) =>
      (w.definition.States[STATES.map] as unknown as { ItemProcessor: { ProcessorConfig: unknown } })
        .ItemProcessor.ProcessorConfig;
    expect(processorConfig(workflow)).toEqual({ Mode: 'DISTRIBUTED', ExecutionType: 'EXPRESS' });
    const standard = await synthesizeWorkflow({ map: { childExecutionType: 'STANDARD' } });
    expect(processorConfig(standard)).toEqual({ Mode: 'DISTRIBUTED', ExecutionType: 'STANDARD' });
    const store = await freshLake('standard-once');
    await expect(
      runWorkflowLocally(standard, depsOf(store), { tier: 'hourly', childDeliveries: 'twice' }),
    ).rejects.toThrow(/STANDARD children, which run exactly once/);
  });

  it.each(['twice', 'overlapping'] as const)(
    'every child delivered %s: hourly then daily end with exact rows and nothing left',
    async (deliveries) => {
      const store = await freshLake(`deliveries-${deliveries}`);
      const compacts = new Map<string, number>();
      const onStep = (step: string, payload: unknown) => {
        if (step !== 'compact') return;
        const partition = (payload as { partition: string }).partition;
        compacts.set(partition, (compacts.get(partition) ?? 0) + 1);
      };
      const hourly = await runWorkflowLocally(workflow, depsOf(store), {
        tier: 'hourly',
        retryIntervalMs: 0,
        childDeliveries: deliveries,
        onStep,
      });
      // The three small hours of one table are one Map item: its child ran twice, each job's
      // chain in it.
      expect(hourly.output?.plan).toMatchObject({ jobs: 3, mapItems: 1 });
      expect(hourly.execution.childExecutions).toBe(2);
      if (deliveries === 'twice') {
        expect([...compacts.values()]).toEqual([2, 2, 2]);
        // The Map records the first delivery; the rerun finds its job done and changes nothing.
        expect(hourly.execution.status, hourly.execution.cause).toBe('SUCCEEDED');
        expect(hourly.output?.summary).toMatchObject({ partitions: 3, compacted: 3, failed: 0 });
      }
      // An overlapping duplicate may lose the manifest CAS and fail its delivery
      // (test/core/concurrency.test.ts); the next execution recovers whatever either left.
      const settle = await runWorkflowLocally(workflow, depsOf(store), {
        tier: 'hourly',
        retryIntervalMs: 0,
      });
      expect(settle.execution.status, settle.execution.cause).toBe('SUCCEEDED');
      expect(await ids(store)).toEqual(range(total));
      const hourlyOutputs: string[] = [];
      for await (const o of store.list('')) if (config.layout.isDataKey(o.key)) hourlyOutputs.push(o.key);
      expect(hourlyOutputs).toHaveLength(3);

      const daily = await runWorkflowLocally(workflow, depsOf(store), {
        tier: 'daily',
        retryIntervalMs: 0,
        childDeliveries: deliveries,
      });
      if (deliveries === 'twice') expect(daily.execution.status, daily.execution.cause).toBe('SUCCEEDED');
      await runWorkflowLocally(workflow, depsOf(store), { tier: 'daily', retryIntervalMs: 0 });
      expect(await ids(store)).toEqual(range(total));
      const data: string[] = [];
      for await (const o of store.list('')) if (config.layout.isDataKey(o.key)) data.push(o.key);
      expect(data).toHaveLength(1);
      expect(await stateKeys(store, 'manifests/')).toEqual([]);
      expect(await stateKeys(store, 'staging/')).toEqual([]);
    },
  );

  it('a child past its Express limit (15 s here, inside its step’s 20 s task timeout) fails with States.Timeout while its step runs on; the next execution rolls it forward exactly', async () => {
    const inner = await freshLake('express-timeout');
    let release: () => void = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    let published: () => void = () => {};
    const zombieDone = new Promise<void>((resolve) => {
      published = resolve;
    });
    // Hour 02's publish copy waits, in its Lambda, until released: longer than its child may live.
    const store = new FaultStore(inner, {
      gate: async (call) => {
        if (call.op === 'copy' && call.key.startsWith('db/cpu/2025/01/14/02/')) await released;
      },
    });
    const onStep = (step: string, payload: unknown) => {
      if (step === 'publish' && (payload as { partition: string }).partition === 'db/cpu/2025/01/14/02/')
        published();
    };
    const first = await runWorkflowLocally(workflow, depsOf(store), {
      tier: 'hourly',
      retryIntervalMs: 0,
      expressChildTimeoutSeconds: 15,
      onStep,
    });
    expect(first.execution.status).toBe('FAILED');
    expect(first.execution.error).toBe(MAP_FAILED_ERROR);
    const summary = first.stoppedSummary;
    // The three hours are one Map item, one child: it timed out as a whole, so no job's outcome
    // reached the Map. The two that finished inside it left receipts naming this execution and
    // count compacted; the one still publishing counts failed, its manifest left for recovery.
    expect(summary, JSON.stringify(summary?.failures)).toMatchObject({
      partitions: 3,
      items: 1,
      failedItems: 1,
      compacted: 2,
      failed: 1,
    });
    expect(summary?.failures.map((f) => f.partition)).toEqual(['db/cpu/2025/01/14/02/']);
    expect(JSON.stringify(summary?.failures)).toContain('States.Timeout');
    // The child's execution timeout, not the publish task's (20 s), ended it.
    expect(JSON.stringify(summary?.failures)).toContain('ran past its 15 s execution timeout');
    // The child is gone, its Lambda is not: it publishes after the execution ended.
    release();
    await zombieDone;
    // Published, inputs not yet deleted: what a plain glob reader may see until recovery (DESIGN).
    expect(await stateKeys(inner, 'manifests/')).toHaveLength(1);
    const next = await runWorkflowLocally(workflow, depsOf(inner), { tier: 'hourly', retryIntervalMs: 0 });
    expect(next.execution.status, next.execution.cause).toBe('SUCCEEDED');
    expect(next.output?.recovery).toMatchObject({ rolledForward: 1 });
    expect(await ids(inner)).toEqual(range(total));
    expect(await stateKeys(inner, 'manifests/')).toEqual([]);
    expect(await stateKeys(inner, 'staging/')).toEqual([]);
  });
});
