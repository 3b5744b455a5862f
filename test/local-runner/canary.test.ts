/**
 * The stack's scheduled canary, run locally: the canary state machine CDK synthesizes, executed
 * by aws-local-stepfunctions with its Lambdas bound in-process, its `.sync` StartExecution task
 * running the synthesized compaction state machine locally over the same folder store.
 * - A healthy run seeds the canary, compacts only its table, checks its rows and removes it; the
 *   lake's own files stay as they were.
 * - A compaction execution that fails (every plan write refused) fails the `.sync` task with
 *   States.TaskFailed; the canary is still removed, then the execution fails.
 * - A job of the canary that stops after staging (its publish copy refused) leaves a live
 *   manifest: the removal keeps the canary (removing it would make recovery quarantine the job)
 *   and the execution fails with the compaction's error.
 */

import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { CANARY_STATES } from '../../cdk/constructs/canary.ts';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { LocalFolderStore } from '../../functions/adapters/local-store/local-store.ts';
import { CANARY_ROOT } from '../../functions/core/canary.ts';
import { type CompactorConfig, parseConfig } from '../../functions/core/config.ts';
import { systemClock } from '../../functions/core/engine.ts';
import type { ObjectStore } from '../../functions/core/object-store.ts';
import { runCanaryLocally } from '../../functions/local-runner/canary.ts';
import type { CfnTemplate } from '../cdk/synth.ts';
import { synth } from '../cdk/synth.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { FaultStore } from '../support/fault-store.ts';
import { HANG_GUARD_MS } from '../support/hang-guard.ts';
import { writeLake } from '../support/lake-harness.ts';

const PREFIX = 'lake/';
// Raw files of an old hour the hourly tier would compact: the canary's execution must not.
const LAKE = [1, 2, 3].map((i) => ({
  key: `${PREFIX}db/cpu/2025/01/14/01/cpu_20250114_01${i}000_${i}.parquet`,
  rows: 7,
}));

let engine: DuckDbEngine;
let root: string;
let json: CfnTemplate;
let config: CompactorConfig;
useEngineAndDir('canary-local-', (e, dir) => {
  engine = e;
  root = dir;
});

beforeAll(() => {
  json = synth({ compactor: { dataPrefix: PREFIX, quietSeconds: 0, canary: { enabled: true } } }).json;
  // The Lambdas' COMPACTOR_CONFIG, as the stack gives it to them.
  const fn = Object.values(json.Resources).find(
    (r) => r.Type === 'AWS::Lambda::Function' && JSON.stringify(r.Properties).includes('canary-seed'),
  );
  const env = fn?.Properties.Environment as { Variables: { COMPACTOR_CONFIG: string } };
  config = parseConfig(JSON.parse(env.Variables.COMPACTOR_CONFIG));
}, HANG_GUARD_MS);

async function keys(store: ObjectStore, prefix = ''): Promise<string[]> {
  const out: string[] = [];
  for await (const o of store.list(prefix)) out.push(o.key);
  return out.sort();
}

async function lake(name: string): Promise<{ dir: string; store: LocalFolderStore }> {
  const dir = join(root, name);
  await writeLake(engine, dir, LAKE);
  return { dir, store: new LocalFolderStore(dir) };
}

function run(store: ObjectStore, dir: string) {
  return runCanaryLocally(
    json as Parameters<typeof runCanaryLocally>[0],
    { store, config, clock: systemClock, engine: async () => engine, workDir: join(dir, '.work') },
    { retryIntervalMs: 0 },
  );
}

describe('the scheduled canary, its synthesized definition run locally', () => {
  it(
    'seeds the canary, compacts only its table, checks its rows and removes it',
    async () => {
      const { dir, store } = await lake('healthy');
      const before = await keys(store, `${PREFIX}db/`);
      const { execution, compactions } = await run(store, dir);
      expect(execution.status, `${execution.error}: ${execution.cause}`).toBe('SUCCEEDED');
      expect(execution.statesEntered).toEqual([
        CANARY_STATES.name,
        CANARY_STATES.seed,
        CANARY_STATES.compact,
        CANARY_STATES.check,
        CANARY_STATES.remove,
        CANARY_STATES.passed,
      ]);
      // One compaction execution, scoped to the canary's table, one job.
      expect(compactions).toHaveLength(1);
      const plan = compactions[0]?.output?.plan;
      expect(plan?.only).toMatch(new RegExp(`^${CANARY_ROOT}/canary-[0-9a-f]{8}/$`));
      expect(plan?.jobs).toBe(1);
      const output = execution.output as { check: { Payload: { rows: string } } };
      expect(output.check.Payload.rows).toMatch(/^100 rows, ids 1\.\.100 once each, in 1 hourly output/);
      // The canary is gone, the lake's own files untouched, no manifest or staging left.
      expect(await keys(store, `${PREFIX}${CANARY_ROOT}`)).toEqual([]);
      expect(await keys(store, `${PREFIX}db/`)).toEqual(before);
      expect(await keys(store, `${PREFIX}_compaction/manifests/`)).toEqual([]);
      expect(await keys(store, `${PREFIX}_compaction/staging/`)).toEqual([]);
    },
    HANG_GUARD_MS,
  );

  it(
    'a compaction execution that fails fails the canary, after removing it',
    async () => {
      const { dir, store: inner } = await lake('failing');
      const before = await keys(inner, `${PREFIX}db/`);
      // Every write of a plan refused (transient, so retried, then given up): Plan fails, and
      // with it the compaction execution, before any job claimed the canary.
      const store = new FaultStore(inner, {
        fault: { at: (c) => c.op === 'put' && c.key.includes('/_compaction/plans/'), kind: 'fail-before' },
      });
      const { execution, compactions } = await run(store, dir);
      expect(execution.status).toBe('FAILED');
      expect(compactions.map((c) => c.execution.status)).toEqual(['FAILED']);
      // The `.sync` task's error, its cause the child's description.
      expect(execution.error).toBe('States.TaskFailed');
      expect(JSON.parse(execution.cause ?? '{}')).toMatchObject({
        Status: 'FAILED',
        Error: 'TransientStoreError',
      });
      expect(execution.statesEntered).toEqual([
        CANARY_STATES.name,
        CANARY_STATES.seed,
        CANARY_STATES.compact,
        CANARY_STATES.removeAfterFailure,
        CANARY_STATES.failed,
      ]);
      expect(await keys(inner, `${PREFIX}${CANARY_ROOT}`)).toEqual([]);
      expect(await keys(inner, `${PREFIX}db/`)).toEqual(before);
    },
    HANG_GUARD_MS,
  );

  it(
    'keeps a canary a live manifest still names, and fails with the compaction error',
    async () => {
      const { dir, store: inner } = await lake('held');
      // The canary's publish copy refused every time: its job stays staged, its manifest live.
      const store = new FaultStore(inner, {
        fault: { at: (c) => c.op === 'copy' && c.key.includes(CANARY_ROOT), kind: 'fail-before' },
      });
      const { execution } = await run(store, dir);
      expect(execution.status).toBe('FAILED');
      expect(execution.error).toBe('States.TaskFailed');
      expect(execution.statesEntered.slice(-2)).toEqual([
        CANARY_STATES.removeAfterFailure,
        CANARY_STATES.failed,
      ]);
      expect((await keys(inner, `${PREFIX}${CANARY_ROOT}`)).length).toBeGreaterThan(0);
      expect(await keys(inner, `${PREFIX}_compaction/manifests/`)).toEqual([
        expect.stringMatching(new RegExp(`^${PREFIX}_compaction/manifests/hourly/${CANARY_ROOT}/canary-`)),
      ]);
    },
    HANG_GUARD_MS,
  );
});
