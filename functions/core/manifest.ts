/**
 * The job manifest: the lease on a (tier, partition) and the record recovery resolves.
 * Everything read back from the store is validated here before anything acts on it: a
 * manifest that names keys outside its partition, another bucket or `..` is never obeyed.
 */

import { createHash } from 'node:crypto';
import { type CompactorConfig, JOB_KINDS, type JobKind, type TierName } from './config.ts';
import type { DedupRequest } from './engine.ts';
import { InvalidManifestError, ManifestConflictError } from './errors.ts';
import { compactDate, type DataFile, type Layout, periodEnd } from './layout.ts';
import type { Checksum } from './object-store.ts';
import { outputFolderOf, partitionOf, TIER_SPECS, tierFolder, tierPeriod } from './tiers.ts';

export const MANIFEST_STATES = ['claimed', 'staged', 'published', 'verified', 'inputs-deleted'] as const;
export type ManifestState = (typeof MANIFEST_STATES)[number];

export interface InputRef {
  readonly key: string;
  readonly size: number;
  readonly etag: string;
}

export interface OutputRef {
  readonly stagingKey: string;
  readonly finalKey: string;
  readonly size: number;
  readonly rows: number;
  readonly checksum: Checksum;
}

export interface KeptInput {
  readonly key: string;
  readonly reason: string;
}

/** What a retention job checked: every input's period ends at or before `cutoff`. */
export interface Expiry {
  /** The rule applied: its table path, or `*`. */
  readonly rule: string;
  readonly days: number;
  readonly bufferHours: number;
  /** ISO time: the job's creation time less the rule's days and the buffer. */
  readonly cutoff: string;
}

export interface Manifest {
  readonly version: 1;
  readonly jobId: string;
  readonly executionId: string;
  readonly tier: JobKind;
  /** The partition folder key prefix (hour folder for hourly, day folder for daily and retention). */
  readonly partition: string;
  /** The store (bucket) every key belongs to. */
  readonly location: string;
  readonly state: ManifestState;
  readonly inputs: readonly InputRef[];
  /** Rows of the inputs, from their footers. */
  readonly inputRows?: number;
  /**
   * The dedup the job applied (its 'last' keys include the time column). Absent: none, and the
   * outputs hold inputRows rows.
   */
  readonly dedup?: DedupRequest;
  /** With dedup: the inputs' distinct rows or keys, counted apart from the write; the outputs hold this many. */
  readonly distinctRows?: number;
  readonly outputs?: readonly OutputRef[];
  /** Inputs replaced after we read them: new data, kept. */
  readonly keptInputs?: readonly KeptInput[];
  /** Inputs found corrupt or foreign (no time column) while staging: left in place and quarantined. */
  readonly quarantinedInputs?: readonly KeptInput[];
  /** Footer key-value metadata keys of the inputs that the outputs do not carry, sorted. */
  readonly droppedMetadataKeys?: readonly string[];
  /**
   * A repair job (see repair.ts): existing outputs, at these ETags, already hold every row of the
   * inputs, so the inputs are deleted with no new output. Such a job goes claimed -> verified.
   */
  readonly repairOf?: readonly InputRef[];
  /**
   * A retention job (see retention.ts): the inputs are expired and deleted with no output. Such
   * a job goes claimed -> verified (the commit point) -> inputs-deleted.
   */
  readonly expiry?: Expiry;
  readonly createdAt: string;
  readonly updatedAt: string;
  readonly leaseExpiresAt: string;
}

export function stateIndex(state: ManifestState): number {
  return MANIFEST_STATES.indexOf(state);
}

export function isAtOrPast(manifest: Pick<Manifest, 'state'>, state: ManifestState): boolean {
  return stateIndex(manifest.state) >= stateIndex(state);
}

// ---- keys under the state root ----

export function manifestsRoot(layout: Layout): string {
  return `${layout.stateRoot}manifests/`;
}

export function manifestKey(layout: Layout, tier: JobKind, partition: string): string {
  return `${manifestsRoot(layout)}${tier}/${partition.slice(layout.dataPrefix.length, -1)}.json`;
}

export function stagingRoot(layout: Layout): string {
  return `${layout.stateRoot}staging/`;
}

export function stagingPrefix(layout: Layout, jobId: string): string {
  return `${stagingRoot(layout)}${jobId}/`;
}

export function quarantineRoot(layout: Layout): string {
  return `${layout.stateRoot}quarantine/`;
}

export function quarantinedManifestKey(layout: Layout, manifestKeyValue: string, stamp: string): string {
  const relative = manifestKeyValue.slice(manifestsRoot(layout).length).replace(/\.json$/, '');
  return `${quarantineRoot(layout)}manifests/${relative}/${stamp}.json`;
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
  const readable = `${quarantineRoot(layout)}inputs/${inputKey.slice(layout.dataPrefix.length)}.json`;
  if (keyFits(readable)) return readable;
  return `${hashedQuarantineRoot(layout)}${createHash('sha256').update(inputKey).digest('hex')}.json`;
}

/** Job ids sort by creation time and are unique: `20250115T100000Z-1a2b3c4d`. */
export function newJobId(now: Date, random: () => string): string {
  return `${now
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z')}-${random()}`;
}

const RETENTION_REPAIRS_NOTHING = 'a retention job repairs nothing: it has no repairOf';

const JOB_ID = /^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{8,32}$/;

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

/** What a manifest that does not validate still seems to say. */
export interface ManifestScan {
  readonly jobId?: string;
  readonly inputKeys: readonly string[];
  readonly outputKeys: readonly string[];
}

const QUOTED_FIELD = (field: string) => new RegExp(`"${field}"\\s*:\\s*("(?:[^"\\\\]|\\\\.)*")`, 'g');

/**
 * Best effort on a manifest's text that failed validation, for hiding and excluding (never for
 * deleting): the fields of a well-formed JSON or, of a text that no longer parses (truncated,
 * hand-edited), every quoted value it still spells out.
 */
export function scanManifestText(text: string): ManifestScan {
  const ours = (id: unknown): string | undefined =>
    typeof id === 'string' && JOB_ID.test(id) ? id : undefined;
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    const values = (field: string): string[] =>
      [...text.matchAll(QUOTED_FIELD(field))].flatMap((m) => {
        try {
          const value: unknown = JSON.parse(m[1] as string);
          return typeof value === 'string' ? [value] : [];
        } catch {
          return [];
        }
      });
    const jobId = ours(values('jobId')[0]);
    return { ...(jobId ? { jobId } : {}), inputKeys: values('key'), outputKeys: values('finalKey') };
  }
  const m = (typeof raw === 'object' && raw !== null ? raw : {}) as Record<string, unknown>;
  const pick = (list: unknown, field: string): string[] =>
    Array.isArray(list)
      ? list.flatMap((e) => {
          const value = (e as Record<string, unknown> | null)?.[field];
          return typeof value === 'string' ? [value] : [];
        })
      : [];
  const jobId = ours(m.jobId);
  return {
    ...(jobId ? { jobId } : {}),
    inputKeys: pick(m.inputs, 'key'),
    outputKeys: pick(m.outputs, 'finalKey'),
  };
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
  const manifest = manifestKey(layout, tier, tierFolder(tier, partitionFile) ?? '');
  for (const [what, key] of [
    ['output', output],
    ['manifest', manifest],
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

function isTierFolder(layout: Layout, tier: TierName, folder: string): boolean {
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

type Json = unknown;

function fail(key: string, reason: string): never {
  throw new InvalidManifestError(key, reason);
}

function str(key: string, value: Json, field: string, max = 2048): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > max) {
    fail(key, `${field} must be a non-empty string`);
  }
  return value;
}

function count(key: string, value: Json, field: string): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    fail(key, `${field} must be a whole number >= 0`);
  }
  return value;
}

function isoTime(key: string, value: Json, field: string): string {
  const text = str(key, value, field, 64);
  if (Number.isNaN(Date.parse(text))) fail(key, `${field} is not a time`);
  return text;
}

function safeKey(key: string, value: Json, field: string): string {
  const k = str(key, value, field, 1024);
  const segments = k.split('/');
  if (k.startsWith('/') || segments.some((s) => s === '' || s === '.' || s === '..') || k.includes('\0')) {
    fail(key, `${field} "${k}" is not a plain object key`);
  }
  return k;
}

/**
 * Parses and validates a manifest read from `key`. Throws InvalidManifestError for anything that
 * is not exactly a manifest this configuration would have written for this store.
 */
export function parseManifest(
  config: CompactorConfig,
  location: string,
  key: string,
  body: Buffer,
): Manifest {
  const { layout } = config;
  let raw: Json;
  try {
    raw = JSON.parse(body.toString('utf8'));
  } catch (error) {
    throw new InvalidManifestError(key, 'not valid JSON', { cause: error });
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) fail(key, 'not a JSON object');
  const m = raw as Record<string, Json>;
  if (m.version !== 1) fail(key, 'unknown version');
  const jobId = str(key, m.jobId, 'jobId', 64);
  if (!JOB_ID.test(jobId)) fail(key, `jobId "${jobId}" is malformed`);
  const executionId = str(key, m.executionId, 'executionId');
  const tier = m.tier as JobKind;
  if (!JOB_KINDS.includes(tier)) fail(key, `unknown tier ${String(m.tier)}`);
  if (typeof m.partition !== 'string' || !m.partition.endsWith('/'))
    fail(key, 'partition must be a folder ending in "/"');
  const partitionFolder = `${safeKey(key, m.partition.slice(0, -1), 'partition')}/`;
  if (manifestKey(layout, tier, partitionFolder) !== key)
    fail(key, 'partition does not match the manifest key');
  // Retention leases a day folder, or a month folder for monthly outputs.
  const validPartition =
    tier === 'retention'
      ? isTierFolder(layout, 'daily', partitionFolder) || isTierFolder(layout, 'monthly', partitionFolder)
      : isTierFolder(layout, tier, partitionFolder);
  if (!validPartition) fail(key, `partition "${partitionFolder}" is not a ${tier} folder of this layout`);
  if (m.location !== location) fail(key, `belongs to ${String(m.location)}, not ${location}`);
  const state = m.state as ManifestState;
  if (!MANIFEST_STATES.includes(state)) fail(key, `unknown state ${String(m.state)}`);
  if (!Array.isArray(m.inputs) || m.inputs.length === 0) fail(key, 'inputs must be a non-empty list');
  if (m.inputs.length > config.maxJobFiles) fail(key, `${m.inputs.length} inputs exceed the job bound`);

  const seen = new Set<string>();
  const inputs: InputRef[] = m.inputs.map((entry: Json, i: number) => {
    if (typeof entry !== 'object' || entry === null) fail(key, `inputs[${i}] is not an object`);
    const e = entry as Record<string, Json>;
    const inputKey = safeKey(key, e.key, `inputs[${i}].key`);
    const file = layout.parse(inputKey);
    if (!file || jobPartitionOf(tier, file) !== partitionFolder) {
      fail(key, `input "${inputKey}" is outside partition ${partitionFolder} or not a ${tier} input`);
    }
    if (seen.has(inputKey)) fail(key, `input "${inputKey}" is listed twice`);
    seen.add(inputKey);
    return {
      key: inputKey,
      size: count(key, e.size, `inputs[${i}].size`),
      etag: str(key, e.etag, `inputs[${i}].etag`, 256),
    };
  });

  let outputs: OutputRef[] | undefined;
  if (m.outputs !== undefined) {
    if (tier === 'retention') fail(key, 'a retention job has no outputs');
    if (!Array.isArray(m.outputs) || m.outputs.length === 0 || m.outputs.length > 10_000) {
      fail(key, 'outputs must be a non-empty list');
    }
    const staging = stagingPrefix(layout, jobId);
    const wantLevel = TIER_SPECS[tier].output;
    outputs = m.outputs.map((entry: Json, i: number) => {
      if (typeof entry !== 'object' || entry === null) fail(key, `outputs[${i}] is not an object`);
      const e = entry as Record<string, Json>;
      const finalKey = safeKey(key, e.finalKey, `outputs[${i}].finalKey`);
      const file = layout.parse(finalKey);
      const folder = file && outputFolderOf(tier, file);
      if (!file || file.level !== wantLevel || folder !== partitionFolder || !file.fileName.includes(jobId)) {
        fail(key, `output "${finalKey}" is not an output of this job in ${partitionFolder}`);
      }
      const stagingKey = safeKey(key, e.stagingKey, `outputs[${i}].stagingKey`);
      if (!stagingKey.startsWith(staging)) fail(key, `staging key "${stagingKey}" is outside ${staging}`);
      const checksum = e.checksum as Record<string, Json> | undefined;
      if (checksum?.algorithm !== 'CRC32' || typeof checksum.value !== 'string') {
        fail(key, `outputs[${i}].checksum must be a CRC32 checksum`);
      }
      return {
        stagingKey,
        finalKey,
        size: count(key, e.size, `outputs[${i}].size`),
        rows: count(key, e.rows, `outputs[${i}].rows`),
        checksum: { algorithm: 'CRC32', value: checksum.value },
      };
    });
  }
  let repairOf: InputRef[] | undefined;
  if (m.repairOf !== undefined) {
    if (!Array.isArray(m.repairOf) || m.repairOf.length === 0 || m.repairOf.length > 10_000) {
      fail(key, 'repairOf must be a non-empty list');
    }
    if (outputs !== undefined) fail(key, 'a repair job has no outputs');
    if (tier === 'retention') fail(key, RETENTION_REPAIRS_NOTHING);
    if (state === 'staged' || state === 'published') fail(key, `a repair job is never ${state}`);
    const wantLevel = TIER_SPECS[tier].output;
    repairOf = m.repairOf.map((entry: Json, i: number) => {
      const e = (entry ?? {}) as Record<string, Json>;
      const evidenceKey = safeKey(key, e.key, `repairOf[${i}].key`);
      const file = layout.parse(evidenceKey);
      const folder = file && outputFolderOf(tier, file);
      if (!file || file.level !== wantLevel || folder !== partitionFolder) {
        fail(key, `repair evidence "${evidenceKey}" is not a ${tier} output in ${partitionFolder}`);
      }
      return {
        key: evidenceKey,
        size: count(key, e.size, `repairOf[${i}].size`),
        etag: str(key, e.etag, `repairOf[${i}].etag`, 256),
      };
    });
  }
  const expiry = tier === 'retention' ? parseExpiry(key, m, state, inputs, layout) : undefined;
  if (tier !== 'retention' && m.expiry !== undefined) fail(key, 'only a retention job has an expiry');
  if (
    stateIndex(state) >= stateIndex('staged') &&
    outputs === undefined &&
    repairOf === undefined &&
    expiry === undefined
  )
    fail(key, `state ${state} without outputs`);

  let deduped: { dedup: DedupRequest; distinctRows: number } | undefined;
  if (m.dedup !== undefined || m.distinctRows !== undefined) {
    const dedup = parseDedupRecord(key, m.dedup);
    const distinctRows = count(key, m.distinctRows, 'distinctRows');
    if (typeof m.inputRows === 'number' && distinctRows > m.inputRows) {
      fail(key, `distinctRows ${distinctRows} exceeds inputRows ${m.inputRows}`);
    }
    const outputRows = outputs?.reduce((sum, o) => sum + o.rows, 0);
    if (outputRows !== undefined && outputRows !== distinctRows) {
      fail(key, `outputs hold ${outputRows} rows, not the ${distinctRows} distinct rows recorded`);
    }
    deduped = { dedup, distinctRows };
  }

  const reasons = (value: Json, field: string): KeptInput[] | undefined => {
    if (value === undefined) return undefined;
    if (!Array.isArray(value)) fail(key, `${field} must be a list`);
    return value.map((entry: Json, i: number) => {
      const e = (entry ?? {}) as Record<string, Json>;
      const k = safeKey(key, e.key, `${field}[${i}].key`);
      const file = layout.parse(k);
      if (!file || jobPartitionOf(tier, file) !== partitionFolder)
        fail(key, `${field}[${i}] is outside the partition`);
      return { key: k, reason: str(key, e.reason, `${field}[${i}].reason`, 4096) };
    });
  };

  return {
    version: 1,
    jobId,
    executionId,
    tier,
    partition: partitionFolder,
    location,
    state,
    inputs,
    ...(m.inputRows === undefined ? {} : { inputRows: count(key, m.inputRows, 'inputRows') }),
    ...deduped,
    ...(outputs === undefined ? {} : { outputs }),
    ...(repairOf === undefined ? {} : { repairOf }),
    ...(expiry === undefined ? {} : { expiry }),
    ...(m.keptInputs === undefined ? {} : { keptInputs: reasons(m.keptInputs, 'keptInputs') }),
    ...(m.quarantinedInputs === undefined
      ? {}
      : { quarantinedInputs: reasons(m.quarantinedInputs, 'quarantinedInputs') }),
    ...(m.droppedMetadataKeys === undefined
      ? {}
      : { droppedMetadataKeys: metadataKeys(key, m.droppedMetadataKeys) }),
    createdAt: isoTime(key, m.createdAt, 'createdAt'),
    updatedAt: isoTime(key, m.updatedAt, 'updatedAt'),
    leaseExpiresAt: isoTime(key, m.leaseExpiresAt, 'leaseExpiresAt'),
  };
}

function metadataKeys(key: string, value: Json): string[] {
  if (!Array.isArray(value) || value.length > 10_000) fail(key, 'droppedMetadataKeys must be a list');
  // Any text: a footer may hold an empty key.
  return value.map((k: Json, i: number) => {
    if (typeof k !== 'string' || k.length > 4096) fail(key, `droppedMetadataKeys[${i}] must be a string`);
    return k;
  });
}

function parseDedupRecord(key: string, value: Json): DedupRequest {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    fail(key, 'dedup must be an object (distinctRows is recorded only with it)');
  }
  const d = value as Record<string, Json>;
  if (d.mode === 'exact' && d.keys === undefined) return { mode: 'exact' };
  if (
    d.mode === 'last' &&
    Array.isArray(d.keys) &&
    d.keys.length > 0 &&
    d.keys.length <= 1000 &&
    d.keys.every((k) => typeof k === 'string' && k.length > 0 && k.length <= 1024)
  ) {
    return { mode: 'last', keys: d.keys as string[] };
  }
  return fail(key, 'dedup must be {"mode": "exact"} or {"mode": "last", "keys": [column, ...]}');
}

/**
 * A retention job's expiry: no outputs, no evidence, never staged or published, and every input
 * expired by a cutoff that its rule gives at the job's creation time. A manifest claiming more
 * (a later cutoff, an input newer than it) is never obeyed.
 */
function parseExpiry(
  key: string,
  m: Record<string, Json>,
  state: ManifestState,
  inputs: readonly InputRef[],
  layout: Layout,
): Expiry {
  if (m.outputs !== undefined) fail(key, 'a retention job has no outputs');
  if (m.repairOf !== undefined) fail(key, RETENTION_REPAIRS_NOTHING);
  if (state === 'staged' || state === 'published') fail(key, `a retention job is never ${state}`);
  if (typeof m.expiry !== 'object' || m.expiry === null) fail(key, 'a retention job needs its expiry');
  const e = m.expiry as Record<string, Json>;
  const rule = str(key, e.rule, 'expiry.rule', 1024);
  const days = count(key, e.days, 'expiry.days');
  const bufferHours = count(key, e.bufferHours, 'expiry.bufferHours');
  const cutoff = isoTime(key, e.cutoff, 'expiry.cutoff');
  const createdAt = isoTime(key, m.createdAt, 'createdAt');
  if (days < 1) fail(key, 'expiry.days must be at least 1');
  if (Date.parse(cutoff) + days * 86_400_000 + bufferHours * 3_600_000 > Date.parse(createdAt)) {
    fail(key, `expiry.cutoff ${cutoff} is later than its rule allows at ${createdAt}`);
  }
  for (const input of inputs) {
    const file = layout.parse(input.key);
    if (!file || periodEnd(file).getTime() > Date.parse(cutoff)) {
      fail(key, `input "${input.key}" is not expired at ${cutoff}`);
    }
  }
  return { rule, days, bufferHours, cutoff };
}

export function serializeManifest(manifest: Manifest): Buffer {
  return Buffer.from(`${JSON.stringify(manifest, null, 2)}\n`);
}
