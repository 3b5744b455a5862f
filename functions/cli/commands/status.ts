/**
 * `compactor status`: the live and quarantined manifests, the failing partitions, and each
 * compaction tier's backlog. Loads no engine or SDK (test/cli/startup.test.ts).
 */

import { hostname } from 'node:os';
import { isExecutionArn } from '../../adapters/execution-arn.ts';
import { isGoneLocalExecution, localOwnerOf } from '../../adapters/local-owner.ts';
import { type Backlog, formatAge } from '../../core/backlog.ts';
import { type CompactorConfig, TIERS, type TierName } from '../../core/config.ts';
import type { Clock } from '../../core/engine.ts';
import { heldByBackoff, readFailures } from '../../core/failures.ts';
import { type Manifest, manifestsRoot, parseManifest, quarantineRoot } from '../../core/manifest/manifest.ts';
import { getBytesIfExists, type ObjectStore } from '../../core/object-store.ts';
import { planTier } from '../../core/planner/planner.ts';
import { describeQuarantineRecord, type QuarantineRecordRow } from '../../core/quarantine.ts';
import { type CliIo, type CommandContext, commandContext, emit } from '../command.ts';
import { formatDuration, table } from '../format.ts';
import { COMMAND_OPTIONS, type ParsedOptions } from '../options.ts';

export async function statusCommand(options: ParsedOptions, io: CliIo): Promise<number> {
  const ctx = await commandContext(options);
  const { store } = ctx.target;
  const now = ctx.clock.now().getTime();
  const recover = recoverCommand(options);
  const live: {
    key: string;
    tier: string;
    state: string;
    job: string;
    owner: string;
    age: string;
    lease: string;
    ownerAlive: boolean | null;
    ownerNote: string;
  }[] = [];
  for (const found of await readLiveManifests(ctx)) {
    if ('invalid' in found) {
      live.push({
        key: found.key,
        tier: '?',
        state: 'INVALID',
        job: '?',
        owner: '?',
        age: '',
        lease: found.invalid,
        ownerAlive: null,
        ownerNote: '',
      });
      continue;
    }
    const m = found.manifest;
    const leaseLeft = Date.parse(m.leaseExpiresAt) - now;
    const owner = describeOwner(m, now, recover);
    live.push({
      key: m.partition,
      tier: m.tier,
      state: m.state,
      job: m.jobId,
      owner: m.executionId,
      age: formatDuration(now - Date.parse(m.createdAt)),
      lease: leaseLeft > 0 ? `${formatDuration(leaseLeft)} left` : 'expired',
      ownerAlive: owner.alive,
      ownerNote: owner.note,
    });
  }
  const quarantined: ({ key: string } & QuarantineRecordRow)[] = [];
  for await (const object of store.list(quarantineRoot(ctx.config.layout))) {
    // Resolved by an operator since the listing: nothing to show.
    const body = (await getBytesIfExists(store, object.key))?.body;
    if (body === undefined) continue;
    quarantined.push({ key: object.key, ...describeQuarantineRecord(body) });
  }
  const failing = [...(await readFailures(store, ctx.config)).values()].map((f) => {
    const held = heldByBackoff(ctx.config, f, now);
    return {
      partition: f.partition,
      tier: f.tier,
      failures: f.consecutiveFailures,
      heldBack: held,
      // Not held back: the next run of its tier tries it again.
      nextAttemptAt: held ? f.nextAttemptAt : 'next run',
      lastError: f.lastError.split('\n')[0] ?? '',
    };
  });
  const heldBack = failing.filter((f) => f.heldBack).length;
  const orphaned = live.filter((l) => l.ownerAlive === false).length;
  const backlog = await tierBacklogs(store, ctx.config, ctx.clock);
  const backlogRows = Object.entries(backlog).map(([tier, b]) => [
    tier,
    b.eligiblePartitions,
    b.oldestEligiblePartition ?? '',
    b.eligiblePartitions === 0 ? '' : formatAge(b.oldestEligibleAgeSeconds),
    formatAge(b.behindAfterSeconds),
    b.behind ? 'BEHIND' : 'keeps up',
  ]);
  emit(io, options, { live, quarantined, failing, backlog }, () =>
    [
      `live manifests: ${live.length}${orphaned > 0 ? ` (${orphaned} whose owner is not running)` : ''}`,
      ...(live.length > 0
        ? [
            table(
              ['partition', 'tier', 'state', 'job', 'owner', 'age', 'lease'],
              live.map((l) => [l.key, l.tier, l.state, l.job, l.owner, l.age, l.lease]),
            ),
            ...live.filter((l) => l.ownerNote !== '').map((l) => `${l.key} (${l.tier}): ${l.ownerNote}`),
          ]
        : []),
      `quarantined: ${quarantined.length}`,
      ...(quarantined.length > 0
        ? [
            table(
              ['record', 'holds', 'since', 'reason'],
              quarantined.map((q) => [q.key, q.holds, q.at, q.reason]),
            ),
            'once the cause is fixed, `compactor release --partition P` (or --all) re-admits quarantined inputs; a record whose objects are gone is pruned by the next run',
          ]
        : []),
      `failing partitions: ${failing.length}${failing.length > 0 ? ` (${heldBack} held back: after ${ctx.config.failureBackoff.after} failures in a row a partition waits for its next attempt)` : ''}`,
      ...(failing.length > 0
        ? [
            table(
              ['partition', 'tier', 'failures', 'next attempt', 'last error'],
              failing.map((f) => [f.partition, f.tier, f.failures, f.nextAttemptAt, f.lastError]),
            ),
          ]
        : []),
      'backlog (eligible partitions; the oldest, waiting since it became due, against tiers.<tier>.behindAfterSeconds):',
      table(['tier', 'eligible', 'oldest eligible', 'waiting', 'behind after', 'verdict'], backlogRows),
      ...(Object.values(backlog).some((b) => b.behind)
        ? [
            'a tier BEHIND: `compactor plan --tier <tier>` gives each waiting partition its skip reason; then let runs take more (map.maxConcurrency, maxJobsPerPartition, the job bounds) or run the tier more often',
          ]
        : []),
    ].join('\n'),
  );
  return quarantined.length > 0 || failing.length > 0 || orphaned > 0 ? 1 : 0;
}

/**
 * Each compaction tier's backlog as its plan would count it now (backlog.ts: the same eligibility
 * and verdict as Plan and the backlog alarm), for the tiers that run: the monthly one only when
 * enabled, none the layout refuses. A dry plan: it lists as the settings say, and writes nothing.
 */
async function tierBacklogs(
  store: ObjectStore,
  config: CompactorConfig,
  clock: Clock,
): Promise<Partial<Record<TierName, Backlog>>> {
  const backlogs: Partial<Record<TierName, Backlog>> = {};
  for (const tier of TIERS) {
    if (!config.tiers[tier].enabled || config.layout.tierRefusal(tier) !== undefined) continue;
    const { backlog } = await planTier(store, config, clock, tier);
    if (backlog !== undefined) backlogs[tier] = backlog;
  }
  return backlogs;
}

/** The live manifests under the state root, each parsed, or why it does not validate. */
export async function readLiveManifests(
  ctx: CommandContext,
): Promise<({ key: string; manifest: Manifest } | { key: string; invalid: string })[]> {
  const { store } = ctx.target;
  const found: ({ key: string; manifest: Manifest } | { key: string; invalid: string })[] = [];
  for await (const object of store.list(manifestsRoot(ctx.config.layout))) {
    // A job cleared since the listing is no longer live: not an error.
    const got = await getBytesIfExists(store, object.key);
    if (!got) continue;
    try {
      found.push({
        key: object.key,
        manifest: parseManifest(ctx.config, store.location, object.key, got.body),
      });
    } catch (error) {
      if (!(error instanceof Error && error.name === 'InvalidManifestError')) throw error;
      found.push({ key: object.key, invalid: error.message });
    }
  }
  return found;
}

/**
 * `compactor recover` with the lake options this command was given (store, layout, context, ...),
 * so it reads the same lake the same way; values quoted for a POSIX shell where they need it.
 */
export function recoverCommand(options: ParsedOptions): string {
  const args = COMMAND_OPTIONS.recover.flatMap((name) => {
    const value = options[name];
    if (name === 'json' || value === undefined || value === false) return [];
    return value === true ? [`--${name}`] : [`--${name}`, shellWord(value)];
  });
  return ['compactor', 'recover', ...args].join(' ');
}

function shellWord(value: string): string {
  return /^[\w@%+=:,./-]+$/.test(value) ? value : `'${value.replaceAll("'", `'\\''`)}'`;
}

/**
 * What this host can tell of a manifest's owner, and what resolves its job (recovery.ts): recovery
 * takes over a job whose lease expired whoever owns it; before that, only one whose owner is surely
 * gone, which `compactor recover` and `compactor run` know only of this host's processes.
 * `alive`: false only for a local process that is surely gone; null when this host cannot tell.
 */
export function describeOwner(
  manifest: Pick<Manifest, 'executionId' | 'leaseExpiresAt'>,
  now: number,
  recover: string,
): { readonly alive: boolean | null; readonly note: string } {
  const leaseLeft = Date.parse(manifest.leaseExpiresAt) - now;
  const expired = leaseLeft <= 0;
  const resolvesNow = `\`${recover}\` resolves it now (else the next run's recovery does)`;
  const atLease = `\`${recover}\` resolves it once its lease expires (in ${formatDuration(leaseLeft)})`;
  const local = localOwnerOf(manifest.executionId);
  if (local !== undefined && local.pid === process.pid && local.host === hostname()) {
    // This process: a run embedded beside status (the CLI's own commands never are), or a pid
    // reused since the owner ended. The pid alone cannot tell which.
    return {
      alive: null,
      note: expired
        ? `owner pid ${local.pid} is this process and its lease expired: ${resolvesNow}`
        : `owner pid ${local.pid} is this process, which cannot tell whether its job is still in flight: ${atLease}`,
    };
  }
  if (local !== undefined && local.host === hostname()) {
    const alive = !isGoneLocalExecution(manifest.executionId);
    const pid = `owner pid ${local.pid}`;
    if (!alive && expired)
      return { alive, note: `${pid} is not running and its lease expired: ${resolvesNow}` };
    if (!alive) {
      return {
        alive,
        note: `${pid} is not running: \`${recover}\` resolves it now (else the next \`compactor run\` does)`,
      };
    }
    return {
      alive,
      note: expired
        ? `${pid} is running but its lease expired: \`${recover}\` takes the job over and resolves it now (else the next run's recovery does)`
        : `${pid} is running: its job is in flight, left to it until it ends or its lease expires (in ${formatDuration(leaseLeft)})`,
    };
  }
  if (local !== undefined) {
    const who = `owner is pid ${local.pid} on host ${local.host}, which this host cannot check`;
    return {
      alive: null,
      note: expired
        ? `${who}; its lease expired: ${resolvesNow}`
        : `${who}: ${atLease}, as does the next run`,
    };
  }
  if (isExecutionArn(manifest.executionId)) {
    const who = 'owner is a Step Functions execution';
    return {
      alive: null,
      note: expired
        ? `${who}; its lease expired: ${resolvesNow}`
        : `${who}: the deployed state machine's next run checks it, and resolves the job once the execution has stopped long enough that none of its Lambdas can still run; ${atLease}`,
    };
  }
  const who = `owner ${manifest.executionId} is neither a local process nor a Step Functions execution`;
  return {
    alive: null,
    note: expired ? `${who}; its lease expired: ${resolvesNow}` : `${who}: ${atLease}, as does the next run`,
  };
}
