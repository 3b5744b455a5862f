/**
 * The store probe leaves nothing behind: what its conditional deletes did not remove goes without
 * a condition, and so do the objects of probes cut short (a crash, a timeout) before they could.
 */

import { MAX_DELETE_BATCH, type ObjectStore } from '../object-store.ts';

/** A probe object this much older than a new probe's own belongs to a probe that was cut short. */
export const ABANDONED_PROBE_MS = 10 * 60_000;

export interface ProbeLeftovers {
  /** Where every probe writes (probeRoot). */
  readonly root: string;
  /** This probe's own folder under root. */
  readonly base: string;
  /** This probe's objects still there. */
  readonly left: readonly string[];
  /** When this probe's object was written, by the store's clock; undefined when no head saw it. */
  readonly ours: number | undefined;
  readonly signal: AbortSignal | undefined;
}

/** Deletes this probe's leftovers and abandoned probes' objects; throws if any of them stays. */
export async function removeProbeLeftovers(store: ObjectStore, probe: ProbeLeftovers): Promise<void> {
  const { root, base, ours, signal } = probe;
  const left = [...probe.left];
  // Probes cut short left objects of their own: those clearly older than this probe's, by the
  // store's own clock, go too; a concurrent probe's never do.
  if (ours !== undefined) {
    for await (const o of store.list(root, { signal })) {
      if (!o.key.startsWith(base) && o.lastModified.getTime() < ours - ABANDONED_PROBE_MS) left.push(o.key);
    }
  }
  for (let i = 0; i < left.length; i += MAX_DELETE_BATCH) {
    const outcomes = await store.deleteMany(
      left.slice(i, i + MAX_DELETE_BATCH).map((key) => ({ key })),
      { signal },
    );
    const stuck = outcomes.filter((o) => o.status !== 'deleted' && o.status !== 'not-found');
    if (stuck.length > 0) {
      throw new Error(
        `the store probe could not remove its objects: ${stuck.map((o) => `${o.key} (${o.status === 'error' ? `${o.code}: ${o.message}` : o.status})`).join(', ')}`,
      );
    }
  }
}
