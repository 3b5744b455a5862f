/**
 * The manifest's key scheme: where manifests, staging and quarantine records live under the state
 * root, what a job's outputs are named, which keys fit every store, and the job ids they carry.
 */

import { createHash } from 'node:crypto';
import { JOB_KINDS, type JobKind, type TierName } from '../config.ts';
import { ManifestConflictError } from '../errors.ts';
import { compactDate, type DataFile, type Layout } from '../layout.ts';
import { stateFolder } from '../state-root.ts';
import { outputFolderOf, partitionOf, TIER_SPECS, tierFolder, tierPeriod } from '../tiers.ts';

export function manifestsRoot(layout: Layout): string {
  return stateFolder(layout.stateRoot, 'manifests');
}

export function manifestKey(layout: Layout, tier: JobKind, partition: string): string {
  return `${manifestsRoot(layout)}${tier}/${partition.slice(layout.dataPrefix.length, -1)}.json`;
}

export function stagingRoot(layout: Layout): string {
  return stateFolder(layout.stateRoot, 'staging');
}

export function stagingPrefix(layout: Layout, jobId: string): string {
  return `${stagingRoot(layout)}${jobId}/`;
}

export function quarantineRoot(layout: Layout): string {
  return stateFolder(layout.stateRoot, 'quarantine');
}

export function quarantinedManifestKey(layout: Layout, manifestKeyValue: string, stamp: string): string {
  const relative = manifestKeyValue.slice(manifestsRoot(layout).length).replace(/\.json$/, '');
  return `${quarantinedManifestsRoot(layout)}${relative}/${stamp}.json`;
}

/** Records of quarantined jobs: `<tier>/<partition>/<stamp>.json` (quarantinedManifestKey). */
export function quarantinedManifestsRoot(layout: Layout): string {
  return `${quarantineRoot(layout)}manifests/`;
}

export function receiptsRoot(layout: Layout): string {
  return stateFolder(layout.stateRoot, 'receipts');
}

/**
 * A committed job's receipt: under its partition's path, so one listing finds a day's receipts
 * and its hours'; named by the job id (which sorts by the job's start) and its tier.
 */
export function receiptKey(layout: Layout, tier: JobKind, partition: string, jobId: string): string {
  return `${receiptsRoot(layout)}${partition.slice(layout.dataPrefix.length)}${jobId}.${tier}.json`;
}

/** The partition, job id and tier a receipt key names (receiptKey read backwards), or undefined. */
export function receiptOf(
  layout: Layout,
  key: string,
): { partition: string; jobId: string; tier: JobKind } | undefined {
  const root = receiptsRoot(layout);
  if (!key.startsWith(root)) return undefined;
  const slash = key.lastIndexOf('/');
  const match = /^(.+)\.([a-z]+)\.json$/.exec(key.slice(slash + 1));
  const jobId = match?.[1];
  const tier = match?.[2] as JobKind | undefined;
  if (jobId === undefined || tier === undefined || !JOB_ID.test(jobId) || !JOB_KINDS.includes(tier))
    return undefined;
  return { partition: `${layout.dataPrefix}${key.slice(root.length, slash + 1)}`, jobId, tier };
}

/** S3's limit on a key. */
export const MAX_KEY_BYTES = 1024;
/** The local folder store keeps each object as a file (255 bytes a name, less its sidecar's `.json`). */
export const MAX_NAME_BYTES = 250;

/** Whether a key can be written to every store we support. */
export function keyFits(key: string): boolean {
  const name = key.slice(key.lastIndexOf('/') + 1);
  return Buffer.byteLength(key) <= MAX_KEY_BYTES && Buffer.byteLength(name) <= MAX_NAME_BYTES;
}

/** Records of quarantined inputs whose readable record key would be too long; the record names the input. */
export function hashedQuarantineRoot(layout: Layout): string {
  return `${quarantineRoot(layout)}inputs-hashed/`;
}

/**
 * The quarantine record of a corrupt input: readable (the input's key plus `.json`) when that
 * fits, else named by a hash of the input key, so an input at the key limits can still be held.
 */
export function quarantinedInputKey(layout: Layout, inputKey: string): string {
  const readable = `${readableQuarantineRoot(layout)}${inputKey.slice(layout.dataPrefix.length)}.json`;
  if (keyFits(readable)) return readable;
  return `${hashedQuarantineRoot(layout)}${createHash('sha256').update(inputKey).digest('hex')}.json`;
}

/** Records of quarantined inputs named by the input's key. */
export function readableQuarantineRoot(layout: Layout): string {
  return `${quarantineRoot(layout)}inputs/`;
}

/**
 * The input a readable record names (quarantinedInputKey read backwards), or undefined for any
 * other key: a hash-named record names its input only inside.
 */
export function inputOfReadableRecord(layout: Layout, recordKey: string): string | undefined {
  const root = readableQuarantineRoot(layout);
  if (!recordKey.startsWith(root)) return undefined;
  return layout.dataPrefix + recordKey.slice(root.length).replace(/\.json$/, '');
}

/** Job ids sort by creation time and are unique: `20250115T100000Z-1a2b3c4d`. */
export function newJobId(now: Date, random: () => string): string {
  return `${jobIdTime(now)}-${random()}`;
}

/** How a job id begins for a job created at `time` (`20250115T100000Z`): job ids compare with it as text. */
export function jobIdTime(time: Date): string {
  return time
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z');
}

/** What a job id of ours looks like (newJobId). */
export const JOB_ID = /^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{8,32}$/;

/** The job id an output's file name carries, if it looks like one of ours. */
export function jobIdOfOutput(key: string): string | undefined {
  const name = key.slice(key.lastIndexOf('/') + 1);
  return /(?:^|_)([0-9]{8}T[0-9]{6}Z-[0-9a-f]{8,32})_\d{3}_(?:compacted|daily|monthly)\.parquet$/.exec(
    name,
  )?.[1];
}

/** The tier and partition a manifest key leases. */
export function leaseOf(layout: Layout, key: string): { tier: JobKind; partition: string } | undefined {
  const root = manifestsRoot(layout);
  if (!key.startsWith(root) || !key.endsWith('.json')) return undefined;
  const rest = key.slice(root.length, -'.json'.length);
  const slash = rest.indexOf('/');
  const tier = rest.slice(0, slash);
  if (slash <= 0 || !(JOB_KINDS as readonly string[]).includes(tier)) return undefined;
  return { tier: tier as JobKind, partition: `${layout.dataPrefix}${rest.slice(slash + 1)}/` };
}

/**
 * Final output key; it carries the job id, so two jobs can never write the same key. Arc's name
 * (`{table}_{date}_{HH}_...`) when the key fits; without the table and date when a long table
 * name would push it past the key limits (the folder already says both).
 */
export function outputKey(
  layout: Layout,
  tier: TierName,
  partitionFile: DataFile,
  jobId: string,
  index: number,
): string {
  const name = layout.tableName(partitionFile);
  const part = String(index).padStart(3, '0');
  const { suffix } = TIER_SPECS[tier];
  const folder = tierFolder(tier, partitionFile);
  const period = tierPeriod(tier, partitionFile);
  if (folder === undefined || period === undefined) {
    throw new ManifestConflictError(`${partitionFile.key} has no ${tier} folder in this layout`);
  }
  const start = new Date(period.start);
  const stamp =
    tier === 'hourly'
      ? `${compactDate(start)}_${String(start.getUTCHours()).padStart(2, '0')}`
      : tier === 'daily'
        ? compactDate(start)
        : compactDate(start).slice(0, 6);
  const full = `${folder}${name}_${stamp}_${jobId}_${part}${suffix}`;
  if (keyFits(full)) return full;
  return `${folder}${jobId}_${part}${suffix}`;
}

/** A job id as long as the ones this product makes, for checking key lengths before a job exists. */
const SAMPLE_JOB_ID = newJobId(new Date(0), () => '0'.repeat(16));

/**
 * Why a partition's jobs could not write their keys (outputs, manifest, staging), or undefined
 * when they can. Checked at planning, so such a partition is reported instead of failing each cycle.
 */
export function keysTooLong(layout: Layout, tier: TierName, partitionFile: DataFile): string | undefined {
  const output = outputKey(layout, tier, partitionFile, SAMPLE_JOB_ID, 999);
  const partition = tierFolder(tier, partitionFile) ?? '';
  const manifest = manifestKey(layout, tier, partition);
  const receipt = receiptKey(layout, tier, partition, SAMPLE_JOB_ID);
  for (const [what, key] of [
    ['output', output],
    ['manifest', manifest],
    ['receipt', receipt],
  ] as const) {
    if (!keyFits(key)) {
      return `its ${what} key would be ${Buffer.byteLength(key)} bytes (limit ${MAX_KEY_BYTES}, ${MAX_NAME_BYTES} a name): shorten the data prefix or table path`;
    }
  }
  return undefined;
}

/**
 * A file of `tier`'s outputs in `folder`, when `folder` is a folder that tier's outputs go in (an
 * hour, day or month folder), else undefined: the folder's coordinates (table, period).
 */
export function tierFolderFile(layout: Layout, tier: TierName, folder: string): DataFile | undefined {
  // A day (month) folder holds only daily (monthly) outputs, so probe it with an output name.
  const probe = layout.parse(`${folder}probe${TIER_SPECS[tier].suffix}`);
  return probe !== undefined && outputFolderOf(tier, probe) === folder ? probe : undefined;
}

/** Whether `folder` is one that `tier`'s outputs go in (tierFolderFile). */
export function isTierFolder(layout: Layout, tier: TierName, folder: string): boolean {
  return tierFolderFile(layout, tier, folder) !== undefined;
}

/**
 * The partition folder of a data file for a job kind, or undefined when the file is not that
 * kind's input. Retention takes every level, by the folder its period is named by: the day
 * folder, or the month folder for monthly outputs.
 */
export function jobPartitionOf(kind: JobKind, file: DataFile): string | undefined {
  if (kind === 'retention') return file.dayFolder ?? file.monthFolder;
  return partitionOf(kind, file);
}

// ---- validation ----
