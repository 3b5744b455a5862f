/**
 * The audit streams its listing a day at a time (functions/core/audit.ts): the objects it holds at
 * once do not grow with the number of days, only with one day's files and the month's daily
 * outputs. Counted by the audit's own high-water mark of objects held, on a real local store.
 */

import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { type AuditDay, auditLake } from '../../functions/core/audit.ts';
import { parseConfig } from '../../functions/core/config.ts';
import { runCycle } from '../../functions/core/cycle.ts';
import { listReceipts } from '../../functions/core/receipts.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { copyLake, hourlyTemplate, sweepDeps } from '../support/lake-harness.ts';
import { testStore } from '../support/test-store.ts';

let engine: DuckDbEngine;
let root: string;

useEngineAndDir('audit-stream-', async (e, dir) => {
  engine = e;
  root = dir;
});

const DAY = 86_400_000;

/**
 * `days` days from 2025-01-01 of table db/cpu: each with two raw files in hour 10 and an hourly
 * output in hour 09, or with `daily` a daily output in the day folder instead (no folder holds an
 * output beside its tier's inputs, so nothing is read by content).
 */
async function lake(name: string, days: number, daily: boolean) {
  const dir = join(root, name);
  const store = testStore(dir);
  for (let d = 0; d < days; d++) {
    const iso = new Date(Date.UTC(2025, 0, 1) + d * DAY).toISOString();
    const [y, m, dd] = [iso.slice(0, 4), iso.slice(5, 7), iso.slice(8, 10)];
    const folder = `db/cpu/${y}/${m}/${dd}/`;
    const body = Buffer.from('not read');
    await store.put(`${folder}10/cpu_${y}${m}${dd}_100000_1.parquet`, body);
    await store.put(`${folder}10/cpu_${y}${m}${dd}_101000_2.parquet`, body);
    if (daily) await store.put(`${folder}cpu_${y}${m}${dd}_daily.parquet`, body);
    else await store.put(`${folder}09/cpu_${y}${m}${dd}_09_compacted.parquet`, body);
  }
  return store;
}

async function audit(store: ReturnType<typeof testStore>, onDay?: (day: AuditDay) => void) {
  return auditLake({
    store,
    config: parseConfig({ layout: 'arc', quietSeconds: 0 }),
    clock: { now: () => new Date(Date.UTC(2025, 6, 1)) },
    engine,
    workDir: join(root, 'work'),
    ...(onDay ? { onDay } : {}),
  });
}

describe('the audit in bounded memory', () => {
  it('holds one day of raw and hourly files at a time, however many days', async () => {
    const few = await audit(await lake('few', 2, false));
    const many = await audit(await lake('many', 40, false));
    expect(few.findings).toEqual([]);
    expect(many.findings).toEqual([]);
    expect(many.days).toHaveLength(40);
    expect(many.peakObjectsHeld).toBe(few.peakObjectsHeld);
    expect(many.peakObjectsHeld).toBe(3);
  });

  it("holds a day's files and its month's daily outputs: as many months as it likes", async () => {
    const one = await audit(await lake('one-month', 31, true));
    const three = await audit(await lake('three-months', 90, true));
    expect(three.findings).toEqual([]);
    // January's 31 daily outputs, and the last day's three files (its daily output among them).
    expect(one.peakObjectsHeld).toBe(31 + 3);
    expect(three.peakObjectsHeld).toBe(one.peakObjectsHeld);
  });

  it('hands each day to onDay and then holds no days', async () => {
    const seen: AuditDay[] = [];
    const report = await audit(await lake('streamed', 5, false), (day) => seen.push(day));
    expect(report.days).toEqual([]);
    expect(seen.map((d) => [d.day, d.files, d.findings])).toEqual(
      [1, 2, 3, 4, 5].map((d) => [`db/cpu/2025/01/0${d}/`, 3, 0]),
    );
  });

  it('judges the receipts of a day whose data is all gone: every output lost', async () => {
    const template = await hourlyTemplate(engine);
    const dir = await copyLake(template);
    const store = testStore(dir);
    await runCycle(
      sweepDeps(store, template.config, engine, join(root, 'work'), 'exec-1', new Set()),
      'hourly',
    );
    const outputs = (await listReceipts(store, template.config)).flatMap((r) =>
      'receipt' in r ? r.receipt.outputs.map((o) => o.key) : [],
    );
    expect(outputs.length).toBeGreaterThan(0);
    const data: { key: string }[] = [];
    for await (const o of store.list('db/')) data.push({ key: o.key });
    await store.deleteMany(data);
    const report = await auditLake({
      store,
      config: template.config,
      clock: { now: () => new Date() },
      engine,
      workDir: join(root, 'work'),
    });
    expect(report.days).toEqual([]);
    expect(report.findings.map((f) => [f.kind, f.key]).sort()).toEqual(
      outputs.map((key) => ['output-missing', key]).sort(),
    );
    for (const d of [dir, template.dir]) await rm(d, { recursive: true, force: true });
  });

  it('refuses a store that lists out of key order, naming the keys', async () => {
    const store = await lake('unordered', 2, false);
    const reversed = Object.assign(Object.create(store) as typeof store, {
      list: async function* (prefix: string) {
        const all = [];
        for await (const o of store.list(prefix)) all.push(o);
        yield* all.reverse();
      },
    });
    await expect(audit(reversed)).rejects.toThrow(/listed db\/cpu\/\S+ after db\/cpu\/\S+, out of key order/);
  });
});
