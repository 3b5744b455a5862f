/**
 * Sweep markers: where a tier's sweeps are recorded, the latest one (which decides whether a
 * cycle sweeps or lists windows: planner-listing.ts), and recording one once its plan is written.
 */

import type { CompactorConfig, JobKind, TierName } from '../config.ts';
import type { ObjectStore } from '../object-store.ts';
import { stateFolder } from '../state-root.ts';

/** Where sweeps are recorded: one empty-bodied marker per sweep, named by its plan time. */
export function sweepsRoot(config: CompactorConfig, tier: TierName): string {
  // Under plans/: the plan step may already list and write there, and the bucket's lifecycle rule
  // expires markers with the plans (after RUN_RECORD_DAYS), so they never pile up.
  return `${stateFolder(config.layout.stateRoot, 'plans')}sweeps/${tier}/`;
}

/** The latest recorded sweep of `tier` at or before `now` (ms), if any. */
export async function lastSweep(
  store: ObjectStore,
  config: CompactorConfig,
  tier: TierName,
  now: number,
): Promise<number | undefined> {
  const root = sweepsRoot(config, tier);
  let latest: number | undefined;
  for await (const object of store.list(root)) {
    const at = Date.parse(object.key.slice(root.length).replace(/\.json$/, ''));
    // A marker from a later plan time (a replay planned as if earlier) says nothing about now.
    if (Number.isNaN(at) || at > now) continue;
    latest = latest === undefined ? at : Math.max(latest, at);
  }
  return latest;
}

/**
 * Records that `plan` swept its tier, once the plan is written (plan step): the narrow cycles
 * that follow rely on it. A plan step retried after its record only lists windows again.
 */
export async function recordSweep(
  store: ObjectStore,
  config: CompactorConfig,
  plan: {
    readonly tier: JobKind;
    readonly now: string;
    readonly listing?: { readonly mode: string; readonly tables?: unknown };
  },
): Promise<void> {
  if (plan.listing?.mode !== 'sweep' || plan.tier === 'retention') return;
  const body = Buffer.from(`${JSON.stringify({ plannedAt: plan.now, tables: plan.listing.tables })}\n`);
  await store.put(`${sweepsRoot(config, plan.tier)}${plan.now}.json`, body, {
    contentType: 'application/json',
  });
}
