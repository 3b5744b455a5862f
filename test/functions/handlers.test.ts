/**
 * The Lambda handlers through their middy stack, with deps for a local folder: inputs are
 * validated at the door (errors name the field), results are small and flat, and a step about
 * to time out stops on middy's abort signal, leaving a state recovery resolves.
 */

import { join } from 'node:path';
import type { Context } from 'aws-lambda';
import { describe, expect, it, vi } from 'vitest';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { LocalFolderStore } from '../../functions/adapters/local-store/local-store.ts';
import { createHandler as clearHandler } from '../../functions/clear-manifest.ts';
import { createHandler as compactHandler } from '../../functions/compact.ts';
import { parseConfig } from '../../functions/core/config.ts';
import { manifestsRoot } from '../../functions/core/manifest/manifest.ts';
import { recover } from '../../functions/core/recovery.ts';
import { createHandler as deleteInputsHandler } from '../../functions/delete-inputs.ts';
import { configFromEnv } from '../../functions/lambda/env-deps.ts';
import { EARLY_TIMEOUT_MS, type HandlerDeps } from '../../functions/lambda/handler-kit.ts';
import { localObservability } from '../../functions/local-runner/lambdas.ts';
import { createHandler as planHandler } from '../../functions/plan.ts';
import { createHandler as publishHandler } from '../../functions/publish.ts';
import { createHandler as recoverHandler } from '../../functions/recover.ts';
import { createHandler as verifyHandler } from '../../functions/verify.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { FaultStore } from '../support/fault-store.ts';
import { localHandlerDeps } from '../support/handler-deps.ts';
import { ALL_CONDITIONS, IgnoringStore } from '../support/ignoring-store.ts';
import { writeLake } from '../support/lake-harness.ts';
import { planJobItems } from '../support/plan-items.ts';

const config = parseConfig({ tiers: { hourly: { minFiles: 2 } }, quietSeconds: 0 });
let engine: DuckDbEngine;
let root: string;

useEngineAndDir('handlers-', (e, dir) => {
  engine = e;
  root = dir;
});

function deps(store: HandlerDeps['store']): HandlerDeps {
  return localHandlerDeps(store, config, engine, root);
}

function context(remainingMs?: number): Context {
  return {
    functionName: 'test',
    awsRequestId: 'req-1',
    ...(remainingMs === undefined ? {} : { getRemainingTimeInMillis: () => remainingMs }),
  } as unknown as Context;
}

describe('handler inputs are validated at the door', () => {
  it('names the missing or wrong field', async () => {
    const store = new LocalFolderStore(join(root, 'empty'));
    const plan = planHandler(async () => deps(store), localObservability());
    await expect(plan({ tier: 'weekly', executionId: 'e', executionName: 'n' }, context())).rejects.toThrow(
      /"tier" must be one of hourly, daily, monthly, retention/,
    );
    await expect(plan({ tier: 'hourly', executionName: 'n' }, context())).rejects.toThrow(/"executionId"/);
    const publish = publishHandler(async () => deps(store), localObservability());
    await expect(
      publish({ tier: 'hourly', partition: 'db/cpu/2025/01/15/10/' }, context()),
    ).rejects.toMatchObject({
      name: 'ConfigError',
      message: expect.stringContaining('"jobId"'),
    });
  });

  it('reads its configuration from the environment, naming the variable when it is wrong', () => {
    const saved = { ...process.env };
    try {
      process.env.COMPACTOR_CONFIG = '{not json';
      expect(() => configFromEnv()).toThrow(/COMPACTOR_CONFIG is not valid JSON/);
      process.env.COMPACTOR_CONFIG = JSON.stringify({ layout: 'hive', tiers: { hourly: { minFiles: 4 } } });
      process.env.DATA_PREFIX = 'lake/';
      const parsed = configFromEnv();
      expect(parsed.layout.dataPrefix).toBe('lake/');
      expect(parsed.tiers.hourly.minFiles).toBe(4);
      expect(parsed.layout.template).toBe('{table}/dt={YYYY}-{MM}-{DD}/hour={HH}/');
    } finally {
      process.env = saved;
    }
  });
});

describe('a retention item through the step Lambdas', () => {
  it('compact claims, re-checks and commits it with no engine; publish and verify find it verified; delete-inputs and clear finish it', async () => {
    const dir = join(root, 'retention');
    await writeLake(engine, dir, [
      { key: 'db/cpu/2025/01/15/10/a.parquet', rows: 5 },
      { key: 'db/cpu/2025/01/15/cpu_20250115_daily.parquet', rows: 5 },
    ]);
    const store = new LocalFolderStore(dir);
    const retentionDeps = async (): Promise<HandlerDeps> => ({
      ...deps(store),
      config: parseConfig({ retention: { rules: { 'db/': 30 } } }),
      engine: async () => {
        throw new Error('a retention job needs no engine');
      },
    });
    const planOutput = (await planHandler(retentionDeps, localObservability())(
      { tier: 'retention', executionId: 'exec-r', executionName: 'retention-handlers' },
      context(),
    )) as { itemsKey: string; jobs: number; inputFiles: number };
    expect(planOutput).toMatchObject({ jobs: 1, inputFiles: 2 });
    const [item] = await planJobItems(store, planOutput.itemsKey);
    const job = {
      tier: item?.tier,
      partition: item?.partition,
      jobId: item?.jobId,
      executionId: item?.executionId,
    };
    expect(job.tier).toBe('retention');
    const results = [
      await compactHandler(retentionDeps, localObservability())(item, context()),
      await publishHandler(retentionDeps, localObservability())(job, context()),
      await verifyHandler(retentionDeps, localObservability())(job, context()),
      await deleteInputsHandler(retentionDeps, localObservability())(job, context()),
      await clearHandler(retentionDeps, localObservability())(job, context()),
    ] as { status: string; state: string }[];
    expect(results.map((r) => `${r.status} ${r.state}`)).toEqual([
      'done verified',
      'already-done verified',
      'already-done verified',
      'done inputs-deleted',
      'done cleared',
    ]);
    // Nothing is left but the job's receipt.
    const left: string[] = [];
    for await (const o of store.list('')) if (!o.key.startsWith('_compaction/plans/')) left.push(o.key);
    expect(left).toEqual([`_compaction/receipts/db/cpu/2025/01/15/${String(job.jobId)}.retention.json`]);
  });
});

describe('a step about to time out', () => {
  it('stops on the abort signal, and recovery resolves what it left', async () => {
    const dir = join(root, 'timeout');
    const total = await writeLake(engine, dir, [
      { key: 'db/cpu/2025/01/15/10/a.parquet', rows: 30 },
      { key: 'db/cpu/2025/01/15/10/b.parquet', rows: 30 },
    ]);
    const inner = new LocalFolderStore(dir);
    // Downloads are slow: the Lambda would run out of time in the middle of them.
    const slow = new FaultStore(inner, {
      gate: async (call) => {
        if (call.op === 'getToFile') await new Promise((resolve) => setTimeout(resolve, 400));
      },
    });
    const planOutput = (await planHandler(async () => deps(inner), localObservability())(
      { tier: 'hourly', executionId: 'exec-1', executionName: 'hourly-timeout' },
      context(),
    )) as { itemsKey: string };
    const items = await planJobItems(inner, planOutput.itemsKey);
    expect(items).toHaveLength(1);

    const compact = compactHandler(async () => deps(slow), localObservability());
    // 150 ms left before middy's early-timeout margin: the signal fires mid-download.
    await expect(compact(items[0], context(EARLY_TIMEOUT_MS + 150))).rejects.toMatchObject({
      name: 'TimeoutError',
    });
    // Let the abandoned download settle, as a frozen Lambda would be killed: the step stopped itself.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const manifests: string[] = [];
    for await (const o of inner.list(manifestsRoot(config.layout))) manifests.push(o.key);
    expect(manifests).toHaveLength(1);

    const report = await recover({ ...deps(inner), executionId: 'exec-recover' });
    expect(report.entries.map((e) => [e.state, e.action])).toEqual([['claimed', 'rolled-back']]);
    // Nothing lost: both inputs are still there.
    const keys: string[] = [];
    for await (const o of inner.list('db/')) keys.push(o.key);
    expect(keys.sort()).toEqual(['db/cpu/2025/01/15/10/a.parquet', 'db/cpu/2025/01/15/10/b.parquet']);
    expect(total).toBe(60);
  });
});

describe('the Recover step probes the store before its first write', () => {
  it('refuses a store that ignores the conditions, writing nothing; the single-writer opt-out runs with a warning', async () => {
    const dir = join(root, 'probe');
    await writeLake(engine, dir, [
      { key: 'db/cpu/2025/01/15/10/a.parquet', rows: 5 },
      { key: 'db/cpu/2025/01/15/10/b.parquet', rows: 5 },
    ]);
    const inner = new LocalFolderStore(dir);
    // A staged job whose owner is gone: recovery would roll it forward (copy, deletes, clear).
    const planOutput = (await planHandler(async () => deps(inner), localObservability())(
      { tier: 'hourly', executionId: 'exec-1', executionName: 'hourly-probe' },
      context(),
    )) as { itemsKey: string };
    const [item] = await planJobItems(inner, planOutput.itemsKey);
    await compactHandler(async () => deps(inner), localObservability())(item, context());
    const snapshot = async () => {
      const out: string[] = [];
      for await (const o of inner.list('')) out.push(`${o.key} ${o.etag}`);
      return out;
    };
    const before = await snapshot();
    expect(before.some((k) => k.startsWith('_compaction/manifests/'))).toBe(true);

    const fauxqsLike = new IgnoringStore(inner, ALL_CONDITIONS);
    const event = { tier: 'hourly', executionId: 'exec-2', executionName: 'hourly-probe-2' };
    const refused = recoverHandler(async () => deps(fauxqsLike), localObservability());
    await expect(refused(event, context())).rejects.toMatchObject({
      name: 'StoreGuaranteesError',
      missing: ALL_CONDITIONS.map((guarantee) => ({ guarantee, detail: expect.any(String) })),
    });
    expect(await snapshot()).toEqual(before);

    const observability = localObservability();
    const warn = vi.spyOn(observability.logger, 'warn');
    const optedOut = recoverHandler(
      async () => ({ ...deps(fauxqsLike), config: { ...config, unsafeSingleWriterStore: true } }),
      observability,
    );
    await expect(optedOut(event, context())).resolves.toMatchObject({ examined: 1, rolledForward: 1 });
    expect(warn).toHaveBeenCalledWith(expect.stringMatching(/^UNSAFE: the store file:\/\/.* is not probed/), {
      setting: 'unsafeSingleWriterStore',
    });
  });
});
