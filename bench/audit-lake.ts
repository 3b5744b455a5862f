/**
 * The audit at lake scale: `compactor audit`'s core (auditLake) over the planner bench's synthetic
 * lake (bench/planner-lake.ts, about 10M objects), in its own process with V8's old space capped
 * as on the plan Lambda, so its peak RSS is the audit's alone. The lake holds no folder with an
 * output beside its tier's inputs, so nothing is read by content (the worker's engine refuses to be
 * called) and no footer is read: what is measured is the streaming pass over the listing, its
 * per-day verdicts and its receipt listings. LIST latency is not waited (0 ms): the question is
 * memory; the wall time is the CPU of the audit and of the synthetic store generating keys.
 */

import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { runChild } from './child.ts';
import { LAKE_TARGETS, PLAN_LAMBDA_HEAP_MB } from './planner-scale.ts';

export interface AuditLakeTask {
  readonly tables: number;
  readonly years: number;
  readonly now: number;
}

export interface AuditLakeRun extends AuditLakeTask {
  readonly lakeObjects: number;
  readonly objectsListed: number;
  readonly days: number;
  readonly findings: number;
  readonly peakObjectsHeld: number;
  readonly listRequests: number;
  readonly wallMs: number;
  readonly maxRssBytes: number;
  readonly baselineRssBytes: number;
}

export interface AuditLakeResult extends AuditLakeRun {
  readonly heapMb: number;
}

/** The same bound as the plan step's on this lake. */
export const AUDIT_PEAK_RSS_MB = LAKE_TARGETS.peakRssMb;

export async function runAuditLake(
  dir: string,
  shape: { readonly tables: number; readonly years: number },
): Promise<AuditLakeResult> {
  await mkdir(dir, { recursive: true });
  const task: AuditLakeTask = { ...shape, now: Date.UTC(2026, 0, 15, 12, 10) };
  const run = await runChild<AuditLakeRun>('audit-worker.ts', task, join(dir, 'audit-lake.json'), {}, [
    `--max-old-space-size=${PLAN_LAMBDA_HEAP_MB}`,
  ]);
  return { ...run, heapMb: PLAN_LAMBDA_HEAP_MB };
}

const MIB = 2 ** 20;
const met = (r: AuditLakeResult) => r.maxRssBytes / MIB <= AUDIT_PEAK_RSS_MB;

/** The log lines of the section. */
export function auditLakeRows(r: AuditLakeResult): string[] {
  return [
    `audit at lake scale: ${r.objectsListed.toLocaleString('en-US')} objects listed, ${r.days.toLocaleString('en-US')} days, ${r.findings} finding(s); ` +
      `peak RSS ${(r.maxRssBytes / MIB).toFixed(0)} MB (baseline ${(r.baselineRssBytes / MIB).toFixed(0)} MB) with a ${r.heapMb} MB heap, ` +
      `at most ${r.peakObjectsHeld.toLocaleString('en-US')} objects held, ${(r.wallMs / 1000).toFixed(1)} s, ${r.listRequests.toLocaleString('en-US')} LIST requests; ` +
      `target <= ${AUDIT_PEAK_RSS_MB} MB: ${met(r) ? 'met' : 'not met'}`,
  ];
}

/** Target row (bench/report-targets.ts). */
export function auditLakeTargets(r: AuditLakeResult): { name: string; value: string; met: boolean }[] {
  return [
    {
      name: `audit, ${(r.lakeObjects / 1e6).toFixed(1)}M-object lake: <= ${AUDIT_PEAK_RSS_MB} MB peak RSS`,
      value: `${(r.maxRssBytes / MIB).toFixed(0)} MB with a ${r.heapMb} MB heap, ${r.peakObjectsHeld.toLocaleString('en-US')} objects held at most, ${(r.wallMs / 1000).toFixed(1)} s`,
      met: met(r),
    },
  ];
}

/** The bench/results.md section. */
export function auditLakeMarkdown(r: AuditLakeResult): string[] {
  return [
    '## Audit at lake scale',
    '',
    `\`compactor audit\`'s core over the planner's lake (${r.lakeObjects.toLocaleString('en-US')} objects, ${r.tables} tables, ${r.years} years), in its own process with V8's old space at ${r.heapMb} MB; ` +
      'no content check (no folder holds an output beside its inputs) and no footer read, LIST latency not waited. ' +
      `It streams the listing a day at a time: ${r.days.toLocaleString('en-US')} days, at most ${r.peakObjectsHeld.toLocaleString('en-US')} objects held at once.`,
    '',
    '| objects listed | days | findings | LIST requests | wall s | peak RSS MB | target |',
    '| ---: | ---: | ---: | ---: | ---: | ---: | --- |',
    `| ${r.objectsListed.toLocaleString('en-US')} | ${r.days.toLocaleString('en-US')} | ${r.findings} | ${r.listRequests.toLocaleString('en-US')} | ${(r.wallMs / 1000).toFixed(1)} | ${(r.maxRssBytes / MIB).toFixed(0)} | <= ${AUDIT_PEAK_RSS_MB} MB: ${met(r) ? 'met' : 'not met'} |`,
    '',
  ];
}
