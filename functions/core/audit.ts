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
 * (a job writes its manifest before its staging); the manifests are read again once the data is
 * listed, and what a job held at either time is not reported; and an output that seems lost or
 * unreceipted has its day's receipts listed again after its day's data (a job writes its receipt
 * before its manifest goes).
 */

import { join } from 'node:path';
import { crc32OfFile } from './checksum.ts';
import type { CompactorConfig } from './config.ts';
import type { JobToPrice, RepairFolderToPrice } from './cost/index.ts';
import { type Exclusions, isExcluded, readExclusions } from './exclusions.ts';
import { halfCompacted } from './half-compacted.ts';
import type { DataFile, Layout } from './layout.ts';
import {
  JOB_ID,
  jobIdOfOutput,
  jobIdTime,
  manifestKey,
  receiptOf,
  receiptsRoot,
  stagingRoot,
} from './manifest/manifest.ts';
import { type Checksum, compareKeys, type ObjectStore, type ObjectSummary } from './object-store.ts';
import { parseDataObject } from './parquet-sniff.ts';
import { QUARANTINED_INPUT_FIX } from './quarantine.ts';
import { pruneQuarantine } from './quarantine-lifecycle.ts';
import { type ListedReceipt, type Receipt, readReceipts } from './receipts.ts';
import {
  addToRepairFolders,
  checkRepairFolders,
  type RepairCandidate,
  type RepairDeps,
  type RepairFolder,
} from './repair.ts';
import { inScratchFolder } from './scratch.ts';
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
  unreadable: 'a data file whose footer does not read: no reader can read it',
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
  /** The most data objects (and receipts) the audit held at once: one day's, and its month's. */
  readonly peakObjectsHeld: number;
}

export interface AuditDeps extends RepairDeps {
  /** Footer rows of data files, by key; absent: the days show no rows. */
  readonly rowsOf?: (objects: readonly ObjectSummary[]) => Promise<ReadonlyMap<string, number | undefined>>;
  /**
   * Each day's row once its folder is done. Given, the report holds no days, and each row's
   * `findings` counts what was found in it before the manifests were read again at the end.
   */
  readonly onDay?: (day: AuditDay) => void;
}

const REPAIR = '`compactor repair` removes them once it has checked their rows by content';
const RUN = 'the next `compactor run` of its tier compacts them';

/**
 * The audit streams the data listing: the store lists in key order and every key of a day folder
 * (or a month folder) starts with its name, so one day is read, judged and let go before the next,
 * and only its aggregate and findings stay. Its receipts are read beside it (a job's receipt sits
 * under its partition), and the monthly tier's folder, which spans days, keeps only the month's
 * daily and monthly outputs. A defect a job in flight could explain is judged again against the
 * manifests read when the listing ends (what a job holds at the start or at the end is not reported).
 */
export async function auditLake(deps: AuditDeps): Promise<AuditReport> {
  const { store, config } = deps;
  const { layout } = config;
  const now = deps.clock.now().getTime();

  const staging: ObjectSummary[] = [];
  for await (const o of store.list(stagingRoot(layout))) staging.push(o);
  const before = await readExclusions(store, config);
  const orphans: Finding[] = [];
  // Staging of no job: the manifest was read after the listing, so a job in flight has one.
  const withManifest = jobsWithManifest([before]);
  for (const o of staging) {
    const jobId = o.key.slice(stagingRoot(layout).length).split('/')[0] ?? '';
    if (!withManifest.has(jobId)) {
      orphans.push({
        kind: 'orphan-staging',
        key: o.key,
        detail: `staging of job ${jobId}, which has no live or quarantined manifest`,
        fix: 'nothing reads it: delete it (the next run of a job of that id never comes)',
      });
    }
  }

  const index = await indexReceipts(store, config);
  const lake = new LakeAudit(deps, before, index);
  let listedObjects = 0;
  let previous = '';
  for await (const o of store.list(layout.dataPrefix)) {
    // A day at a time holds only if keys come in order: S3 general purpose buckets list in
    // lexicographical order of key names, directory buckets do not
    // (https://docs.aws.amazon.com/AmazonS3/latest/API/API_ListObjectsV2.html).
    if (compareKeys(o.key, previous) < 0) {
      throw new Error(
        `audit: the store listed ${o.key} after ${previous}, out of key order (an S3 directory bucket?); the audit reads a lake a day at a time and needs keys in order`,
      );
    }
    previous = o.key;
    listedObjects++;
    if (layout.isDataKey(o.key)) await lake.add(o);
  }
  await lake.endUnit();
  // Receipts of folders whose data is all gone.
  for (const unit of index.units) if (!lake.visited.has(unit)) await lake.receiptsOnly(unit);

  const after = await readExclusions(store, config);
  const holds = new Holds([before, after]);
  const found = lake.settle(holds);

  const state: Finding[] = [];
  for await (const o of store.list(stateFolder(layout.stateRoot, 'probe'))) {
    if (now - o.lastModified.getTime() > ABANDONED_PROBE_MS) {
      state.push({
        kind: 'probe-leftover',
        key: o.key,
        detail: `written ${new Date(o.lastModified).toISOString()} by a probe cut short`,
        fix: 'the next store probe removes it',
      });
    }
  }
  for (const change of await pruneQuarantine(deps, { dryRun: true })) {
    state.push({
      kind: 'stale-quarantine-record',
      key: change.recordKey,
      detail: change.reason,
      fix: 'the next run prunes it (or `compactor release --all`)',
    });
  }

  const findings = [
    ...orphans,
    ...lake.invalidReceipts,
    ...lake.unreadable,
    ...found.receipts,
    ...found.withoutReceipt,
    ...state,
    ...found.duplicates,
    ...found.halfCompacted,
  ];
  const days = [...lake.days.values()].map((d) => ({
    ...d,
    findings: findings.filter((f) => f.key.startsWith(d.day)).length,
  }));
  return {
    days,
    findings,
    receipts: lake.receipts,
    fix: { listedObjects, repairs: found.repairs, compactions: found.compactions },
    peakObjectsHeld: lake.peakObjectsHeld,
  };
}

/** What jobs hold, by the manifests read at the start and at the end of the listing. */
class Holds {
  readonly #all: readonly Exclusions[];
  readonly #partitions: readonly string[];
  readonly jobsWithManifest: ReadonlySet<string>;

  constructor(all: readonly Exclusions[]) {
    this.#all = all;
    this.#partitions = all.flatMap((e) => e.liveManifests.map((m) => m.partition));
    this.jobsWithManifest = jobsWithManifest(all);
  }

  /** A key under a partition a live manifest leases, or named by a manifest or quarantine. */
  isHeld = (key: string): boolean =>
    this.#partitions.some((p) => key.startsWith(p)) || this.#all.some((e) => e.keys.has(key));

  /** Whether repair would leave this candidate alone. */
  excludes(layout: Layout, candidate: RepairCandidate): boolean {
    return this.#all.some(
      (e) =>
        e.leasedManifests.has(manifestKey(layout, candidate.tier, candidate.partition)) ||
        [...candidate.inputs, ...candidate.evidence].some((o) => isExcluded(e, o.key)),
    );
  }
}

function jobsWithManifest(all: readonly Exclusions[]): Set<string> {
  return new Set(
    all.flatMap((e) => [
      ...e.liveManifests.map((m) => m.jobId),
      ...e.quarantinedManifests.map((m) => m.jobId),
      ...e.jobIds,
    ]),
  );
}

/**
 * The receipts' names, listed without reading them: the first job with a receipt (older outputs
 * predate receipts, or theirs expired) and the folders (units) that hold any.
 */
async function indexReceipts(
  store: ObjectStore,
  config: CompactorConfig,
): Promise<{ since: string | undefined; units: Set<string> }> {
  const { layout } = config;
  let first: string | undefined;
  const units = new Set<string>();
  for await (const o of store.list(receiptsRoot(layout))) {
    const named = receiptOf(layout, o.key);
    if (!named) continue;
    if (first === undefined || named.jobId < first) first = named.jobId;
    const unit = folderAt(layout, named.partition, unitDepth(layout));
    if (unit) units.add(unit);
  }
  return { since: first?.slice(0, jobIdTime(new Date(0)).length), units };
}

/** Template segments (table included) of an hour folder. */
function hourDepth(layout: Layout): number {
  return layout.template.slice(0, -1).split('/').length;
}

/** The unit the audit reads receipts by: the month folder where the layout has one, else the day. */
function unitDepth(layout: Layout): number {
  return hourDepth(layout) - (layout.hasMonthFolder ? 2 : 1);
}

/** The folder `depth` segments below the data prefix that holds `folder`, or undefined if above it. */
function folderAt(layout: Layout, folder: string, depth: number): string | undefined {
  const parts = folder.slice(layout.dataPrefix.length).split('/').filter(Boolean);
  if (parts.length < depth) return undefined;
  return `${layout.dataPrefix}${parts.slice(0, depth).join('/')}/`;
}

interface DayRow {
  table: string;
  day: string;
  files: number;
  bytes: number;
  rows: number | undefined;
}

/** The state of the streaming pass: the day and unit being read, and what was found so far. */
class LakeAudit {
  readonly #deps: AuditDeps;
  readonly #layout: Layout;
  readonly #holds: Holds;
  readonly #since: string | undefined;
  readonly days = new Map<string, DayRow>();
  readonly visited = new Set<string>();
  readonly invalidReceipts: Finding[] = [];
  /** Data files whose footer rowsOf could not read. */
  readonly unreadable: Finding[] = [];
  receipts = 0;
  peakObjectsHeld = 0;

  // The day (or month folder) being read.
  #group: string | undefined;
  #dayObjects: { object: ObjectSummary; file: DataFile }[] = [];
  // The unit (month, or day) being read: its receipts' names by day, its own receipts, its
  // monthly tier's folder.
  #unit: string | undefined;
  #unitKeys = new Map<string, string[]>();
  #unitReceipts: Receipt[] = [];
  #unitLake = new Map<string, ObjectSummary>();
  #monthFolders = new Map<string, RepairFolder>();

  // Found, judged again against the manifests at the end.
  readonly #candidates: RepairCandidate[] = [];
  readonly #halfHours: ObjectSummary[][] = [];
  readonly #receiptFindings: Finding[] = [];
  readonly #withoutReceipt: { finding: Finding; jobId: string }[] = [];

  readonly #withReceipts: ReadonlySet<string>;

  constructor(deps: AuditDeps, before: Exclusions, index: { since: string | undefined; units: Set<string> }) {
    this.#deps = deps;
    this.#layout = deps.config.layout;
    this.#holds = new Holds([before]);
    this.#exclusions = before;
    this.#since = index.since;
    this.#withReceipts = index.units;
  }

  async add(object: ObjectSummary): Promise<void> {
    const file = this.#layout.parse(object.key);
    const group = file?.dayFolder ?? file?.monthFolder;
    // Not a file of the layout: no day, no folder of a tier, no receipt names it.
    if (!file || !group) return;
    const unit = folderAt(this.#layout, group, unitDepth(this.#layout));
    if (group !== this.#group) await this.#endGroup();
    if (unit !== this.#unit) {
      await this.endUnit();
      if (unit) await this.#startUnit(unit);
    }
    this.#group = group;
    this.#dayObjects.push({ object, file });
    if (file.level >= 2) this.#unitLake.set(object.key, object);
    this.peakObjectsHeld = Math.max(
      this.peakObjectsHeld,
      this.#dayObjects.length + this.#unitLake.size + this.#unitReceipts.length,
    );
  }

  async #startUnit(unit: string): Promise<void> {
    const { store, config } = this.#deps;
    this.#unit = unit;
    // A unit that held no receipt when they were indexed is not listed: a receipt written since
    // can only add findings, and an output that seems unreceipted lists its day's again.
    if (!this.#withReceipts.has(unit)) return;
    this.visited.add(unit);
    const unitOwn: string[] = [];
    const hourly = hourDepth(this.#layout);
    for await (const o of store.list(
      `${receiptsRoot(this.#layout)}${unit.slice(this.#layout.dataPrefix.length)}`,
    )) {
      const named = receiptOf(this.#layout, o.key);
      if (!named) continue;
      const day = folderAt(this.#layout, named.partition, hourly - 1);
      if (day === undefined) unitOwn.push(o.key);
      else this.#unitKeys.set(day, [...(this.#unitKeys.get(day) ?? []), o.key]);
    }
    this.#unitReceipts = this.#read(await readReceipts(store, config, unitOwn));
  }

  /** The unit's receipts of days with no data left, its own receipts, its monthly tier's folder. */
  async endUnit(): Promise<void> {
    await this.#endGroup();
    if (this.#unit === undefined) return;
    const { store, config } = this.#deps;
    for (const keys of this.#unitKeys.values()) {
      const receipts = this.#read(await readReceipts(store, config, keys));
      await this.#judgeReceipts([...receipts, ...this.#unitReceipts], receipts, new Map());
    }
    await this.#judgeReceipts(this.#unitReceipts, this.#unitReceipts, this.#unitLake);
    this.#candidates.push(...(await checkRepairFolders(this.#deps, this.#monthFolders, this.#exclusions)));
    this.#unit = undefined;
    this.#unitKeys = new Map();
    this.#unitReceipts = [];
    this.#unitLake = new Map();
    this.#monthFolders = new Map();
  }

  async receiptsOnly(unit: string): Promise<void> {
    await this.#startUnit(unit);
    await this.endUnit();
  }

  /** The day (or month folder) read: its row, its folders checked by content, its hours, its receipts. */
  async #endGroup(): Promise<void> {
    const group = this.#group;
    const files = this.#dayObjects;
    this.#group = undefined;
    this.#dayObjects = [];
    if (group === undefined || files.length === 0) return;
    const { store, config } = this.#deps;
    const objects = files.map((f) => f.object);
    const first = files[0]?.file;
    const rows = this.#deps.rowsOf ? await this.#deps.rowsOf(objects) : undefined;
    const row = this.days.get(group) ?? {
      table: first?.table ?? '',
      day: group,
      files: 0,
      bytes: 0,
      rows: rows ? 0 : undefined,
    };
    let found = 0;
    for (const { object } of files) {
      row.files++;
      row.bytes += object.size;
      const n = rows?.get(object.key);
      row.rows = row.rows === undefined || n === undefined ? undefined : row.rows + n;
      if (rows === undefined || n !== undefined) continue;
      // A job in flight holds it (and quarantines it if it is bad), or it changed or went since
      // it was listed (a job deleted it): not this file's finding.
      if (this.#holds.isHeld(object.key)) continue;
      if ((await this.#deps.store.head(object.key))?.etag !== object.etag) continue;
      found++;
      this.unreadable.push({
        kind: 'unreadable',
        key: object.key,
        detail: `${object.size} bytes whose Parquet footer does not read`,
        fix: this.#exclusions.quarantinedInputs.has(object.key)
          ? `compaction quarantined it (\`compactor status\` gives the reason): ${QUARANTINED_INPUT_FIX}`
          : 'replace or remove it: compaction quarantines it and never merges or deletes it',
      });
    }
    const before = this.#exclusions;
    const folders = new Map<string, RepairFolder>();
    for (const { object } of files) {
      const file = await parseDataObject(store, this.#layout, object);
      if (!file) continue;
      addToRepairFolders(folders, object, file);
    }
    // The monthly tier's folder spans the month: checked when the unit ends.
    for (const [id, folder] of folders) {
      if (folder.tier !== 'monthly') continue;
      folders.delete(id);
      const month = this.#monthFolders.get(id) ?? { tier: folder.tier, inputs: [], outputs: [] };
      month.inputs.push(...folder.inputs);
      month.outputs.push(...folder.outputs);
      this.#monthFolders.set(id, month);
    }
    const candidates = await checkRepairFolders(this.#deps, folders, before);
    this.#candidates.push(...candidates);
    found += candidates.reduce((n, c) => n + c.inputs.length, 0);
    for (const hour of halfCompacted(config, objects, this.#holds.isHeld)) {
      this.#halfHours.push(files.filter((f) => f.file.hourFolder === hour.folder).map((f) => f.object));
      found++;
    }
    const lake = new Map(objects.map((o) => [o.key, o]));
    const keys = this.#unitKeys.get(group) ?? [];
    this.#unitKeys.delete(group);
    let receipts = this.#read(await readReceipts(store, config, keys));
    // Once per output version: the day's receipts may be judged twice.
    const same = onceEach((object: ObjectSummary, recorded: Checksum) =>
      sameContent(this.#deps, object, recorded),
    );
    const judge = async () => ({
      receipts: await receiptFindings(
        same,
        [...receipts, ...this.#unitReceipts],
        receipts,
        lake,
        this.#holds.isHeld,
      ),
      withoutReceipt: this.#outputsWithoutReceipt(objects, [...receipts, ...this.#unitReceipts]),
    });
    let judged = await judge();
    // A job that ended after the unit's receipts were listed left its receipt before its manifest
    // went: list the day's again before calling an output lost or unreceipted.
    if (judged.receipts.some((f) => f.kind === 'output-missing') || judged.withoutReceipt.length > 0) {
      const again: string[] = [];
      for await (const o of store.list(
        `${receiptsRoot(this.#layout)}${group.slice(this.#layout.dataPrefix.length)}`,
      )) {
        if (receiptOf(this.#layout, o.key) && !keys.includes(o.key)) again.push(o.key);
      }
      if (again.length > 0) {
        receipts = [...receipts, ...this.#read(await readReceipts(store, config, again))];
        judged = await judge();
      }
    }
    this.#receiptFindings.push(...judged.receipts);
    this.#withoutReceipt.push(...judged.withoutReceipt);
    found += judged.receipts.length + judged.withoutReceipt.length;
    if (this.#deps.onDay) this.#deps.onDay({ ...row, findings: found });
    else this.days.set(group, row);
  }

  #exclusions: Exclusions;

  /** Receipts read: invalid ones are findings now; the count goes to the report. */
  #read(listed: readonly ListedReceipt[]): Receipt[] {
    const receipts: Receipt[] = [];
    for (const r of listed) {
      if ('receipt' in r) receipts.push(r.receipt);
      else
        this.invalidReceipts.push({
          kind: 'invalid-receipt',
          key: r.key,
          detail: r.invalid,
          fix: 'restore it from a backup, or delete it',
        });
    }
    this.receipts += receipts.length;
    return receipts;
  }

  async #judgeReceipts(
    all: readonly Receipt[],
    own: readonly Receipt[],
    lake: ReadonlyMap<string, ObjectSummary>,
  ): Promise<void> {
    this.#receiptFindings.push(
      ...(await receiptFindings(
        (object, recorded) => sameContent(this.#deps, object, recorded),
        all,
        own,
        lake,
        this.#holds.isHeld,
      )),
    );
  }

  /**
   * Outputs of ours (a job id in the name) with no receipt and no manifest. Only jobs from the
   * lake's first receipt on: older jobs predate receipts, or their receipts have expired.
   */
  #outputsWithoutReceipt(
    objects: readonly ObjectSummary[],
    receipts: readonly Receipt[],
  ): { finding: Finding; jobId: string }[] {
    const since = this.#since;
    if (since === undefined) return [];
    const receipted = new Set(receipts.map((r) => r.jobId));
    const found: { finding: Finding; jobId: string }[] = [];
    for (const o of objects) {
      const jobId = jobIdOfOutput(o.key);
      if (jobId === undefined || !JOB_ID.test(jobId) || receipted.has(jobId)) continue;
      if (this.#holds.jobsWithManifest.has(jobId) || jobId < since) continue;
      found.push({
        jobId,
        finding: {
          kind: 'output-without-receipt',
          key: o.key,
          detail: `job ${jobId} left no receipt, though jobs since ${since} did`,
          fix: 'nothing records which rows it moved: check it with `compactor verify`',
        },
      });
    }
    return found;
  }

  /** The findings, judged again against what jobs held at the start or at the end. */
  settle(holds: Holds): {
    receipts: Finding[];
    withoutReceipt: Finding[];
    duplicates: Finding[];
    halfCompacted: Finding[];
    repairs: RepairFolderToPrice[];
    compactions: JobToPrice[];
  } {
    const { config } = this.#deps;
    const candidates = this.#candidates
      .filter((c) => !holds.excludes(this.#layout, c))
      .sort((a, b) => compareKeys(`${a.tier}:${a.partition}`, `${b.tier}:${b.partition}`));
    const duplicates = candidates.flatMap((candidate) =>
      candidate.inputs.map(
        (input): Finding => ({
          kind: 'duplicate',
          key: input.key,
          detail: `every row is also in ${candidate.evidence.map((e) => e.key).join(', ')}`,
          fix: REPAIR,
        }),
      ),
    );
    const removed = new Set(duplicates.map((f) => f.key));
    const half: Finding[] = [];
    const compactions: JobToPrice[] = [];
    for (const objects of this.#halfHours) {
      for (const partition of halfCompacted(config, objects, holds.isHeld)) {
        const left = objects.filter(
          (o) => this.#layout.parse(o.key)?.level === 0 && !holds.isHeld(o.key) && !removed.has(o.key),
        );
        if (left.length > 0) {
          compactions.push({
            tier: 'hourly',
            inputs: left.length,
            inputBytes: left.reduce((sum, o) => sum + o.size, 0),
            wave: 0,
          });
        }
        half.push({
          kind: 'half-compacted',
          key: partition.folder,
          detail: `${partition.olderRaw} raw file(s) older than its newest output`,
          fix: `if the output holds their rows, ${REPAIR}; else ${RUN}`,
        });
      }
    }
    return {
      receipts: this.#receiptFindings.filter((f) => !holds.isHeld(f.key)),
      withoutReceipt: this.#withoutReceipt
        .filter((w) => !holds.jobsWithManifest.has(w.jobId))
        .map((w) => w.finding),
      duplicates,
      halfCompacted: half,
      repairs: candidates.map(repairShape),
      compactions,
    };
  }
}

/** What repair downloads and deletes in a folder it checked. */
function repairShape(candidate: RepairCandidate): RepairFolderToPrice {
  return {
    outputs: candidate.evidence.length,
    inputs: candidate.inputs.length + candidate.kept.length,
    duplicates: candidate.inputs.length,
  };
}

/**
 * `receipts` against the lake (`lake`: the objects they can name): outputs changed or gone, inputs
 * restored. An output at its recorded size under another ETag is a finding only if its content
 * changed too (sameContent): a copied or moved lake, or a store that gives a copy a new ETag,
 * keeps the bytes the job wrote.
 */
async function receiptFindings(
  sameAsRecorded: (object: ObjectSummary, recorded: Checksum) => Promise<boolean>,
  all: readonly Receipt[],
  receipts: readonly Receipt[],
  lake: ReadonlyMap<string, ObjectSummary>,
  isHeld: (key: string) => boolean,
): Promise<Finding[]> {
  const findings: Finding[] = [];
  // An output a later job took as input was merged, not lost: such a job's receipt is in `all`
  // (the same day's, or the month's).
  const merged = new Set(all.flatMap((r) => r.inputs.map((i) => i.key)));
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
      } else if (
        now.size !== output.size ||
        (output.etag !== undefined &&
          now.etag !== output.etag &&
          !(await sameAsRecorded(now, output.checksum)))
      ) {
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
 * Whether `object` holds the bytes whose full-object CRC32 a receipt recorded: by the checksum the
 * store keeps for it (S3 keeps it through a copy), else by reading it.
 */
async function sameContent(
  deps: Pick<RepairDeps, 'store' | 'workDir'>,
  object: ObjectSummary,
  recorded: Checksum,
): Promise<boolean> {
  const { store, workDir } = deps;
  const head = await store.head(object.key);
  // Gone since it was listed: a later job merged it, or the next audit says what happened.
  if (head === undefined) return true;
  if (head.checksum !== undefined) return head.checksum.value === recorded.value;
  // Streamed through a file: an output may be larger than memory.
  return inScratchFolder(workDir, 'audit-', async (dir) => {
    const path = join(dir, 'output');
    await store.getToFile(object.key, path, { ifMatch: head.etag });
    return (await crc32OfFile(path)).value === recorded.value;
  });
}

/** `check`, asked once per object version and checksum; later asks get the first answer. */
function onceEach(
  check: (object: ObjectSummary, recorded: Checksum) => Promise<boolean>,
): (object: ObjectSummary, recorded: Checksum) => Promise<boolean> {
  const verdicts = new Map<string, Promise<boolean>>();
  return (object, recorded) => {
    const id = `${object.key}\u0000${object.etag}\u0000${recorded.value}`;
    let verdict = verdicts.get(id);
    if (verdict === undefined) {
      verdict = check(object, recorded);
      verdicts.set(id, verdict);
    }
    return verdict;
  };
}
