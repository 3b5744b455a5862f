/**
 * runCycle's Map items on real Parquet in a real LocalFolderStore with DuckDB: a wave's jobs in
 * the items the Plan step groups, an item failed when one of its jobs failed, and the redrive of
 * a failed item, whole, whose committed job answers from its receipt.
 */

import { describe, expect, it } from 'vitest';
import { type CycleReport, runCycle } from '../../functions/core/cycle.ts';
import { listReceipts } from '../../functions/core/receipts.ts';
import { FaultStore } from '../support/fault-store.ts';
import {
  HOURLY_HOUR_10,
  HOURLY_HOUR_11,
  LakeChecker,
  sweepDeps,
  useHourlyTemplate,
} from '../support/lake-harness.ts';

const fixture = useHourlyTemplate('cycle-');

/**
 * An hourly cycle over the template's two hours, with items of up to `smallJobsPerItem` jobs,
 * whose publish copy of hour 11 fails once with an error no Retry names.
 */
async function cycleFailingHour11(smallJobsPerItem: number, redriveFailedItems: boolean) {
  const { dir, store: inner, config: base } = await fixture.lake();
  const config = { ...base, smallJobsPerItem };
  // Attempts of the first copy to an hour-11 final key; its first attempt fails (the job's other
  // outputs are copied at the same time, and may land).
  let failures = 0;
  let failing: string | undefined;
  const store = new FaultStore(inner, {
    gate: async (call) => {
      if (call.op !== 'copy' || !call.key.startsWith(HOURLY_HOUR_11)) return;
      failing ??= call.key;
      if (call.key === failing && failures++ === 0)
        throw new Error(`injected: the copy to ${call.key} fails`);
    },
  });
  const report = await runCycle(
    { ...sweepDeps(store, config, fixture.engine, fixture.workDir, 'exec-1', new Set()), redriveFailedItems },
    'hourly',
  );
  return { dir, store: inner, config, report, failures };
}

function byPartition(report: CycleReport) {
  return Object.fromEntries(
    report.jobs.map((j) => [
      j.job.partition,
      {
        item: j.item,
        first: j.firstRun?.status,
        outcome: j.outcome.status,
        compact: `${j.outcome.steps[0]?.status} ${j.outcome.steps[0]?.state}`,
      },
    ]),
  );
}

describe('runCycle runs Map items', () => {
  it('groups a wave’s small jobs of one table into one item, and fails the item with its job', async () => {
    const { report, failures } = await cycleFailingHour11(2, false);
    expect(failures).toBe(1);
    expect(byPartition(report)).toEqual({
      [HOURLY_HOUR_10]: {
        item: { wave: 0, index: 0, jobs: 2 },
        first: undefined,
        outcome: 'compacted',
        compact: 'done staged',
      },
      [HOURLY_HOUR_11]: {
        item: { wave: 0, index: 0, jobs: 2 },
        first: undefined,
        outcome: 'failed',
        compact: 'done staged',
      },
    });
  });

  it('redrives a failed item whole: its committed job answers from its receipt', async () => {
    const { dir, store, config, report } = await cycleFailingHour11(2, true);
    expect(byPartition(report)).toEqual({
      [HOURLY_HOUR_10]: {
        item: { wave: 0, index: 0, jobs: 2 },
        first: 'compacted',
        outcome: 'compacted',
        compact: 'already-done cleared',
      },
      [HOURLY_HOUR_11]: {
        item: { wave: 0, index: 0, jobs: 2 },
        first: 'failed',
        outcome: 'compacted',
        compact: 'already-done staged',
      },
    });
    const receipts = await listReceipts(store, config);
    expect(receipts.map((r) => ('receipt' in r ? r.receipt.partition : r.invalid))).toEqual([
      HOURLY_HOUR_10,
      HOURLY_HOUR_11,
    ]);
    await new LakeChecker(fixture.engine, dir, store, config, fixture.template.totalRows).assertQuiescent();
  });

  it('with one job an item, redrives only the failed job’s item', async () => {
    const { dir, store, config, report } = await cycleFailingHour11(1, true);
    expect(byPartition(report)).toEqual({
      [HOURLY_HOUR_10]: {
        item: { wave: 0, index: 0, jobs: 1 },
        first: undefined,
        outcome: 'compacted',
        compact: 'done staged',
      },
      [HOURLY_HOUR_11]: {
        item: { wave: 0, index: 1, jobs: 1 },
        first: 'failed',
        outcome: 'compacted',
        compact: 'already-done staged',
      },
    });
    await new LakeChecker(fixture.engine, dir, store, config, fixture.template.totalRows).assertQuiescent();
  });
});
