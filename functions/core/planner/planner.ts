/**
 * Candidate planning for one tier. Data is listed first, then manifests, so a file listed
 * before its manifest appeared is still excluded by it. A file named by any live or quarantined
 * manifest, or quarantined itself, is never a candidate.
 *
 * This module is the planner's public face: planTier, its two passes in order, and every name its
 * importers use. The listing lives in planner-listing.ts (with list-windows.ts), the jobs and
 * skips in planner-jobs.ts, the sweep markers in planner-sweeps.ts.
 */

import type { Backlog } from '../backlog.ts';
import type { CompactorConfig, JobKind, TierName } from '../config.ts';
import type { Clock } from '../engine.ts';
import { ConfigError } from '../errors.ts';
import { readExclusions } from '../exclusions.ts';
import { readFailures } from '../failures.ts';
import type { ObjectStore } from '../object-store.ts';
import { type BacklogRecord, backlogRecordOf } from './planner-backlog-record.ts';
import { type PlannedJob, planJobs, type SkippedPartition } from './planner-jobs.ts';
import { listTierFolders, type PlanListing, type PlanScope, scopePrefix } from './planner-listing.ts';

export {
  BACKLOG_RECORD_LIMIT,
  type BacklogRecord,
  backlogRecordKey,
  readBacklogRecord,
  writeBacklogRecord,
} from './planner-backlog-record.ts';
export { candidateFiles, type PlannedJob, type SkippedPartition } from './planner-jobs.ts';
export { type PlanListing, type PlanScope, parseInFolder, scopePrefix } from './planner-listing.ts';
export { lastSweep, recordSweep, sweepsRoot } from './planner-sweeps.ts';

export interface Plan {
  readonly tier: JobKind;
  readonly now: string;
  readonly jobs: readonly PlannedJob[];
  readonly skipped: readonly SkippedPartition[];
  /** Partitions already one file of the tier's level: nothing to merge. Absent on retention plans. */
  readonly settled?: number;
  readonly objectsListed: number;
  /** Absent on retention plans, which always list the whole data root. */
  readonly listing?: PlanListing;
  /**
   * The tier's eligible partitions and how long the oldest has waited (backlog.ts), over the
   * folders this plan listed. Absent on retention plans.
   */
  readonly backlog?: Backlog;
  /**
   * The backlog record the plan step writes once the plan is written (planner-backlog-record.ts):
   * the eligible partitions, for the next windowed plan. Absent on retention plans.
   */
  readonly backlogRecord?: BacklogRecord;
}

/**
 * Throws the ConfigError of a tier that is off, or that its layout refuses (its outputs would sit
 * above the partitions readers read: Layout.tierRefusal), before anything is listed or written.
 */
export function assertTierRuns(config: CompactorConfig, tier: TierName): void {
  // The layout's refusal first: it holds whatever the tier's setting says.
  const refusal = config.layout.tierRefusal(tier);
  if (refusal) throw new ConfigError(`tiers.${tier}: ${refusal}`);
  if (config.tiers[tier].enabled) return;
  throw new ConfigError(
    `the ${tier} tier is off: set tiers.${tier}.enabled to true (cdk.json context compactor.tiers.${tier}.enabled, or --context${tier === 'monthly' ? '; a local command also takes --monthly' : ''})`,
  );
}

export async function planTier(
  store: ObjectStore,
  config: CompactorConfig,
  clock: Clock,
  tier: TierName,
  scope: PlanScope = {},
): Promise<Plan> {
  assertTierRuns(config, tier);
  // Validated before anything is listed: a bad scope plans nothing rather than everything.
  const listed = scopePrefix(config, scope);
  const now = clock.now().getTime();

  // 1. Data first: every listing completes before manifests are read.
  const { folders, objectsListed, listing } = await listTierFolders(store, config, tier, now, scope, listed);

  // 2. Then manifests and quarantine, and partitions in failure backoff.
  const exclusions = await readExclusions(store, config);
  const failures = await readFailures(store, config);
  const { jobs, skipped, settled, backlog, eligible } = await planJobs(
    store,
    config,
    tier,
    now,
    folders,
    exclusions,
    failures,
  );
  const plannedAt = new Date(now).toISOString();
  // Only windowed plans read the record, and a plan that lists the data root whole is followed by
  // a sweep before any windows (it records no sweep): it leaves none, nor anything in a local lake.
  const backlogRecord =
    listing.mode === 'full' ? undefined : backlogRecordOf(plannedAt, listing.backlogCovered, eligible);
  return {
    tier,
    now: plannedAt,
    jobs,
    skipped,
    settled,
    objectsListed,
    listing,
    backlog,
    ...(backlogRecord !== undefined ? { backlogRecord } : {}),
  };
}
