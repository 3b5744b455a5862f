/**
 * The job manifest: the lease on a (tier, partition) and the record recovery resolves.
 * Everything read back from the store is validated here before anything acts on it: a
 * manifest that names keys outside its partition, another bucket or `..` is never obeyed.
 *
 * Here: the format, its validating parser and its serializer. The key scheme is in
 * manifest-keys.ts, the scan of a manifest that does not validate in manifest-scan.ts.
 */

import { type CompactorConfig, JOB_KINDS, type JobKind } from '../config.ts';
import { MAX_JOB_FILES } from '../config-schema.ts';
import type { ColumnStats, DedupRequest } from '../engine.ts';
import { InvalidManifestError } from '../errors.ts';
import { type Layout, periodEnd } from '../layout.ts';
import type { Checksum } from '../object-store.ts';
import { outputFolderOf, TIER_SPECS } from '../tiers.ts';
import { isTierFolder, JOB_ID, jobPartitionOf, manifestKey, stagingPrefix } from './manifest-keys.ts';

// The key scheme and the scan of an unreadable manifest are part of the manifest's public face.
export * from './manifest-keys.ts';
export { type ManifestScan, scanManifestText } from './manifest-scan.ts';

export const MANIFEST_STATES = ['claimed', 'staged', 'published', 'verified', 'inputs-deleted'] as const;
export type ManifestState = (typeof MANIFEST_STATES)[number];

export interface InputRef {
  readonly key: string;
  readonly size: number;
  readonly etag: string;
  /** Rows from the footer: recorded once the job has read it (staged on), for its receipt. */
  readonly rows?: number;
}

export interface OutputRef {
  readonly stagingKey: string;
  readonly finalKey: string;
  readonly size: number;
  readonly rows: number;
  readonly checksum: Checksum;
  /** The published object's ETag, recorded by the verify step. */
  readonly etag?: string;
  /** Per column: nulls and min/max from the output's footer (Engine.columnStats). */
  readonly columns?: readonly ColumnStats[];
}

/** The longest min/max text a manifest keeps; a longer one is recorded as unknown (null). */
export const MAX_STATS_TEXT = 1024;

export interface KeptInput {
  readonly key: string;
  readonly reason: string;
  /** Set aside because it cannot be read as Parquet (not for what its readable rows hold). */
  readonly unreadable?: boolean;
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
  /** With dedup: the hash of the kept rows or keys (DistinctCount.keysHash), equal over inputs and outputs. */
  readonly keysHash?: string;
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

const RETENTION_REPAIRS_NOTHING = 'a retention job repairs nothing: it has no repairOf';

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
  if (m.inputs.length > MAX_JOB_FILES)
    fail(key, `${m.inputs.length} inputs exceed the largest job bound (${MAX_JOB_FILES})`);

  const job: JobScope = { key, layout, tier, partition: partitionFolder, jobId };
  const inputs = parseInputs(job, m.inputs);
  const outputs = m.outputs === undefined ? undefined : parseOutputs(job, m.outputs);
  const repairOf = m.repairOf === undefined ? undefined : parseRepairOf(job, m.repairOf, state, outputs);
  const expiry = tier === 'retention' ? parseExpiry(key, m, state, inputs, layout) : undefined;
  if (tier !== 'retention' && m.expiry !== undefined) fail(key, 'only a retention job has an expiry');
  if (
    stateIndex(state) >= stateIndex('staged') &&
    outputs === undefined &&
    repairOf === undefined &&
    expiry === undefined
  )
    fail(key, `state ${state} without outputs`);

  const deduped =
    m.dedup !== undefined || m.distinctRows !== undefined || m.keysHash !== undefined
      ? parseDeduped(key, m, outputs)
      : undefined;

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
    ...(m.keptInputs === undefined ? {} : { keptInputs: parseReasons(job, m.keptInputs, 'keptInputs') }),
    ...(m.quarantinedInputs === undefined
      ? {}
      : { quarantinedInputs: parseReasons(job, m.quarantinedInputs, 'quarantinedInputs') }),
    ...(m.droppedMetadataKeys === undefined
      ? {}
      : { droppedMetadataKeys: metadataKeys(key, m.droppedMetadataKeys) }),
    createdAt: isoTime(key, m.createdAt, 'createdAt'),
    updatedAt: isoTime(key, m.updatedAt, 'updatedAt'),
    leaseExpiresAt: isoTime(key, m.leaseExpiresAt, 'leaseExpiresAt'),
  };
}

/** What a manifest's parts are checked against: its key, the layout, and its job's tier, partition and id. */
interface JobScope {
  readonly key: string;
  readonly layout: Layout;
  readonly tier: JobKind;
  readonly partition: string;
  readonly jobId: string;
}

/** The inputs: each a plain key inside the job's partition, of the tier's input level, listed once. */
function parseInputs({ key, layout, tier, partition }: JobScope, value: Json): InputRef[] {
  const seen = new Set<string>();
  return (value as Json[]).map((entry: Json, i: number) => {
    if (typeof entry !== 'object' || entry === null) fail(key, `inputs[${i}] is not an object`);
    const e = entry as Record<string, Json>;
    const inputKey = safeKey(key, e.key, `inputs[${i}].key`);
    const file = layout.parse(inputKey);
    if (!file || jobPartitionOf(tier, file) !== partition) {
      fail(key, `input "${inputKey}" is outside partition ${partition} or not a ${tier} input`);
    }
    if (seen.has(inputKey)) fail(key, `input "${inputKey}" is listed twice`);
    seen.add(inputKey);
    return {
      key: inputKey,
      size: count(key, e.size, `inputs[${i}].size`),
      etag: str(key, e.etag, `inputs[${i}].etag`, 256),
      ...(e.rows === undefined ? {} : { rows: count(key, e.rows, `inputs[${i}].rows`) }),
    };
  });
}

/** The outputs: each a final key of this job's level in its partition, staged under its own staging folder. */
function parseOutputs({ key, layout, tier, partition, jobId }: JobScope, value: Json): OutputRef[] {
  if (tier === 'retention') fail(key, 'a retention job has no outputs');
  if (!Array.isArray(value) || value.length === 0 || value.length > 10_000) {
    fail(key, 'outputs must be a non-empty list');
  }
  const staging = stagingPrefix(layout, jobId);
  const wantLevel = TIER_SPECS[tier].output;
  return value.map((entry: Json, i: number) => {
    if (typeof entry !== 'object' || entry === null) fail(key, `outputs[${i}] is not an object`);
    const e = entry as Record<string, Json>;
    const finalKey = safeKey(key, e.finalKey, `outputs[${i}].finalKey`);
    const file = layout.parse(finalKey);
    const folder = file && outputFolderOf(tier, file);
    if (!file || file.level !== wantLevel || folder !== partition || !file.fileName.includes(jobId)) {
      fail(key, `output "${finalKey}" is not an output of this job in ${partition}`);
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
      ...(e.etag === undefined ? {} : { etag: str(key, e.etag, `outputs[${i}].etag`, 256) }),
      ...(e.columns === undefined
        ? {}
        : { columns: parseColumnStats(key, e.columns, `outputs[${i}].columns`) }),
    };
  });
}

function parseColumnStats(key: string, value: Json, field: string): ColumnStats[] {
  if (!Array.isArray(value) || value.length > 10_000) fail(key, `${field} must be a list`);
  const text = (v: Json, what: string): string | null => {
    if (v === null) return null;
    if (typeof v !== 'string' || v.length > MAX_STATS_TEXT) fail(key, `${what} must be text or null`);
    return v;
  };
  return value.map((entry: Json, i: number) => {
    const e = (entry ?? {}) as Record<string, Json>;
    const at = `${field}[${i}]`;
    if (typeof e.name !== 'string' || e.name.length > 4096) fail(key, `${at}.name must be a string`);
    return {
      name: e.name,
      nulls: e.nulls === null ? null : count(key, e.nulls, `${at}.nulls`),
      min: text(e.min, `${at}.min`),
      max: text(e.max, `${at}.max`),
    };
  });
}

/** A repair job's evidence: the outputs of its tier in its partition that hold the inputs' rows. */
function parseRepairOf(
  { key, layout, tier, partition }: JobScope,
  value: Json,
  state: ManifestState,
  outputs: OutputRef[] | undefined,
): InputRef[] {
  if (!Array.isArray(value) || value.length === 0 || value.length > 10_000) {
    fail(key, 'repairOf must be a non-empty list');
  }
  if (outputs !== undefined) fail(key, 'a repair job has no outputs');
  if (tier === 'retention') fail(key, RETENTION_REPAIRS_NOTHING);
  if (state === 'staged' || state === 'published') fail(key, `a repair job is never ${state}`);
  const wantLevel = TIER_SPECS[tier].output;
  return value.map((entry: Json, i: number) => {
    const e = (entry ?? {}) as Record<string, Json>;
    const evidenceKey = safeKey(key, e.key, `repairOf[${i}].key`);
    const file = layout.parse(evidenceKey);
    const folder = file && outputFolderOf(tier, file);
    if (!file || file.level !== wantLevel || folder !== partition) {
      fail(key, `repair evidence "${evidenceKey}" is not a ${tier} output in ${partition}`);
    }
    return {
      key: evidenceKey,
      size: count(key, e.size, `repairOf[${i}].size`),
      etag: str(key, e.etag, `repairOf[${i}].etag`, 256),
    };
  });
}

/** A dedup job's request and the distinct rows its outputs must hold. */
function parseDeduped(
  key: string,
  m: Record<string, Json>,
  outputs: OutputRef[] | undefined,
): { dedup: DedupRequest; distinctRows: number; keysHash?: string } {
  const dedup = parseDedupRecord(key, m.dedup);
  const distinctRows = count(key, m.distinctRows, 'distinctRows');
  const keysHash = m.keysHash === undefined ? undefined : str(key, m.keysHash, 'keysHash', 64);
  if (typeof m.inputRows === 'number' && distinctRows > m.inputRows) {
    fail(key, `distinctRows ${distinctRows} exceeds inputRows ${m.inputRows}`);
  }
  const outputRows = outputs?.reduce((sum, o) => sum + o.rows, 0);
  if (outputRows !== undefined && outputRows !== distinctRows) {
    fail(key, `outputs hold ${outputRows} rows, not the ${distinctRows} distinct rows recorded`);
  }
  return { dedup, distinctRows, ...(keysHash === undefined ? {} : { keysHash }) };
}

/** Inputs set aside with a reason (kept, quarantined): each inside the job's partition. */
function parseReasons({ key, layout, tier, partition }: JobScope, value: Json, field: string): KeptInput[] {
  if (!Array.isArray(value)) fail(key, `${field} must be a list`);
  return value.map((entry: Json, i: number) => {
    const e = (entry ?? {}) as Record<string, Json>;
    const k = safeKey(key, e.key, `${field}[${i}].key`);
    const file = layout.parse(k);
    if (!file || jobPartitionOf(tier, file) !== partition)
      fail(key, `${field}[${i}] is outside the partition`);
    return { key: k, reason: str(key, e.reason, `${field}[${i}].reason`, 4096) };
  });
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
