/**
 * The audit of a lake, ours or not: per table and day its files, bytes and rows, and every defect
 * found, each naming the object and the fix. Nothing is changed. What it checks:
 * - rows an output and raw files both hold, judged by content as repair judges them (findRepairs);
 * - half-compacted partitions: an output beside raw files older than it, with no job holding them
 *   (halfCompacted, the verdict `compactor verify` gives too);
 * - orphans: staging of no job, outputs of ours with no receipt, store-probe leftovers;
 * - receipts the objects no longer match: an output changed or gone (and not merged since);
 * - restored raw files: inputs a receipt says its job deleted, back at the size it read (a backup
 *   restored over the lake), whose rows the job's outputs hold;
 * - quarantine records whose objects are gone; receipts that do not read.
 *
 * Listing order keeps it sound while jobs run: staging is listed before the manifests are read
 * (a job writes its manifest before its staging), and the data before the receipts (a job writes
 * its receipt before its manifest goes).
 */

import type { JobToPrice, RepairFolderToPrice } from './cost/index.ts';
import { readExclusions } from './exclusions.ts';
import { halfCompacted } from './half-compacted.ts';
import type { DataFile } from './layout.ts';
import { JOB_ID, jobIdOfOutput, jobIdTime, stagingRoot } from './manifest/manifest.ts';
import type { ObjectSummary } from './object-store.ts';
import { pruneQuarantine } from './quarantine-lifecycle.ts';
import { listReceipts, type Receipt } from './receipts.ts';
import { findRepairs, type RepairCandidate, type RepairDeps } from './repair.ts';
import { stateFolder } from './state-root.ts';
import { ABANDONED_PROBE_MS } from './store-probe/store-probe.ts';

export const FINDING_KINDS = {
  duplicate: 'rows an output beside it already holds (by content)',
  'half-compacted': 'an output beside raw files older than it, no job holding them',
  'orphan-staging': 'staging of a job that has no manifest',
  'output-without-receipt': 'an output of ours whose job left no receipt',
  'probe-leftover': "a store probe's object it did not remove",
  'output-changed': 'an output its receipt records, at another size or version now',
  'output-missing': 'an output its receipt records, gone and not merged by a later job',
  restored: 'an input its job deleted, back at the size the job read (a restored backup)',
  'stale-quarantine-record': 'a quarantine record whose objects are gone',
  'invalid-receipt': 'a file under receipts/ that does not read as a receipt',
} as const;
export type FindingKind = keyof typeof FINDING_KINDS;

export interface Finding {
  readonly kind: FindingKind;
  /** The object (or folder) at fault. */
  readonly key: string;
  readonly detail: string;
  /** What fixes it. */
  readonly fix: string;
}

export interface AuditDay {
  readonly table: string;
  /** The day folder (data prefix included); outside a day: the month folder. */
  readonly day: string;
  readonly files: number;
  readonly bytes: number;
  /** Footer rows of its files; undefined when the caller reads no footers or one is unreadable. */
  readonly rows: number | undefined;
  readonly findings: number;
}

/** What fixing the findings takes, for the cost model (cost/fix.ts): repair, then a cycle. */
export interface AuditFix {
  /** Objects the data root's listing returned: repair lists them again. */
  readonly listedObjects: number;
  /** Each folder repair checks by content. */
  readonly repairs: readonly RepairFolderToPrice[];
  /** Half-compacted hours with raw files repair leaves: the hourly jobs that compact them. */
  readonly compactions: readonly JobToPrice[];
}

export interface AuditReport {
  readonly days: readonly AuditDay[];
  readonly findings: readonly Finding[];
  readonly receipts: number;
  readonly fix: AuditFix;
}

export interface AuditDeps extends RepairDeps {
  /** Footer rows of data files, by key; absent: the days show no rows. */
  readonly rowsOf?: (objects: readonly ObjectSummary[]) => Promise<ReadonlyMap<string, number | undefined>>;
}

const REPAIR = '`compactor repair` removes them once it has checked their rows by content';
const RUN = 'the next `compactor run` of its tier compacts them';

export async function auditLake(deps: AuditDeps): Promise<AuditReport> {
  const { store, config } = deps;
  const { layout } = config;
  const now = deps.clock.now().getTime();
  const findings: Finding[] = [];

  const staging: ObjectSummary[] = [];
  for await (const o of store.list(stagingRoot(layout))) staging.push(o);
  const data: ObjectSummary[] = [];
  let listedObjects = 0;
  for await (const o of store.list(layout.dataPrefix)) {
    listedObjects++;
    if (layout.isDataKey(o.key)) data.push(o);
  }
  const exclusions = await readExclusions(store, config);
  const listed = await listReceipts(store, config);

  const jobsWithManifest = new Set([
    ...exclusions.liveManifests.map((m) => m.jobId),
    ...exclusions.quarantinedManifests.map((m) => m.jobId),
    ...exclusions.jobIds,
  ]);
  const held = exclusions.liveManifests.map((m) => m.partition);
  const isHeld = (key: string) => held.some((p) => key.startsWith(p)) || exclusions.keys.has(key);

  // Staging of no job: the manifest was read after the listing, so a job in flight has one.
  for (const o of staging) {
    const jobId = o.key.slice(stagingRoot(layout).length).split('/')[0] ?? '';
    if (!jobsWithManifest.has(jobId)) {
      findings.push({
        kind: 'orphan-staging',
        key: o.key,
        detail: `staging of job ${jobId}, which has no live or quarantined manifest`,
        fix: 'nothing reads it: delete it (the next run of a job of that id never comes)',
      });
    }
  }

  const receipts: Receipt[] = [];
  for (const r of listed) {
    if ('receipt' in r) receipts.push(r.receipt);
    else
      findings.push({
        kind: 'invalid-receipt',
        key: r.key,
        detail: r.invalid,
        fix: 'restore it from a backup, or delete it',
      });
  }
  const lake = new Map(data.map((o) => [o.key, o]));
  findings.push(...receiptFindings(receipts, lake, isHeld));
  findings.push(...outputsWithoutReceipt(data, receipts, jobsWithManifest));

  for await (const o of store.list(stateFolder(layout.stateRoot, 'probe'))) {
    if (now - o.lastModified.getTime() > ABANDONED_PROBE_MS) {
      findings.push({
        kind: 'probe-leftover',
        key: o.key,
        detail: `written ${new Date(o.lastModified).toISOString()} by a probe cut short`,
        fix: 'the next store probe removes it',
      });
    }
  }
  for (const change of await pruneQuarantine(deps, { dryRun: true })) {
    findings.push({
      kind: 'stale-quarantine-record',
      key: change.recordKey,
      detail: change.reason,
      fix: 'the next run prunes it (or `compactor release --all`)',
    });
  }

  const candidates = await findRepairs(deps);
  for (const candidate of candidates) {
    for (const input of candidate.inputs) {
      findings.push({
        kind: 'duplicate',
        key: input.key,
        detail: `every row is also in ${candidate.evidence.map((e) => e.key).join(', ')}`,
        fix: REPAIR,
      });
    }
  }
  const duplicates = new Set(candidates.flatMap((c) => c.inputs.map((i) => i.key)));
  const compactions: JobToPrice[] = [];
  for (const partition of halfCompacted(config, data, isHeld)) {
    const left = data.filter((o) => {
      const file = layout.parse(o.key);
      return (
        file?.hourFolder === partition.folder && file.level === 0 && !isHeld(o.key) && !duplicates.has(o.key)
      );
    });
    if (left.length > 0) {
      compactions.push({
        tier: 'hourly',
        inputs: left.length,
        inputBytes: left.reduce((sum, o) => sum + o.size, 0),
        wave: 0,
      });
    }
    findings.push({
      kind: 'half-compacted',
      key: partition.folder,
      detail: `${partition.olderRaw} raw file(s) older than its newest output`,
      fix: `if the output holds their rows, ${REPAIR}; else ${RUN}`,
    });
  }

  return {
    days: await days(deps, data, findings),
    findings,
    receipts: receipts.length,
    fix: { listedObjects, repairs: candidates.map(repairShape), compactions },
  };
}

/** What repair downloads and deletes in a folder it checked. */
function repairShape(candidate: RepairCandidate): RepairFolderToPrice {
  return {
    outputs: candidate.evidence.length,
    inputs: candidate.inputs.length + candidate.kept.length,
    duplicates: candidate.inputs.length,
  };
}

/** Receipts against the lake: outputs changed or gone, inputs restored. */
function receiptFindings(
  receipts: readonly Receipt[],
  lake: ReadonlyMap<string, ObjectSummary>,
  isHeld: (key: string) => boolean,
): Finding[] {
  const findings: Finding[] = [];
  // An output a later job took as input was merged, not lost.
  const merged = new Set(receipts.flatMap((r) => r.inputs.map((i) => i.key)));
  for (const r of receipts) {
    for (const output of r.outputs) {
      const now = lake.get(output.key);
      if (now === undefined) {
        if (merged.has(output.key) || isHeld(output.key)) continue;
        findings.push({
          kind: 'output-missing',
          key: output.key,
          detail: `job ${r.jobId} published it (${output.rows} rows); it is gone and no later job merged it`,
          fix: 'restore it from a backup (its ETag and checksum are in the receipt)',
        });
      } else if (now.size !== output.size || (output.etag !== undefined && now.etag !== output.etag)) {
        findings.push({
          kind: 'output-changed',
          key: output.key,
          detail: `job ${r.jobId} published it at ${output.size} bytes${output.etag ? `, ETag ${output.etag}` : ''}; it is now ${now.size} bytes, ETag ${now.etag}`,
          fix: 'something other than the compactor rewrote it: restore it from a backup',
        });
      }
    }
    const left = new Set([...(r.keptInputs ?? []), ...(r.quarantinedInputs ?? [])].map((k) => k.key));
    for (const input of r.inputs) {
      const now = lake.get(input.key);
      // A restore writes the object anew: S3 gives it the same ETag only where the ETag is the
      // content's MD5 (not under SSE-KMS), so the size is what tells; repair then judges by content.
      if (now === undefined || left.has(input.key) || now.size !== input.size || isHeld(input.key)) continue;
      const same = now.etag === input.etag ? 'the very version' : 'the same size';
      findings.push({
        kind: 'restored',
        key: input.key,
        detail: `job ${r.jobId} merged it into ${r.outputs.map((o) => o.key).join(', ') || 'nothing (it expired)'} and deleted it at ${r.inputsDeletedAt}; it is back at ${same} (a restored backup?)`,
        fix:
          r.outputs.length > 0 ? REPAIR : 'its retention rule expired it: the next retention run deletes it',
      });
    }
  }
  return findings;
}

/**
 * Outputs of ours (a job id in the name) with no receipt and no manifest. Only jobs from the
 * lake's first receipt on: older jobs predate receipts, or their receipts have expired.
 */
function outputsWithoutReceipt(
  data: readonly ObjectSummary[],
  receipts: readonly Receipt[],
  jobsWithManifest: ReadonlySet<string>,
): Finding[] {
  if (receipts.length === 0) return [];
  const receipted = new Set(receipts.map((r) => r.jobId));
  const [first = ''] = receipts.map((r) => r.jobId).sort();
  const since = first.slice(0, jobIdTime(new Date(0)).length);
  const findings: Finding[] = [];
  for (const o of data) {
    const jobId = jobIdOfOutput(o.key);
    if (jobId === undefined || !JOB_ID.test(jobId) || receipted.has(jobId) || jobsWithManifest.has(jobId))
      continue;
    if (jobId < since) continue;
    findings.push({
      kind: 'output-without-receipt',
      key: o.key,
      detail: `job ${jobId} left no receipt, though jobs since ${since} did`,
      fix: 'nothing records which rows it moved: check it with `compactor verify`',
    });
  }
  return findings;
}

/** Files, bytes and rows per table and day, with how many findings name something in it. */
async function days(
  deps: AuditDeps,
  data: readonly ObjectSummary[],
  findings: readonly Finding[],
): Promise<AuditDay[]> {
  const { layout } = deps.config;
  const rows = deps.rowsOf ? await deps.rowsOf(data) : undefined;
  const byDay = new Map<
    string,
    { table: string; day: string; files: number; bytes: number; rows: number | undefined }
  >();
  const dayOf = (file: DataFile | undefined) => file?.dayFolder ?? file?.monthFolder;
  for (const o of data) {
    const file = layout.parse(o.key);
    const day = dayOf(file);
    if (!file || !day) continue;
    const entry = byDay.get(day) ?? {
      table: file.table,
      day,
      files: 0,
      bytes: 0,
      rows: rows ? 0 : undefined,
    };
    entry.files++;
    entry.bytes += o.size;
    const n = rows?.get(o.key);
    entry.rows = entry.rows === undefined || n === undefined ? undefined : entry.rows + n;
    byDay.set(day, entry);
  }
  return [...byDay.values()].map((d) => ({
    ...d,
    findings: findings.filter((f) => f.key.startsWith(d.day)).length,
  }));
}
