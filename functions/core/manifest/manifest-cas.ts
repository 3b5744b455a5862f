/**
 * The manifest layer of the job protocol. Every manifest change is a conditional write on the
 * ETag the step read (compare-and-swap), so a step acting on a stale view fails with
 * ManifestConflictError instead of doing damage; a refused write that was our own landed retry,
 * or our twin delivery's work, is told apart by re-reading.
 */

import type { JobKind, TierName } from '../config.ts';
import {
  DeleteFailedError,
  LeaseExpiredError,
  ManifestConflictError,
  NotFoundError,
  PreconditionFailedError,
} from '../errors.ts';
import {
  type JobRef,
  META_JOB_ID,
  result,
  type StepDeps,
  type StepResult,
  summary,
  withSignal,
} from '../job.ts';
import type { DataFile } from '../layout.ts';
import { getBytesIfExists, MAX_DELETE_BATCH, type ObjectStore } from '../object-store.ts';
import { clearedByThisExecution } from '../receipts.ts';
import {
  type InputRef,
  isAtOrPast,
  type Manifest,
  type ManifestState,
  manifestKey,
  outputKey,
  parseManifest,
  serializeManifest,
  stagingPrefix,
  tierFolderFile,
} from './manifest.ts';

export interface Loaded {
  readonly key: string;
  readonly etag: string;
  readonly manifest: Manifest;
}

export async function loadManifest(
  deps: StepDeps,
  tier: JobKind,
  partition: string,
): Promise<Loaded | undefined> {
  const key = manifestKey(deps.config.layout, tier, partition);
  try {
    const { body, etag } = await deps.store.getBytes(key, withSignal(deps));
    return { key, etag, manifest: parseManifest(deps.config, deps.store.location, key, body) };
  } catch (error) {
    if (error instanceof NotFoundError) return undefined;
    throw error;
  }
}

function ownedBy(loaded: Loaded, ref: JobRef): boolean {
  return loaded.manifest.jobId === ref.jobId && loaded.manifest.executionId === ref.executionId;
}

/** A step refuses to start a side effect once its lease is over: recovery may own the job by then. */
export function checkLease(deps: StepDeps, manifest: Manifest): void {
  deps.signal?.throwIfAborted();
  if (deps.clock.now().getTime() >= Date.parse(manifest.leaseExpiresAt)) {
    throw new LeaseExpiredError(
      `lease of job ${manifest.jobId} on ${manifest.partition} expired at ${manifest.leaseExpiresAt}; recovery resolves it`,
    );
  }
}

export function advance(deps: StepDeps, manifest: Manifest, patch: Partial<Manifest>): Manifest {
  const now = deps.clock.now();
  return {
    ...manifest,
    ...patch,
    updatedAt: now.toISOString(),
    leaseExpiresAt: new Date(now.getTime() + deps.config.leaseSeconds * 1000).toISOString(),
  };
}

export async function writeManifest(deps: StepDeps, loaded: Loaded, next: Manifest): Promise<Loaded> {
  checkLease(deps, loaded.manifest);
  return casManifest(deps, loaded, next);
}

/**
 * Recovery's takeover: the same conditional write, without the lease check (the lease being
 * over is why recovery may take the job). The old owner's next write then fails.
 */
export async function takeOver(deps: StepDeps, loaded: Loaded, executionId: string): Promise<Loaded> {
  deps.signal?.throwIfAborted();
  return casManifest(deps, loaded, advance(deps, loaded.manifest, { executionId }));
}

/**
 * Replaces the manifest only if it is still the version we read. A refused write may be our own:
 * the SDK retries a PUT whose response was lost, and when the first attempt landed the retry is
 * answered 412 (or 409), its ETag having moved on
 * (https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html). So a refusal
 * re-reads the manifest, and bytes equal to what we wrote mean the write was ours: every manifest
 * write advances updatedAt and no other writer writes our job id with our execution.
 */
async function casManifest(deps: StepDeps, loaded: Loaded, next: Manifest): Promise<Loaded> {
  const body = serializeManifest(next);
  try {
    const { etag } = await deps.store.put(loaded.key, body, {
      ifMatch: loaded.etag,
      contentType: 'application/json',
      ...withSignal(deps),
    });
    return { key: loaded.key, etag, manifest: next };
  } catch (error) {
    if (error instanceof PreconditionFailedError || error instanceof NotFoundError) {
      const current = await getBytesIfExists(deps.store, loaded.key, withSignal(deps));
      if (current?.body.equals(body)) return { key: loaded.key, etag: current.etag, manifest: next };
      throw new ManifestConflictError(
        `manifest ${loaded.key} of job ${loaded.manifest.jobId} changed meanwhile`,
        {
          cause: error,
        },
      );
    }
    throw error;
  }
}

/** Deletes the manifest only if it is still the version we read. */
export async function deleteManifest(deps: StepDeps, loaded: Loaded): Promise<void> {
  const [outcome] = await deps.store.deleteMany([{ key: loaded.key, etag: loaded.etag }], withSignal(deps));
  if (outcome?.status === 'deleted' || outcome?.status === 'not-found') return;
  if (outcome?.status === 'precondition-failed') {
    throw new ManifestConflictError(`manifest ${loaded.key} changed before it could be removed`);
  }
  throw new DeleteFailedError(`could not delete manifest ${loaded.key}: ${describeOutcome(outcome)}`);
}

export function describeOutcome(
  outcome: Awaited<ReturnType<ObjectStore['deleteMany']>>[number] | undefined,
): string {
  if (!outcome) return 'no result';
  return outcome.status === 'error' ? `${outcome.code}: ${outcome.message}` : outcome.status;
}

/**
 * Express children are at-least-once
 * (https://docs.aws.amazon.com/step-functions/latest/dg/express-at-least-once-execution.html):
 * a twin delivery of this very job (same job id, same execution) may move the manifest on
 * between our read and our write. When a step's write is refused, the store tells whether the
 * twin did the step: the manifest holds our job past `from`, or, the manifest cleared, the job's
 * first output is published under our job id. Then this delivery has nothing left to do, exactly
 * as if it had arrived after its twin. Anything else (recovery took the job over or rolled it
 * back, or the output is gone) stays the conflict it is.
 */
export async function orTwinsWork(
  deps: StepDeps,
  ref: JobRef,
  from: ManifestState,
  step: () => Promise<StepResult>,
): Promise<StepResult> {
  try {
    return await step();
  } catch (error) {
    if (!(error instanceof ManifestConflictError)) throw error;
    const loaded = await loadManifest(deps, ref.tier, ref.partition);
    if (loaded) {
      const done = pastStep(loaded, ref, from, 'a twin delivery of this job did this step');
      if (done === undefined) throw error;
      return done;
    }
    if (ref.tier === 'retention') throw error;
    const first = outputKey(
      deps.config.layout,
      ref.tier,
      partitionDataFile(deps, ref.tier, ref.partition),
      ref.jobId,
      0,
    );
    const head = await deps.store.head(first, withSignal(deps));
    if (head?.metadata[META_JOB_ID] !== ref.jobId) throw error;
    return result(ref, 'already-done', 'cleared', {
      reason: `a twin delivery of this job published ${first} and cleared the job`,
    });
  }
}

/**
 * Loads the job's manifest for a step that needs it in `from` state. Returns a StepResult when
 * there is nothing (more) for this step to do.
 */
export async function loadForStep(
  deps: StepDeps,
  ref: JobRef,
  from: ManifestState,
): Promise<{ loaded: Loaded } | { done: StepResult }> {
  const loaded = await loadManifest(deps, ref.tier, ref.partition);
  if (!loaded) return { done: await withoutManifest(deps, ref) };
  if (!ownedBy(loaded, ref)) {
    return {
      done: result(ref, 'superseded', 'none', {
        reason: `the partition is held by job ${loaded.manifest.jobId} of ${loaded.manifest.executionId}`,
      }),
    };
  }
  const { manifest } = loaded;
  if (manifest.state === from) return { loaded };
  const done = pastStep(loaded, ref, from);
  if (done !== undefined) return { done };
  throw new ManifestConflictError(`job ${ref.jobId} is ${manifest.state}; this step needs ${from}`);
}

/**
 * A step of a job that has no manifest: done, when this execution cleared the job before (its
 * receipt, read only on this rare path); else the job was rolled back or taken over.
 */
async function withoutManifest(deps: StepDeps, ref: JobRef): Promise<StepResult> {
  return (
    (await committedBefore(deps, ref)) ??
    result(ref, 'superseded', 'none', { reason: 'no manifest: the job was cleared or rolled back' })
  );
}

/** Done, with the job's figures, when this execution committed and cleared the job before. */
export async function committedBefore(deps: StepDeps, ref: JobRef): Promise<StepResult | undefined> {
  const cleared = await clearedByThisExecution(deps, ref);
  if (cleared === undefined) return undefined;
  return result(ref, 'already-done', 'cleared', {
    ...summary(cleared.receipt),
    reason: `this execution committed and cleared the job before: its receipt is ${cleared.key}`,
  });
}

/** Our job's manifest already past `from`: the step was done (by an earlier attempt or a twin). */
function pastStep(loaded: Loaded, ref: JobRef, from: ManifestState, reason?: string): StepResult | undefined {
  const { manifest } = loaded;
  if (!ownedBy(loaded, ref) || manifest.state === from || !isAtOrPast(manifest, from)) return undefined;
  return result(ref, 'already-done', manifest.state, {
    ...summary(manifest),
    ...(reason === undefined ? {} : { reason }),
  });
}

/**
 * A job's first manifest (state `claimed`), serialized and checked: it must be a manifest recovery
 * would accept, so we never write what we would refuse to read.
 */
export function newClaim(
  deps: Pick<StepDeps, 'store' | 'config' | 'clock'>,
  job: JobRef,
  inputs: readonly InputRef[],
  extra: Pick<Manifest, 'repairOf' | 'expiry'> = {},
): { readonly key: string; readonly body: Buffer; readonly manifest: Manifest } {
  const now = deps.clock.now();
  const manifest: Manifest = {
    version: 1,
    jobId: job.jobId,
    executionId: job.executionId,
    tier: job.tier,
    partition: job.partition,
    location: deps.store.location,
    state: 'claimed',
    inputs,
    ...extra,
    createdAt: now.toISOString(),
    updatedAt: now.toISOString(),
    leaseExpiresAt: new Date(now.getTime() + deps.config.leaseSeconds * 1000).toISOString(),
  };
  const key = manifestKey(deps.config.layout, job.tier, job.partition);
  const body = serializeManifest(manifest);
  parseManifest(deps.config, deps.store.location, key, body);
  return { key, body, manifest };
}

/**
 * The job's manifest: ours if it is already there (a retry), else our claim written now with a
 * conditional create, so of two jobs on one partition only one claims it. A 412 is either
 * another owner or our own earlier write whose response was lost: the manifest tells which.
 * Another job's lease, or `build` giving a reason not to claim, ends the step as skipped.
 */
export async function claimOrLoad(
  deps: StepDeps,
  job: JobRef,
  noun: string,
  build: () => ReturnType<typeof newClaim> | { readonly reason: string },
): Promise<Loaded | StepResult> {
  const loaded = await loadManifest(deps, job.tier, job.partition);
  if (loaded) {
    if (ownedBy(loaded, job)) return loaded;
    return await leasedElsewhere(deps, job, `${noun} leased by job ${loaded.manifest.jobId}`);
  }
  const claim = build();
  if ('reason' in claim) return result(job, 'skipped', 'none', { reason: claim.reason });
  deps.signal?.throwIfAborted();
  try {
    const { etag } = await deps.store.put(claim.key, claim.body, {
      ifNoneMatch: '*',
      contentType: 'application/json',
      ...withSignal(deps),
    });
    deps.onEvent?.({ type: 'claimed', job });
    return { key: claim.key, etag, manifest: claim.manifest };
  } catch (error) {
    if (!(error instanceof PreconditionFailedError)) throw error;
    const found = await loadManifest(deps, job.tier, job.partition);
    if (found && ownedBy(found, job)) return found;
    const holder = found ? `job ${found.manifest.jobId}` : 'another job';
    return await leasedElsewhere(deps, job, `${noun} leased by ${holder}`);
  }
}

/**
 * A claim another job holds, or one refused: skipped, unless this execution committed and cleared
 * this job before (a redrive runs a Map item's finished jobs again), which its receipt says. The
 * receipt is read only on this path, where a partition is leased or a claim was refused.
 */
async function leasedElsewhere(deps: StepDeps, job: JobRef, reason: string): Promise<StepResult> {
  return (await committedBefore(deps, job)) ?? result(job, 'skipped', 'none', { reason });
}

/** The partition's coordinates, for naming outputs. */
export function partitionDataFile(deps: StepDeps, tier: TierName, partition: string): DataFile {
  const file = tierFolderFile(deps.config.layout, tier, partition);
  if (!file) throw new ManifestConflictError(`${partition} is not a ${tier} partition of this layout`);
  return file;
}

/** Gives up a claim we still hold (nothing staged is referenced): inputs become candidates again. */
export async function release(deps: StepDeps, loaded: Loaded): Promise<void> {
  await deleteManifest(deps, loaded);
  await deletePrefix(deps, stagingPrefix(deps.config.layout, loaded.manifest.jobId));
}

/** Deletes every object under a prefix (unconditionally: only job-owned state-root prefixes). */
export async function deletePrefix(
  deps: StepDeps,
  prefix: string,
  alsoDelete: readonly string[] = [],
): Promise<number> {
  const keys: string[] = [];
  for await (const object of deps.store.list(prefix, withSignal(deps))) keys.push(object.key);
  const listed = keys.length;
  keys.push(...alsoDelete);
  for (let i = 0; i < keys.length; i += MAX_DELETE_BATCH) {
    const outcomes = await deps.store.deleteMany(
      keys.slice(i, i + MAX_DELETE_BATCH).map((key) => ({ key })),
      withSignal(deps),
    );
    const failed = outcomes.find((o) => o.status === 'error');
    if (failed) throw new DeleteFailedError(`could not delete ${failed.key}: ${describeOutcome(failed)}`);
  }
  return listed;
}
