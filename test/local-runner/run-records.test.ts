/**
 * A local run applies the bucket's lifecycle rules to its store, which has none: what the rules
 * expire (plans, Map results, receipts) goes once it is older than the rule's days, and nothing
 * younger goes with it.
 */

import { mkdir, utimes, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { commandContext } from '../../functions/cli/command.ts';
import { DEFAULTS } from '../../functions/core/config.ts';
import { RUN_RECORD_DAYS, stateExpiries, stateFolder } from '../../functions/core/state-root.ts';
import { runWorkflowLocally, synthesizeWorkflow } from '../../functions/local-runner/run.ts';
import { listAll } from '../support/cli-lake.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';

let engine: DuckDbEngine;
let root: string;

useEngineAndDir('run-records-', (e, dir) => {
  engine = e;
  root = dir;
});

const DAY_MS = 86_400_000;

/** Writes `key` under the lake, last modified `ageDays` ago. */
async function plant(lake: string, key: string, ageDays: number): Promise<void> {
  const path = join(lake, key);
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, '{}');
  const when = new Date(Date.now() - ageDays * DAY_MS);
  await utimes(path, when, when);
}

describe('a local run and the lifecycle rules', () => {
  it('removes what each rule expires once older than its days, and nothing younger', async () => {
    const lake = join(root, 'lake');
    await mkdir(lake);
    const ctx = await commandContext({
      store: lake,
      'work-dir': join(root, 'work'),
      quiet: '0',
      tier: 'hourly',
    });
    const { stateRoot } = ctx.config.layout;
    const expiries = stateExpiries({ runRecords: RUN_RECORD_DAYS, receipts: DEFAULTS.receiptDays });
    const kept: string[] = [];
    for (const { folder, days } of expiries) {
      await plant(lake, `${stateFolder(stateRoot, folder)}old/x.json`, days + 1);
      const young = `${stateFolder(stateRoot, folder)}young/x.json`;
      await plant(lake, young, days - 1);
      kept.push(young);
    }
    const run = await runWorkflowLocally(
      await synthesizeWorkflow(),
      {
        store: ctx.target.store,
        config: ctx.config,
        clock: ctx.clock,
        engine: async () => engine,
        workDir: join(root, 'work'),
      },
      { tier: 'hourly', retryIntervalMs: 0 },
    );
    expect(run.execution.status).toBe('SUCCEEDED');
    expect((await listAll(lake)).filter((key) => key.startsWith(stateRoot))).toEqual(kept.sort());
  });
});
