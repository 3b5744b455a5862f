/**
 * The compact Lambda's /tmp work dir: what a timed-out invocation left there is removed when the
 * next invocation on the same sandbox starts, before it does anything else; the warm engine's
 * spill folder stays. The deployed deps (env-deps.ts) wire this; the local runner, where
 * concurrent jobs share one work dir, does not.
 */

import { mkdir, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Context } from 'aws-lambda';
import { afterEach, describe, expect, it } from 'vitest';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { LocalFolderStore } from '../../functions/adapters/local-store/local-store.ts';
import { createHandler as compactHandler } from '../../functions/compact.ts';
import { parseConfig } from '../../functions/core/config.ts';
import { envDeps } from '../../functions/lambda/env-deps.ts';
import { clearWorkDir, SPILL_DIR } from '../../functions/lambda/work-dir.ts';
import { localObservability } from '../../functions/local-runner/lambdas.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { localHandlerDeps } from '../support/handler-deps.ts';

let engine: DuckDbEngine;
let root: string;
useEngineAndDir('work-dir-', (e, dir) => {
  engine = e;
  root = dir;
});

const savedEnv = { ...process.env };
afterEach(() => {
  process.env = savedEnv;
});

/** What an invocation killed by its timeout leaves: its job folder, half downloaded. */
async function leaveDeadJob(workDir: string): Promise<void> {
  await mkdir(join(workDir, 'job-dead', 'in-0'), { recursive: true });
  await writeFile(join(workDir, 'job-dead', 'in-0', '0.parquet'), Buffer.alloc(1024 * 1024));
  await mkdir(join(workDir, SPILL_DIR), { recursive: true });
  await writeFile(join(workDir, 'stray.tmp'), 'x');
}

describe('the compact Lambda work dir', () => {
  it('clearWorkDir removes everything but the kept folders, and creates a missing dir', async () => {
    const workDir = join(root, 'clear');
    await leaveDeadJob(workDir);
    expect((await clearWorkDir(workDir, [SPILL_DIR])).sort()).toEqual(['job-dead', 'stray.tmp']);
    expect(await readdir(workDir)).toEqual([SPILL_DIR]);
    const missing = join(root, 'missing');
    expect(await clearWorkDir(missing)).toEqual([]);
    expect(await readdir(missing)).toEqual([]);
  });

  it('the deployed deps clear WORK_DIR when a compact invocation starts, before it reads its input', async () => {
    const workDir = join(root, 'lambda-tmp');
    await leaveDeadJob(workDir);
    process.env.DATA_BUCKET = 'some-bucket';
    process.env.WORK_DIR = workDir;
    process.env.AWS_REGION = 'us-east-1';
    process.env.COMPACTOR_CONFIG = '{}';
    const deployed = await envDeps()();
    expect(deployed.resetWorkDir).toBeDefined();
    // The same handler, on a local store, with the deployed reset wired in.
    const store = new LocalFolderStore(join(root, 'lake'));
    const deps = {
      ...localHandlerDeps(store, parseConfig({}), engine, root),
      workDir,
      ...(deployed.resetWorkDir ? { resetWorkDir: deployed.resetWorkDir } : {}),
    };
    const compact = compactHandler(async () => deps, localObservability());
    const item = {
      tier: 'hourly',
      partition: 'db/cpu/2025/01/15/10/',
      jobId: 'j',
      executionId: 'e',
      jobKey: 'nope',
    };
    // The job file does not exist: the step fails, but only after the reset.
    await expect(
      compact(item, { functionName: 't', awsRequestId: 'r' } as unknown as Context),
    ).rejects.toThrow();
    expect(await readdir(workDir)).toEqual([SPILL_DIR]);
  });

  it('the local deps have no reset: concurrent local jobs share one work dir', () => {
    const deps = localHandlerDeps(new LocalFolderStore(join(root, 'lake')), parseConfig({}), engine, root);
    expect(deps.resetWorkDir).toBeUndefined();
  });
});
