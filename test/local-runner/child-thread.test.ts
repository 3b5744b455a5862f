/**
 * A local run's helper thread (child-thread.ts), started from the CLI's own recipe
 * (cli/thread-deps.ts) over a real folder lake, real DuckDB and the synthesized definition:
 * - small items run there as well as here, each its own child execution, and every row stays
 *   exactly once; the thread's step results reach the run's observer;
 * - a thread that cannot build its deps fails the items it took, naming why, and takes no more;
 * - only items of small jobs go there (its engine is the small compact function's).
 */

import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { commandContext } from '../../functions/cli/command.ts';
import { buildEngine } from '../../functions/cli/context.ts';
import type { ParsedOptions } from '../../functions/cli/options.ts';
import type { Json } from '../../functions/local-runner/asl-graph.ts';
import type { StepName } from '../../functions/local-runner/lambdas.ts';
import {
  type LocalRunDeps,
  runWorkflowLocally,
  type SynthesizedWorkflow,
  smallJobsOnly,
  synthesizeWorkflow,
} from '../../functions/local-runner/run.ts';
import { arcRawKey, idMismatch, lakeIds, stateKeys } from '../support/cli-lake.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { type LakeFile, writeLake } from '../support/lake-harness.ts';

const THREAD_DEPS = new URL('../../functions/cli/thread-deps.ts', import.meta.url).href;
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
async function lakeAndDeps(threadOptions?: (options: ParsedOptions) => ParsedOptions) {
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
    threadRecipe: () => ({ module: THREAD_DEPS, data: (threadOptions?.(options) ?? options) as Json }),
  };
  return { lake, total, deps, close: () => built.engine.close() };
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

  it('fails the items a thread that cannot start took, naming why, and runs the rest here', async () => {
    const missing = join(root, 'no-such-lake');
    const { lake, deps, close } = await lakeAndDeps((options) => ({ ...options, store: missing }));
    try {
      const run = await runWorkflowLocally(workflow, deps, { tier: 'hourly', retryIntervalMs: 0 });
      const results = [...run.execution.mapResults.values()].flat();
      const failed = results.filter((r) => r.Status === 'FAILED');
      expect(run.execution.childExecutionsElsewhere).toBeGreaterThan(0);
      expect(failed).toHaveLength(run.execution.childExecutionsElsewhere);
      for (const f of failed) expect(f.Cause).toContain(missing);
      expect(results.filter((r) => r.Status === 'SUCCEEDED')).toHaveLength(
        TABLES.length - run.execution.childExecutionsElsewhere,
      );
      // Past the Map's tolerated failures: the execution fails, as it would on AWS.
      expect(run.execution.status).toBe('FAILED');
    } finally {
      await close();
    }
    // Nothing the thread took was touched: those partitions keep their raw files.
    const ids = await lakeIds(engine, lake);
    expect(new Set(ids).size).toBe(ids.length);
  });
});

describe('smallJobsOnly', () => {
  it('takes an item whose every job is small, and nothing else', () => {
    const job = (compactSize: string) => ({ partition: 'db/cpu/2025/01/15/00/', compactSize });
    expect(smallJobsOnly({ table: 'db/cpu/', jobs: [job('small'), job('small')] })).toBe(true);
    expect(smallJobsOnly({ table: 'db/cpu/', jobs: [job('small'), job('large')] })).toBe(false);
    // An item of the older shape is the job itself.
    expect(smallJobsOnly(job('small'))).toBe(true);
    expect(smallJobsOnly(job('large'))).toBe(false);
    // Planned before sizes existed: the large function's.
    expect(smallJobsOnly({ partition: 'db/cpu/2025/01/15/00/' })).toBe(false);
    expect(smallJobsOnly(null)).toBe(false);
  });
});
