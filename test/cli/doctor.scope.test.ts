/**
 * The execution input `only` (what `compactor doctor` scopes its canary execution with), through
 * the state machine CDK synthesizes, run locally with every Lambda in-process:
 * - the Defaults state gives `only` null, Plan gets it, Recover does not;
 * - an execution with `only` compacts that table's partitions and leaves an eligible partition of
 *   another table alone, while its Recover still resolves a manifest left in that other table;
 * - a bad `only` fails the execution in Plan with a ConfigError naming the field, planning nothing.
 */

import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { STATES } from '../../cdk/constructs/compaction-workflow.ts';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { LocalFolderStore } from '../../functions/adapters/local-store/local-store.ts';
import { type CompactorConfig, parseConfig } from '../../functions/core/config.ts';
import { systemClock } from '../../functions/core/engine.ts';
import { manifestKey, newJobId, serializeManifest } from '../../functions/core/manifest/manifest.ts';
import {
  runWorkflowLocally,
  type SynthesizedWorkflow,
  synthesizeWorkflow,
} from '../../functions/local-runner/run.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { writeLake } from '../support/lake-harness.ts';

type Json = Record<string, unknown>;

let engine: DuckDbEngine;
let root: string;
let workflow: SynthesizedWorkflow;
const config: CompactorConfig = parseConfig({ tiers: { hourly: { minFiles: 2 } }, quietSeconds: 0 });

useEngineAndDir('doctor-scope-', async (e, dir) => {
  engine = e;
  root = dir;
  workflow = await synthesizeWorkflow({});
});

function state(name: string): Json {
  return (workflow.definition as unknown as { States: Record<string, Json> }).States[name] as Json;
}

describe('the execution input "only" in the synthesized definition', () => {
  it('defaults to null, reaches Plan and not Recover', () => {
    expect(state(STATES.defaults).Result).toEqual({ now: null, only: null, sweep: null });
    const plan = (state(STATES.plan).Parameters as Json).Payload as Json;
    expect(plan['only.$']).toBe('$.args.only');
    const recover = (state(STATES.recover).Parameters as Json).Payload as Json;
    expect(Object.keys(recover)).not.toContain('only.$');
  });
});

describe('an execution scoped with "only", run locally', () => {
  it('compacts only that table; recovery still covers the whole lake', async () => {
    const dir = join(root, 'lake');
    const total = await writeLake(engine, dir, [
      { key: 'db/cpu/2025/01/14/01/cpu_20250114_010500_1.parquet', rows: 11 },
      { key: 'db/cpu/2025/01/14/01/cpu_20250114_012000_2.parquet', rows: 12 },
      { key: 'db/mem/2025/01/14/01/mem_20250114_010500_3.parquet', rows: 13 },
      { key: 'db/mem/2025/01/14/01/mem_20250114_012000_4.parquet', rows: 14 },
    ]);
    expect(total).toBe(50);
    const store = new LocalFolderStore(dir);
    // A claimed manifest of a crashed run in the other table: recovery (never scoped) rolls it back.
    const memHour = 'db/mem/2025/01/14/01/';
    const leftOver = manifestKey(config.layout, 'hourly', memHour);
    const memInput = await store.head('db/mem/2025/01/14/01/mem_20250114_010500_3.parquet');
    await store.put(
      leftOver,
      serializeManifest({
        version: 1,
        jobId: newJobId(new Date(), () => '0badc0de'),
        executionId: 'local:gone',
        tier: 'hourly',
        partition: memHour,
        location: store.location,
        state: 'claimed',
        inputs: [{ key: memInput?.key ?? '', size: memInput?.size ?? 0, etag: memInput?.etag ?? '' }],
        createdAt: new Date(Date.now() - 3_600_000).toISOString(),
        updatedAt: new Date(Date.now() - 3_600_000).toISOString(),
        leaseExpiresAt: new Date(Date.now() - 60_000).toISOString(),
      }),
      { ifNoneMatch: '*' },
    );
    const deps = {
      store,
      config,
      clock: systemClock,
      engine: async () => engine,
      workDir: join(root, 'work'),
    };

    const run = await runWorkflowLocally(workflow, deps, {
      tier: 'hourly',
      only: 'db/cpu/',
      retryIntervalMs: 0,
    });
    expect(run.execution.status, run.execution.cause).toBe('SUCCEEDED');
    expect(run.output?.recovery.rolledBack).toBe(1);
    expect(run.output?.plan).toMatchObject({ jobs: 1, only: 'db/cpu/' });
    expect(run.output?.summary).toMatchObject({
      partitions: 1,
      compacted: 1,
      filesIn: 2,
      filesOut: 1,
      rows: 23,
    });
    const keys: string[] = [];
    for await (const o of store.list('db/')) keys.push(o.key);
    expect(keys.filter((k) => k.startsWith('db/cpu/'))).toEqual([
      expect.stringMatching(/^db\/cpu\/2025\/01\/14\/01\/cpu_20250114_.*_compacted\.parquet$/),
    ]);
    // The other table's eligible hour is untouched: both raw files are still there.
    expect(keys.filter((k) => k.startsWith('db/mem/'))).toEqual([
      'db/mem/2025/01/14/01/mem_20250114_010500_3.parquet',
      'db/mem/2025/01/14/01/mem_20250114_012000_4.parquet',
    ]);
    expect(await store.head(leftOver)).toBeUndefined();

    // The same definition without `only` plans the whole lake (the schedules' input).
    const whole = await runWorkflowLocally(workflow, deps, { tier: 'hourly', retryIntervalMs: 0 });
    expect(whole.execution.status, whole.execution.cause).toBe('SUCCEEDED');
    expect(whole.output?.plan).toMatchObject({ jobs: 1, only: null });
    expect(whole.output?.summary).toMatchObject({ compacted: 1, rows: 27 });
  });

  it('fails in Plan with a ConfigError naming "only" when it is not a table path, planning nothing', async () => {
    const dir = join(root, 'bad');
    await writeLake(engine, dir, [
      { key: 'db/cpu/2025/01/14/01/cpu_20250114_010500_1.parquet', rows: 5 },
      { key: 'db/cpu/2025/01/14/01/cpu_20250114_012000_2.parquet', rows: 6 },
    ]);
    const store = new LocalFolderStore(dir);
    const deps = {
      store,
      config,
      clock: systemClock,
      engine: async () => engine,
      workDir: join(root, 'work'),
    };
    for (const only of ['db/', 'db/cpu/2025/']) {
      const run = await runWorkflowLocally(workflow, deps, { tier: 'hourly', only, retryIntervalMs: 0 });
      expect(run.execution.status).toBe('FAILED');
      expect(run.execution.failedState?.name).toBe(STATES.plan);
      expect(run.execution.error).toBe('ConfigError');
      expect(run.execution.cause).toMatch(/"only" must be a table path under the data root/);
      expect(run.execution.statesEntered).not.toContain(STATES.map);
    }
    const keys: string[] = [];
    for await (const o of store.list('db/')) keys.push(o.key);
    expect(keys).toHaveLength(2);
  });
});
