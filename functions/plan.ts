/**
 * Plan step: lists the tier's candidates (or, for `retention`, the expired files) and writes the Map items (and each job's inputs) to
 * the state root, where the Distributed Map's ItemReader reads them. Thin: validate, build
 * deps, call the planner, return a small result.
 */

import { ageStands, type Backlog, behindWarning } from './core/backlog.ts';
import { assignJobs, planCycle } from './core/cycle.ts';
import type { Clock } from './core/engine.ts';
import { writePlan } from './core/plan-store.ts';
import { recordSweep, writeBacklogRecord } from './core/planner/planner.ts';
import { isRetentionPlan, UNMATCHED_RULE } from './core/retention.ts';
import { truncateCause } from './core/run-summary.ts';
import { envDeps, envObservability } from './lambda/env-deps.ts';
import { type ExecutionEvent, parseExecutionEvent } from './lambda/events.ts';
import {
  createLambdaHandler,
  type DepsFactory,
  type HandlerDeps,
  type HandlerTools,
} from './lambda/handler-kit.ts';
import type { Observability } from './lambda/telemetry.ts';
import { recordExecutionPlanned } from './lambda/telemetry.ts';

export interface PlanOutput {
  readonly tier: string;
  readonly bucket: string;
  /** The first wave's items (the only ones a definition from before waves reads). */
  readonly itemsKey: string;
  /** Each wave's items, in order: the Map runs once per wave (planner-jobs.ts). */
  readonly itemsKeys: readonly string[];
  /** How many Map runs the jobs take: the most jobs any one partition got. */
  readonly waves: number;
  readonly jobs: number;
  /** The Map items carrying them (several small jobs of one table share one, plan-store.ts). */
  readonly mapItems: number;
  readonly skipped: number;
  /**
   * The first skipped partitions, with why: in the console's Plan output and `compactor run`'s
   * table (cut short, as recover's list is: the execution's state is limited to 256 KiB).
   */
  readonly skippedPartitions: readonly {
    readonly partition: string;
    readonly reason: string;
    readonly candidates?: number;
  }[];
  /** Partitions already one file of the tier's level: nothing to merge. */
  readonly settled: number;
  readonly inputFiles: number;
  readonly inputBytes: number;
  readonly objectsListed: number;
  /** 'windows' (a narrow cycle), 'sweep' (every table whole) or 'full' (one listing); see README Operate. */
  readonly listing: string;
  readonly listingReason: string;
  readonly plannedAt: string;
  /** The table the plan was scoped to (execution input `only`), or null for the whole lake. */
  readonly only: string | null;
  /**
   * A compaction tier's eligible partitions, the oldest one's wait and whether the tier is behind
   * (backlog.ts), over the folders this plan listed; null for retention.
   */
  readonly backlog: Backlog | null;
}

const SKIPS_LISTED = 20;

export async function planStep(
  event: ExecutionEvent,
  deps: HandlerDeps,
  tools: HandlerTools,
): Promise<PlanOutput> {
  // `now` plans as if at that time (replays, tests); leases still use the real clock.
  const clock: Clock = event.now ? { now: () => new Date(event.now as string) } : deps.clock;
  // `retention` plans the expired files; the tiers plan their candidates.
  const plan = await planCycle(deps.store, deps.config, clock, event.tier, {
    ...(event.only !== undefined ? { only: event.only } : {}),
    ...(event.sweep === true ? { sweep: true } : {}),
  });
  const jobs = assignJobs(plan, {
    clock: deps.clock,
    randomHex: deps.randomHex,
    executionId: event.executionId,
  });
  const { itemsKeys, items, mapItems } = await writePlan(
    deps.store,
    deps.config.layout,
    event.executionName,
    jobs,
    { itemShape: event.itemShape ?? 'job', smallJobsPerItem: deps.config.smallJobsPerItem },
  );
  // Only once the plan is written: the narrow cycles until the next sweep rely on this one.
  if (!isRetentionPlan(plan)) await recordSweep(deps.store, deps.config, plan);
  // A run scoped to one table (compactor doctor's canary) is not the tier's scheduled run: it must
  // not hide a schedule that starts nothing from the missed-start alarm, nor clear a backlog alarm
  // with one table's figures.
  if (event.only === undefined) {
    const { backlog } = plan;
    // For the next windowed plan, which lists again the partitions it carries.
    if (!isRetentionPlan(plan)) await writeBacklogRecord(deps.store, deps.config, plan);
    const covered = plan.listing?.backlogCovered === true;
    recordExecutionPlanned(
      tools,
      event.tier,
      backlog && { figures: backlog, ageStands: ageStands(backlog, covered) },
    );
  }
  if (plan.backlog !== undefined && event.tier !== 'retention') {
    const behind = behindWarning(event.tier, plan.backlog);
    if (behind !== undefined) tools.logger.warn('behind', { ...plan.backlog, message: behind });
  }
  for (const skip of plan.skipped) tools.logger.debug('skipped', { ...skip });
  // A mistyped table path expires nothing, silently: say so where the operator looks.
  if (isRetentionPlan(plan)) {
    for (const rule of plan.unmatchedRules) {
      tools.logger.warn(UNMATCHED_RULE, { rule, tablesSeen: plan.tablesSeen });
    }
  }
  return {
    tier: event.tier,
    bucket: deps.bucket,
    itemsKey: itemsKeys[0] as string,
    itemsKeys,
    waves: itemsKeys.length,
    jobs: items.length,
    mapItems: mapItems.reduce((sum, inWave) => sum + inWave.length, 0),
    skipped: plan.skipped.length,
    skippedPartitions: plan.skipped.slice(0, SKIPS_LISTED).map((s) => ({
      partition: s.partition,
      reason: truncateCause(s.reason),
      ...(s.candidates !== undefined ? { candidates: s.candidates } : {}),
    })),
    settled: plan.settled ?? 0,
    inputFiles: items.reduce((sum, i) => sum + i.inputFiles, 0),
    inputBytes: items.reduce((sum, i) => sum + i.inputBytes, 0),
    objectsListed: plan.objectsListed,
    listing: plan.listing?.mode ?? 'full',
    listingReason: plan.listing?.reason ?? 'retention lists the whole data root',
    plannedAt: plan.now,
    only: event.only ?? null,
    backlog: plan.backlog ?? null,
  };
}

export function createHandler(getDeps: DepsFactory, observability: Observability) {
  return createLambdaHandler(parseExecutionEvent, planStep, getDeps, observability);
}

export const handler = createHandler(envDeps(), envObservability());
