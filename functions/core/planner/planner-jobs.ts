/**
 * A plan's jobs from the folders its listing gathered: each partition either becomes a job, its
 * inputs chosen and bounded by maxJobFiles and maxJobBytes, or is skipped with the reason (a live
 * or quarantined manifest, failure backoff, minAge, quiet time, minFiles, the key limit).
 */

import type { CompactorConfig, JobKind, TierName } from '../config.ts';
import { type Exclusions, isExcluded } from '../exclusions.ts';
import { type FailureRecord, failureKey } from '../failures.ts';
import { type InputRef, keysTooLong, manifestKey } from '../manifest/manifest.ts';
import { compareKeys, type ObjectStore } from '../object-store.ts';
import { isParquetObject } from '../parquet-sniff.ts';
import { TIER_SPECS } from '../tiers.ts';
import type { Candidate, Folder } from './planner-listing.ts';

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

/**
 * The jobs and skipped partitions of `folders`, in partition key order, as of `now` (ms), given
 * the manifests and quarantine (`exclusions`) and the failure records read after the listing.
 */
export async function planJobs(
  store: ObjectStore,
  config: CompactorConfig,
  tier: TierName,
  now: number,
  folders: ReadonlyMap<string, Folder>,
  exclusions: Exclusions,
  failures: ReadonlyMap<string, FailureRecord>,
): Promise<{ jobs: PlannedJob[]; skipped: SkippedPartition[] }> {
  const { layout } = config;
  const tierConfig = config.tiers[tier];
  const jobs: PlannedJob[] = [];
  const skipped: SkippedPartition[] = [];
  const sortedFolders = [...folders.entries()].sort(([a], [b]) => compareKeys(a, b));
  for (const [partition, folder] of sortedFolders) {
    let candidates = folder.candidates.filter((c) => !isExcluded(exclusions, c.key));
    const skip = (reason: string) => skipped.push({ tier, partition, reason });
    if (candidates.length === 0) {
      // Say why a month with daily outputs has no monthly job yet, rather than nothing at all.
      if (folder.waiting > 0) {
        const after = new Date(folder.periodEnd + tierConfig.minAgeSeconds * 1000).toISOString();
        skip(
          `${folder.waiting} daily file(s) pass to the monthly tier once the month is older than minAge (${tierConfig.minAgeSeconds}s): after ${after}`,
        );
      }
      continue;
    }
    const lease = manifestKey(layout, tier, partition);
    if (exclusions.quarantineHolds.has(lease)) {
      skip('held by a quarantined manifest that does not validate: see compactor status');
      continue;
    }
    if (exclusions.leasedManifests.has(lease)) {
      skip('a job holds this partition (live manifest)');
      continue;
    }
    const sample = layout.parse((candidates[0] as Candidate).key);
    const tooLong = sample && keysTooLong(layout, tier, sample);
    if (tooLong) {
      skip(`cannot be compacted: ${tooLong}`);
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
    if (now < folder.periodEnd + tierConfig.minAgeSeconds * 1000) {
      skip(`period not older than minAge (${tierConfig.minAgeSeconds}s)`);
      continue;
    }
    if (folder.newestModified > now - config.quietSeconds * 1000) {
      skip(`a file was written less than ${config.quietSeconds}s ago`);
      continue;
    }
    // Inputs whose name does not say Parquet (Firehose without an extension) are read only now, in
    // a folder otherwise ready: anything else stays where it is, untouched.
    if (candidates.some((c) => layout.needsContentCheck(c.key))) {
      const checked: Candidate[] = [];
      for (const c of candidates) {
        if (!layout.needsContentCheck(c.key) || (await isParquetObject(store, c))) checked.push(c);
      }
      candidates = checked;
      if (candidates.length === 0) continue;
    }
    // Stragglers are flushed once the next tier may run on the period, so it can take everything.
    const straggler = stragglerFlush(config, tier, folder.periodStart, now);
    if (candidates.length < tierConfig.minFiles && !straggler) {
      skip(`${candidates.length} file(s), fewer than minFiles ${tierConfig.minFiles}`);
      continue;
    }
    // One file of the tier's own level alone has nothing to merge with.
    const lone =
      candidates.length === 1 &&
      layout.parse((candidates[0] as Candidate).key)?.level === TIER_SPECS[tier].output;
    if (tier !== 'hourly' && lone) continue;
    candidates.sort((a, b) => compareKeys(a.key, b.key));
    const inputs: Candidate[] = [];
    let bytes = 0;
    for (const c of candidates) {
      if (inputs.length > 0 && (inputs.length >= config.maxJobFiles || bytes + c.size > config.maxJobBytes))
        break;
      inputs.push(c);
      bytes += c.size;
    }
    if (tier !== 'hourly' && inputs.length < 2 && candidates.length > 1) {
      skip(`the next ${tier} input alone exceeds the job bound`);
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
          ? `straggler flush: the ${tier === 'hourly' ? 'day is old enough for the daily' : 'month is old enough for the monthly'} tier`
          : `${candidates.length} candidate file(s)`,
    });
  }
  return { jobs, skipped };
}

/**
 * Whether a tier compacts a folder below minFiles because the next tier may already run on the
 * enclosing period: the hour's day is old enough for the daily tier, or the day's month for the
 * (enabled) monthly tier. Without it, a lone file would never reach the next tier's level.
 */
function stragglerFlush(config: CompactorConfig, tier: TierName, periodStart: number, now: number): boolean {
  const start = new Date(periodStart);
  if (tier === 'hourly') {
    const dayEnd = Date.UTC(start.getUTCFullYear(), start.getUTCMonth(), start.getUTCDate() + 1);
    return now >= dayEnd + config.tiers.daily.minAgeSeconds * 1000;
  }
  if (tier === 'daily' && config.tiers.monthly.enabled && config.layout.hasMonthFolder) {
    const monthEnd = Date.UTC(start.getUTCFullYear(), start.getUTCMonth() + 1, 1);
    return now >= monthEnd + config.tiers.monthly.minAgeSeconds * 1000;
  }
  return false;
}
