/**
 * The dashboard and alarms graph exactly what the handlers emit. The left side is read from the
 * synthesized template (the dashboard body and every alarm's metrics); the right side is the EMF
 * the real handlers publish through their middy stack, with the Metrics that envObservability()
 * builds from the environment the stack gives the step Lambdas, over one cycle that compacts a
 * partition and quarantines another. A metric charted but never emitted would graph nothing
 * (and an alarm on it never fire); one emitted but never charted is watched by no one.
 */

import type { Context } from 'aws-lambda';
import { beforeAll, describe, expect, it } from 'vitest';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { LocalFolderStore } from '../../functions/adapters/local-store/local-store.ts';
import { createHandler as clearHandler } from '../../functions/clear-manifest.ts';
import { createHandler as compactHandler } from '../../functions/compact.ts';
import { ENV } from '../../functions/contract.ts';
import { parseConfig } from '../../functions/core/config.ts';
import { createHandler as deleteInputsHandler } from '../../functions/delete-inputs.ts';
import { envObservability } from '../../functions/lambda/env-deps.ts';
import type { DepsFactory } from '../../functions/lambda/handler-kit.ts';
import type { Observability } from '../../functions/lambda/telemetry.ts';
import { createHandler as planHandler } from '../../functions/plan.ts';
import { createHandler as publishHandler } from '../../functions/publish.ts';
import { createHandler as recoverHandler } from '../../functions/recover.ts';
import { createHandler as summaryHandler } from '../../functions/summary.ts';
import { createHandler as verifyHandler } from '../../functions/verify.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { localHandlerDeps } from '../support/handler-deps.ts';
import { writeLake } from '../support/lake-harness.ts';
import { planJobItems } from '../support/plan-items.ts';
import { type CfnTemplate, dashboardBody, resourcesOfType, type Synthesized, synth } from './synth.ts';

/** A namespace other than the default, so the test sees the stack's setting reach both sides. */
const NAMESPACE = 'Lake/CompactorContract';

/** One custom metric as CloudWatch keys it: namespace, name and the set of dimension names. */
function metricKey(namespace: string, name: string, dimensions: readonly string[]): string {
  return `${namespace} ${name} [${[...dimensions].sort().join(',')}]`;
}

/**
 * The custom metrics on the dashboard: rows `[namespace, name, dim, value, ..., {options}?]`,
 * where "." repeats the previous row's entry; `{expression}` rows and AWS/* namespaces are not ours.
 */
function dashboardMetrics(json: CfnTemplate): string[] {
  const keys: string[] = [];
  for (const widget of dashboardBody(json).widgets) {
    let previous: unknown[] = [];
    for (const row of widget.properties.metrics ?? []) {
      const fields = row.filter((f) => typeof f === 'string') as string[];
      const resolved = fields.map((f, i) => (f === '.' ? (previous[i] as string) : f));
      previous = resolved;
      const [namespace, name, ...dims] = resolved;
      if (namespace === undefined || name === undefined || namespace.startsWith('AWS/')) continue;
      keys.push(
        metricKey(
          namespace,
          name,
          dims.filter((_, i) => i % 2 === 0),
        ),
      );
    }
  }
  return keys;
}

interface AlarmMetric {
  readonly Namespace?: string;
  readonly MetricName?: string;
  readonly Dimensions?: readonly { readonly Name: string }[];
}

/** The custom metrics the alarms read, directly or inside a math expression. */
function alarmMetrics(json: CfnTemplate): string[] {
  const keys: string[] = [];
  for (const [, alarm] of resourcesOfType(json, 'AWS::CloudWatch::Alarm')) {
    const p = alarm.Properties as AlarmMetric & { Metrics?: { MetricStat?: { Metric: AlarmMetric } }[] };
    const metrics = [p, ...(p.Metrics ?? []).flatMap((m) => (m.MetricStat ? [m.MetricStat.Metric] : []))];
    for (const m of metrics) {
      if (m.Namespace === undefined || m.MetricName === undefined || m.Namespace.startsWith('AWS/')) continue;
      keys.push(
        metricKey(
          m.Namespace,
          m.MetricName,
          (m.Dimensions ?? []).map((d) => d.Name),
        ),
      );
    }
  }
  return keys;
}

/** The environment the stack gives a step Lambda (only its plain strings: tokens are deploy-time). */
function lambdaEnvironment(json: CfnTemplate): Record<string, string> {
  const steps = resourcesOfType(json, 'AWS::Lambda::Function').flatMap(([, fn]) => {
    const vars = (fn.Properties.Environment as { Variables?: Record<string, unknown> } | undefined)
      ?.Variables;
    return vars?.[ENV.step] === undefined ? [] : [vars];
  });
  const [vars] = steps;
  if (!vars) throw new Error('no step Lambda in the template');
  return Object.fromEntries(
    Object.entries(vars).filter((e): e is [string, string] => typeof e[1] === 'string'),
  );
}

interface EmfDocument {
  readonly _aws: {
    readonly CloudWatchMetrics: readonly {
      readonly Namespace: string;
      readonly Dimensions: readonly (readonly string[])[];
      readonly Metrics: readonly { readonly Name: string }[];
    }[];
  };
}

/** envObservability() under the given environment, recording every EMF document it publishes. */
function recordingObservability(env: Record<string, string>): { tools: Observability; emitted: string[] } {
  const saved = { ...process.env };
  let tools: Observability;
  try {
    Object.assign(process.env, env, { POWERTOOLS_LOG_LEVEL: 'SILENT' });
    tools = envObservability();
  } finally {
    process.env = saved;
  }
  const metrics = tools.metrics;
  if (!metrics) throw new Error('envObservability() has no Metrics');
  const emitted: string[] = [];
  const serialize = metrics.serializeMetrics.bind(metrics);
  // publishStoredMetrics (the middleware's flush) prints exactly what this returns.
  metrics.serializeMetrics = () => {
    const document = serialize();
    for (const d of (document as unknown as EmfDocument)._aws.CloudWatchMetrics) {
      for (const dims of d.Dimensions)
        for (const m of d.Metrics) emitted.push(metricKey(d.Namespace, m.Name, dims));
    }
    return document;
  };
  return { tools, emitted };
}

const context = { functionName: 'metrics-contract', awsRequestId: 'req-1' } as unknown as Context;

let engine: DuckDbEngine;
let root: string;
useEngineAndDir('metrics-contract-', (e, dir) => {
  engine = e;
  root = dir;
});

/** What one hourly cycle's handlers emit: a partition compacted to the end, one all-corrupt. */
async function emittedByOneCycle(env: Record<string, string>): Promise<string[]> {
  await writeLake(engine, root, [
    { key: 'db/cpu/2025/01/15/10/a.parquet', rows: 5 },
    { key: 'db/cpu/2025/01/15/10/b.parquet', rows: 5 },
  ]);
  const store = new LocalFolderStore(root);
  for (const name of ['x', 'y'])
    await store.put(`db/cpu/2025/01/15/11/${name}.parquet`, Buffer.from('not parquet'));
  const config = parseConfig({ tiers: { hourly: { minFiles: 2 } }, quietSeconds: 0 });
  const getDeps: DepsFactory = async () => localHandlerDeps(store, config, engine, root);
  const { tools, emitted } = recordingObservability(env);
  const execution = { tier: 'hourly', executionId: 'exec-1', executionName: 'metrics-contract' };

  await recoverHandler(getDeps, tools)(execution, context);
  const plan = (await planHandler(getDeps, tools)(execution, context)) as { itemsKey: string };
  const items = await planJobItems(store, plan.itemsKey);
  const outcomes: string[] = [];
  for (const item of items) {
    const staged = (await compactHandler(getDeps, tools)(item, context)) as { status: string };
    outcomes.push(`${item.partition} ${staged.status}`);
    if (staged.status !== 'done') continue;
    const job = {
      tier: item.tier,
      partition: item.partition,
      jobId: item.jobId,
      executionId: item.executionId,
    };
    for (const step of [publishHandler, verifyHandler, deleteInputsHandler, clearHandler]) {
      await step(getDeps, tools)(job, context);
    }
  }
  await summaryHandler(getDeps, tools)({ ...execution, toleratedFailurePercentage: 5 }, context);
  // The cycle this test relies on: one partition compacted, the corrupt one quarantined and skipped.
  expect(outcomes.sort()).toEqual(['db/cpu/2025/01/15/10/ done', 'db/cpu/2025/01/15/11/ skipped']);
  return emitted;
}

describe('the dashboard and alarms read what the handlers emit', () => {
  let s: Synthesized;
  let emitted: ReadonlySet<string>;
  beforeAll(async () => {
    s = synth({ compactor: { metricsNamespace: NAMESPACE } });
    emitted = new Set(await emittedByOneCycle(lambdaEnvironment(s.json)));
  }, 120_000);

  it('the Lambdas publish under the stack’s namespace', () => {
    expect(lambdaEnvironment(s.json)[ENV.metricsNamespace]).toBe(NAMESPACE);
    expect([...emitted].every((key) => key.startsWith(`${NAMESPACE} `))).toBe(true);
  });

  it('every metric the dashboard or an alarm reads is emitted by a handler', () => {
    const read = new Set([...dashboardMetrics(s.json), ...alarmMetrics(s.json)]);
    expect(read.size).toBeGreaterThan(0);
    expect([...read].filter((key) => !emitted.has(key)).sort()).toEqual([]);
  });

  it('every metric a handler emits is on the dashboard or in an alarm', () => {
    const read = new Set([...dashboardMetrics(s.json), ...alarmMetrics(s.json)]);
    expect(emitted.size).toBeGreaterThan(0);
    expect([...emitted].filter((key) => !read.has(key)).sort()).toEqual([]);
  });
});
