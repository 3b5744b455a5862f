/**
 * The audit on real Parquet in a real LocalFolderStore with DuckDB: clean on a freshly compacted
 * lake, and every planted defect found, each naming its object: a duplicate, a half-compacted
 * hour, orphan staging, an output with no receipt, a probe leftover, a tampered output, a lost
 * output, a restored input, a stale quarantine record, a receipt that does not read.
 */

import { cp, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { type AuditDeps, type AuditReport, auditLake, type FindingKind } from '../../functions/core/audit.ts';
import { parseConfig } from '../../functions/core/config.ts';
import { runCycle } from '../../functions/core/cycle.ts';
import { InputUnreadableError } from '../../functions/core/errors.ts';
import { jobIdOfOutput, receiptKey, stagingRoot } from '../../functions/core/manifest/manifest.ts';
import { listReceipts, type Receipt } from '../../functions/core/receipts.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import {
  copyLake,
  HOURLY_HOUR_10,
  hourlyTemplate,
  SWEEP_CONFIG,
  sweepDeps,
  type TemplateLake,
  writeLake,
} from '../support/lake-harness.ts';
import { testStore } from '../support/test-store.ts';

let engine: DuckDbEngine;
let workDir: string;
let template: TemplateLake;
const lakes: string[] = [];

useEngineAndDir('audit-', async (e, dir) => {
  engine = e;
  workDir = join(dir, 'work');
  template = await hourlyTemplate(engine);
});

afterEach(async () => {
  for (const dir of lakes.splice(0)) await rm(dir, { recursive: true, force: true });
});

/** The template lake, compacted hourly: two hours, each one job with its receipt. */
async function compacted() {
  const dir = await copyLake(template);
  lakes.push(dir);
  const store = testStore(dir);
  const config = template.config;
  await runCycle(sweepDeps(store, config, engine, workDir, 'exec-1', new Set()), 'hourly');
  const receipts = (await listReceipts(store, config)).flatMap((r) => ('receipt' in r ? [r.receipt] : []));
  return { dir, store, config, receipts };
}

async function audit(
  l: Awaited<ReturnType<typeof compacted>>,
  now = Date.now(),
  rowsOf?: AuditDeps['rowsOf'],
): Promise<AuditReport> {
  return auditLake({
    store: l.store,
    config: l.config,
    clock: { now: () => new Date(now) },
    engine,
    workDir: join(workDir, 'audit'),
    // As the CLI's footerRows: an unreadable footer has no rows.
    rowsOf:
      rowsOf ??
      (async (objects) => {
        const rows = new Map<string, number | undefined>();
        for (const o of objects) {
          const info = await engine.inspect(join(l.dir, o.key)).catch((error: unknown) => {
            if (error instanceof InputUnreadableError) return undefined;
            throw error;
          });
          rows.set(o.key, info?.rows);
        }
        return rows;
      }),
  });
}

const kinds = (report: AuditReport) => report.findings.map((f) => [f.kind, f.key] as [FindingKind, string]);

function outputsOf(receipts: readonly Receipt[], partition: string): string[] {
  return receipts.filter((r) => r.partition === partition).flatMap((r) => r.outputs.map((o) => o.key));
}

describe('compactor audit', () => {
  it('is clean on a freshly compacted lake, and counts its files and rows per table and day', async () => {
    const l = await compacted();
    const report = await audit(l);
    expect(report.findings).toEqual([]);
    expect(report.receipts).toBe(2);
    const outputs = (await l.store.head(outputsOf(l.receipts, HOURLY_HOUR_10)[0] ?? '')) !== undefined;
    expect(outputs).toBe(true);
    expect(report.days).toEqual([
      expect.objectContaining({
        table: 'db/cpu/',
        day: 'db/cpu/2025/01/15/',
        rows: template.totalRows,
        findings: 0,
      }),
    ]);
  });

  it('a copied lake (every local ETag new) is clean; an output rewritten at its own size is not', async () => {
    const l = await compacted();
    const copy = `${l.dir}-copy`;
    lakes.push(copy);
    await cp(l.dir, copy, { recursive: true });
    const copied = { ...l, dir: copy, store: testStore(copy) };
    const [output = ''] = outputsOf(l.receipts, HOURLY_HOUR_10);
    expect((await copied.store.head(output))?.etag).not.toBe((await l.store.head(output))?.etag);
    expect((await audit(copied)).findings).toEqual([]);
    // The same size, other bytes: changed.
    const bytes = await readFile(join(copy, output));
    bytes[8] = (bytes[8] ?? 0) ^ 0xff;
    await writeFile(join(copy, output), bytes);
    expect(kinds(await audit(copied))).toEqual([['output-changed', output]]);
  });

  it('names a data file whose footer does not read, and its fix', async () => {
    const dir = await copyLake(template);
    lakes.push(dir);
    const store = testStore(dir);
    const empty = `${HOURLY_HOUR_10}cpu_20250115_105900_9.parquet`;
    await store.put(empty, Buffer.alloc(0));
    const report = await audit({ dir, store, config: template.config, receipts: [] });
    expect(kinds(report)).toEqual([['unreadable', empty]]);
    expect(report.findings[0]?.fix).toContain('replace or remove it');
    expect(report.days[0]).toMatchObject({ rows: undefined, findings: 1 });
    // Gone while the audit ran (a job deleted it): no finding.
    const deleting = await audit(
      { dir, store, config: template.config, receipts: [] },
      Date.now(),
      async (objects) => {
        await store.deleteMany([{ key: empty }]);
        return new Map(objects.map((o) => [o.key, o.key === empty ? undefined : 1]));
      },
    );
    expect(kinds(deleting)).toEqual([]);
  });

  it('finds every planted defect and names each object', async () => {
    // Four hours, each compacted into one output, so each defect sits in its own hour.
    const dir = join(workDir, `planted-${Date.now()}`);
    lakes.push(dir);
    const hours = [10, 11, 12, 13].map((h) => `db/cpu/2025/01/15/${h}/`);
    const raw = (hour: string, n: number) => `${hour}cpu_20250115_${hour.slice(-3, -1)}0${n}00_${n}.parquet`;
    const files = hours.flatMap((h) => [1, 2, 3].map((n) => ({ key: raw(h, n), rows: 10 })));
    await writeLake(engine, dir, files);
    const originals = new Map<string, Buffer>();
    for (const f of files) originals.set(f.key, await readFile(join(dir, f.key)));
    const store = testStore(dir);
    const config = parseConfig({ ...SWEEP_CONFIG, targetFileBytes: 512 * 1024 * 1024 });
    await runCycle(sweepDeps(store, config, engine, workDir, 'exec-1', new Set()), 'hourly');
    const receipts = (await listReceipts(store, config)).flatMap((r) => ('receipt' in r ? [r.receipt] : []));
    const l = { dir, store, config, receipts };
    expect((await audit(l)).findings).toEqual([]);
    const [h10, h11, h12, h13] = hours as [string, string, string, string];
    const out12 = outputsOf(receipts, h12)[0] ?? '';
    const out13 = outputsOf(receipts, h13)[0] ?? '';

    // Hour 10: a backup from before the run restored one input (rows its output holds).
    const restored = raw(h10, 1);
    await store.put(restored, originals.get(restored) ?? Buffer.alloc(0));
    // Hour 11: a copy of an input under a new name (the seed bug's leftover).
    const duplicate = `${h11}cpu_20250115_114500_9.parquet`;
    await store.put(duplicate, originals.get(raw(h11, 2)) ?? Buffer.alloc(0));
    // Hour 12's output rewritten by someone else; hour 13's lost.
    await store.put(out12, originals.get(raw(h12, 1)) ?? Buffer.alloc(0));
    await store.deleteMany([{ key: out13 }]);
    // Hour 14, half-compacted: a raw file, then an (Arc) output written after it, with other rows.
    const half = 'db/cpu/2025/01/15/14/';
    await writeLake(engine, dir, [{ key: `${half}cpu_20250115_140500_1.parquet`, rows: 3 }], 10_001);
    await new Promise((resolve) => setTimeout(resolve, 20));
    await writeLake(engine, dir, [{ key: `${half}cpu_20250115_14_compacted.parquet`, rows: 4 }], 20_001);
    // Hour 15: an output of ours whose job left no receipt.
    const foreign = 'db/cpu/2025/01/15/15/cpu_20250115_15_29991231T000000Z-0000f00d_000_compacted.parquet';
    await writeLake(engine, dir, [{ key: foreign, rows: 2 }], 30_001);
    expect(jobIdOfOutput(foreign)).toBe('29991231T000000Z-0000f00d');
    // State-root debris: staging of no job, a probe's object, a record of a gone input, a receipt
    // that does not read.
    const orphanStaging = `${stagingRoot(config.layout)}20250115T130000Z-0badc0de/a1/000.parquet`;
    const probe = '_compaction/probe/abandoned/created';
    const stale = '_compaction/quarantine/inputs/db/cpu/2025/01/15/10/gone.parquet.json';
    const badReceipt = receiptKey(config.layout, 'hourly', h11, '29991231T000000Z-0000beef');
    await store.put(orphanStaging, Buffer.from('PAR1'));
    await store.put(probe, Buffer.from(''));
    await store.put(
      stale,
      Buffer.from(JSON.stringify({ key: 'db/cpu/2025/01/15/10/gone.parquet', reason: 'x' })),
    );
    await store.put(badReceipt, Buffer.from('{}'));

    // An hour later by the clock: the probe's object is abandoned.
    const report = await audit(l, Date.now() + 3_600_000);
    const found = kinds(report).sort();
    expect(found).toEqual(
      (
        [
          ['restored', restored],
          ['duplicate', restored],
          ['duplicate', duplicate],
          ['output-changed', out12],
          ['output-missing', out13],
          ['half-compacted', half],
          ['output-without-receipt', foreign],
          ['orphan-staging', orphanStaging],
          ['probe-leftover', probe],
          ['stale-quarantine-record', stale],
          ['invalid-receipt', badReceipt],
        ] as [FindingKind, string][]
      ).sort(),
    );
    for (const finding of report.findings) expect(finding.fix.length).toBeGreaterThan(0);
    // Each day row says how many findings name something in it.
    expect(report.days.find((d) => d.day === 'db/cpu/2025/01/15/')?.findings).toBe(7);
  });

  it('reads only what it lists: a lake of raw files alone, never compacted, is clean', async () => {
    const dir = await copyLake(template);
    lakes.push(dir);
    const store = testStore(dir);
    const report = await audit({ dir, store, config: template.config, receipts: [] });
    expect(report.findings).toEqual([]);
    expect(report.receipts).toBe(0);
    expect(report.days.reduce((s, d) => s + (d.rows ?? 0), 0)).toBe(template.totalRows);
  });
});
