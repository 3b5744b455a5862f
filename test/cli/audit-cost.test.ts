/**
 * `compactor audit` prices the fix: after a real local run, a backup's raw file restored beside its
 * output (repair removes it) and a half-compacted hour (an Arc output beside an older raw file with
 * other rows: repair keeps it, a cycle compacts it). `--json` gives `fixCost`, the text the same
 * block under the findings, with the plan's list-price caveat.
 */

import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { AuditReport } from '../../functions/core/audit.ts';
import { type FixCost, PRICE_BASIS, requestsUsd } from '../../functions/core/cost/index.ts';
import { RESTORED, useAuditLake } from '../support/audit-lake.ts';
import { cli } from '../support/cli-lake.ts';
import { writeLake } from '../support/lake-harness.ts';

const HALF = 'db/cpu/2025/01/15/14/';

const lake = useAuditLake('cli-audit-cost-');

describe('compactor audit: the price of the fix', () => {
  it('prices repair, then the cycle compacting what repair leaves', async () => {
    const { dir, backup, engine } = lake;
    const run = await cli('run', '--tier', 'hourly', '--store', dir, '--quiet', '0');
    expect(run.code, run.text).toBe(0);
    await writeFile(join(dir, RESTORED), backup);
    await writeLake(engine, dir, [{ key: `${HALF}cpu_20250115_140500_1.parquet`, rows: 3 }], 10_001);
    await sleep(20);
    await writeLake(engine, dir, [{ key: `${HALF}cpu_20250115_14_compacted.parquet`, rows: 4 }], 20_001);

    const found = await cli('audit', '--store', dir, '--json');
    expect(found.code).toBe(1);
    const report = JSON.parse(found.text) as AuditReport & { fixCost: FixCost };
    // Two folders hold outputs beside raw files: the restored hour (one duplicate) and the
    // half-compacted one (its raw file's rows are in no output: kept, then compacted).
    expect(report.fix.repairs).toEqual([
      { outputs: 1, inputs: 1, duplicates: 1 },
      { outputs: 1, inputs: 1, duplicates: 0 },
    ]);
    const { fixCost } = report;
    expect(fixCost.repair).toMatchObject({ folders: 2, duplicates: 1 });
    expect(fixCost.repair.usd).toBeCloseTo(requestsUsd(fixCost.repair.requests), 12);
    expect(fixCost.compaction?.total).toMatchObject({ jobs: 1, inputFiles: 1 });
    expect(fixCost.totalUsd).toBeCloseTo(fixCost.repair.usd + (fixCost.compaction?.total.totalUsd ?? 0), 12);
    expect(fixCost.basis).toBe(PRICE_BASIS);

    const text = await cli('audit', '--store', dir);
    expect(text.text).toContain(`estimated cost of the fix, ${PRICE_BASIS}:`);
    expect(text.text).toMatch(
      /compactor repair: 2 folder\(s\) checked by content, 1 duplicate file\(s\) removed/,
    );
    expect(text.text).toMatch(/then a cycle compacting 1 partition\(s\) \(1 file\(s\)/);
  }, 180_000);
});
