/**
 * `compactor audit` after a real local run (the synthesized state machine): clean, exit 0; then a
 * backup restored over one hour, exit 1, the restored file named with the fix, and `compactor
 * repair` removing it so the audit is clean again.
 */

import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { AuditReport } from '../../functions/core/audit.ts';
import { RESTORED, useAuditLake } from '../support/audit-lake.ts';
import { cli } from '../support/cli-lake.ts';

const lake = useAuditLake('cli-audit-');

describe('compactor audit', () => {
  it('is clean after a run, names a restored input with its fix, and repair makes it clean again', async () => {
    const { dir, backup } = lake;
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
