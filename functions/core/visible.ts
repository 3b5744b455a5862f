/**
 * The visible-files view for consistent readers: data files, minus inputs of manifests at or
 * past `published`, minus final outputs of manifests before `published`. The switch to
 * `published` is one atomic write, so a reader of this view never sees both or neither.
 *
 * The data listing is bracketed by two manifest snapshots; if they differ, a job moved while
 * we listed and the view is taken again.
 */

import type { CompactorConfig } from './config.ts';
import { ConfigError, TransientStoreError } from './errors.ts';
import { type Exclusions, readExclusions, type UnreadableManifest } from './exclusions.ts';
import {
  isAtOrPast,
  jobIdOfOutput,
  jobPartitionOf,
  leaseOf,
  type Manifest,
  quarantinedInputKey,
} from './manifest/manifest.ts';
import { getBytesIfExists, type ObjectStore, type ObjectSummary } from './object-store.ts';
import { isParquetObject } from './parquet-sniff.ts';
import { parseInputRecord } from './quarantine.ts';

export interface VisibleView {
  readonly files: readonly ObjectSummary[];
  /**
   * Files of the view that are quarantined inputs no reader can read (not Parquet: cut off,
   * empty, another format): the view is the contract's, which hides no data file, so a reader of
   * it fails on them until each is replaced or removed.
   */
  readonly unreadableQuarantined: readonly string[];
  readonly hiddenInputs: number;
  readonly hiddenOutputs: number;
  readonly liveManifests: number;
  readonly quarantinedManifests: number;
  /** Data keys of quarantined inputs, left in place by design. */
  readonly quarantinedInputs: ReadonlySet<string>;
}

function fingerprint(manifests: readonly Manifest[]): string {
  return manifests
    .map((m) => `${m.tier}:${m.partition}:${m.jobId}:${m.state}`)
    .sort()
    .join('|');
}

/**
 * Whether the data listed between two manifest snapshots can be read through the second one.
 * Only changes that move the visibility switch matter: a job that reached `published` during
 * the listing, or one that was cleared, rolled back or quarantined. A job that appeared or
 * advanced before `published` hides nothing the second snapshot does not also hide.
 */
function unchangedForReaders(before: readonly Manifest[], after: readonly Manifest[]): boolean {
  const post = (m: Manifest) => isAtOrPast(m, 'published');
  const key = (m: Manifest) => `${m.tier}:${m.partition}:${m.jobId}`;
  const was = new Map(before.map((m) => [key(m), m]));
  const now = new Map(after.map((m) => [key(m), m]));
  for (const k of was.keys()) if (!now.has(k)) return false;
  for (const [k, m] of now) if (post(m) && !(was.get(k) && post(was.get(k) as Manifest))) return false;
  return true;
}

export async function visibleFiles(
  store: ObjectStore,
  config: CompactorConfig,
  options: {
    readonly maxAttempts?: number;
    /** Only the data under this key prefix (e.g. one table), inside the data root; manifests are read whole. */
    readonly under?: string;
  } = {},
): Promise<VisibleView> {
  const maxAttempts = options.maxAttempts ?? 20;
  const under = options.under ?? config.layout.dataPrefix;
  if (!under.startsWith(config.layout.dataPrefix) || under.startsWith(config.layout.stateRoot)) {
    throw new ConfigError(
      `visible files under "${under}": not inside the data root "${config.layout.dataPrefix}"`,
    );
  }
  let before = await readExclusions(store, config);
  for (let attempt = 1; attempt <= maxAttempts; attempt++) {
    const data: ObjectSummary[] = [];
    const unreadableQuarantined: string[] = [];
    for await (const object of store.list(under)) {
      if (!config.layout.isDataKey(object.key)) continue;
      // A name that does not say Parquet (Firehose without an extension) is listed only if it is one.
      if (config.layout.needsContentCheck(object.key) && !(await isParquetObject(store, object))) continue;
      if (before.quarantinedInputs.has(object.key) && !(await quarantinedReadable(store, config, object))) {
        unreadableQuarantined.push(object.key);
      }
      data.push(object);
    }
    const after = await readExclusions(store, config);
    const stable =
      unchangedForReaders(before.liveManifests, after.liveManifests) &&
      fingerprint(before.quarantinedManifests) === fingerprint(after.quarantinedManifests) &&
      fingerprintUnreadable(before.unreadable) === fingerprintUnreadable(after.unreadable);
    if (stable) {
      const view = select(config, data, after);
      const kept = new Set(view.files.map((f) => f.key));
      return { ...view, unreadableQuarantined: unreadableQuarantined.filter((k) => kept.has(k)) };
    }
    before = after;
  }
  throw new TransientStoreError(`the lake kept changing during ${maxAttempts} listings; try again`);
}

/**
 * Whether a quarantined input can be read: as its record says (the compact step read that
 * version), else, for a record that does not say or an object replaced since, whether it looks
 * like Parquet (isParquetObject).
 */
async function quarantinedReadable(
  store: ObjectStore,
  config: CompactorConfig,
  object: ObjectSummary,
): Promise<boolean> {
  const found = await getBytesIfExists(store, quarantinedInputKey(config.layout, object.key));
  const record = found === undefined ? undefined : parseInputRecord(found.body);
  // Its verdict holds for the version it judged; a replacement is looked at anew.
  const readable = record?.etag === object.etag ? record.readable : undefined;
  return readable ?? (await isParquetObject(store, object));
}

function fingerprintUnreadable(entries: Exclusions['unreadable']): string {
  return entries
    .map((e) => `${e.manifestKey}:${e.jobId}`)
    .sort()
    .join('|');
}

function select(
  config: CompactorConfig,
  data: readonly ObjectSummary[],
  exclusions: Exclusions,
): Omit<VisibleView, 'unreadableQuarantined'> {
  const { liveManifests: live, quarantinedManifests: quarantined } = exclusions;
  // Inputs are hidden by key and ETag: an input replaced after it was read is new data.
  const hiddenInputs = new Map<string, string>();
  const hiddenOutputs = new Set<string>();
  for (const m of live) {
    if (isAtOrPast(m, 'published')) for (const i of m.inputs) hiddenInputs.set(i.key, i.etag);
    else for (const o of m.outputs ?? []) hiddenOutputs.add(o.finalKey);
  }
  // A quarantined job's outputs are not trusted; its inputs were never deleted.
  for (const m of quarantined) for (const o of m.outputs ?? []) hiddenOutputs.add(o.finalKey);
  for (const raw of exclusions.unreadable)
    for (const key of unreadableOutputsToHide(config, data, raw)) hiddenOutputs.add(key);
  let inputsHidden = 0;
  let outputsHidden = 0;
  const files = data.filter((f) => {
    if (hiddenInputs.get(f.key) === f.etag) {
      inputsHidden++;
      return false;
    }
    if (hiddenOutputs.has(f.key)) {
      outputsHidden++;
      return false;
    }
    return true;
  });
  return {
    files,
    hiddenInputs: inputsHidden,
    hiddenOutputs: outputsHidden,
    liveManifests: live.length,
    quarantinedManifests: quarantined.length,
    quarantinedInputs: exclusions.quarantinedInputs,
  };
}

/**
 * A manifest that does not validate (live until recovery quarantines it, then held): its outputs,
 * named in it or by its job id, would duplicate its inputs while any of those are still there;
 * once they are all gone, the outputs hold the rows. When its inputs cannot be read from it, any
 * file of the tier's input level left in its partition counts as one.
 */
function unreadableOutputsToHide(
  config: CompactorConfig,
  data: readonly ObjectSummary[],
  raw: UnreadableManifest,
): string[] {
  const { layout } = config;
  const outputs = new Set(raw.outputKeys);
  if (raw.jobId) for (const f of data) if (jobIdOfOutput(f.key) === raw.jobId) outputs.add(f.key);
  if (outputs.size === 0) return [];
  const present = new Set(data.map((f) => f.key));
  let inputsRemain = raw.inputKeys.some((k) => present.has(k));
  if (raw.inputKeys.length === 0) {
    const lease = raw.manifestKey ? leaseOf(layout, raw.manifestKey) : undefined;
    inputsRemain =
      lease === undefined ||
      data.some((f) => {
        if (outputs.has(f.key) || !f.key.startsWith(lease.partition)) return false;
        const file = layout.parse(f.key);
        return file !== undefined && jobPartitionOf(lease.tier, file) === lease.partition;
      });
  }
  return inputsRemain ? [...outputs] : [];
}
