/**
 * What planning, retention, repair and readers must leave alone: every key a live or quarantined
 * manifest names, quarantined inputs, and the partitions such manifests hold. Read from the state
 * root once per plan; unreadable records still hold what they seem to name.
 */

import type { CompactorConfig } from './config.ts';
import { InvalidManifestError } from './errors.ts';
import {
  hashedQuarantineRoot,
  inputOfReadableRecord,
  jobIdOfOutput,
  type Manifest,
  type ManifestScan,
  manifestsRoot,
  parseManifest,
  quarantineRoot,
  scanManifestText,
} from './manifest/manifest.ts';
import { getBytesIfExists, type ObjectStore } from './object-store.ts';

/** A manifest (live, or held by a quarantine record) that does not validate, as far as it can be read. */
export interface UnreadableManifest extends ManifestScan {
  readonly manifestKey?: string;
}

/** Keys excluded from planning, and partitions that hold a live or unreadable manifest. */
export interface Exclusions {
  readonly keys: ReadonlySet<string>;
  /** Jobs of unreadable manifests: their outputs (named by job id) are excluded too. */
  readonly jobIds: ReadonlySet<string>;
  readonly leasedManifests: ReadonlySet<string>;
  /** Manifest keys held by a quarantine record that did not validate. */
  readonly quarantineHolds: ReadonlySet<string>;
  /** Data keys of quarantined inputs (readable and hash-named records). */
  readonly quarantinedInputs: ReadonlySet<string>;
  readonly liveManifests: readonly Manifest[];
  readonly quarantinedManifests: readonly Manifest[];
  /** Live and quarantined manifests that did not validate (best effort). */
  readonly unreadable: readonly UnreadableManifest[];
}

/** Whether planning must leave a data file alone. */
export function isExcluded(exclusions: Exclusions, key: string): boolean {
  if (exclusions.keys.has(key)) return true;
  if (exclusions.jobIds.size === 0) return false;
  const jobId = jobIdOfOutput(key);
  return jobId !== undefined && exclusions.jobIds.has(jobId);
}

/**
 * Reads every live and quarantined manifest and quarantined-input record. Unreadable manifests
 * still lease their partition (recovery quarantines live ones) and exclude every key and job
 * output they seem to name; what they cannot name is reported, not obeyed.
 */
export async function readExclusions(store: ObjectStore, config: CompactorConfig): Promise<Exclusions> {
  const keys = new Set<string>();
  const jobIds = new Set<string>();
  const leasedManifests = new Set<string>();
  const liveManifests: Manifest[] = [];
  const quarantinedManifests: Manifest[] = [];
  const unreadable: UnreadableManifest[] = [];
  const quarantineHolds = new Set<string>();
  const quarantinedInputs = new Set<string>();
  const holdUnreadable = (entry: UnreadableManifest) => {
    unreadable.push(entry);
    for (const key of entry.inputKeys) keys.add(key);
    for (const key of entry.outputKeys) keys.add(key);
    if (entry.jobId) jobIds.add(entry.jobId);
  };
  for await (const object of store.list(manifestsRoot(config.layout))) {
    leasedManifests.add(object.key);
    const read = await readManifestText(store, config, object.key);
    if (!read) continue;
    if ('scan' in read) {
      holdUnreadable({ manifestKey: object.key, ...read.scan });
      continue;
    }
    const { manifest } = read;
    liveManifests.push(manifest);
    for (const input of manifest.inputs) keys.add(input.key);
    // Its outputs too: a job's output is not another tier's input until the job is done
    // (a daily job merging an hourly output mid-job would duplicate its rows).
    for (const output of manifest.outputs ?? []) keys.add(output.finalKey);
    // A repair's evidence must stay as it was checked until the repair is done.
    for (const evidence of manifest.repairOf ?? []) keys.add(evidence.key);
  }
  const quarantine = quarantineRoot(config.layout);
  for await (const object of store.list(quarantine)) {
    const readable = inputOfReadableRecord(config.layout, object.key);
    if (readable !== undefined) {
      keys.add(readable);
      quarantinedInputs.add(readable);
      continue;
    }
    if (object.key.startsWith(hashedQuarantineRoot(config.layout))) {
      const input = await hashedRecordInput(store, config, object.key);
      if (input) {
        keys.add(input);
        quarantinedInputs.add(input);
      }
      continue;
    }
    const record = await readQuarantineRecord(store, config, object.key);
    if (record.manifest) {
      quarantinedManifests.push(record.manifest);
      for (const input of record.manifest.inputs) keys.add(input.key);
      for (const output of record.manifest.outputs ?? []) keys.add(output.finalKey);
      continue;
    }
    // A quarantined manifest we cannot validate: exclude every key it seems to name, hide the
    // outputs it names from readers, and hold its partition, so nothing it may cover is merged
    // again until an operator resolves it.
    holdUnreadable({
      ...(record.manifestKey ? { manifestKey: record.manifestKey } : {}),
      ...(record.jobId ? { jobId: record.jobId } : {}),
      inputKeys: record.inputKeys,
      outputKeys: record.outputKeys,
    });
    if (record.manifestKey) {
      leasedManifests.add(record.manifestKey);
      quarantineHolds.add(record.manifestKey);
    }
  }
  return {
    keys,
    jobIds,
    leasedManifests,
    quarantineHolds,
    quarantinedInputs,
    liveManifests,
    quarantinedManifests,
    unreadable,
  };
}

/** A live manifest, validated, or what its text seems to say when it does not validate. */
async function readManifestText(
  store: ObjectStore,
  config: CompactorConfig,
  key: string,
): Promise<{ manifest: Manifest } | { scan: ManifestScan } | undefined> {
  const body = (await getBytesIfExists(store, key))?.body;
  if (body === undefined) return undefined;
  try {
    return { manifest: parseManifest(config, store.location, key, body) };
  } catch (error) {
    if (error instanceof InvalidManifestError) return { scan: scanManifestText(body.toString('utf8')) };
    throw error;
  }
}

/**
 * The input a hash-named quarantine record holds. A record that names no key of this lake excludes
 * nothing: the input fails again on its next compaction and is quarantined anew.
 */
async function hashedRecordInput(
  store: ObjectStore,
  config: CompactorConfig,
  key: string,
): Promise<string | undefined> {
  const got = await getBytesIfExists(store, key);
  if (!got) return undefined;
  try {
    const record = JSON.parse(got.body.toString('utf8')) as { key?: unknown };
    const input = record.key;
    return typeof input === 'string' && input.startsWith(config.layout.dataPrefix) ? input : undefined;
  } catch {
    return undefined;
  }
}

export interface QuarantineRecord {
  /** The quarantined manifest, when it still validates. */
  readonly manifest?: Manifest;
  readonly manifestKey?: string;
  /** Best effort for a manifest that does not validate: the job and keys it seems to name. */
  readonly jobId?: string;
  readonly inputKeys: readonly string[];
  readonly outputKeys: readonly string[];
}

/** Quarantine records wrap the manifest text they quarantined and the reason. */
export async function readQuarantineRecord(
  store: ObjectStore,
  config: CompactorConfig,
  key: string,
): Promise<QuarantineRecord> {
  const none: QuarantineRecord = { inputKeys: [], outputKeys: [] };
  const body = (await getBytesIfExists(store, key))?.body;
  if (body === undefined) return none;
  let record: { manifestKey?: unknown; manifest?: unknown };
  try {
    record = JSON.parse(body.toString('utf8'));
  } catch {
    return none;
  }
  const manifestKey = typeof record.manifestKey === 'string' ? record.manifestKey : undefined;
  if (!manifestKey || typeof record.manifest !== 'string')
    return { ...none, ...(manifestKey ? { manifestKey } : {}) };
  try {
    return {
      ...none,
      manifestKey,
      manifest: parseManifest(config, store.location, manifestKey, Buffer.from(record.manifest)),
    };
  } catch (error) {
    if (!(error instanceof InvalidManifestError)) throw error;
  }
  const scan = scanManifestText(record.manifest);
  return { manifestKey, ...scan };
}
