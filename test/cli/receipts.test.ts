/**
 * `compactor receipts` after a real local run (the synthesized state machine): one row per
 * committed job, filtered by folder and by job start, and --json carrying every receipt whole.
 */

import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import type { Receipt } from '../../functions/core/receipts.ts';
import { arcRawKey, cli } from '../support/cli-lake.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { writeLake } from '../support/lake-harness.ts';

const HOUR = 3_600_000;
const START = Date.UTC(2025, 0, 15, 10);
const HOUR_10 = 'db/cpu/2025/01/15/10/';
const HOUR_11 = 'db/cpu/2025/01/15/11/';

let dir: string;

useEngineAndDir('cli-receipts-', async (engine: DuckDbEngine, root) => {
  dir = join(root, 'lake');
  await writeLake(engine, dir, [
    ...Array.from({ length: 10 }, (_, i) => ({ key: arcRawKey(START, i), rows: 5 })),
    ...Array.from({ length: 10 }, (_, i) => ({ key: arcRawKey(START + HOUR, i), rows: 3 })),
  ]);
});

describe('compactor receipts', () => {
  it('lists each committed job once, by folder and by start, and --json carries the receipts whole', async () => {
    const empty = await cli('receipts', '--store', dir);
    expect(empty.code, empty.err.join('\n')).toBe(0);
    expect(empty.text).toContain('receipts: 0');

    const run = await cli('run', '--tier', 'hourly', '--store', dir, '--quiet', '0');
    expect(run.code, run.text).toBe(0);

    const all = await cli('receipts', '--store', dir);
    expect(all.code, all.err.join('\n')).toBe(0);
    expect(all.text).toContain('receipts: 2');
    const row = (hour: string) =>
      all.text
        .split('\n')
        .find((l) => l.startsWith(hour))
        ?.replace(/\s+/g, ' ');
    expect(row(HOUR_10)).toMatch(/ hourly \d{8}T\d{6}Z-[0-9a-f]+ \S+ 10 \(.+\) 50 50 1 \(.+\)$/);
    expect(row(HOUR_11)).toMatch(/ 10 \(.+\) 30 30 1 \(.+\)$/);

    const json = await cli('receipts', '--store', dir, '--partition', HOUR_11, '--json');
    const { receipts } = JSON.parse(json.text) as { receipts: Receipt[] };
    expect(receipts.map((r) => [r.partition, r.inputs.length, r.inputRows, r.outputs[0]?.rows])).toEqual([
      [HOUR_11, 10, 30, 30],
    ]);
    expect(receipts[0]?.outputs[0]?.columns?.map((c) => c.name)).toContain('time');

    const later = await cli('receipts', '--store', dir, '--since', new Date(Date.now() + HOUR).toISOString());
    expect(later.text).toContain('receipts: 0');
    const bad = await cli('receipts', '--store', dir, '--since', 'yesterday');
    expect(bad.code).toBe(2);
    expect(bad.err.join('\n')).toContain('--since yesterday: use an ISO time');
  }, 120_000);
});
