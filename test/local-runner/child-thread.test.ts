/**
 * A local run's helper thread (child-thread.ts), started from the CLI's own recipe
 * (cli/thread-deps.ts) over a real folder lake, real DuckDB and the synthesized definition:
 * - small items run there as well as here, each its own child execution, and every row stays
 *   exactly once; the thread's step results reach the run's observer;
 * - the thread ends with the run, whatever its deps hold open;
 * - a thread that cannot build its deps takes no more items; those it took run here, and the run
 *   says why;
 * - a thread that dies with a DuckDB call in flight fails the run cleanly: the process goes on;
 * - a thread that dies with a store call in flight ends it whole and starts no other, so it leaves
 *   no key lock held, and the next run completes what its children left; so does a thread that
 *   ends with its run while a timed-out child's step is in a store call;
 * - only items of small jobs go there (its engine is the small compact function's).
 */

import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { storePaths } from '../../functions/adapters/local-store/local-store-keys.ts';
import { commandContext } from '../../functions/cli/command.ts';
import { buildEngine } from '../../functions/cli/context.ts';
import type { ParsedOptions } from '../../functions/cli/options.ts';
import type { Json } from '../../functions/local-runner/asl-graph.ts';
import type { StepName } from '../../functions/local-runner/lambdas.ts';
import {
  CHILD_THREAD_FAILED,
  type LocalRunDeps,
  runWorkflowLocally,
  type SynthesizedWorkflow,
  smallJobsOnly,
  synthesizeWorkflow,
} from '../../functions/local-runner/run.ts';
import { arcRawKey, idMismatch, lakeIds, stateKeys } from '../support/cli-lake.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { PUT_RECORD, type PutRecord } from '../support/held-put-store.ts';
import { type LakeFile, writeLake } from '../support/lake-harness.ts';
import { THREAD_BUG } from '../support/thread-deps-crash-mid-merge.ts';
import { THREAD_BUG as THREAD_BUG_MID_PUT } from '../support/thread-deps-crash-mid-put.ts';
import { SLOW_PUT_MS } from '../support/thread-deps-slow-put.ts';

const THREAD_DEPS = new URL('../../functions/cli/thread-deps.ts', import.meta.url).href;
const OPEN_HANDLE_DEPS = new URL('../support/thread-deps-open-handle.ts', import.meta.url).href;
const CRASH_DEPS = new URL('../support/thread-deps-crash-mid-merge.ts', import.meta.url).href;
const CRASH_MID_PUT_DEPS = new URL('../support/thread-deps-crash-mid-put.ts', import.meta.url).href;
const SLOW_PUT_DEPS = new URL('../support/thread-deps-slow-put.ts', import.meta.url).href;
const TABLES = ['cpu', 'mem', 'disk', 'net'];
const HOURS = 3;

/** 4 tables x 3 hours x 2 files: 12 small partitions, one Map item of 3 jobs a table. */
const FILES: LakeFile[] = TABLES.flatMap((table) =>
  Array.from({ length: HOURS * 2 }, (_, i) => ({
    key: arcRawKey(Date.UTC(2025, 0, 15, Math.floor(i / 2)), i + 1, table),
    rows: 20 + i,
  })),
);
const PARTITIONS = TABLES.length * HOURS;

let engine: DuckDbEngine;
let root: string;
let workflow: SynthesizedWorkflow;
let lakes = 0;

useEngineAndDir('child-thread-', async (e, dir) => {
  engine = e;
  root = dir;
  workflow = await synthesizeWorkflow({ map: { maxConcurrency: 4 } });
});

/** A fresh lake, the CLI's options over it, and the run's deps built from them as `run` builds them. */
async function lakeAndDeps(
  threadOptions?: (options: ParsedOptions) => ParsedOptions,
  recipeModule = THREAD_DEPS,
) {
  const lake = join(root, `lake-${++lakes}`);
  const total = await writeLake(engine, lake, FILES);
  const options: ParsedOptions = {
    store: lake,
    'work-dir': join(root, `work-${lakes}`),
    quiet: '0',
    tier: 'hourly',
    'min-files': '2',
    threads: '1',
  };
  const ctx = await commandContext(options);
  const built = await buildEngine(options);
  const deps: LocalRunDeps = {
    store: ctx.target.store,
    config: ctx.config,
    clock: ctx.clock,
    engine: async () => built.engine,
    workDir: built.workDir,
    threadRecipe: () => ({ module: recipeModule, data: (threadOptions?.(options) ?? options) as Json }),
  };
  return { lake, total, deps, workDir: options['work-dir'] as string, close: () => built.engine.close() };
}

/** The key locks held in a lake's store: none once every writer has ended. */
async function heldLocks(lake: string): Promise<string[]> {
  return (await readdir(storePaths(lake).locksDir)).filter((name) => name.endsWith('.lock'));
}

/** Runs the lake again, without the helper thread: it takes up what the run before left. */
async function nextRunSucceeds(deps: LocalRunDeps) {
  const next = await runWorkflowLocally(
    workflow,
    { ...deps, threadRecipe: undefined },
    { tier: 'hourly', retryIntervalMs: 0 },
  );
  expect(next.execution.status).toBe('SUCCEEDED');
  return next;
}

/** What the held-put recipes recorded in the run's work dir (held-put-store.ts). */
async function heldPutRecord(workDir: string): Promise<PutRecord> {
  return JSON.parse(await readFile(join(workDir, PUT_RECORD), 'utf8')) as PutRecord;
}

/** A run that fails with its helper thread: its log of that failure, and the run. */
async function runWithFailingThread(deps: LocalRunDeps) {
  const failures: Record<string, unknown>[] = [];
  const run = await runWorkflowLocally(workflow, deps, {
    tier: 'hourly',
    retryIntervalMs: 0,
    onLog: (_level, message, details) => {
      if (message === CHILD_THREAD_FAILED) failures.push(details);
    },
  });
  return { run, failures };
}

describe('a local run with its helper thread', () => {
  it('runs small items there and here, every row exactly once, its steps observed here', async () => {
    const { lake, total, deps, close } = await lakeAndDeps();
    const compacted: string[] = [];
    const onStep = (step: StepName, payload: unknown) => {
      if (step === 'compact') compacted.push((payload as { partition: string }).partition);
    };
    try {
      const run = await runWorkflowLocally(workflow, deps, { tier: 'hourly', retryIntervalMs: 0, onStep });
      expect(run.execution.status).toBe('SUCCEEDED');
      expect(run.output?.summary.compacted).toBe(PARTITIONS);
      expect(run.execution.childExecutions).toBe(TABLES.length);
      // Both threads ran children: the Map's concurrency is shared between them.
      expect(run.execution.childExecutionsElsewhere).toBeGreaterThan(0);
      expect(run.execution.childExecutionsElsewhere).toBeLessThan(run.execution.childExecutions);
      // The thread's compact steps were forwarded: every partition's, once.
      expect(new Set(compacted).size).toBe(PARTITIONS);
      expect(compacted).toHaveLength(PARTITIONS);
    } finally {
      await close();
    }
    expect(idMismatch(await lakeIds(engine, lake), total)).toBeUndefined();
    expect(await stateKeys(lake)).toEqual([]);
    // The execution's scratch folder (both threads') is gone.
    expect((await readdir(deps.workDir)).filter((name) => name.startsWith('local-'))).toEqual([]);
  });

  it('ends the thread with the run though its deps hold a handle open (an S3 client would)', async () => {
    const { lake, total, deps, close } = await lakeAndDeps(undefined, OPEN_HANDLE_DEPS);
    try {
      // A thread left running would keep this waiting (for an S3 client, until its sockets close).
      const run = await runWorkflowLocally(workflow, deps, { tier: 'hourly', retryIntervalMs: 0 });
      expect(run.execution.status).toBe('SUCCEEDED');
      expect(run.execution.childExecutionsElsewhere).toBeGreaterThan(0);
    } finally {
      await close();
    }
    expect(idMismatch(await lakeIds(engine, lake), total)).toBeUndefined();
  });

  it('runs here the children of a thread that could not start, saying why', async () => {
    const missing = join(root, 'no-such-lake');
    const { lake, total, deps, close } = await lakeAndDeps((options) => ({ ...options, store: missing }));
    const logs: { message: string; details: Record<string, unknown> }[] = [];
    try {
      const run = await runWorkflowLocally(workflow, deps, {
        tier: 'hourly',
        retryIntervalMs: 0,
        onLog: (_level, message, details) => logs.push({ message, details }),
      });
      // Nothing of them ran there, so they ran here, each once.
      expect(run.execution.status).toBe('SUCCEEDED');
      expect(run.output?.summary.compacted).toBe(PARTITIONS);
      expect(run.execution.childExecutionsElsewhere).toBe(0);
      expect(run.execution.childExecutions).toBe(TABLES.length);
    } finally {
      await close();
    }
    const failed = logs.filter((l) => l.message === CHILD_THREAD_FAILED);
    expect(failed).toHaveLength(1);
    expect(String(failed[0]?.details.reason)).toContain(missing);
    expect(idMismatch(await lakeIds(engine, lake), total)).toBeUndefined();
  });

  it('a thread that dies in the middle of a merge fails the run, saying why, without aborting the process; no row is lost or doubled', async () => {
    const { lake, total, deps, close } = await lakeAndDeps(undefined, CRASH_DEPS);
    try {
      const { run, failures } = await runWithFailingThread(deps);
      // Its children failed with it; those it had not started ran here.
      expect(run.execution.status).toBe('FAILED');
      expect(failures).toHaveLength(1);
      expect(String(failures[0]?.reason)).toContain(THREAD_BUG);
      expect(idMismatch(await lakeIds(engine, lake), total)).toBeUndefined();
      expect(await heldLocks(lake)).toEqual([]);
      // A new run takes up what the dead children left.
      await nextRunSucceeds(deps);
    } finally {
      await close();
    }
    expect(idMismatch(await lakeIds(engine, lake), total)).toBeUndefined();
  });

  it('a thread that dies with a store call in flight ends that call whole and starts no other: it holds no lock, and the next run takes up the rest', async () => {
    const { lake, total, deps, workDir, close } = await lakeAndDeps(undefined, CRASH_MID_PUT_DEPS);
    try {
      const { run, failures } = await runWithFailingThread(deps);
      expect(run.execution.status).toBe('FAILED');
      expect(failures).toHaveLength(1);
      expect(String(failures[0]?.reason)).toContain(THREAD_BUG_MID_PUT);
      const record = await heldPutRecord(workDir);
      // The put in flight finished before the thread ended; none began after the error.
      expect(record.finished).toBeDefined();
      expect(record.callsAfterBug).toBe(0);
      // So no write of the thread's is left holding its key's lock, which names this live process.
      expect(await heldLocks(lake)).toEqual([]);
      expect(idMismatch(await lakeIds(engine, lake), total)).toBeUndefined();
      expect((await nextRunSucceeds(deps)).output?.summary.compacted).toBeGreaterThan(0);
    } finally {
      await close();
    }
    expect(idMismatch(await lakeIds(engine, lake), total)).toBeUndefined();
    expect(await heldLocks(lake)).toEqual([]);
  });

  it('a run that ends while a timed-out child of the thread is in a store call ends the thread only after that call: no lock held', async () => {
    const { lake, total, deps, workDir, close } = await lakeAndDeps(undefined, SLOW_PUT_DEPS);
    try {
      // The thread's first put is held past its child's timeout: the child fails with
      // States.Timeout while its step runs on, and the run ends with that step in the put.
      const timeoutSeconds = SLOW_PUT_MS / 2_000;
      const run = await runWorkflowLocally(workflow, deps, {
        tier: 'hourly',
        retryIntervalMs: 0,
        expressChildTimeoutSeconds: timeoutSeconds,
      });
      expect(run.execution.status).toBe('FAILED');
      const record = await heldPutRecord(workDir);
      expect(record.finished).toBeDefined();
      expect(await heldLocks(lake)).toEqual([]);
      await nextRunSucceeds(deps);
    } finally {
      await close();
    }
    expect(idMismatch(await lakeIds(engine, lake), total)).toBeUndefined();
    expect(await heldLocks(lake)).toEqual([]);
  });
});

describe('smallJobsOnly', () => {
  it('takes an item whose every job is small, and nothing else', () => {
    const partition = 'db/cpu/2025/01/15/00/';
    const job = (compactSize?: string): Json =>
      compactSize === undefined ? { partition } : { partition, compactSize };
    expect(smallJobsOnly({ table: 'db/cpu/', jobs: [job('small'), job('small')] })).toBe(true);
    expect(smallJobsOnly({ table: 'db/cpu/', jobs: [job('small'), job('large')] })).toBe(false);
    // Planned before sizes existed: the large function's.
    expect(smallJobsOnly({ table: 'db/cpu/', jobs: [job()] })).toBe(false);
    // Not an item the plan writes.
    expect(smallJobsOnly(job('small'))).toBe(false);
    expect(smallJobsOnly(null)).toBe(false);
  });
});
