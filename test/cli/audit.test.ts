/**
 * `compactor audit` after a real local run (the synthesized state machine): clean, exit 0; then a
 * backup restored over one hour, exit 1, the restored file named with the fix, and `compactor
 * repair` removing it so the audit is clean again. And the days printed in several chunks.
 */

import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { auditCommand } from '../../functions/cli/commands/audit.ts';
import type { AuditDay, AuditReport } from '../../functions/core/audit.ts';
import { RESTORED, useAuditLake } from '../support/audit-lake.ts';
import { arcRawKey, cli } from '../support/cli-lake.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { writeLake } from '../support/lake-harness.ts';

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

describe('compactor audit prints the days in chunks', () => {
  // Five days of one table, two files in hour 10 of each; day 2 and day 4 get a backup of their
  // first file restored after the run: two findings each (duplicate, restored).
  const DAYS = 5;
  const hourOf = (day: number) => Date.UTC(2025, 0, 10 + day, 10);
  const restored = [1, 3].map((day) => arcRawKey(hourOf(day), 0));
  let dir: string;
  const backups = new Map<string, Buffer>();

  useEngineAndDir('cli-audit-chunks-', async (engine, root) => {
    dir = join(root, 'lake');
    const files = Array.from({ length: DAYS }, (_, day) =>
      [0, 1].map((n) => ({ key: arcRawKey(hourOf(day), n), rows: 3 })),
    );
    await writeLake(engine, dir, files.flat());
    for (const key of restored) backups.set(key, await readFile(join(dir, key)));
  });

  /** `compactor audit --store dir [--json]` in this process, printing `chunk` days at a time. */
  async function audit(chunk: number, json = false) {
    const out: string[] = [];
    const io = { out: (line: string) => out.push(line), err: () => {} };
    const code = await auditCommand({ store: dir, ...(json ? { json: true } : {}) }, io, chunk);
    return { code, out, text: out.join('\n') };
  }

  it('every day and every finding exactly once, across chunks of two days, in text and --json', async () => {
    const run = await cli('run', '--tier', 'hourly', '--store', dir, '--quiet', '0');
    expect(run.code, run.text).toBe(0);
    for (const [key, body] of backups) await writeFile(join(dir, key), body);
    const dayNames = Array.from({ length: DAYS }, (_, day) =>
      new Date(hourOf(day)).toISOString().slice(0, 10).replaceAll('-', '/'),
    );

    const json = await audit(2, true);
    expect(json.code).toBe(1);
    // One element a line per day across the chunks (2, 2, 1), and the whole still one JSON object.
    expect(
      json.out.filter((line) => line.startsWith('{"table"') || line.startsWith(',{"table"')),
    ).toHaveLength(DAYS);
    const report = JSON.parse(json.text) as AuditReport & { days: AuditDay[] };
    expect(report.days.map((d) => d.day)).toEqual(dayNames.map((d) => `db/cpu/${d}/`));
    expect(report.days.map((d) => d.findings)).toEqual([0, 2, 0, 2, 0]);
    expect(report.findings.map((f) => [f.kind, f.key]).sort()).toEqual(
      restored
        .flatMap((key) => [
          ['duplicate', key],
          ['restored', key],
        ])
        .sort(),
    );

    const text = await audit(2);
    expect(text.code).toBe(1);
    // A table per chunk (2, 2, 1 days): its header three times, each day's row once.
    expect(text.text.match(/^table\s+day\s+files/gm)).toHaveLength(3);
    for (const [i, day] of dayNames.entries()) {
      const rows = text.text.match(new RegExp(`^db/cpu/\\s+db/cpu/${day}/\\s.*$`, 'gm')) ?? [];
      expect(rows, day).toHaveLength(1);
      expect(rows[0]?.trimEnd().endsWith(' 2'), day).toBe(i === 1 || i === 3);
    }
    for (const key of restored) {
      expect(text.text.match(new RegExp(`^duplicate\\s+${key}\\s`, 'gm')), key).toHaveLength(1);
      expect(text.text.match(new RegExp(`^restored\\s+${key}\\s`, 'gm')), key).toHaveLength(1);
    }
    expect(text.text).toContain('audit: 4 finding(s)');
    // The default chunk holds them all: one table.
    expect((await audit(1000)).text.match(/^table\s+day\s+files/gm)).toHaveLength(1);
  }, 180_000);
});
