/**
 * The compact step's two functions in a local run of the synthesized definition (aws-local-stepfunctions
 * through executeDefinition, the real handlers, DuckDB and a local folder): the plan sizes each job,
 * a small job's item goes to the small compact function and an item without a size (as an older
 * plan step wrote it) to the large one, and either way the partition is compacted.
 */

import { join } from 'node:path';
import type { Context } from 'aws-lambda';
import { expect, it } from 'vitest';
import { parseStackConfig } from '../../cdk/config.ts';
import { lambdaConfigInput } from '../../cdk/lambda-config.ts';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { LocalFolderStore } from '../../functions/adapters/local-store/local-store.ts';
import { parseConfig } from '../../functions/core/config.ts';
import { ForwardingStore, type ObjectStore } from '../../functions/core/object-store.ts';
import { localObservability, STEP_HANDLERS, type StepName } from '../../functions/local-runner/lambdas.ts';
import { synthesizeWorkflow } from '../../functions/local-runner/run.ts';
import { executeDefinition } from '../../functions/local-runner/workflow.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { localHandlerDeps } from '../support/handler-deps.ts';
import { writeLake } from '../support/lake-harness.ts';

let engine: DuckDbEngine;
let root: string;
useEngineAndDir('compact-size-', (e, dir) => {
  engine = e;
  root = dir;
});

const CONTEXT = { tiers: { hourly: { minFiles: 2 } }, quietSeconds: 0 };

/** The Map's items with jobs as an older plan step wrote them: without `compactSize`. */
class OlderItemsStore extends ForwardingStore {
  override async getBytes(key: string, options?: Parameters<ObjectStore['getBytes']>[1]) {
    const got = await super.getBytes(key, options);
    if (!/_compaction\/plans\/.*items(-\d+)?\.json$/.test(key)) return got;
    const items = JSON.parse(got.body.toString()) as { jobs: Record<string, unknown>[] }[];
    const older = items.map((item) => ({
      ...item,
      jobs: item.jobs.map(({ compactSize: _, ...job }) => job),
    }));
    return { ...got, body: Buffer.from(JSON.stringify(older)) };
  }
}

async function runHour(hour: string, older: boolean): Promise<{ invoked: string[]; status: string }> {
  const dir = join(root, `lake-${hour}`);
  await writeLake(
    engine,
    dir,
    [1, 2, 3].map((i) => ({
      key: `db/cpu/2025/01/14/${hour}/cpu_20250114_${hour}0${i}00_${i}.parquet`,
      rows: 20,
    })),
  );
  const folder = new LocalFolderStore(dir);
  const store = older ? new OlderItemsStore(folder) : folder;
  const workflow = await synthesizeWorkflow(CONTEXT, { cacheDir: join(root, 'definitions') });
  const config = parseConfig(lambdaConfigInput(parseStackConfig(CONTEXT)));
  const observability = localObservability();
  const invoked: string[] = [];
  const invoke = async (functionName: string, payload: unknown) => {
    const step = workflow.functionSteps.get(functionName) as StepName | undefined;
    if (!step) throw new Error(`no step for ${functionName}`);
    invoked.push(functionName);
    const handler = STEP_HANDLERS[step](
      async () => localHandlerDeps(folder, config, engine, root),
      observability,
    );
    return (await (handler as (p: unknown, c: Context) => Promise<unknown>)(payload, {
      functionName: step,
      awsRequestId: `r${invoked.length}`,
      getRemainingTimeInMillis: () => 900_000,
    } as unknown as Context)) as never;
  };
  const execution = await executeDefinition(
    workflow.definition,
    { store, bucket: workflow.bucket, invoke },
    {
      input: { tier: 'hourly' },
      executionId: `local:${hour}`,
      executionName: `hourly-${hour}`,
      retryIntervalMs: 0,
    },
  );
  const compacted = [];
  for await (const o of folder.list('db/cpu/2025/01/14/')) compacted.push(o.key);
  expect(compacted, execution.cause).toHaveLength(1);
  return { invoked, status: execution.status };
}

/** The function names (local ARNs) of the compact step, by their logical id's start. */
function compactFunctions(invoked: readonly string[]): string[] {
  return invoked
    .filter((arn) => /:function:StepsCompact/.test(arn))
    .map((arn) => arn.split(':function:')[1] ?? '');
}

it('runs a small job on the small compact function', async () => {
  const run = await runHour('10', false);
  expect(run.status).toBe('SUCCEEDED');
  const compact = compactFunctions(run.invoked);
  expect(compact).toHaveLength(1);
  expect(compact[0]).toMatch(/^StepsCompactSmall/);
}, 120_000);

it('runs an item without a size, planned by an older plan step, on the large compact function', async () => {
  const run = await runHour('11', true);
  expect(run.status).toBe('SUCCEEDED');
  const compact = compactFunctions(run.invoked);
  expect(compact).toHaveLength(1);
  expect(compact[0]).not.toMatch(/^StepsCompactSmall/);
}, 120_000);
