/**
 * A plan's jobs from the folders its listing gathered: each partition either becomes jobs, its
 * inputs chosen and bounded by maxJobFiles and maxJobBytes, or is skipped with the reason (a live
 * or quarantined manifest, failure backoff, minAge, quiet time, minFiles, the key limit).
 *
 * A partition holding more than one job bound becomes up to maxJobsPerPartition jobs with
 * disjoint inputs, numbered by wave: the workflow runs wave k (every partition's k-th job) only
 * after wave k-1 ended, so one partition's jobs run one after another, each claiming the lease in
 * turn, and a backlog drains in one execution.
 */

import { type Backlog, dueAt, type EligiblePartition, stragglerFlushAt, tallyBacklog } from '../backlog.ts';
import type { CompactorConfig, JobKind, TierName } from '../config.ts';
import { type Exclusions, isExcluded } from '../exclusions.ts';
import { type FailureRecord, failureKey, heldByBackoff } from '../failures.ts';
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
  /**
   * The job's place among its partition's jobs (0 for the first): the workflow runs the waves in
   * order, so no two jobs of one partition ever run at once.
   */
  readonly wave: number;
}

export interface SkippedPartition {
  readonly tier: JobKind;
  readonly partition: string;
  readonly reason: string;
  /** The folder's files that would be inputs, when the skip comes from a listed folder. */
  readonly candidates?: number;
}

/** How plan and run name a partition's candidate files: the files a tier would merge there. */
export function candidateFiles(count: number): string {
  return `${count} candidate file(s)`;
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
): Promise<{
  jobs: PlannedJob[];
  skipped: SkippedPartition[];
  settled: number;
  backlog: Backlog;
  eligible: EligiblePartition[];
}> {
  const context: FolderContext = { store, config, tier, now, exclusions, failures };
  const jobs: PlannedJob[] = [];
  const skipped: SkippedPartition[] = [];
  const eligible: EligiblePartition[] = [];
  let settled = 0;
  const sortedFolders = [...folders.entries()].sort(([a], [b]) => compareKeys(a, b));
  for (const [partition, folder] of sortedFolders) {
    const planned = await planFolder(context, partition, folder);
    if (planned.eligible !== undefined)
      eligible.push({ partition, periodStart: folder.periodStart, ...planned.eligible });
    const aside = quarantinedAside(context, partition, folder);
    const withAside = (reason: string) => (aside === undefined ? reason : `${reason}; ${aside}`);
    if (planned.kind === 'jobs')
      jobs.push(...planned.jobs.map((job) => ({ ...job, reason: withAside(job.reason) })));
    else if (planned.kind === 'skip') {
      skipped.push({ tier, partition, reason: withAside(planned.reason), candidates: planned.candidates });
    } else if (aside !== undefined) {
      // A folder whose only inputs are quarantined is said, never silent: they wait for a release.
      skipped.push({ tier, partition, reason: aside, candidates: 0 });
    } else if (planned.kind === 'settled') settled++;
  }
  return { jobs, skipped, settled, backlog: tallyBacklog(config, tier, now, eligible), eligible };
}

interface FolderContext {
  readonly store: ObjectStore;
  readonly config: CompactorConfig;
  readonly tier: TierName;
  readonly now: number;
  readonly exclusions: Exclusions;
  readonly failures: ReadonlyMap<string, FailureRecord>;
}

/**
 * One folder's part of the plan: a job, a skip with its reason, already one file of the tier's
 * level (settled: nothing to merge, whatever its age), or nothing to say; and, when the folder is
 * eligible (backlog.ts), when it became due and whether this plan leaves some of it.
 */
type FolderPlan = (
  | { readonly kind: 'jobs'; readonly jobs: readonly PlannedJob[] }
  | { readonly kind: 'skip'; readonly reason: string; readonly candidates: number }
  | { readonly kind: 'settled' }
  | { readonly kind: 'none' }
) & { readonly eligible?: Omit<EligiblePartition, 'partition' | 'periodStart'> };

async function planFolder(context: FolderContext, partition: string, folder: Folder): Promise<FolderPlan> {
  const { config, tier, now } = context;
  const tierConfig = config.tiers[tier];
  let candidates = folder.candidates.filter((c) => !isExcluded(context.exclusions, c.key));
  // Eligible by the candidates as they are now, unless a later check drops some of them.
  const eligible = (count = candidates.length, leftForLater = true) => {
    const due = dueAt(config, tier, folder, count);
    return due === undefined || due > now ? {} : { eligible: { dueAt: due, leftForLater } };
  };
  // Before the candidates: a manifest excludes the files it names, which may be all of them.
  const leased = leaseHolder(context, partition);
  if (leased !== undefined)
    return { kind: 'skip', reason: leased, candidates: folder.candidates.length, ...eligible() };
  const skip = (reason: string): FolderPlan => ({
    kind: 'skip',
    reason,
    candidates: candidates.length,
    ...eligible(),
  });
  const first = candidates[0];
  if (first === undefined) {
    // Say why a month with daily outputs has no monthly job yet, rather than nothing at all.
    if (folder.waiting === 0) return { kind: 'none' };
    const after = new Date(folder.periodEnd + tierConfig.minAgeSeconds * 1000).toISOString();
    return skip(
      `${folder.waiting} daily file(s) pass to the monthly tier once the month is older than minAge (${tierConfig.minAgeSeconds}s): after ${after}`,
    );
  }
  // One file of the tier's own level alone has nothing to merge with: said before any wait.
  if (
    tier !== 'hourly' &&
    candidates.length === 1 &&
    config.layout.parse(first.key)?.level === TIER_SPECS[tier].output
  ) {
    return { kind: 'settled' };
  }
  const held = heldBack(context, partition, folder, first);
  if (held !== undefined) return skip(held);
  candidates = await parquetOnly(context, candidates);
  if (candidates.length === 0) return { kind: 'none' };
  // Stragglers are flushed once the next tier may run on the period, so it can take everything.
  const flushAt = stragglerFlushAt(config, tier, folder.periodStart);
  const straggler = flushAt !== undefined && now >= flushAt;
  if (candidates.length < tierConfig.minFiles && !straggler) {
    return skip(`${candidates.length} file(s), fewer than minFiles ${tierConfig.minFiles}`);
  }
  candidates.sort((a, b) => compareKeys(a.key, b.key));
  const chunks = boundedChunks(config, candidates);
  const firstJob = chunks[0];
  if (firstJob === undefined) return { kind: 'none' };
  if (tier !== 'hourly' && firstJob.inputs.length < 2 && candidates.length > 1) {
    return skip(`the next ${tier} input alone exceeds the job bound`);
  }
  const reason =
    candidates.length < tierConfig.minFiles
      ? `straggler flush: the ${tier === 'hourly' ? 'day is old enough for the daily' : 'month is old enough for the monthly'} tier`
      : candidateFiles(candidates.length);
  // A later chunk of one file alone would only rewrite it above the hourly tier: it waits for
  // the next run, which merges it with what arrives meanwhile.
  const runnable = chunks.filter((chunk, wave) => wave === 0 || tier === 'hourly' || chunk.inputs.length > 1);
  const taken = runnable.reduce((sum, chunk) => sum + chunk.inputs.length, 0);
  return {
    kind: 'jobs',
    ...eligible(candidates.length, taken < candidates.length),
    jobs: runnable.map((chunk, wave) => ({
      tier,
      partition,
      inputs: chunk.inputs,
      inputBytes: chunk.bytes,
      candidates: candidates.length,
      reason:
        runnable.length > 1 ? `${reason}: job ${wave + 1} of ${runnable.length}, one after another` : reason,
      wave,
    })),
  };
}

/** The folder's quarantined inputs, which no job takes until released, and the way back. */
function quarantinedAside(context: FolderContext, partition: string, folder: Folder): string | undefined {
  const count = folder.candidates.filter((c) => context.exclusions.quarantinedInputs.has(c.key)).length;
  if (count === 0) return undefined;
  return `${count} quarantined input(s) set aside (compactor status says why): once the cause is fixed, \`compactor release --partition ${partition}\` re-admits them`;
}

/**
 * Why a manifest holds the folder's lease, if one does: a quarantined one that does not validate,
 * or a live one, with its job, state, owner and lease, and what the next run's recovery does.
 */
function leaseHolder(context: FolderContext, partition: string): string | undefined {
  const { config, tier } = context;
  const lease = manifestKey(config.layout, tier, partition);
  if (context.exclusions.quarantineHolds.has(lease)) {
    return 'held by a quarantined manifest that does not validate: see compactor status';
  }
  if (!context.exclusions.leasedManifests.has(lease)) return undefined;
  const held = context.exclusions.liveManifests.find((m) => m.tier === tier && m.partition === partition);
  if (held === undefined)
    return 'held by a live manifest that does not validate: the next run quarantines it';
  const then =
    held.state === 'claimed'
      ? 'rolls it back (its inputs are planned again)'
      : `finishes it from ${held.state}`;
  return `held by job ${held.jobId} (${held.state} since ${held.updatedAt}, owner ${held.executionId}, lease until ${held.leaseExpiresAt}): the next run leaves it to its owner while that runs and the lease lasts, else its recovery ${then}`;
}

/**
 * Why a folder with candidates is not planned now, in the order checked: keys too long for the
 * store, failure backoff, minAge, quiet time. Undefined: none.
 */
function heldBack(
  context: FolderContext,
  partition: string,
  folder: Folder,
  first: Candidate,
): string | undefined {
  const { config, tier, now } = context;
  const { layout } = config;
  const tierConfig = config.tiers[tier];
  const sample = layout.parse(first.key);
  const tooLong = sample && keysTooLong(layout, tier, sample);
  if (tooLong) return `cannot be compacted: ${tooLong}`;
  const failure = context.failures.get(failureKey(config, tier, partition));
  if (failure && heldByBackoff(config, failure, now)) {
    return `failed ${failure.consecutiveFailures} times in a row (last: ${failure.lastError.split('\n')[0]}); next attempt after ${failure.nextAttemptAt}`;
  }
  if (now < folder.periodEnd + tierConfig.minAgeSeconds * 1000) {
    return `period not older than minAge (${tierConfig.minAgeSeconds}s)`;
  }
  if (folder.newestModified > now) {
    // Planning as of an earlier time (a replay, --now) than a file's write.
    return `a file was written at ${new Date(folder.newestModified).toISOString()}, after the time planned for (${new Date(now).toISOString()})`;
  }
  if (folder.newestModified > now - config.quietSeconds * 1000) {
    return `a file was written less than quietSeconds (${config.quietSeconds}s) ago`;
  }
  return undefined;
}

/**
 * Inputs whose name does not say Parquet (Firehose without an extension) are read only now, in a
 * folder otherwise ready: anything else stays where it is, untouched.
 */
async function parquetOnly(context: FolderContext, candidates: Candidate[]): Promise<Candidate[]> {
  const { layout } = context.config;
  if (!candidates.some((c) => layout.needsContentCheck(c.key))) return candidates;
  const checked: Candidate[] = [];
  for (const c of candidates) {
    if (!layout.needsContentCheck(c.key) || (await isParquetObject(context.store, c))) checked.push(c);
  }
  return checked;
}

/**
 * The jobs the sorted candidates make, in order: each at least one candidate, then up to
 * maxJobFiles and maxJobBytes; at most maxJobsPerPartition of them (the rest waits for a later run).
 */
function boundedChunks(
  config: CompactorConfig,
  candidates: readonly Candidate[],
): { readonly inputs: Candidate[]; readonly bytes: number }[] {
  const chunks: { inputs: Candidate[]; bytes: number }[] = [];
  let current: { inputs: Candidate[]; bytes: number } | undefined;
  for (const c of candidates) {
    if (
      current === undefined ||
      current.inputs.length >= config.maxJobFiles ||
      current.bytes + c.size > config.maxJobBytes
    ) {
      if (chunks.length >= config.maxJobsPerPartition) break;
      current = { inputs: [], bytes: 0 };
      chunks.push(current);
    }
    current.inputs.push(c);
    current.bytes += c.size;
  }
  return chunks;
}
