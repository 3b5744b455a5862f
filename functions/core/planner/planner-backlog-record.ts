/**
 * The backlog record: the eligible partitions (backlog.ts) a tier's last plan knew of, carried to
 * the next one. A plan between sweeps lists only its windows (list-windows.ts), which hold the
 * folders that became due within `planning.lookbackHours`; a partition that stays eligible longer
 * drops out of them, and without the record only the next sweep would see it again. So every
 * sweep and windowed plan of a compaction tier, unless scoped to one table, writes the record once
 * its plan is written (plan step), and a
 * windowed plan lists again, each whole, the recorded partitions that lie before its window: one
 * listing per partition, the rest of the lake untouched. Those still eligible count in its
 * backlog (and, listed whole, are planned as any listed folder is); those compacted since are gone.
 *
 * The record "covers" the backlog when its writer counted every eligible partition it could know
 * of: a sweep or full listing, or a windowed plan that read a covering record written no more than
 * lookbackHours before it (a longer gap lets a folder become due and leave the window unseen), and
 * none was cut by the limit. A plan covered so may report the tier caught up (backlog.ts
 * ageStands). Data written into a folder older than the window (late data, a backfill) is never
 * seen between sweeps: the sweep catches it, as before.
 */

import * as z from 'zod';
import type { CompactorConfig, JobKind, TierName } from '../config.ts';
import { getBytesIfExists, type ObjectStore } from '../object-store.ts';
import { stateFolder } from '../state-root.ts';

/**
 * The most partitions a record holds, the oldest (by when they became due) kept. A record cut
 * short no longer covers the backlog: the oldest age stays right, the count is a lower bound, and
 * only the next sweep may say the tier caught up. Each recorded partition before the window costs
 * one LIST per plan, so the limit also bounds what a plan spends on it.
 */
export const BACKLOG_RECORD_LIMIT = 1000;

const recordSchema = z.object({
  plannedAt: z.iso.datetime(),
  covers: z.boolean(),
  partitions: z.array(
    z.object({ partition: z.string(), periodStart: z.iso.datetime(), dueAt: z.iso.datetime() }),
  ),
});

/** The record as written: ISO times, the partitions oldest first. */
export type BacklogRecord = z.infer<typeof recordSchema>;

/** One eligible partition as the record keeps it. */
export interface RecordedPartition {
  readonly partition: string;
  /** Start (ms) of its period: a windowed plan lists it again when this is before its window. */
  readonly periodStart: number;
  /** When (ms) it became due. */
  readonly dueAt: number;
}

/**
 * The folder of the tiers' backlog records. Under plans/: the plan step writes there, and the
 * lifecycle rule expires a record that no plan rewrites for RUN_RECORD_DAYS (a tier no longer
 * run), as it does the plans. The plan step's role may read this folder only (cdk/step-grants).
 */
export function backlogRecordsFolder(stateRoot: string): string {
  return `${stateFolder(stateRoot, 'plans')}backlog/`;
}

/** Where a tier's backlog record is: one object, overwritten by each plan. */
export function backlogRecordKey(config: CompactorConfig, tier: TierName): string {
  return `${backlogRecordsFolder(config.layout.stateRoot)}${tier}.json`;
}

/** The record a plan at `plannedAt` leaves: its eligible partitions, the oldest BACKLOG_RECORD_LIMIT. */
export function backlogRecordOf(
  plannedAt: string,
  covers: boolean,
  eligible: readonly RecordedPartition[],
): BacklogRecord {
  const oldest = [...eligible].sort((a, b) => a.dueAt - b.dueAt).slice(0, BACKLOG_RECORD_LIMIT);
  return {
    plannedAt,
    covers: covers && eligible.length <= BACKLOG_RECORD_LIMIT,
    partitions: oldest.map((p) => ({
      partition: p.partition,
      periodStart: new Date(p.periodStart).toISOString(),
      dueAt: new Date(p.dueAt).toISOString(),
    })),
  };
}

/**
 * The tier's record as a plan at `now` (ms) may use it, or why not: none written yet (or expired),
 * one from a later plan time (a replay planned as if earlier), or one that does not parse.
 */
export async function readBacklogRecord(
  store: ObjectStore,
  config: CompactorConfig,
  tier: TierName,
  now: number,
): Promise<{ readonly record: BacklogRecord } | { readonly unusable: string }> {
  const key = backlogRecordKey(config, tier);
  const got = await getBytesIfExists(store, key);
  if (got === undefined) return { unusable: `no backlog record (${key})` };
  let json: unknown;
  try {
    json = JSON.parse(got.body.toString('utf8'));
  } catch (error) {
    if (!(error instanceof SyntaxError)) throw error;
    json = undefined;
  }
  const parsed = recordSchema.safeParse(json);
  // Only plans write it: one that does not parse is replaced by this plan's, and judged as none.
  if (!parsed.success) return { unusable: `the backlog record ${key} does not parse` };
  if (Date.parse(parsed.data.plannedAt) > now) {
    return { unusable: `the backlog record ${key} is from a later plan (${parsed.data.plannedAt})` };
  }
  return { record: parsed.data };
}

/** Writes `plan`'s record, once its plan is written (plan step); nothing for a plan without one. */
export async function writeBacklogRecord(
  store: ObjectStore,
  config: CompactorConfig,
  plan: { readonly tier: JobKind; readonly backlogRecord?: BacklogRecord },
): Promise<void> {
  if (plan.backlogRecord === undefined || plan.tier === 'retention') return;
  const body = Buffer.from(`${JSON.stringify(plan.backlogRecord)}\n`);
  await store.put(backlogRecordKey(config, plan.tier), body, { contentType: 'application/json' });
}
