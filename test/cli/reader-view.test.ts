/**
 * The exactly-once reader view: after every single store call of an hourly and a daily job
 * (the job paused there), `compactor visible --sql` prints a DuckDB view that DuckDB reads with
 * every row id exactly once, while a plain glob over the same folder sees duplicates in between.
 */

import { rm } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { LocalFolderStore } from '../../functions/adapters/local-store/local-store.ts';
import { runCli } from '../../functions/cli/compactor.ts';
import type { TierName } from '../../functions/core/config.ts';
import { runCycle } from '../../functions/core/cycle.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { type CallRecord, FaultStore } from '../support/fault-store.ts';
import {
  copyLake,
  dailyTemplate,
  hourlyTemplate,
  sweepDeps,
  type TemplateLake,
} from '../support/lake-harness.ts';

let engine: DuckDbEngine;
let workDir: string;

useEngineAndDir('reader-view-', (e, dir) => {
  engine = e;
  workDir = dir;
});

async function readThroughView(dir: string): Promise<{ rows: number; distinct: number }> {
  const out: string[] = [];
  const code = await runCli(['visible', '--sql', '--store', dir, '--layout', 'arc'], {
    out: (l) => out.push(l),
    err: () => {},
  });
  expect(code).toBe(0);
  const name = `v${Math.random().toString(36).slice(2)}`;
  const sql = out.join('\n').replace('CREATE OR REPLACE VIEW lake', `CREATE OR REPLACE TEMP VIEW ${name}`);
  // The printed view, then a count through it, in one DuckDB call (the last statement's rows come back).
  const [row] = await engine.query(
    `${sql}\nSELECT count(*)::INTEGER AS n, count(DISTINCT id)::INTEGER AS d FROM ${name}`,
  );
  return { rows: Number(row?.n), distinct: Number(row?.d) };
}

async function plainGlobRows(dir: string): Promise<number> {
  const [row] = await engine.query(
    `SELECT count(*)::INTEGER AS n FROM read_parquet('${dir}/db/**/*.parquet', union_by_name = true, hive_partitioning = false)`,
  );
  return Number(row?.n);
}

describe.each(['hourly', 'daily'] as const)('the reader view during a %s job', (tier: TierName) => {
  it('reads every row exactly once after each of the job’s store calls', async () => {
    const template: TemplateLake =
      tier === 'hourly' ? await hourlyTemplate(engine) : await dailyTemplate(engine);
    const dir = await copyLake(template);
    let checked = 0;
    let plainSawDuplicates = 0;
    const afterCall = async (call: CallRecord) => {
      // The job is paused here: a reader arrives now.
      const view = await readThroughView(dir);
      expect(view, `after call ${call.n} ${call.op} ${call.key}`).toEqual({
        rows: template.totalRows,
        distinct: template.totalRows,
      });
      if ((await plainGlobRows(dir)) > template.totalRows) plainSawDuplicates++;
      checked++;
    };
    const store = new FaultStore(new LocalFolderStore(dir), { afterCall });
    const report = await runCycle(
      sweepDeps(store, template.config, engine, workDir, `reader-${tier}`, new Set()),
      tier,
    );
    expect(report.jobs.every((j) => j.outcome.status === 'compacted')).toBe(true);
    expect(checked).toBe(store.calls.length);
    expect(checked).toBeGreaterThan(20);
    // Without the view, a glob reader does see both outputs and inputs for a while.
    expect(plainSawDuplicates).toBeGreaterThan(0);
    console.log(
      `${tier}: view exact at all ${checked} calls; a plain glob saw duplicates at ${plainSawDuplicates}`,
    );
    await rm(dir, { recursive: true, force: true });
  }, 120_000);
});
