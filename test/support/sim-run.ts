/**
 * The seeded simulation: one seed = one interleaving of two overlapping cycles (two executions,
 * hourly or daily, each running its waves in Map items of up to `smallJobsPerItem` jobs and
 * perhaps redriving its failed items), a zombie step (an attempt paused before one of its store
 * calls and resumed later), an on-demand recovery and transient store faults, all chosen by the
 * seed and run on a real LocalFolderStore with real DuckDB output. After every store call that changes something:
 * I1 (no row id missing) and, on most changes, the visible view (every id exactly once), the
 * SimInvariants (I7, I8, I9, quarantine), and before every delete the I3 audit. Then recovery
 * until quiet under faults (I6), a clean cycle per tier, the same again must change nothing (I5),
 * the old quarantined job must be untouched, and once the operator resolved it the lake must be
 * quiescent with exact ids (I2, I4).
 *
 * Replay one seed: `node test/support/simulate.ts --seed N`.
 */

import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import type { LocalFolderStore } from '../../functions/adapters/local-store/local-store.ts';
import { readIds, type SqlRunner } from '../../functions/adapters/sample-data.ts';
import type { CompactorConfig, TierName } from '../../functions/core/config.ts';
import { type CycleDeps, type CycleReport, runCycle } from '../../functions/core/cycle.ts';
import type { Clock } from '../../functions/core/engine.ts';
import {
  type Manifest,
  type ManifestState,
  manifestsRoot,
  parseManifest,
} from '../../functions/core/manifest/manifest.ts';
import { EXECUTION_TYPES, type ExecutionType, isCommitted } from '../../functions/core/pipeline.ts';
import {
  type CompactDeps,
  clearManifestStep,
  compactStep,
  deleteInputsStep,
  type Job,
  type JobEvent,
  publishStep,
  type StepResult,
  verifyStep,
} from '../../functions/core/protocol.ts';
import { recover } from '../../functions/core/recovery.ts';
import { FaultStore, MUTATING_OPS } from './fault-store.ts';
import { LakeChecker } from './lake-harness.ts';
import { MemoEngine, type MemoStats, memoQueries } from './sim-engine.ts';
import { SimInvariants } from './sim-invariants.ts';
import {
  linkLake,
  SIM_UNTOUCHED,
  type SimTemplate,
  simConfig,
  simRoot,
  simTemplate,
  verifyTemplate,
  writeFixtureRecord,
} from './sim-lake.ts';
import { Rng, Scheduler, type SimActor } from './sim-scheduler.ts';
import { type FaultCounts, type FaultPolicy, noFaults, SimStore } from './sim-store.ts';
import { testStore } from './test-store.ts';

/** The one-line command that replays a seed (with the options it ran with). */
export function REPLAY(seed: number, options: SeedOptions = {}): string {
  const flags = [
    options.overlapTiers ? ' --overlap-tiers' : '',
    options.conflictOnCopy ? ' --conflict-on-copy' : '',
    options.dropDeleteEtags ? ' --drop-delete-etags' : '',
    options.visibleEvery !== undefined ? ` --visible-every ${options.visibleEvery}` : '',
  ].join('');
  return `node test/support/simulate.ts --seed ${seed}${flags}`;
}

/** Why a job may fail under transient faults, crashes, takeovers and lease expiry; anything else is a bug. */
const EXPECTED_JOB_ERRORS = new Set([
  'TransientStoreError',
  'DeleteFailedError',
  'ManifestConflictError',
  'LeaseExpiredError',
  'CrashedError',
]);
/** Why a whole cycle or recovery may stop (its recovery or listing failed). */
const EXPECTED_RUN_ERRORS = new Set([
  'TransientStoreError',
  'DeleteFailedError',
  'RecoveryIncompleteError',
  'CrashedError',
]);

const STEP_FOR_STATE: Record<ManifestState, [string, (deps: CompactDeps, job: Job) => Promise<StepResult>]> =
  {
    claimed: ['compact', compactStep],
    staged: ['publish', publishStep],
    published: ['verify', verifyStep],
    verified: ['delete-inputs', deleteInputsStep],
    'inputs-deleted': ['clear', clearManifestStep],
  };

export interface SimContext {
  readonly root: string;
  readonly template: SimTemplate;
  readonly engine: MemoEngine;
  readonly ids: SqlRunner;
  readonly stats: MemoStats;
  close(): Promise<void>;
}

export async function createSimContext(): Promise<SimContext> {
  const duck = await DuckDbEngine.create({ threads: 1 });
  const root = await simRoot();
  const template = await simTemplate(duck, root);
  const stats: MemoStats = {
    inspectHits: 0,
    inspectRuns: 0,
    compactHits: 0,
    compactRuns: 0,
    queryHits: 0,
    queryRuns: 0,
  };
  return {
    root,
    template,
    engine: new MemoEngine(duck, stats),
    ids: memoQueries(duck, stats),
    stats,
    async close() {
      try {
        await verifyTemplate(template);
      } finally {
        await duck.close();
        await rm(root, { recursive: true, force: true });
      }
    },
  };
}

/** What the seed chose. */
export interface SeedPlan {
  readonly tiers: readonly [TierName, TierName];
  /** Tick at which the second cycle starts. */
  readonly startB: number;
  /** Tick at which an on-demand recovery starts. */
  readonly recoveryAt: number | undefined;
  readonly zombie:
    | { readonly at: number; readonly pauseAtCall: number; readonly resumeAfter: number }
    | undefined;
  /** Tick at which every lease runs out (the clock jumps past leaseSeconds). */
  readonly clockJumpAt: number | undefined;
  readonly faultRate: number;
  readonly crash: { readonly actor: string; readonly atCall: number } | undefined;
  readonly targetFileBytes: number;
  /** The Map's children, whose Retry the cycle's partition steps follow (pipeline.ts RETRY). */
  readonly childExecutionType: ExecutionType;
  /** Small jobs of one table a Map item holds (`smallJobsPerItem`): 1, or 2..6. */
  readonly smallJobsPerItem: number;
  /** Whether the cycles redrive each failed Map item once, as an operator redrives an execution. */
  readonly redriveFailedItems: boolean;
}

/** The Rng stream the Map item choices draw from (the seed's own stream draws everything else). */
const ITEMS_STREAM = 1;

/**
 * The seed's choices. The Map item choices come from a stream of their own: a seed that draws
 * items of one job and no redrive runs what it ran before cycles ran items.
 */
export function planSeed(rng: Rng, items: Rng): SeedPlan {
  const tiers = rng.weighted<readonly [TierName, TierName]>([
    [['hourly', 'hourly'], 4],
    [['hourly', 'daily'], 3],
    [['daily', 'hourly'], 2],
    [['daily', 'daily'], 1],
  ]);
  return {
    tiers,
    startB: rng.int(40),
    recoveryAt: rng.chance(0.4) ? rng.int(80) : undefined,
    zombie: rng.chance(0.75)
      ? { at: 1 + rng.int(60), pauseAtCall: 1 + rng.int(5), resumeAfter: 1 + rng.int(120) }
      : undefined,
    clockJumpAt: rng.chance(0.15) ? rng.int(100) : undefined,
    faultRate: rng.pick([0, 0.02, 0.05, 0.1, 0.2]),
    crash: rng.chance(0.2) ? { actor: rng.pick(['A', 'B', 'R', 'Z']), atCall: 1 + rng.int(40) } : undefined,
    targetFileBytes: rng.pick([2500, 1 << 20]),
    childExecutionType: rng.pick(EXECUTION_TYPES),
    smallJobsPerItem: items.chance(0.3) ? 1 : 2 + items.int(5),
    redriveFailedItems: items.chance(0.6),
  };
}

export interface SeedOptions {
  /** Let CopyObject with If-None-Match get a 409 (see the publish-conflict test). */
  readonly conflictOnCopy?: boolean;
  /** Let an hourly and a daily cycle overlap (off by default: a known bug, see the findings). */
  readonly overlapTiers?: boolean;
  /** Sabotage: strip the ETag condition from deletes of data keys (the sim must catch it). */
  readonly dropDeleteEtags?: boolean;
  /** Check the visible view after one change in this many (default 4; 1 = every change). */
  readonly visibleEvery?: number;
  readonly keepLake?: boolean;
  /** Run the I5 check (a cycle after quiescence writes nothing) on this seed whatever its number. */
  readonly checkIdempotence?: boolean;
}

export interface SeedResult {
  readonly seed: number;
  readonly plan: SeedPlan;
  /** The seed's scenario: which tiers, zombie step, recovery, lease expiry, crash, faults, splits. */
  readonly scenario: string;
  readonly ms: number;
  readonly ticks: number;
  readonly trace: readonly string[];
  readonly violations: readonly string[];
  readonly faults: FaultCounts;
  readonly zombie: string | undefined;
  readonly jobOutcomes: Readonly<Record<string, number>>;
  /** The overlapping cycles' Map items: ITEM_COUNTS, by what happened to them. */
  readonly items: Readonly<Record<ItemCount, number>>;
  readonly recoveryActions: Readonly<Record<string, number>>;
  readonly finalRecoveryPasses: number;
  readonly observations: number;
  readonly auditedDeletes: number;
  readonly dir: string;
}

class SimClock implements Clock {
  #ms: number;
  constructor(ms: number) {
    this.#ms = ms;
  }
  now(): Date {
    return new Date(this.#ms);
  }
  advance(ms: number): void {
    this.#ms += ms;
  }
}

function bump(counts: Record<string, number>, key: string): void {
  counts[key] = (counts[key] ?? 0) + 1;
}

/**
 * What the simulation counts of Map items: items run, items of several jobs, items redriven, jobs
 * redriven, redriven jobs that answered from their receipt (already done, cleared: only a
 * receipt says so), and redriven jobs whose redrive changed a committed verdict.
 */
export const ITEM_COUNTS = [
  'items',
  'multi-job',
  'redriven',
  'redriven-jobs',
  'receipt-answers',
  'committed-then-not',
] as const;
export type ItemCount = (typeof ITEM_COUNTS)[number];

function countItems(report: CycleReport, counts: Record<ItemCount, number>): string[] {
  const notes: string[] = [];
  const seen = new Set<string>();
  for (const { job, outcome, item, firstRun } of report.jobs) {
    const name = `${item.wave}.${item.index}`;
    if (!seen.has(name)) {
      seen.add(name);
      counts.items++;
      if (item.jobs > 1) counts['multi-job']++;
      if (firstRun) counts.redriven++;
    }
    if (!firstRun) continue;
    counts['redriven-jobs']++;
    const receipt = outcome.steps.some((s) => s.status === 'already-done' && s.state === 'cleared');
    if (receipt) counts['receipt-answers']++;
    if (isCommitted(firstRun.status) && !isCommitted(outcome.status) && outcome.status !== 'failed')
      counts['committed-then-not']++;
    notes.push(
      `redrove ${job.jobId} (item ${name}, ${item.jobs} jobs): ${firstRun.status} -> ${outcome.status}${receipt ? ' from its receipt' : ''}`,
    );
  }
  return notes;
}

function errorName(error: unknown): string {
  return error instanceof Error ? error.name : typeof error;
}

function describe(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

let lakeCounter = 0;

export async function runSeed(ctx: SimContext, seed: number, options: SeedOptions = {}): Promise<SeedResult> {
  const started = performance.now();
  const rng = new Rng(seed);
  const plan = planSeed(rng, new Rng(seed, ITEMS_STREAM));
  const config = simConfig(plan.targetFileBytes, plan.smallJobsPerItem);
  const { template } = ctx;
  const dir = join(ctx.root, `seed-${seed}-${++lakeCounter}`);
  const workDir = `${dir}.work`;
  await mkdir(dir);
  await linkLake(template, dir);
  const inner = testStore(dir);
  const violations: string[] = [];
  const faults = noFaults();
  const jobOutcomes: Record<string, number> = {};
  const items = Object.fromEntries(ITEM_COUNTS.map((k) => [k, 0])) as Record<ItemCount, number>;
  const recoveryActions: Record<string, number> = {};
  const events: JobEvent[] = [];
  const scheduler = new Scheduler(rng);
  let zombieLabel: string | undefined;
  let finalRecoveryPasses = 0;
  let checker: LakeChecker | undefined;
  try {
    const recordKey = await writeFixtureRecord(inner, config, template);
    const fixture = [template.fixtureInput, template.fixtureOutput];
    const fixtureTags = await Promise.all(fixture.map(async (k) => (await inner.head(k))?.etag));

    const lake = new LakeChecker(
      // LakeChecker reads ids through readIds(engine), which needs only `query`: a memoised one.
      ctx.ids as unknown as DuckDbEngine,
      dir,
      inner,
      config,
      template.totalRows,
    );
    checker = lake;
    const invariants = new SimInvariants(
      inner,
      config,
      fixture,
      async (key) => (await readIds(ctx.ids, [join(dir, key)])).length,
    );
    const visibleEvery = options.visibleEvery ?? 4;
    let changes = 0;
    const observed = new FaultStore(inner, {
      beforeCall: async (call) => {
        invariants.beforeCall(call);
        await lake.audit(call);
      },
      afterCall: async (call) => {
        if (!MUTATING_OPS.has(call.op)) return;
        changes++;
        // I1 after every change; the visible view after one change in `visibleEvery`.
        lake.checkVisible = (changes + seed) % visibleEvery === 0;
        // Manifests (I7, I8, I9) change only when a manifest is written or deleted.
        if (call.key.includes(manifestsRoot(config.layout))) await invariants.observe(call);
        await lake.observe(call);
      },
    });

    const clock = new SimClock(Date.parse('2030-01-01T00:00:00.000Z'));
    const alive = new Set<string>();
    const executionOf = new Map<string, string>();
    const policy: FaultPolicy = {
      rate: plan.faultRate,
      conflictOnCopy: options.conflictOnCopy === true,
      ...(plan.crash ? { crash: plan.crash } : {}),
      ...(options.dropDeleteEtags ? { dropDeleteEtags: (key: string) => config.layout.isDataKey(key) } : {}),
    };
    const storeFor = (actor: SimActor) =>
      new SimStore(observed, scheduler, actor, policy, faults, (crashed) => {
        const execution = executionOf.get(crashed.name);
        if (execution) alive.delete(execution);
      });
    let jobs = 0;
    const deps = (actor: SimActor, executionId: string): CycleDeps => ({
      store: storeFor(actor),
      config,
      clock,
      engine: ctx.engine,
      workDir,
      executionId,
      isOwnerAlive: async (id) => alive.has(id),
      concurrency: 1,
      randomHex: () => `${seed.toString(16).padStart(6, '0')}${(++jobs).toString(16).padStart(2, '0')}`,
      childExecutionType: plan.childExecutionType,
      redriveFailedItems: plan.redriveFailedItems,
      sleep: async () => {},
      onEvent: (event) => events.push(event),
    });
    const unexpected = (what: string, error: unknown, allowed: ReadonlySet<string>) => {
      if (!allowed.has(errorName(error)) && !lake.violations.length && !invariants.violations.length)
        violations.push(`${what} failed unexpectedly: ${describe(error)}`);
    };

    const cycle = (name: string, tier: TierName) =>
      scheduler.spawn(name, async (actor) => {
        const executionId = `exec-${name}`;
        executionOf.set(name, executionId);
        alive.add(executionId);
        try {
          // runCycle retries Recover and Plan as the state machine's Retry does.
          const report = await runCycle(deps(actor, executionId), tier);
          for (const entry of report.recovery.entries) bump(recoveryActions, entry.action);
          for (const { job, outcome, firstRun } of report.jobs) {
            bump(jobOutcomes, outcome.status === 'failed' ? `failed:${outcome.error.name}` : outcome.status);
            // A redrive that ends well must not hide why the first run failed.
            for (const run of [firstRun, outcome])
              if (run?.status === 'failed')
                unexpected(`job ${job.jobId} on ${job.partition}`, run.error, EXPECTED_JOB_ERRORS);
          }
          const before = items['committed-then-not'];
          for (const note of countItems(report, items)) scheduler.note(`${scheduler.tick} ${name} ${note}`);
          // A job this execution committed is reported committed again by its redrive (its receipt).
          if (items['committed-then-not'] > before)
            violations.push(`${name}: a redrive reported a job it had committed as not committed`);
          return `${tier} cycle: ${report.jobs.map((j) => j.outcome.status).join(',') || 'no jobs'}`;
        } catch (error) {
          unexpected(`cycle ${name}`, error, EXPECTED_RUN_ERRORS);
          bump(jobOutcomes, `cycle-stopped:${errorName(error)}`);
          return `${tier} cycle stopped: ${errorName(error)}`;
        } finally {
          alive.delete(executionId);
        }
      });

    const recovery = (name: string, executionId: string) =>
      scheduler.spawn(name, async (actor) => {
        executionOf.set(name, executionId);
        alive.add(executionId);
        try {
          const report = await recover(deps(actor, executionId));
          for (const entry of report.entries) bump(recoveryActions, entry.action);
          return report.changed ? 'changed' : 'quiet';
        } catch (error) {
          unexpected(`recovery ${name}`, error, EXPECTED_RUN_ERRORS);
          return `stopped: ${errorName(error)}`;
        } finally {
          alive.delete(executionId);
        }
      });

    const liveManifests = async (): Promise<Manifest[]> => {
      const out: Manifest[] = [];
      for await (const object of inner.list(manifestsRoot(config.layout))) {
        const { body } = await inner.getBytes(object.key);
        out.push(parseManifest(config, inner.location, object.key, body));
      }
      return out;
    };

    // ---- the overlapping phase ----
    let zombie: SimActor | undefined;
    let zombieSpawnedAt = 0;
    cycle('A', plan.tiers[0]);
    let cycleB: SimActor | undefined;
    let recoveryActor: SimActor | undefined;
    let jumped = false;
    await scheduler.run(async (tick) => {
      // An hourly and a daily cycle overlap only when asked (a known bug, see the simulation
      // test's findings): otherwise the second tier starts once everything else is over.
      const quiet = scheduler.actors.every((a) => a.done);
      if (!recoveryActor && plan.recoveryAt !== undefined && (tick >= plan.recoveryAt || quiet))
        recoveryActor = recovery('R', 'exec-R');
      const mixed = plan.tiers[0] !== plan.tiers[1];
      const startB =
        mixed && !options.overlapTiers
          ? scheduler.actors.every((a) => a.done) &&
            (plan.recoveryAt === undefined || recoveryActor !== undefined)
          : tick >= plan.startB || quiet;
      if (!cycleB && startB) cycleB = cycle('B', plan.tiers[1]);
      if (!jumped && plan.clockJumpAt !== undefined && tick >= plan.clockJumpAt) {
        jumped = true;
        clock.advance((config.leaseSeconds + 1) * 1000);
        scheduler.note(`${tick} every lease expires`);
      }
      // Nor does a zombie of one tier outlive the start of the other (a stale zombie of a cleared
      // hourly job quarantines it when the daily tier merged its output meanwhile: see findings).
      const zombieMayStart = !(mixed && !options.overlapTiers && cycleB);
      if (plan.zombie && !zombie && zombieMayStart && tick >= plan.zombie.at && tick < plan.zombie.at + 200) {
        const live = await liveManifests();
        if (live.length > 0) {
          const m = rng.pick(live);
          const [stepName, step] = STEP_FOR_STATE[m.state];
          const job: Job = {
            tier: m.tier,
            partition: m.partition,
            jobId: m.jobId,
            executionId: m.executionId,
            inputs: m.inputs,
          };
          zombieLabel = `${stepName}@${m.state}`;
          zombieSpawnedAt = tick;
          scheduler.note(
            `${tick} zombie ${stepName} of ${m.jobId}, paused before its call ${plan.zombie.pauseAtCall}`,
          );
          zombie = scheduler.spawn(
            'Z',
            async (actor) => {
              // The zombie runs as its job's owner; its crash does not end the owner's execution.
              try {
                const result = await step(deps(actor, m.executionId), job);
                return `${result.status}`;
              } catch (error) {
                unexpected(`zombie ${stepName}`, error, EXPECTED_JOB_ERRORS);
                return errorName(error);
              }
            },
            plan.zombie.pauseAtCall,
          );
        }
      }
      if (zombie?.parked && plan.zombie && tick >= zombieSpawnedAt + plan.zombie.resumeAfter)
        scheduler.unpark(zombie);
    }, 20_000);
    if (zombie) {
      const z = zombie as SimActor;
      zombieLabel = `${zombieLabel} ${z.resumed ? 'paused+resumed' : 'never paused'} -> ${z.outcome}`;
    }

    // ---- recovery until quiet, under faults (I6) ----
    alive.clear();
    policy.rate = Math.min(plan.faultRate, 0.05);
    delete policy.crash;
    let quiet = false;
    for (let pass = 1; pass <= 12 && !quiet; pass++) {
      finalRecoveryPasses = pass;
      const actor = recovery(`F${pass}`, `exec-final-${pass}`);
      await scheduler.run(() => {}, 20_000);
      quiet = actor.outcome === 'quiet';
    }
    if (!quiet) violations.push(`I6: recovery did not reach a fixed point in ${finalRecoveryPasses} passes`);

    // ---- a clean cycle per tier: everything left compacts ----
    policy.rate = 0;
    // Any partition in failure backoff is due again.
    clock.advance((config.failureBackoff.maxSeconds + 1) * 1000);
    const tiers: TierName[] = plan.tiers.includes('daily') ? ['hourly', 'daily'] : ['hourly'];
    for (const tier of tiers) {
      const actor = scheduler.spawn(`final-${tier}`, async (a) => {
        const report = await runCycle(deps(a, `exec-final-${tier}`), tier);
        const bad = report.jobs.filter((j) => j.outcome.status !== 'compacted');
        if (bad.length > 0)
          violations.push(
            `final ${tier} cycle: ${bad.map((j) => `${j.job.partition} ${j.outcome.status} ${j.outcome.status === 'failed' ? describe(j.outcome.error) : ''}`).join('; ')}`,
          );
        const held = report.plan.skipped.filter((s) => !/minFiles/.test(s.reason));
        if (held.length > 0)
          violations.push(
            `final ${tier} cycle skipped ${held.map((s) => `${s.partition}: ${s.reason}`).join('; ')}`,
          );
        return 'ok';
      });
      await scheduler.run(() => {}, 20_000);
      if (actor.outcome !== 'ok') violations.push(`final ${tier} cycle: ${actor.outcome}`);
    }

    // ---- I5: the same again changes nothing (one seed in three: it is the same check) ----
    if (seed % 3 === 0 || options.checkIdempotence) {
      const before = observed.calls.length;
      const again = scheduler.spawn('again', async (a) => {
        for (const tier of tiers) await runCycle(deps(a, `exec-again-${tier}`), tier);
        return 'ok';
      });
      await scheduler.run(() => {}, 20_000);
      const writes = observed.calls.slice(before).filter((c) => MUTATING_OPS.has(c.op));
      if (again.outcome !== 'ok' || writes.length > 0)
        violations.push(
          `I5: a cycle after quiescence: ${again.outcome}, writes ${writes.map((c) => `${c.op} ${c.key}`).join('; ')}`,
        );
    }

    // ---- the old quarantined job: nothing of it was deleted; the operator resolves it ----
    const nowTags = await Promise.all(fixture.map(async (k) => (await inner.head(k))?.etag));
    if (nowTags.join() !== fixtureTags.join())
      violations.push(`the quarantined job's files changed: ${fixtureTags.join()} -> ${nowTags.join()}`);
    await inner.deleteMany([{ key: template.fixtureOutput }, { key: recordKey }]);

    // ---- I2, I4: exact ids at rest, empty state root; only the resolved job's input is raw ----
    try {
      await lake.assertQuiescent({ untouched: SIM_UNTOUCHED });
    } catch (error) {
      violations.push((error as Error).message);
    }
    for await (const object of inner.list(config.layout.dataPrefix)) {
      const file = config.layout.parse(object.key);
      if (file?.level === 0 && object.key !== template.fixtureInput)
        violations.push(`raw file ${object.key} left after the final cycles`);
    }
    if (lake.auditedDeletes === 0) violations.push('the delete audit saw no input delete');
    for (const event of events) {
      if (event.type === 'quarantined' || event.type === 'input-quarantined')
        violations.push(`a transient fault quarantined ${event.key}: ${event.reason}`);
    }
    violations.push(...lake.violations, ...invariants.violations);
  } catch (error) {
    violations.push(`simulation error: ${describe(error)}`);
  } finally {
    if (!options.keepLake) {
      await rm(dir, { recursive: true, force: true });
      await rm(workDir, { recursive: true, force: true });
    }
  }
  const z = plan.zombie ? (zombieLabel?.split(' ')[0] ?? 'no-manifest') : 'none';
  const scenario = [
    plan.tiers.join('+'),
    `zombie:${z}`,
    plan.recoveryAt === undefined ? 'no-rec' : 'rec',
    plan.clockJumpAt === undefined ? 'leases' : 'lease-expiry',
    `crash:${plan.crash?.actor ?? 'none'}`,
    `faults:${plan.faultRate}`,
    plan.targetFileBytes < 10_000 ? 'split' : 'whole',
    `items:${plan.smallJobsPerItem}`,
    plan.redriveFailedItems ? 'redrive' : 'no-redrive',
  ].join(' ');
  return {
    seed,
    plan,
    scenario,
    ms: performance.now() - started,
    ticks: scheduler.tick,
    trace: scheduler.trace,
    violations: [...new Set(violations)],
    faults,
    zombie: zombieLabel,
    jobOutcomes,
    items,
    recoveryActions,
    finalRecoveryPasses,
    observations: checker?.observations ?? 0,
    auditedDeletes: checker?.auditedDeletes ?? 0,
    dir,
  };
}

/** Runs seeds `concurrency` at a time (each seed is deterministic on its own); results in seed order. */
export async function runSeeds(
  ctx: SimContext,
  seeds: readonly number[],
  concurrency: number,
  options: SeedOptions = {},
  onResult?: (result: SeedResult) => void,
): Promise<SeedResult[]> {
  const results: SeedResult[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, seeds.length) }, async () => {
      while (next < seeds.length) {
        const seed = seeds[next++] as number;
        const result = await runSeed(ctx, seed, options);
        results.push(result);
        onResult?.(result);
      }
    }),
  );
  return results.sort((a, b) => a.seed - b.seed);
}

/** A seed's starting lake (hard links + the quarantined job's record), for focused tests. */
export async function freshLake(
  ctx: SimContext,
  targetFileBytes = 1 << 20,
): Promise<{ readonly dir: string; readonly store: LocalFolderStore; readonly config: CompactorConfig }> {
  const dir = join(ctx.root, `lake-${++lakeCounter}`);
  await mkdir(dir);
  await linkLake(ctx.template, dir);
  const store = testStore(dir);
  const config = simConfig(targetFileBytes);
  await writeFixtureRecord(store, config, ctx.template);
  return { dir, store, config };
}

/** Seeds the simulation tests run (SIM_SEEDS, default 1,000) and, with the tiers overlapping, a fifth of that. */
export const SIM_SEEDS = Number(process.env.SIM_SEEDS ?? 1000);
export const SIM_OVERLAP_SEEDS = Math.max(
  1,
  Math.round(Number(process.env.SIM_OVERLAP_SEEDS ?? SIM_SEEDS / 5)),
);
/** Seeds run at a time within one process (their store calls interleave). */
export const SIM_CONCURRENCY = 2;

/** The first ten failing seeds, each with the command that replays it. */
export function failureReport(failures: readonly SeedResult[], options: SeedOptions = {}): string {
  return failures
    .slice(0, 10)
    .map((f) => `seed ${f.seed} (${f.scenario}): ${f.violations[0]}\n  replay: ${REPLAY(f.seed, options)}`)
    .join('\n');
}
