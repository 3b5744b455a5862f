/**
 * Forward progress of a tier: how many partitions are waiting for it, how long the oldest has
 * waited, and the verdict "behind", written once here. The planner counts (planner-jobs.ts), the
 * Plan step publishes the two figures as metrics, the stack alarms on the same threshold with the
 * same comparison, and `compactor run` and `plan` warn with behindWarning.
 *
 * A partition is eligible for a tier when the tier would compact it now but for this run's
 * bounds and holds: it has candidates (files no live or quarantined manifest names, and not
 * quarantined), it is not already one file of the tier's level, and the time it became due has
 * passed. It became due when its period ended `minAgeSeconds` ago; one holding fewer than
 * `minFiles` candidates becomes due only when the planner flushes stragglers (its day is old
 * enough for the daily tier, its month for the monthly one), never before. A partition held by a
 * lease, failure backoff, quiet time, left for a later run by maxJobsPerPartition, or that cannot
 * be compacted as it is (keys too long for the store, an input alone over the job bound) still
 * counts: that is the backlog an operator must hear of.
 *
 * Its age is the time since it became due, not since its period ended: minAge is a wait the
 * operator chose, and the age measures only the lag the compactor adds beyond it, so a threshold
 * of three periods means three cycles behind whatever minAge is.
 */

import type { CompactorConfig, TierName } from './config.ts';

export interface Backlog {
  /** Partitions eligible for the tier, whether or not this plan took them all. */
  readonly eligiblePartitions: number;
  /** Eligible partitions this plan leaves (some of) their candidates in: held, or beyond the job bounds. */
  readonly leftForLater: number;
  /** Seconds since the oldest eligible partition became due (0: none is eligible). */
  readonly oldestEligibleAgeSeconds: number;
  /** The oldest eligible partition, if any. */
  readonly oldestEligiblePartition?: string;
  /** The tier's `behindAfterSeconds`. */
  readonly behindAfterSeconds: number;
  /** The verdict: isBehind(oldestEligibleAgeSeconds, behindAfterSeconds). */
  readonly behind: boolean;
}

/** One partition's part in a backlog: when it became due, and whether this plan takes all of it. */
export interface EligiblePartition {
  readonly partition: string;
  /** Start (ms) of its period. */
  readonly periodStart: number;
  /** When (ms) it became due. */
  readonly dueAt: number;
  readonly leftForLater: boolean;
}

/**
 * How "behind" compares, in CloudWatch's words: the stack's backlog alarm takes it as its
 * ComparisonOperator, so the alarm and isBehind judge a figure alike.
 */
export const BEHIND_COMPARISON = 'GreaterThanThreshold';

/** Behind: the oldest eligible partition has waited longer than the threshold (BEHIND_COMPARISON). */
export function isBehind(oldestEligibleAgeSeconds: number, behindAfterSeconds: number): boolean {
  return oldestEligibleAgeSeconds > behindAfterSeconds;
}

/**
 * Whether a plan's age of the oldest eligible partition may stand as the tier's: a plan whose
 * backlog is `covered` counted every eligible partition the tier had (a sweep or full listing, or
 * a windowed plan that listed again those its backlog record carried: planner-backlog-record.ts),
 * so it can say the tier caught up. Any other plan can say the tier is behind, never that an
 * older backlog, which only the next sweep lists, has drained.
 */
export function ageStands(backlog: Backlog, covered: boolean): boolean {
  return covered || backlog.behind;
}

/** When a partition whose period is [periodStart, periodEnd) with `candidates` candidates becomes due. */
export function dueAt(
  config: CompactorConfig,
  tier: TierName,
  period: { readonly periodStart: number; readonly periodEnd: number },
  candidates: number,
): number | undefined {
  if (candidates === 0) return undefined;
  const due = period.periodEnd + config.tiers[tier].minAgeSeconds * 1000;
  if (candidates >= config.tiers[tier].minFiles) return due;
  const flush = stragglerFlushAt(config, tier, period.periodStart);
  return flush === undefined ? undefined : Math.max(due, flush);
}

/**
 * When (ms) a tier compacts a folder below minFiles because the next tier may run on the
 * enclosing period: the hour's day is old enough for the daily tier, or the day's month for the
 * (enabled) monthly tier. Without it, a lone file would never reach the next tier's level.
 * Undefined: never (the daily tier with no monthly tier to feed, the monthly tier).
 */
export function stragglerFlushAt(
  config: CompactorConfig,
  tier: TierName,
  periodStart: number,
): number | undefined {
  const start = new Date(periodStart);
  if (tier === 'hourly') {
    const dayEnd = Date.UTC(start.getUTCFullYear(), start.getUTCMonth(), start.getUTCDate() + 1);
    return dayEnd + config.tiers.daily.minAgeSeconds * 1000;
  }
  if (tier === 'daily' && config.tiers.monthly.enabled && config.layout.hasMonthFolder) {
    const monthEnd = Date.UTC(start.getUTCFullYear(), start.getUTCMonth() + 1, 1);
    return monthEnd + config.tiers.monthly.minAgeSeconds * 1000;
  }
  return undefined;
}

/** The backlog of `tier` at `now` (ms) from its eligible partitions, in partition order. */
export function tallyBacklog(
  config: CompactorConfig,
  tier: TierName,
  now: number,
  eligible: readonly EligiblePartition[],
): Backlog {
  let oldest: EligiblePartition | undefined;
  for (const p of eligible) if (oldest === undefined || p.dueAt < oldest.dueAt) oldest = p;
  const oldestEligibleAgeSeconds = oldest === undefined ? 0 : Math.floor((now - oldest.dueAt) / 1000);
  const { behindAfterSeconds } = config.tiers[tier];
  return {
    eligiblePartitions: eligible.length,
    leftForLater: eligible.filter((p) => p.leftForLater).length,
    oldestEligibleAgeSeconds,
    ...(oldest === undefined ? {} : { oldestEligiblePartition: oldest.partition }),
    behindAfterSeconds,
    behind: isBehind(oldestEligibleAgeSeconds, behindAfterSeconds),
  };
}

/** `3h 5m`, `2d 4h`, `45s`: a wait as an operator reads it. */
export function formatAge(seconds: number): string {
  const units: [string, number][] = [
    ['d', 86_400],
    ['h', 3600],
    ['m', 60],
    ['s', 1],
  ];
  const parts: string[] = [];
  let rest = seconds;
  for (const [unit, size] of units) {
    if (rest < size && !(size === 1 && parts.length === 0)) continue;
    parts.push(`${Math.floor(rest / size)}${unit}`);
    rest %= size;
    if (parts.length === 2) break;
  }
  return parts.join(' ');
}

/** What a behind tier means and what to do, or undefined when it is not behind. */
export function behindWarning(tier: TierName, backlog: Backlog): string | undefined {
  if (!backlog.behind) return undefined;
  // A first run over old data is behind and drains it; one that leaves some is the backlog to fix.
  const left =
    backlog.leftForLater > 0
      ? `; this run leaves files of ${backlog.leftForLater} of them for later: held (see the skip reasons) or beyond maxJobsPerPartition x maxJobFiles/maxJobBytes`
      : '; this run plans all of them: if they commit, the next plan finds the tier caught up';
  return (
    `the ${tier} tier is behind: partition ${backlog.oldestEligiblePartition} has been eligible for ` +
    `${formatAge(backlog.oldestEligibleAgeSeconds)} (${backlog.oldestEligibleAgeSeconds} s), longer than ` +
    `tiers.${tier}.behindAfterSeconds (${formatAge(backlog.behindAfterSeconds)}); ` +
    `${backlog.eligiblePartitions} partition(s) eligible${left}. ` +
    `Check failed and held partitions (compactor status, the skip reasons), then let runs take more: ` +
    `raise map.maxConcurrency (--concurrency here), maxJobsPerPartition or the job bounds, or run the tier more often`
  );
}
