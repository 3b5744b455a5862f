/**
 * Retention: whole files whose period ended before a table's retention (plus a buffer) are
 * deleted through the same protocol as every other job, and never wait for a merge to succeed
 * (GreptimeDB's expired files). A file is judged by its path only: the layout guarantees the
 * rows of a folder lie in its period, so a file's newest row is no newer than the end of its
 * hour (hour folder) or day (daily output in the day folder).
 *
 * One job per day folder, leased by `manifests/retention/{day}.json` (never the compaction
 * tiers' leases). The job goes claimed -> verified (the commit point: the visible view stops
 * counting its inputs) -> inputs-deleted (ETag-conditioned DeleteObjects) -> cleared, with the
 * shared deleteInputsStep and clearManifestStep; recovery rolls a claimed job back and finishes a
 * verified one. No output is ever written, so the publish and verify steps have nothing to do.
 */

import type { CompactorConfig, RetentionRule } from './config.ts';
import type { Clock } from './engine.ts';
import { ConfigError } from './errors.ts';
import { isExcluded, readExclusions } from './exclusions.ts';
import { failureKey, readFailures } from './failures.ts';
import { type Job, result, type StepDeps, type StepResult, summary, withSignal } from './job.ts';
import { type DataFile, periodEnd } from './layout.ts';
import { forEachLimit } from './limit.ts';
import {
  type Expiry,
  type InputRef,
  jobIdOfOutput,
  jobPartitionOf,
  type KeptInput,
  leaseOf,
  tierFolderFile,
} from './manifest/manifest.ts';
import {
  advance,
  claimOrLoad,
  deleteManifest,
  type Loaded,
  newClaim,
  writeManifest,
} from './manifest/manifest-cas.ts';
import { compareKeys, type ObjectStore } from './object-store.ts';
import { parseDataObject } from './parquet-sniff.ts';
import type { Plan, PlannedJob, SkippedPartition } from './planner/planner.ts';

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

/** Table paths kept for the unmatched-rule hint. */
const MAX_TABLES_SEEN = 5;

/** The rule for a table path: the most specific rule whose path is a prefix of it, else `*`. */
export function retentionRuleFor(config: CompactorConfig, table: string): RetentionRule | undefined {
  const relative = table.slice(config.layout.dataPrefix.length);
  return config.retention.rules.find((r) => r.table === '*' || relative.startsWith(r.table));
}

/** Files whose period ends at or before this time are expired under the rule. */
export function retentionCutoff(config: CompactorConfig, rule: RetentionRule, now: Date): Date {
  return new Date(now.getTime() - rule.days * DAY_MS - config.retention.bufferHours * HOUR_MS);
}

export function isExpired(file: Pick<DataFile, 'day' | 'hour' | 'month'>, cutoff: Date): boolean {
  return periodEnd(file).getTime() <= cutoff.getTime();
}

export interface RetentionJob extends PlannedJob {
  readonly tier: 'retention';
  /** The rule applied (table path or `*`), its days, and the cutoff at planning time. */
  readonly rule: string;
  readonly days: number;
  readonly cutoff: string;
}

export interface RetentionPlan extends Plan {
  readonly tier: 'retention';
  readonly jobs: readonly RetentionJob[];
  /** False when no rule is configured: retention is off and nothing was listed. */
  readonly enabled: boolean;
  /**
   * Rules (table paths) that no listed data file falls under, most likely a mistyped path: they
   * can never expire anything. `*` is never reported.
   */
  readonly unmatchedRules: readonly string[];
  /** A few of the table paths the listing did hold, to show beside an unmatched rule. */
  readonly tablesSeen: readonly string[];
}

/** What the plan step logs, with `{ rule, tablesSeen }`, for each of a plan's unmatchedRules. */
export const UNMATCHED_RULE = 'retention rule matches no data file';

/** The warning for an unmatched rule, naming a few of the tables the lake does hold. */
export function unmatchedRuleWarning(rule: string, tablesSeen: readonly string[]): string {
  return `warning: retention rule "${rule}" matches no data file, so it expires nothing; a rule names a table path under the data prefix${tablesSeen.length > 0 ? ` (tables here include ${tablesSeen.join(', ')})` : ' (no table found)'}`;
}

/** A plan of the retention kind (planCycle returns the general Plan). */
export function isRetentionPlan(plan: Plan): plan is RetentionPlan {
  return plan.tier === 'retention' && 'unmatchedRules' in plan;
}

interface DayFolder {
  readonly rule: RetentionRule;
  readonly cutoff: Date;
  readonly candidates: InputRef[];
}

/**
 * Plans one retention job per day folder holding expired files. Data is listed first, then
 * manifests and quarantine: a file named by any live or quarantined manifest, or quarantined
 * itself, is never a candidate, and a day that a live job of any tier holds (its retention
 * lease, its daily lease or one of its hours' leases) is skipped this time.
 */
export async function planRetention(
  store: ObjectStore,
  config: CompactorConfig,
  clock: Clock,
): Promise<RetentionPlan> {
  const { layout } = config;
  const now = clock.now();
  if (config.retention.rules.length === 0) {
    return {
      tier: 'retention',
      now: now.toISOString(),
      jobs: [],
      skipped: [],
      objectsListed: 0,
      enabled: false,
      unmatchedRules: [],
      tablesSeen: [],
    };
  }
  const days = new Map<string, DayFolder>();
  let objectsListed = 0;
  const matched = new Set<string>();
  const tables = new Set<string>();

  // 1. Data first.
  for await (const object of store.list(layout.dataPrefix)) {
    // The count is of the lake's objects, as the tiers' plans count them: not the state root's.
    if (!object.key.startsWith(layout.stateRoot)) objectsListed++;
    // A non-Parquet object beside the data (read when its name does not say) is never expired.
    const file = await parseDataObject(store, layout, object);
    if (!file) continue;
    if (tables.size < MAX_TABLES_SEEN) tables.add(file.table.slice(layout.dataPrefix.length));
    const rule = retentionRuleFor(config, file.table);
    if (!rule) continue;
    matched.add(rule.table);
    const cutoff = retentionCutoff(config, rule, now);
    if (!isExpired(file, cutoff)) continue;
    const partition = jobPartitionOf('retention', file) as string;
    const day = days.get(partition) ?? { rule, cutoff, candidates: [] };
    day.candidates.push({ key: object.key, size: object.size, etag: object.etag });
    days.set(partition, day);
  }

  // 2. Then manifests and quarantine, and days in failure backoff.
  const exclusions = await readExclusions(store, config);
  const failures = await readFailures(store, config);
  const jobs: RetentionJob[] = [];
  const skipped: SkippedPartition[] = [];
  for (const [partition, day] of [...days.entries()].sort(([a], [b]) => compareKeys(a, b))) {
    const candidates = day.candidates.filter((c) => !isExcluded(exclusions, c.key));
    const skip = (reason: string) => skipped.push({ tier: 'retention', partition, reason });
    if (candidates.length === 0) {
      // Every expired file is held: said, so a day that is not expired is never a silent one.
      const quarantined = day.candidates.filter((c) => exclusions.quarantinedInputs.has(c.key)).length;
      const byJobs = day.candidates.length - quarantined;
      const held = [
        ...(byJobs > 0
          ? [`${byJobs} file(s) named by a live or quarantined job's manifest (expired once it ends)`]
          : []),
        ...(quarantined > 0 ? [`${quarantined} quarantined input(s) (kept until released)`] : []),
      ];
      skip(`${held.join(' and ')}: nothing expired now; see compactor status`);
      continue;
    }
    const holder = leaseHolder(config, exclusions.leasedManifests, partition);
    if (holder) {
      skip(`${holder} holds this day (live manifest): expired on a later run`);
      continue;
    }
    const failure = failures.get(failureKey(config, 'retention', partition));
    if (
      failure &&
      failure.consecutiveFailures >= config.failureBackoff.after &&
      now.getTime() < Date.parse(failure.nextAttemptAt)
    ) {
      skip(
        `failed ${failure.consecutiveFailures} times in a row; next attempt after ${failure.nextAttemptAt}`,
      );
      continue;
    }
    candidates.sort((a, b) => compareKeys(a.key, b.key));
    // Bounded like every job (a manifest never names more than maxJobFiles inputs): a larger day
    // becomes up to maxJobsPerPartition jobs run one after another (waves); the rest goes on the
    // next run.
    const waves = Math.min(Math.ceil(candidates.length / config.maxJobFiles), config.maxJobsPerPartition);
    for (let wave = 0; wave < waves; wave++) {
      const inputs = candidates.slice(wave * config.maxJobFiles, (wave + 1) * config.maxJobFiles);
      jobs.push({
        tier: 'retention',
        partition,
        inputs,
        inputBytes: inputs.reduce((sum, i) => sum + i.size, 0),
        candidates: candidates.length,
        rule: day.rule.table,
        days: day.rule.days,
        cutoff: day.cutoff.toISOString(),
        reason: `${candidates.length} file(s) ended at or before ${day.cutoff.toISOString()} (rule "${day.rule.table}": ${day.rule.days} day(s) + ${config.retention.bufferHours} h buffer)${waves > 1 ? `: job ${wave + 1} of ${waves}, one after another` : ''}`,
        wave,
      });
    }
  }
  return {
    tier: 'retention',
    now: now.toISOString(),
    jobs,
    skipped,
    objectsListed,
    enabled: true,
    unmatchedRules: config.retention.rules.map((r) => r.table).filter((t) => t !== '*' && !matched.has(t)),
    tablesSeen: [...tables].sort(),
  };
}

/**
 * Which job holds a day (or month) folder: its own retention lease, or a lease of any kind on the
 * folder, a folder inside it (an hour of the day) or the folder around it (the day's month).
 */
function leaseHolder(
  config: CompactorConfig,
  leased: ReadonlySet<string>,
  partition: string,
): string | undefined {
  for (const key of leased) {
    const lease = leaseOf(config.layout, key);
    if (!lease) continue;
    if (lease.partition.startsWith(partition) || partition.startsWith(lease.partition)) {
      return `${lease.tier === 'hourly' ? 'an' : 'a'} ${lease.tier} job`;
    }
  }
  return undefined;
}

/** Files other jobs' live or quarantined manifests name, and this day's quarantined inputs: the re-check after our claim. */
async function heldByOthers(
  deps: StepDeps,
  own: Loaded,
): Promise<{ readonly held: Map<string, string>; readonly quarantined: ReadonlySet<string> }> {
  const { store, config } = deps;
  const exclusions = await readExclusions(store, config);
  const held = new Map<string, string>();
  for (const m of exclusions.liveManifests) {
    if (m.jobId === own.manifest.jobId) continue;
    const by = `${m.tier} job ${m.jobId}`;
    for (const i of m.inputs) held.set(i.key, by);
    for (const o of m.outputs ?? []) held.set(o.finalKey, by);
    for (const e of m.repairOf ?? []) held.set(e.key, by);
  }
  for (const m of exclusions.quarantinedManifests) {
    for (const i of m.inputs) held.set(i.key, `quarantined ${m.tier} job ${m.jobId}`);
    for (const o of m.outputs ?? []) held.set(o.finalKey, `quarantined ${m.tier} job ${m.jobId}`);
  }
  for (const raw of exclusions.unreadable) {
    const by = raw.manifestKey === own.key ? undefined : 'a manifest that does not validate';
    if (!by) continue;
    for (const k of [...raw.inputKeys, ...raw.outputKeys]) held.set(k, by);
  }
  // Outputs of jobs whose manifests do not validate, named by their job id.
  if (exclusions.jobIds.size > 0) {
    for (const input of own.manifest.inputs) {
      const jobId = jobIdOfOutput(input.key);
      if (jobId && exclusions.jobIds.has(jobId))
        held.set(input.key, `job ${jobId}, whose manifest does not validate`);
    }
  }
  // Quarantined inputs (a job that held one may have quarantined it and let go since), whatever
  // their record's name (a hash for keys near the limits).
  return { held, quarantined: exclusions.quarantinedInputs };
}

/**
 * The retention job's first step (what the compact Lambda runs for a retention item): claim the
 * day, check each input again, commit. The rule and cutoff are this step's own (its config and
 * clock), so a plan made as if at a later time, or under a longer retention since, never deletes
 * a file that is not expired now. After the claim, every input must still be there at its
 * planned ETag and held by no other job: anything else stays. The CAS to `verified` is the
 * commit point; deleteInputsStep and clearManifestStep follow. Idempotent: a retry finds its own claim
 * and checks again, or finds it committed and reports that.
 */
export async function expireStep(deps: StepDeps, job: Job): Promise<StepResult> {
  const { store } = deps;
  if (job.tier !== 'retention') {
    throw new ConfigError(`job ${job.jobId} is a ${job.tier} job: it is run by compactStep, not expireStep`);
  }
  let loaded = await claimOrLoad(deps, job, 'day', () => {
    const expiring = expiringInputs(deps, job);
    if ('reason' in expiring) return expiring;
    return newClaim(deps, job, expiring.inputs, { expiry: expiring.expiry });
  });
  if (!('manifest' in loaded)) return loaded;
  if (loaded.manifest.state !== 'claimed') {
    return result(job, 'already-done', loaded.manifest.state, summary(loaded.manifest));
  }

  // Checked after the claim: a planner that lists manifests from now on excludes our inputs, and
  // a job that claimed one of them before now is seen here.
  const { held, quarantined } = await heldByOthers(deps, loaded);
  const heads = new Map<string, Awaited<ReturnType<ObjectStore['head']>>>();
  await forEachLimit(loaded.manifest.inputs, 8, async (input) => {
    heads.set(input.key, await store.head(input.key, withSignal(deps)));
  });
  const keep: InputRef[] = [];
  const kept: KeptInput[] = [...(loaded.manifest.keptInputs ?? [])];
  let gone = 0;
  for (const input of loaded.manifest.inputs) {
    const head = heads.get(input.key);
    const holder = held.get(input.key);
    if (!head) gone++;
    else if (head.etag !== input.etag)
      kept.push({ key: input.key, reason: 'replaced since planning: kept as new data' });
    else if (holder) kept.push({ key: input.key, reason: `held by ${holder}` });
    else if (quarantined.has(input.key)) kept.push({ key: input.key, reason: 'quarantined' });
    else keep.push(input);
  }
  if (keep.length === 0) {
    await deleteManifest(deps, loaded);
    const reason = `nothing left to expire: ${gone} gone, ${kept.length} kept since planning`;
    deps.onEvent?.({ type: 'skipped', job, reason });
    return result(job, 'skipped', 'none', { reason, ...(kept.length ? { keptInputs: kept.length } : {}) });
  }
  // The commit point: from here on the inputs are gone for consistent readers.
  loaded = await writeManifest(
    deps,
    loaded,
    advance(deps, loaded.manifest, {
      state: 'verified',
      inputs: keep,
      ...(kept.length ? { keptInputs: kept } : {}),
    }),
  );
  deps.onEvent?.({ type: 'verified', job });
  return result(job, 'done', 'verified', summary(loaded.manifest));
}

/** A planned job's inputs still expired under this step's rule and cutoff, and that expiry. */
function expiringInputs(
  deps: StepDeps,
  job: Job,
): { inputs: readonly InputRef[]; expiry: Expiry } | { reason: string } {
  const { config } = deps;
  // Retention leases a day folder, or a month folder for monthly outputs (as parseManifest checks).
  const probe =
    tierFolderFile(config.layout, 'daily', job.partition) ??
    tierFolderFile(config.layout, 'monthly', job.partition);
  if (!probe) {
    throw new ConfigError(
      `${job.partition} is not a day or month folder of layout ${config.layout.template}`,
    );
  }
  const rule = retentionRuleFor(config, probe.table);
  if (!rule)
    return { reason: 'no retention rule covers this table (the configuration changed since planning)' };
  const now = deps.clock.now();
  const cutoff = retentionCutoff(config, rule, now);
  const inputs = job.inputs.filter((input) => {
    const file = config.layout.parse(input.key);
    return (
      file !== undefined && jobPartitionOf('retention', file) === job.partition && isExpired(file, cutoff)
    );
  });
  if (inputs.length === 0) return { reason: `no input is expired at ${cutoff.toISOString()}` };
  const expiry: Expiry = {
    rule: rule.table,
    days: rule.days,
    bufferHours: config.retention.bufferHours,
    cutoff: cutoff.toISOString(),
  };
  return { inputs, expiry };
}
