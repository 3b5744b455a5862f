/**
 * Candidate planning for one tier. Data is listed first, then manifests, so a file listed
 * before its manifest appeared is still excluded by it. A file named by any live or quarantined
 * manifest, or quarantined itself, is never a candidate.
 */

import type { CompactorConfig, JobKind, TierName } from './config.ts';
import type { Clock } from './engine.ts';
import { InvalidManifestError } from './errors.ts';
import { failureKey, readFailures } from './failures.ts';
import {
  type InputRef,
  type Manifest,
  manifestKey,
  manifestsRoot,
  parseManifest,
  partitionOf,
  quarantineRoot,
} from './manifest.ts';
import type { ObjectStore } from './object-store.ts';

export interface PlannedJob {
  readonly tier: JobKind;
  readonly partition: string;
  readonly inputs: readonly InputRef[];
  readonly inputBytes: number;
  /** Candidates in the partition; more than `inputs` when the job bound split it. */
  readonly candidates: number;
  readonly reason: string;
}

export interface SkippedPartition {
  readonly tier: JobKind;
  readonly partition: string;
  readonly reason: string;
}

export interface Plan {
  readonly tier: JobKind;
  readonly now: string;
  readonly jobs: readonly PlannedJob[];
  readonly skipped: readonly SkippedPartition[];
  readonly objectsListed: number;
}

interface Candidate {
  readonly key: string;
  readonly size: number;
  readonly etag: string;
}

interface Folder {
  /** Period start (ms) of the hour (hourly) or day (daily). */
  readonly periodStart: number;
  readonly candidates: Candidate[];
  newestModified: number;
}

/** Keys excluded from planning, and partitions that hold a live or unreadable manifest. */
export interface Exclusions {
  readonly keys: ReadonlySet<string>;
  readonly leasedManifests: ReadonlySet<string>;
  /** Manifest keys held by a quarantine record that did not validate. */
  readonly quarantineHolds: ReadonlySet<string>;
  readonly liveManifests: readonly Manifest[];
  readonly quarantinedManifests: readonly Manifest[];
  /** Keys named by quarantined manifests that did not validate (best effort). */
  readonly quarantinedRaw: readonly {
    readonly inputKeys: readonly string[];
    readonly outputKeys: readonly string[];
  }[];
}

/**
 * Reads every live and quarantined manifest and quarantined-input record. Unreadable live
 * manifests still lease their partition (recovery quarantines them); unreadable quarantine
 * records exclude nothing they cannot name, so they are reported, not obeyed.
 */
export async function readExclusions(store: ObjectStore, config: CompactorConfig): Promise<Exclusions> {
  const keys = new Set<string>();
  const leasedManifests = new Set<string>();
  const liveManifests: Manifest[] = [];
  const quarantinedManifests: Manifest[] = [];
  const quarantinedRaw: { inputKeys: readonly string[]; outputKeys: readonly string[] }[] = [];
  const quarantineHolds = new Set<string>();
  for await (const object of store.list(manifestsRoot(config.layout))) {
    leasedManifests.add(object.key);
    const manifest = await readManifestOrUndefined(store, config, object.key);
    if (!manifest) continue;
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
    if (object.key.startsWith(`${quarantine}inputs/`)) {
      keys.add(
        config.layout.dataPrefix + object.key.slice(`${quarantine}inputs/`.length).replace(/\.json$/, ''),
      );
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
    for (const key of record.inputKeys) keys.add(key);
    for (const key of record.outputKeys) keys.add(key);
    quarantinedRaw.push({ inputKeys: record.inputKeys, outputKeys: record.outputKeys });
    if (record.manifestKey) {
      leasedManifests.add(record.manifestKey);
      quarantineHolds.add(record.manifestKey);
    }
  }
  return { keys, leasedManifests, quarantineHolds, liveManifests, quarantinedManifests, quarantinedRaw };
}

async function readManifestOrUndefined(
  store: ObjectStore,
  config: CompactorConfig,
  key: string,
): Promise<Manifest | undefined> {
  const { body } = await store.getBytes(key).catch((error: unknown) => {
    if (error instanceof Error && error.name === 'NotFoundError') return { body: undefined };
    throw error;
  });
  if (body === undefined) return undefined;
  try {
    return parseManifest(config, store.location, key, body);
  } catch (error) {
    if (error instanceof InvalidManifestError) return undefined;
    throw error;
  }
}

export interface QuarantineRecord {
  /** The quarantined manifest, when it still validates. */
  readonly manifest?: Manifest;
  readonly manifestKey?: string;
  /** Best effort for a manifest that does not validate: the keys it seems to name. */
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
  const { body } = await store.getBytes(key).catch((error: unknown) => {
    if (error instanceof Error && error.name === 'NotFoundError') return { body: undefined };
    throw error;
  });
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
  const raw = rawKeys(record.manifest);
  return { manifestKey, inputKeys: raw.inputs, outputKeys: raw.outputs };
}

function rawKeys(text: string): { inputs: string[]; outputs: string[] } {
  let raw: { inputs?: unknown; outputs?: unknown };
  try {
    raw = JSON.parse(text) as { inputs?: unknown; outputs?: unknown };
  } catch {
    return { inputs: [], outputs: [] };
  }
  const pick = (list: unknown, field: string): string[] =>
    Array.isArray(list)
      ? list.flatMap((e) => {
          const value = (e as Record<string, unknown> | null)?.[field];
          return typeof value === 'string' ? [value] : [];
        })
      : [];
  return { inputs: pick(raw.inputs, 'key'), outputs: pick(raw.outputs, 'finalKey') };
}

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

export async function planTier(
  store: ObjectStore,
  config: CompactorConfig,
  clock: Clock,
  tier: TierName,
): Promise<Plan> {
  const { layout } = config;
  const now = clock.now().getTime();
  const folders = new Map<string, Folder>();
  const smallDaily = config.targetFileBytes / 2;
  let objectsListed = 0;

  // 1. Data first.
  for await (const object of store.list(layout.dataPrefix)) {
    objectsListed++;
    const file = layout.parse(object.key);
    if (!file) continue;
    // Quiet check covers every data file of the period, whichever tier it belongs to.
    const folderKey = tier === 'hourly' ? file.hourFolder : file.dayFolder;
    if (folderKey === undefined) continue;
    let folder = folders.get(folderKey);
    if (!folder) {
      const periodStart = tier === 'hourly' ? (file.hour ?? file.day).getTime() : file.day.getTime();
      folder = { periodStart, candidates: [], newestModified: 0 };
      folders.set(folderKey, folder);
    }
    folder.newestModified = Math.max(folder.newestModified, object.lastModified.getTime());
    if (partitionOf(tier, file) !== folderKey) continue;
    if (tier === 'daily' && file.level === 2 && object.size >= smallDaily) continue;
    folder.candidates.push({ key: object.key, size: object.size, etag: object.etag });
  }

  // 2. Then manifests and quarantine, and partitions in failure backoff.
  const exclusions = await readExclusions(store, config);
  const failures = await readFailures(store, config);
  const tierConfig = config.tiers[tier];
  const periodMs = tier === 'hourly' ? HOUR_MS : DAY_MS;
  const dailyAgeMs = config.tiers.daily.minAgeSeconds * 1000;
  const jobs: PlannedJob[] = [];
  const skipped: SkippedPartition[] = [];
  const sortedFolders = [...folders.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  for (const [partition, folder] of sortedFolders) {
    const candidates = folder.candidates.filter((c) => !exclusions.keys.has(c.key));
    if (candidates.length === 0) continue;
    const skip = (reason: string) => skipped.push({ tier, partition, reason });
    const lease = manifestKey(layout, tier, partition);
    if (exclusions.quarantineHolds.has(lease)) {
      skip('held by a quarantined manifest that does not validate: see compactor status');
      continue;
    }
    if (exclusions.leasedManifests.has(lease)) {
      skip('a job holds this partition (live manifest)');
      continue;
    }
    const failure = failures.get(failureKey(config, tier, partition));
    if (
      failure &&
      failure.consecutiveFailures >= config.failureBackoff.after &&
      now < Date.parse(failure.nextAttemptAt)
    ) {
      skip(
        `failed ${failure.consecutiveFailures} times in a row (last: ${failure.lastError.split('\n')[0]}); next attempt after ${failure.nextAttemptAt}`,
      );
      continue;
    }
    const periodEnd = folder.periodStart + periodMs;
    if (now < periodEnd + tierConfig.minAgeSeconds * 1000) {
      skip(`period not older than minAge (${tierConfig.minAgeSeconds}s)`);
      continue;
    }
    if (folder.newestModified > now - config.quietSeconds * 1000) {
      skip(`a file was written less than ${config.quietSeconds}s ago`);
      continue;
    }
    const dayEnd = Math.floor(folder.periodStart / DAY_MS) * DAY_MS + DAY_MS;
    const straggler = tier === 'hourly' && now >= dayEnd + dailyAgeMs;
    if (candidates.length < tierConfig.minFiles && !straggler) {
      skip(`${candidates.length} file(s), fewer than minFiles ${tierConfig.minFiles}`);
      continue;
    }
    if (tier === 'daily' && candidates.length < 2) continue;
    candidates.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    const inputs: Candidate[] = [];
    let bytes = 0;
    for (const c of candidates) {
      if (inputs.length > 0 && (inputs.length >= config.maxJobFiles || bytes + c.size > config.maxJobBytes))
        break;
      inputs.push(c);
      bytes += c.size;
    }
    if (tier === 'daily' && inputs.length < 2) {
      skip('the next daily input alone exceeds the job bound');
      continue;
    }
    jobs.push({
      tier,
      partition,
      inputs,
      inputBytes: bytes,
      candidates: candidates.length,
      reason:
        candidates.length < tierConfig.minFiles
          ? 'straggler flush: the day is old enough for the daily tier'
          : `${candidates.length} candidate file(s)`,
    });
  }
  return { tier, now: new Date(now).toISOString(), jobs, skipped, objectsListed };
}
