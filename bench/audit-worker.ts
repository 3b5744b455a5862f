/**
 * Child process of the audit-lake case (bench/audit-lake.ts): auditLake over planner-lake.ts's
 * LakeStore, every day handed to onDay and let go. Checks that it listed the whole lake and found
 * nothing (the lake has no defect), else fails. Prints one JSON line.
 */

import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { auditLake } from '../functions/core/audit.ts';
import { parseConfig } from '../functions/core/config.ts';
import type { RowContainment } from '../functions/core/engine.ts';
import type { AuditLakeRun, AuditLakeTask } from './audit-lake.ts';
import { peakRssBytes } from './peak-rss.ts';
import { LakeStore, lakeObjectCount } from './planner-lake.ts';

/** The lake has no folder to check by content: a call would mean the audit read what it need not. */
const NO_CONTENT_CHECK: RowContainment = {
  countMissing: async () => {
    throw new Error('the audit checked a folder by content on a lake that has none to check');
  },
};

async function main(): Promise<void> {
  const taskFile = process.argv[2];
  if (!taskFile) throw new Error('usage: node bench/audit-worker.ts <task.json>');
  const task = JSON.parse(await readFile(taskFile, 'utf8')) as AuditLakeTask;
  const shape = { tables: task.tables, years: task.years, now: task.now, latencyMs: 0 };
  const store = new LakeStore(shape);
  const baselineRssBytes = process.memoryUsage().rss;
  let days = 0;
  let files = 0;
  const start = performance.now();
  const report = await auditLake({
    store,
    config: parseConfig({}),
    clock: { now: () => new Date(task.now) },
    engine: NO_CONTENT_CHECK,
    workDir: join(tmpdir(), `audit-bench-${process.pid}`),
    onDay: (day) => {
      days++;
      files += day.files;
    },
  });
  const wallMs = performance.now() - start;
  const lakeObjects = lakeObjectCount(shape);
  if (files !== lakeObjects) throw new Error(`the audit counted ${files} files of ${lakeObjects}`);
  if (report.findings.length > 0)
    throw new Error(`findings on a sound lake: ${JSON.stringify(report.findings[0])}`);
  const run: AuditLakeRun = {
    ...task,
    lakeObjects,
    objectsListed: report.fix.listedObjects,
    days,
    findings: report.findings.length,
    peakObjectsHeld: report.peakObjectsHeld,
    listRequests: store.listRequests,
    wallMs,
    maxRssBytes: peakRssBytes(),
    baselineRssBytes,
  };
  process.stdout.write(`${JSON.stringify(run)}\n`);
}

await main();
