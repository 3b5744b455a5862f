/**
 * Liveness: a partition whose job fails again and again (a schema conflict, an input too big
 * for the engine, a Lambda that always times out) is reported and skipped with exponential
 * backoff instead of being retried forever, and never blocks other partitions.
 *
 * A record `_compaction/failures/{tier}/{partition}.json` counts consecutive failures. The
 * compact step writes it when a job fails for a reason that is not transient; recovery writes
 * it when it rolls back a job that died. The clear step removes it when a job succeeds, in the
 * same DeleteObjects call as the staging objects (no extra request).
 */

import type { CompactorConfig, JobKind } from './config.ts';
import { NotFoundError } from './errors.ts';
import type { ObjectStore } from './object-store.ts';
import { stateFolder } from './state-root.ts';

export interface FailureRecord {
  readonly tier: JobKind;
  readonly partition: string;
  readonly consecutiveFailures: number;
  readonly lastError: string;
  readonly lastFailedAt: string;
  /** The job whose failure was counted last: one job counts once, however many say it failed. */
  readonly jobId?: string;
  /** Before this time the planner skips the partition (once failures reach the threshold). */
  readonly nextAttemptAt: string;
}

export function failuresRoot(config: CompactorConfig): string {
  return stateFolder(config.layout.stateRoot, 'failures');
}

export function failureKey(config: CompactorConfig, tier: JobKind, partition: string): string {
  return `${failuresRoot(config)}${tier}/${partition.slice(config.layout.dataPrefix.length, -1)}.json`;
}

/** How long to wait after the n-th consecutive failure: nothing below the threshold, then doubling. */
export function backoffSeconds(config: CompactorConfig, failures: number): number {
  const { after, baseSeconds, maxSeconds } = config.failureBackoff;
  if (failures < after) return 0;
  return Math.min(maxSeconds, baseSeconds * 2 ** (failures - after));
}

/**
 * Whether the planner holds the partition back at `now` (ms): once its failures reach the
 * threshold, until its next attempt. The planner and `compactor status` both ask this.
 */
export function heldByBackoff(config: CompactorConfig, record: FailureRecord, now: number): boolean {
  return record.consecutiveFailures >= config.failureBackoff.after && now < Date.parse(record.nextAttemptAt);
}

async function read(store: ObjectStore, key: string): Promise<FailureRecord | undefined> {
  try {
    const { body } = await store.getBytes(key);
    const record = JSON.parse(body.toString('utf8')) as Partial<FailureRecord>;
    if (typeof record.consecutiveFailures !== 'number' || typeof record.nextAttemptAt !== 'string')
      return undefined;
    return record as FailureRecord;
  } catch (error) {
    if (error instanceof NotFoundError || error instanceof SyntaxError) return undefined;
    throw error;
  }
}

/**
 * Counts one more consecutive failure of the partition's job. The same job counted again (the
 * compact step said why it failed, then recovery rolls the job back) changes nothing: the first
 * cause, the one an operator needs, stays.
 */
export async function recordFailure(
  deps: { readonly store: ObjectStore; readonly config: CompactorConfig; readonly clock: { now(): Date } },
  tier: JobKind,
  partition: string,
  error: string,
  jobId?: string,
): Promise<FailureRecord> {
  const key = failureKey(deps.config, tier, partition);
  const previous = await read(deps.store, key);
  if (previous !== undefined && jobId !== undefined && previous.jobId === jobId) return previous;
  const now = deps.clock.now();
  const consecutiveFailures = (previous?.consecutiveFailures ?? 0) + 1;
  const record: FailureRecord = {
    tier,
    partition,
    consecutiveFailures,
    lastError: error.slice(0, 2000),
    lastFailedAt: now.toISOString(),
    ...(jobId !== undefined ? { jobId } : {}),
    nextAttemptAt: new Date(
      now.getTime() + backoffSeconds(deps.config, consecutiveFailures) * 1000,
    ).toISOString(),
  };
  await deps.store.put(key, Buffer.from(`${JSON.stringify(record, null, 2)}\n`), {
    contentType: 'application/json',
  });
  return record;
}

/** Every failure record, by failure key. Unreadable records are ignored (they only delay). */
export async function readFailures(
  store: ObjectStore,
  config: CompactorConfig,
): Promise<Map<string, FailureRecord>> {
  const out = new Map<string, FailureRecord>();
  for await (const object of store.list(failuresRoot(config))) {
    const record = await read(store, object.key);
    if (record) out.set(object.key, record);
  }
  return out;
}
