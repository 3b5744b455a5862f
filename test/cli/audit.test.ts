/**
 * `compactor audit` after a real local run (the synthesized state machine): clean, exit 0; then a
 * backup restored over one hour, exit 1, the restored file named with the fix, and `compactor
 * repair` removing it so the audit is clean again.
 */

import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import type { AuditReport } from '../../functions/core/audit.ts';
import { arcRawKey, cli } from '../support/cli-lake.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { writeLake } from '../support/lake-harness.ts';

const START = Date.UTC(2025, 0, 15, 10);
const RESTORED = arcRawKey(START, 3);

let dir: string;
let backup: Buffer;

useEngineAndDir('cli-audit-', async (engine: DuckDbEngine, root) => {
  dir = join(root, 'lake');
  await writeLake(
    engine,
    dir,
    Array.from({ length: 10 }, (_, i) => ({ key: arcRawKey(START, i), rows: 5 })),
  );
  backup = await readFile(join(dir, RESTORED));
});

describe('compactor audit', () => {
  it('is clean after a run, names a restored input with its fix, and repair makes it clean again', async () => {
    const run = await cli('run', '--tier', 'hourly', '--store', dir, '--quiet', '0');
    expect(run.code, run.text).toBe(0);

    const clean = await cli('audit', '--store', dir);
    expect(clean.code, clean.text + clean.err.join('\n')).toBe(0);
    expect(clean.text).toMatch(/db\/cpu\/\s+db\/cpu\/2025\/01\/15\/\s+1\s+\S+ \S+\s+50\s*$/m);
    expect(clean.text).toContain('audit: clean: 1 day(s), 1 receipt(s), no defect found');

    // A backup taken before the run, restored over the lake: one raw file comes back.
    await writeFile(join(dir, RESTORED), backup);
    const found = await cli('audit', '--store', dir, '--json');
    expect(found.code).toBe(1);
    const report = JSON.parse(found.text) as AuditReport;
    expect(report.findings.map((f) => [f.kind, f.key]).sort()).toEqual([
      ['duplicate', RESTORED],
      ['restored', RESTORED],
    ]);
    expect(report.findings.every((f) => f.fix.includes('compactor repair'))).toBe(true);
    const text = await cli('audit', '--store', dir);
    expect(text.text).toContain('audit: 2 finding(s): 1 restored');

    const repair = await cli('repair', '--store', dir);
    expect(repair.code, repair.text).toBe(0);
    const after = await cli('audit', '--store', dir);
    expect(after.code, after.text).toBe(0);
  }, 120_000);
});
