/**
 * The job protocol: compact (claim + stage) -> publish -> verify -> delete inputs -> clear.
 *
 * Each step is a separate, idempotent function: Step Functions retries and redrives call it
 * again with the same input, and an earlier invocation may still be running. Every manifest
 * change is a conditional write on the ETag the step read, so a step acting on a stale view
 * fails with ManifestConflictError instead of doing damage. Steps never destroy anything they
 * cannot prove is theirs; unexpected states are left to recovery, which takes a job over only
 * once its owner is gone.
 */

import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { crc32OfFile } from './checksum.ts';
import {
  type CompactorConfig,
  dedupOf,
  type JobKind,
  naiveTimestampsAreUtc,
  type TierName,
  type TimeUnit,
  timeUnitOf,
} from './config.ts';
import {
  type Clock,
  type DedupRequest,
  type Engine,
  type InputInfo,
  InputUnreadableError,
} from './engine.ts';
import { epochOutsideReason, epochRange, isEpochIntegerType } from './epoch-time.ts';
import {
  ConfigError,
  DedupError,
  DeleteFailedError,
  ErrorNames,
  FinalKeyConflictError,
  LeaseExpiredError,
  ManifestConflictError,
  NotFoundError,
  OutputTooLargeError,
  PreconditionFailedError,
  RETRYABLE_ERRORS,
  RowCountMismatchError,
  SchemaConflictError,
  TransientStoreError,
  VerificationFailedError,
} from './errors.ts';
import { failureKey, recordFailure } from './failures.ts';
import { mergeFooterMetadata } from './footer-metadata.ts';
import type { DataFile } from './layout.ts';
import { forEachLimit } from './limit.ts';
import {
  type InputRef,
  isAtOrPast,
  type KeptInput,
  type Manifest,
  type ManifestState,
  manifestKey,
  type OutputRef,
  outputKey,
  parseManifest,
  quarantinedInputKey,
  quarantinedManifestKey,
  serializeManifest,
  stagingPrefix,
  tierFolderFile,
} from './manifest.ts';
import {
  compareKeys,
  getBytesIfExists,
  MAX_DELETE_BATCH,
  type ObjectHead,
  type ObjectStore,
} from './object-store.ts';
import {
  DOUBLE_EXACT_LIMIT,
  type DoubleProof,
  type IntegerFloatMix,
  integerFloatMixes,
  unifySchemas,
} from './schema.ts';
import { tierPeriod } from './tiers.ts';

/** User metadata every staged and final output carries. */
export const META_JOB_ID = 'compactor-job-id';
export const META_ROWS = 'compactor-rows';

export type JobEvent =
  | {
      readonly type: 'claimed' | 'staged' | 'published' | 'verified' | 'inputs-deleted' | 'cleared';
      readonly job: JobRef;
    }
  | {
      readonly type: 'rolled-back' | 'skipped' | 'failure-not-recorded';
      readonly job: JobRef;
      readonly reason: string;
    }
  | { readonly type: 'quarantined'; readonly key: string; readonly reason: string }
  | {
      readonly type: 'input-quarantined';
      readonly key: string;
      readonly partition: string;
      readonly reason: string;
    };

export interface StepDeps {
  readonly store: ObjectStore;
  readonly config: CompactorConfig;
  readonly clock: Clock;
  readonly signal?: AbortSignal;
  /** Progress, logs and metrics hook; must not throw. */
  readonly onEvent?: (event: JobEvent) => void;
}

export interface CompactDeps extends StepDeps {
  readonly engine: Engine;
  /** Local scratch folder (Lambda: /tmp); each job works in its own subfolder and removes it. */
  readonly workDir: string;
}

/** Identifies a job and who runs it. Steps act only when the manifest names both. */
export interface JobRef {
  readonly tier: JobKind;
  readonly partition: string;
  readonly jobId: string;
  readonly executionId: string;
}

export interface JobSpec extends JobRef {
  readonly inputs: readonly InputRef[];
}

/** A job that merges its inputs into outputs (retention jobs run expireStep instead). */
export interface CompactionJob extends JobSpec {
  readonly tier: TierName;
}

export function isCompactionJob(job: JobSpec): job is CompactionJob {
  return job.tier !== 'retention';
}

export type StepStatus =
  /** The step did its work. */
  | 'done'
  /** An earlier attempt already did it (retry, redrive). */
  | 'already-done'
  /** Nothing to do: the partition is leased by another job, or an input changed. */
  | 'skipped'
  /** The manifest is gone (cleared or rolled back) or now names another owner. */
  | 'superseded';

export interface StepResult {
  readonly jobId: string;
  readonly tier: JobKind;
  readonly partition: string;
  readonly status: StepStatus;
  /** The manifest state after the step ('cleared' once the manifest is gone). */
  readonly state: ManifestState | 'cleared' | 'none';
  readonly reason?: string;
  readonly inputs?: number;
  readonly inputBytes?: number;
  readonly inputRows?: number;
  /** With dedup: the inputs' distinct rows (exact) or keys (last), which the outputs hold. */
  readonly distinctRows?: number;
  readonly outputs?: number;
  readonly outputBytes?: number;
  readonly outputRows?: number;
  readonly keptInputs?: number;
  readonly quarantinedInputs?: number;
  /** Footer key-value metadata keys of the inputs that the outputs do not carry (footer-metadata.ts). */
  readonly droppedMetadataKeys?: readonly string[];
}

interface Loaded {
  readonly key: string;
  readonly etag: string;
  readonly manifest: Manifest;
}

// ---- manifest access ----

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
function checkLease(deps: StepDeps, manifest: Manifest): void {
  deps.signal?.throwIfAborted();
  if (deps.clock.now().getTime() >= Date.parse(manifest.leaseExpiresAt)) {
    throw new LeaseExpiredError(
      `lease of job ${manifest.jobId} on ${manifest.partition} expired at ${manifest.leaseExpiresAt}; recovery resolves it`,
    );
  }
}

function advance(deps: StepDeps, manifest: Manifest, patch: Partial<Manifest>): Manifest {
  const now = deps.clock.now();
  return {
    ...manifest,
    ...patch,
    updatedAt: now.toISOString(),
    leaseExpiresAt: new Date(now.getTime() + deps.config.leaseSeconds * 1000).toISOString(),
  };
}

async function writeManifest(deps: StepDeps, loaded: Loaded, next: Manifest): Promise<Loaded> {
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
async function deleteManifest(deps: StepDeps, loaded: Loaded): Promise<void> {
  const [outcome] = await deps.store.deleteMany([{ key: loaded.key, etag: loaded.etag }], withSignal(deps));
  if (outcome?.status === 'deleted' || outcome?.status === 'not-found') return;
  if (outcome?.status === 'precondition-failed') {
    throw new ManifestConflictError(`manifest ${loaded.key} changed before it could be removed`);
  }
  throw new DeleteFailedError(`could not delete manifest ${loaded.key}: ${describeOutcome(outcome)}`);
}

function describeOutcome(
  outcome: Awaited<ReturnType<ObjectStore['deleteMany']>>[number] | undefined,
): string {
  if (!outcome) return 'no result';
  return outcome.status === 'error' ? `${outcome.code}: ${outcome.message}` : outcome.status;
}

export function withSignal(deps: StepDeps): { signal?: AbortSignal } {
  return deps.signal ? { signal: deps.signal } : {};
}

function result(
  ref: JobRef,
  status: StepStatus,
  state: StepResult['state'],
  extra: Partial<StepResult> = {},
): StepResult {
  return { jobId: ref.jobId, tier: ref.tier, partition: ref.partition, status, state, ...extra };
}

function summary(manifest: Manifest): Partial<StepResult> {
  const outputs = manifest.outputs ?? [];
  return {
    inputs: manifest.inputs.length,
    inputBytes: manifest.inputs.reduce((sum, i) => sum + i.size, 0),
    ...(manifest.inputRows === undefined ? {} : { inputRows: manifest.inputRows }),
    ...(manifest.distinctRows === undefined ? {} : { distinctRows: manifest.distinctRows }),
    ...(outputs.length === 0
      ? {}
      : {
          outputs: outputs.length,
          outputBytes: outputs.reduce((sum, o) => sum + o.size, 0),
          outputRows: outputs.reduce((sum, o) => sum + o.rows, 0),
        }),
    ...(manifest.keptInputs?.length ? { keptInputs: manifest.keptInputs.length } : {}),
    ...(manifest.quarantinedInputs?.length ? { quarantinedInputs: manifest.quarantinedInputs.length } : {}),
    ...(manifest.droppedMetadataKeys?.length ? { droppedMetadataKeys: manifest.droppedMetadataKeys } : {}),
  };
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
async function orTwinsWork(
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
      const { manifest } = loaded;
      if (!ownedBy(loaded, ref) || manifest.state === from || !isAtOrPast(manifest, from)) throw error;
      return result(ref, 'already-done', manifest.state, {
        ...summary(manifest),
        reason: 'a twin delivery of this job did this step',
      });
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
async function loadForStep(
  deps: StepDeps,
  ref: JobRef,
  from: ManifestState,
): Promise<{ loaded: Loaded } | { done: StepResult }> {
  const loaded = await loadManifest(deps, ref.tier, ref.partition);
  if (!loaded)
    return {
      done: result(ref, 'superseded', 'none', { reason: 'no manifest: the job was cleared or rolled back' }),
    };
  if (!ownedBy(loaded, ref)) {
    return {
      done: result(ref, 'superseded', 'none', {
        reason: `the partition is held by job ${loaded.manifest.jobId} of ${loaded.manifest.executionId}`,
      }),
    };
  }
  const { manifest } = loaded;
  if (manifest.state === from) return { loaded };
  if (isAtOrPast(manifest, from))
    return { done: result(ref, 'already-done', manifest.state, summary(manifest)) };
  throw new ManifestConflictError(`job ${ref.jobId} is ${manifest.state}; this step needs ${from}`);
}

// ---- step 1: compact (claim + stage) ----

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
    return result(job, 'skipped', 'none', { reason: `${noun} leased by job ${loaded.manifest.jobId}` });
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
    return result(job, 'skipped', 'none', { reason: `${noun} leased by ${holder}` });
  }
}

export async function compactStep(deps: CompactDeps, spec: JobSpec): Promise<StepResult> {
  if (!isCompactionJob(spec)) {
    throw new ConfigError(
      `job ${spec.jobId} is a ${spec.tier} job: it is run by expireStep, not compactStep`,
    );
  }
  const job = spec;
  return orTwinsWork(deps, job, 'claimed', () => compact(deps, job));
}

async function compact(deps: CompactDeps, job: CompactionJob): Promise<StepResult> {
  const loaded = await claimOrLoad(deps, job, 'partition', () => newClaim(deps, job, job.inputs));
  if (!('manifest' in loaded)) return loaded;
  if (loaded.manifest.state !== 'claimed')
    return result(job, 'already-done', loaded.manifest.state, summary(loaded.manifest));
  // A retention job of this period re-checks after its claim that no live manifest holds its
  // files; we check after ours that no retention job holds the period. Each writes before it
  // reads, so one of the two always sees the other, and a merge never reads a file that expiry
  // then deletes (its output would bring expired rows back).
  const expiring = await retentionLeaseOver(deps, job);
  if (expiring) {
    await release(deps, loaded);
    const reason = `retention job holds this period (${expiring}); compacted on a later run`;
    deps.onEvent?.({ type: 'skipped', job, reason });
    return result(job, 'skipped', 'none', { reason });
  }
  try {
    return await stage(deps, loaded, job);
  } catch (error) {
    if (!countsAsFailure(error)) throw error;
    // The job's own error is what the caller must see; if even the record cannot be written,
    // the next cycle simply tries the partition again (no backoff), and the operator is told.
    await recordFailure(deps, job.tier, job.partition, `${error.name}: ${error.message}`).catch(
      (recordError: unknown) => {
        const why =
          recordError instanceof Error ? `${recordError.name}: ${recordError.message}` : String(recordError);
        deps.onEvent?.({
          type: 'failure-not-recorded',
          job,
          reason: `the failure record of ${job.tier} ${job.partition} could not be written (${why}); its backoff starts over`,
        });
      },
    );
    throw error;
  }
}

/**
 * The retention lease over a compaction job's period, if any: the day folder's (hourly and daily
 * jobs) or those of the month and its days (monthly). No request when no retention rule is set.
 */
async function retentionLeaseOver(deps: StepDeps, job: JobRef): Promise<string | undefined> {
  if (deps.config.retention.rules.length === 0 || job.tier === 'retention') return undefined;
  const file = partitionDataFile(deps, job.tier, job.partition);
  const scope = file.dayFolder ?? file.monthFolder;
  if (scope === undefined) return undefined;
  const prefix = manifestKey(deps.config.layout, 'retention', scope).slice(0, -'.json'.length);
  for await (const object of deps.store.list(prefix, withSignal(deps))) return object.key;
  return undefined;
}

/** Errors that mean the partition's job failed, not that the store hiccuped or someone else owns it. */
function countsAsFailure(error: unknown): error is Error {
  if (!(error instanceof Error)) return false;
  const notTheJobs: readonly string[] = [
    ...RETRYABLE_ERRORS,
    ErrorNames.ManifestConflict,
    ErrorNames.PreconditionFailed,
    ErrorNames.NotFound,
    // The step stopped itself at its lease: recovery resolves the job and counts it if it died.
    ErrorNames.LeaseExpired,
  ];
  return !notTheJobs.includes(error.name);
}

async function stage(deps: CompactDeps, loaded: Loaded, ref: CompactionJob): Promise<StepResult> {
  const { store, config, engine } = deps;
  const manifest = loaded.manifest;
  await mkdir(deps.workDir, { recursive: true });
  const dir = await mkdtemp(join(deps.workDir, `${ref.jobId}-`));
  const footerChecks = new Map<string, Promise<{ info: InputInfo } | { error: unknown }>>();
  try {
    // Download every input exactly as planned: an input that changed ends the job cleanly.
    const paths = await inputPaths(dir, manifest.inputs.length);
    const files = manifest.inputs.map((input, i) => ({ input, path: paths[i] as string }));
    const changed: string[] = [];
    await forEachLimit(files, downloadConcurrency(manifest.inputs), async ({ input, path }) => {
      checkLease(deps, manifest);
      try {
        await store.getToFile(input.key, path, { ifMatch: input.etag, ...withSignal(deps) });
      } catch (error) {
        if (error instanceof PreconditionFailedError || error instanceof NotFoundError)
          changed.push(input.key);
        else throw error;
        return;
      }
      // Start the footer check now, overlapping the other downloads; its outcome is taken
      // below, in input order.
      footerChecks.set(
        path,
        engine.inspect(path).then(
          (info) => ({ info }),
          (error: unknown) => ({ error }),
        ),
      );
    });
    if (changed.length > 0) {
      await release(deps, loaded);
      const reason = `input changed or vanished since planning: ${changed.sort()[0]}`;
      deps.onEvent?.({ type: 'skipped', job: ref, reason });
      return result(ref, 'skipped', 'none', { reason });
    }

    // Validate every footer; a corrupt or foreign input is left in place, quarantined, never deleted.
    const good: { input: InputRef; path: string; info: InputInfo }[] = [];
    const corrupt: KeptInput[] = [];
    for (const { input, path } of files) {
      let info: InputInfo;
      try {
        info = await footerCheck(footerChecks, engine, path);
      } catch (error) {
        if (!(error instanceof InputUnreadableError)) throw error;
        corrupt.push({ key: input.key, reason: error.reason.replaceAll(path, input.key) });
        continue;
      }
      const foreign = foreignReason(config.timeColumn, info);
      if (foreign === undefined) good.push({ input, path, info });
      else corrupt.push({ key: input.key, reason: foreign });
    }
    // An integer epoch table (timeUnits): each input's times must lie in the folder's period.
    try {
      const partitionFile = partitionDataFile(deps, ref.tier, ref.partition);
      const unit = timeUnitOf(config, partitionFile.table);
      if (unit !== undefined) {
        const outside = await epochMisfits(deps, ref.tier, ref.partition, partitionFile, unit, good);
        for (const misfit of outside) {
          good.splice(good.indexOf(misfit.input), 1);
          corrupt.push(misfit.kept);
        }
      }
    } catch (error) {
      if (!(error instanceof SchemaConflictError || error instanceof ManifestConflictError)) throw error;
      await release(deps, loaded);
      throw error;
    }
    for (const bad of corrupt) await quarantineInput(deps, bad, manifest);
    if (good.length === 0) {
      await release(deps, loaded);
      const reason = `no readable input: ${corrupt.length} quarantined`;
      deps.onEvent?.({ type: 'skipped', job: ref, reason });
      return result(ref, 'skipped', 'none', { reason, quarantinedInputs: corrupt.length });
    }

    let columns: ReturnType<typeof unifySchemas>;
    try {
      const schemas = good.map((g) => ({ key: g.input.key, columns: g.info.columns }));
      const doubleProofs = await proveDoubles(
        engine,
        integerFloatMixes(schemas),
        new Map(good.map((g) => [g.input.key, g.path])),
      );
      const table = partitionDataFile(deps, ref.tier, ref.partition).table;
      columns = unifySchemas(ref.partition, schemas, {
        doubleProofs,
        naiveTimestampsUtc: naiveTimestampsAreUtc(config, table),
      });
    } catch (error) {
      await release(deps, loaded);
      throw error;
    }
    // Keys every input agrees on (and Arc's tag union) go into the outputs; the rest are named.
    const footerMetadata = mergeFooterMetadata(
      good.map((g) => ({ key: g.input.key, metadata: g.info.metadata ?? {} })),
    );
    const inputRows = good.reduce((sum, g) => sum + g.info.rows, 0);
    let dedup: DedupRequest | undefined;
    let partitionFile: DataFile;
    try {
      partitionFile = partitionDataFile(deps, ref.tier, ref.partition);
      dedup = dedupRequest(config, partitionFile.table, columns);
    } catch (error) {
      await release(deps, loaded);
      throw error;
    }
    // 'last' keeps the row of the last input: give them oldest first.
    const merged = dedup?.mode === 'last' ? oldestFirst(config, good) : good;
    const outDir = join(dir, 'out');
    await mkdir(outDir);
    checkLease(deps, manifest);
    let written: Awaited<ReturnType<Engine['compact']>>;
    // The split is an estimate, and publish is one server-side copy, which the store caps
    // (S3: 5 GiB): an output over the cap is rewritten with a smaller target, never staged.
    const copyLimit = store.maxCopyBytes ?? Number.POSITIVE_INFINITY;
    let target = Math.min(config.targetFileBytes, copyLimit);
    try {
      for (let attempt = 1; ; attempt++) {
        written = await engine.compact({
          inputs: merged.map((g) => g.path),
          columns,
          sortBy: [config.timeColumn, ...config.sortKeys],
          outputDir: outDir,
          targetFileBytes: target,
          rowGroupSize: config.rowGroupSize,
          ...(dedup ? { dedup } : {}),
          ...(Object.keys(footerMetadata.kept).length > 0 ? { metadata: footerMetadata.kept } : {}),
          ...withSignal(deps),
        });
        const largest = Math.max(0, ...written.map((o) => o.bytes));
        if (largest <= copyLimit) break;
        if (attempt >= OUTPUT_SIZE_ATTEMPTS) {
          await release(deps, loaded);
          throw new OutputTooLargeError(
            `partition ${ref.partition}: an output of ${largest} bytes is over the ${copyLimit}-byte limit of one server-side copy, even when split at ${target} bytes; lower targetFileBytes (now ${config.targetFileBytes}); nothing was staged`,
          );
        }
        // Aim below the limit by the size the estimate missed, with room to spare.
        target = Math.max(1, Math.floor(target * (copyLimit / largest) * 0.8));
        checkLease(deps, manifest);
        await rm(outDir, { recursive: true, force: true });
        await mkdir(outDir);
      }
    } catch (error) {
      // The engine refused this partition's dedup (a column hiding its row order): give it back.
      if (error instanceof DedupError) {
        await release(deps, loaded);
        throw error;
      }
      // A valid footer over damaged pages shows only now: quarantine that input and give the
      // partition back, so the next cycle compacts the rest instead of failing forever.
      if (!(error instanceof InputUnreadableError)) throw error;
      const bad = good.find((g) => g.path === error.file);
      if (!bad) throw error;
      await quarantineInput(
        deps,
        { key: bad.input.key, reason: error.reason.replaceAll(bad.path, bad.input.key) },
        manifest,
      );
      await release(deps, loaded);
      const reason = `input ${bad.input.key} is unreadable past its footer: quarantined; the rest is retried next cycle`;
      deps.onEvent?.({ type: 'skipped', job: ref, reason });
      return result(ref, 'skipped', 'none', { reason, quarantinedInputs: corrupt.length + 1 });
    }
    const outputRows = written.reduce((sum, o) => sum + o.rows, 0);
    let distinctRows: number | undefined;
    if (dedup) {
      // Verified, not assumed: the rows a correct dedup writes are counted by separate queries
      // over the inputs, and the outputs must hold that many rows, each distinct.
      checkLease(deps, manifest);
      const count = (files: readonly string[]) =>
        engine.countDistinct({ files, columns, dedup, ...withSignal(deps) });
      distinctRows = await count(good.map((g) => g.path));
      const outputDistinct = await count(written.map((o) => o.path));
      if (outputRows !== distinctRows || outputDistinct !== outputRows || written.length === 0) {
        await release(deps, loaded);
        throw new RowCountMismatchError(
          `partition ${ref.partition}: with dedup ${describeDedup(dedup)} the inputs hold ${inputRows} rows, ${distinctRows} distinct, but the output holds ${outputRows} rows, ${outputDistinct} distinct; nothing was published`,
        );
      }
    } else if (outputRows !== inputRows || written.length === 0) {
      await release(deps, loaded);
      throw new RowCountMismatchError(
        `partition ${ref.partition}: inputs hold ${inputRows} rows but the output holds ${outputRows}; nothing was published`,
      );
    }

    // Stage under a per-attempt folder, so a concurrent attempt of the same job never overwrites ours.
    const attempt = randomBytes(4).toString('hex');
    const outputs: OutputRef[] = [];
    for (const [index, out] of written.entries()) {
      const finalKey = outputKey(config.layout, ref.tier, partitionFile, ref.jobId, index);
      // Named by part, not by the final name: staging keys stay short whatever the table path.
      const stagingKey = `${stagingPrefix(config.layout, ref.jobId)}${attempt}/${String(index).padStart(3, '0')}.parquet`;
      const checksum = await crc32OfFile(out.path);
      checkLease(deps, manifest);
      await store.put(
        stagingKey,
        { file: out.path },
        {
          checksum,
          contentType: 'application/vnd.apache.parquet',
          metadata: { [META_JOB_ID]: ref.jobId, [META_ROWS]: String(out.rows) },
          ...withSignal(deps),
        },
      );
      outputs.push({ stagingKey, finalKey, size: out.bytes, rows: out.rows, checksum });
    }
    const next = advance(deps, manifest, {
      state: 'staged',
      inputs: good.map((g) => g.input),
      inputRows,
      ...(dedup && distinctRows !== undefined ? { dedup, distinctRows } : {}),
      outputs,
      ...(corrupt.length > 0 ? { quarantinedInputs: corrupt } : {}),
      ...(footerMetadata.dropped.length > 0 ? { droppedMetadataKeys: footerMetadata.dropped } : {}),
    });
    try {
      loaded = await writeManifest(deps, loaded, next);
    } catch (error) {
      // Superseded: what we staged belongs to nobody now.
      if (error instanceof ManifestConflictError) {
        await store.deleteMany(outputs.map((o) => ({ key: o.stagingKey })));
      }
      throw error;
    }
    deps.onEvent?.({ type: 'staged', job: ref });
    return result(ref, 'done', 'staged', summary(loaded.manifest));
  } finally {
    // No footer check may still be reading a file when the folder goes.
    await Promise.all(footerChecks.values());
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * For each column held as an integer by some inputs and as a float by others: a proof, from footer
 * statistics, that every integer value is exact as a DOUBLE (|x| <= 2^53), or why there is none.
 * Integers of up to 53 bits are exact by type. A wider one needs min_value/max_value statistics in
 * every row group of every input holding it, within the bound: a file without them is no proof.
 * The values are then checked against the claim (one column of those inputs is read).
 */
async function proveDoubles(
  engine: Engine,
  mixes: readonly IntegerFloatMix[],
  pathOf: ReadonlyMap<string, string>,
): Promise<Map<string, DoubleProof>> {
  const proofs = new Map<string, DoubleProof>();
  for (const { column, needProof } of mixes) {
    let proof: DoubleProof = { proved: true };
    for (const { key, name, type } of needProof) {
      const path = pathOf.get(key);
      const where = `${type} column "${name}" of ${JSON.stringify(key)}`;
      if (path === undefined || engine.integerBounds === undefined) {
        proof = { proved: false, reason: `no statistics can be read for the ${where}` };
        break;
      }
      const bounds = await engine.integerBounds(path, name);
      if ('unproved' in bounds) {
        proof = {
          proved: false,
          reason: `the ${where}: ${bounds.unproved}, so its values are not proved exact`,
        };
        break;
      }
      const outside = [bounds.min, bounds.max].find(
        (v) => v !== null && (v > DOUBLE_EXACT_LIMIT || v < -DOUBLE_EXACT_LIMIT),
      );
      if (outside !== undefined && outside !== null) {
        proof = {
          proved: false,
          reason: `the ${where} holds ${outside}, beyond ±2^53, which a DOUBLE cannot hold exactly`,
        };
        break;
      }
      // Verified, not assumed: statistics are the writer's claim; the values themselves must agree.
      const inexact =
        engine.countInexactAsDouble === undefined ? undefined : await engine.countInexactAsDouble(path, name);
      if (inexact !== 0) {
        proof = {
          proved: false,
          reason:
            inexact === undefined
              ? `the values of the ${where} cannot be checked`
              : `the statistics of the ${where} say every value is within ±2^53, but ${inexact} of its values are not exact as DOUBLE (the statistics are wrong)`,
        };
        break;
      }
    }
    proofs.set(column.toLowerCase(), proof);
  }
  return proofs;
}

/**
 * Why a readable input is foreign to its partition, or undefined when it belongs: an input without
 * the time column (matched case-insensitively, as the schema union matches names) is set aside
 * like a corrupt one. Merged, its rows would get NULL times, sort last, escape retention, and the
 * original would be deleted.
 */
function foreignReason(timeColumn: string, info: InputInfo): string | undefined {
  const wanted = timeColumn.toLowerCase();
  if (info.columns.some((c) => c.name.toLowerCase() === wanted)) return undefined;
  const names = info.columns.map((c) => c.name);
  const shown = names.length > 10 ? `${names.slice(0, 10).join(', ')}, ...` : names.join(', ');
  return `foreign to its partition: no time column "${timeColumn}" (columns: ${shown}); readable, but not merged`;
}

interface GoodInput {
  readonly input: InputRef;
  readonly path: string;
  readonly info: InputInfo;
}

/**
 * The inputs of an integer epoch table whose times, read in the declared unit, lie outside the
 * partition's period widened by retention.bufferHours (retention, judging by path, stays right
 * within it), counted from the data. A time column that is not an integer is a schema conflict:
 * the declared unit is wrong for the table, and the stored type is never converted.
 */
async function epochMisfits(
  deps: CompactDeps,
  tier: TierName,
  partition: string,
  partitionFile: DataFile,
  unit: TimeUnit,
  inputs: readonly GoodInput[],
): Promise<{ input: GoodInput; kept: KeptInput }[]> {
  const { config, engine } = deps;
  const table = partitionFile.table.slice(config.layout.dataPrefix.length);
  const period = tierPeriod(tier, partitionFile);
  if (period === undefined) throw new ManifestConflictError(`${partition} has no ${tier} period`);
  const slackMs = config.retention.bufferHours * 3_600_000;
  const range = epochRange(period, slackMs, unit);
  const wanted = config.timeColumn.toLowerCase();
  const misfits: { input: GoodInput; kept: KeptInput }[] = [];
  for (const good of inputs) {
    const column = good.info.columns.find((c) => c.name.toLowerCase() === wanted);
    if (column === undefined) continue; // foreign inputs were set aside already
    if (!isEpochIntegerType(column.type)) {
      throw new SchemaConflictError(
        partition,
        column.name,
        `${column.type} in ${JSON.stringify(good.input.key)}, but timeUnits[${JSON.stringify(table)}] declares it an integer epoch in "${unit}"; the stored type is never converted: remove the table from timeUnits, or rewrite the file with an integer time`,
      );
    }
    if (engine.integerOutside === undefined) {
      throw new ConfigError(
        `timeUnits[${JSON.stringify(table)}]: this engine cannot read an integer column's range, so epoch times cannot be checked; remove the table from timeUnits`,
      );
    }
    const found = await engine.integerOutside(good.path, column.name, range.low, range.high);
    const reason = epochOutsideReason(column.name, unit, period, slackMs, found);
    if (reason !== undefined) misfits.push({ input: good, kept: { key: good.input.key, reason } });
  }
  return misfits;
}

/** Writes of a job's outputs before one over the store's copy limit fails the partition. */
const OUTPUT_SIZE_ATTEMPTS = 3;

/** Local folders a job's inputs are spread over. */
const INPUT_FOLDERS = 16;

/**
 * The local paths a job's `count` inputs are downloaded to under `dir`, spread over a few folders
 * (created here): creating a file takes its folder's lock, so thousands of small inputs in one
 * folder are created one at a time (2,000 took twice as long on one VM disk).
 */
export async function inputPaths(dir: string, count: number): Promise<string[]> {
  const folders = Math.min(INPUT_FOLDERS, count);
  for (let f = 0; f < folders; f++) await mkdir(join(dir, `in-${f}`), { recursive: true });
  return Array.from({ length: count }, (_, i) => join(dir, `in-${i % folders}`, `${i}.parquet`));
}

/** Bytes of input a compact step aims to have in flight while downloading. */
const DOWNLOAD_WINDOW_BYTES = 8 * 1024 * 1024;

/**
 * Downloads in flight: 8 for large inputs (bandwidth-bound), up to 32 for small ones, whose GETs
 * are bound by S3's first-byte latency rather than bandwidth.
 */
export function downloadConcurrency(inputs: readonly { readonly size: number }[]): number {
  if (inputs.length === 0) return 1;
  const mean = inputs.reduce((sum, input) => sum + input.size, 0) / inputs.length;
  return Math.max(8, Math.min(32, Math.ceil(DOWNLOAD_WINDOW_BYTES / Math.max(mean, 1))));
}

/** The outcome of the footer check started after the download (or a check now, if none was). */
async function footerCheck(
  started: ReadonlyMap<string, Promise<{ info: InputInfo } | { error: unknown }>>,
  engine: Engine,
  path: string,
): Promise<InputInfo> {
  const pending = started.get(path);
  if (!pending) return engine.inspect(path);
  const outcome = await pending;
  if ('error' in outcome) throw outcome.error;
  return outcome.info;
}

/**
 * The engine's dedup for a partition of `table`, or undefined when the table has none. The time
 * column is part of every 'last' key; a key column the inputs lack fails the partition, since
 * comparing without it would merge different series.
 */
function dedupRequest(
  config: CompactorConfig,
  table: string,
  columns: readonly { readonly name: string }[],
): DedupRequest | undefined {
  const setting = dedupOf(config, table);
  if (setting?.mode !== 'last') return setting;
  const keys = [...setting.keys, config.timeColumn];
  const present = new Set(columns.map((c) => c.name.toLowerCase()));
  const missing = keys.filter((k) => !present.has(k.toLowerCase()));
  if (missing.length > 0) {
    throw new DedupError(
      `table ${table}: dedup "last" keys on ${keys.join(', ')}, but the inputs have no column ${missing.join(', ')}; fix dedup["${table.slice(config.layout.dataPrefix.length)}"].keys (or timeColumn) or the data. Nothing was published`,
    );
  }
  return { mode: 'last', keys };
}

function describeDedup(dedup: DedupRequest): string {
  return dedup.mode === 'exact' ? '"exact"' : `"last" on ${dedup.keys.join(', ')}`;
}

/**
 * Inputs in write order, oldest first, for dedup 'last'. Raw files and outputs of one level
 * sort by key: names carry the write time (Arc's `{measurement}_{YYYYMMDD}_{HHMMSS}_...`, and
 * our outputs' job ids start with their creation time). A daily output is older than the hourly
 * outputs beside it: those are late data compacted after it, or left over by a bounded daily job
 * that took the older ones.
 */
function oldestFirst<T extends { readonly input: InputRef }>(
  config: CompactorConfig,
  items: readonly T[],
): T[] {
  const level = (item: T) => config.layout.parse(item.input.key)?.level ?? 0;
  return [...items].sort((a, b) => level(b) - level(a) || compareKeys(a.input.key, b.input.key));
}

/** The partition's coordinates, for naming outputs. */
function partitionDataFile(deps: StepDeps, tier: TierName, partition: string): DataFile {
  const file = tierFolderFile(deps.config.layout, tier, partition);
  if (!file) throw new ManifestConflictError(`${partition} is not a ${tier} partition of this layout`);
  return file;
}

/** Gives up a claim we still hold (nothing staged is referenced): inputs become candidates again. */
async function release(deps: StepDeps, loaded: Loaded): Promise<void> {
  await deleteManifest(deps, loaded);
  await deletePrefix(deps, stagingPrefix(deps.config.layout, loaded.manifest.jobId));
}

async function quarantineInput(deps: StepDeps, bad: KeptInput, manifest: Manifest): Promise<void> {
  const input = manifest.inputs.find((i) => i.key === bad.key);
  const record = {
    key: bad.key,
    etag: input?.etag,
    partition: manifest.partition,
    reason: bad.reason,
    jobId: manifest.jobId,
    quarantinedAt: deps.clock.now().toISOString(),
    fix: 'Replace or remove the object, then delete this record to let it be compacted again.',
  };
  await deps.store.put(
    quarantinedInputKey(deps.config.layout, bad.key),
    Buffer.from(JSON.stringify(record, null, 2)),
    {
      contentType: 'application/json',
    },
  );
  deps.onEvent?.({
    type: 'input-quarantined',
    key: bad.key,
    partition: manifest.partition,
    reason: bad.reason,
  });
}

// ---- step 2: publish ----

function isOurOutput(head: ObjectHead | undefined, output: OutputRef, jobId: string): boolean {
  return (
    head !== undefined &&
    head.size === output.size &&
    head.metadata[META_JOB_ID] === jobId &&
    (head.checksum === undefined || head.checksum.value === output.checksum.value)
  );
}

export async function publishStep(deps: StepDeps, ref: JobRef): Promise<StepResult> {
  return orTwinsWork(deps, ref, 'staged', () => publish(deps, ref));
}

async function publish(deps: StepDeps, ref: JobRef): Promise<StepResult> {
  const step = await loadForStep(deps, ref, 'staged');
  if ('done' in step) return step.done;
  let { loaded } = step;
  for (const output of loaded.manifest.outputs ?? []) {
    checkLease(deps, loaded.manifest);
    try {
      await deps.store.copy(output.stagingKey, output.finalKey, { ifNoneMatch: '*', ...withSignal(deps) });
    } catch (error) {
      if (error instanceof PreconditionFailedError) {
        // Ours only if it is exactly what we staged (our retried copy); otherwise fail closed.
        const head = await deps.store.head(output.finalKey, withSignal(deps));
        if (isOurOutput(head, output, ref.jobId)) continue;
        // Nothing there: a 409 from a concurrent conditional write that did not land. Retry.
        if (head === undefined) {
          throw new TransientStoreError(
            `conditional copy to ${output.finalKey} conflicted; the key is still free`,
            {
              cause: error,
            },
          );
        }
        const reason = `final key ${output.finalKey} already holds an object that is not this job's output`;
        await quarantineManifest(deps, loaded, reason);
        throw new FinalKeyConflictError(`${reason}; the job was quarantined and nothing was deleted`);
      }
      if (error instanceof NotFoundError) {
        throw new ManifestConflictError(
          `staged output ${output.stagingKey} of job ${ref.jobId} is missing; recovery resolves the job`,
          { cause: error },
        );
      }
      throw error;
    }
  }
  // The commit point: from here on the outputs replace the inputs.
  loaded = await writeManifest(deps, loaded, advance(deps, loaded.manifest, { state: 'published' }));
  deps.onEvent?.({ type: 'published', job: ref });
  return result(ref, 'done', 'published', summary(loaded.manifest));
}

// ---- step 3: verify ----

/** Returns why the published outputs do not match the manifest, or undefined when they do. */
async function checkFinals(deps: StepDeps, manifest: Manifest): Promise<string | undefined> {
  for (const output of manifest.outputs ?? []) {
    const head = await deps.store.head(output.finalKey, withSignal(deps));
    if (!head) return `published output ${output.finalKey} is missing`;
    if (!isOurOutput(head, output, manifest.jobId)) {
      return `published output ${output.finalKey} does not match the manifest (size ${head.size} vs ${output.size}, checksum ${head.checksum?.value ?? 'n/a'} vs ${output.checksum.value}, job ${head.metadata[META_JOB_ID] ?? 'none'})`;
    }
  }
  // A repair job's inputs are stood for by existing outputs: they must be exactly the versions checked.
  for (const evidence of manifest.repairOf ?? []) {
    const head = await deps.store.head(evidence.key, withSignal(deps));
    if (!head) return `output ${evidence.key}, which holds the repaired inputs' rows, is missing`;
    if (head.etag !== evidence.etag) return `output ${evidence.key} changed since its rows were checked`;
  }
  return undefined;
}

export async function verifyStep(deps: StepDeps, ref: JobRef): Promise<StepResult> {
  return orTwinsWork(deps, ref, 'published', () => verify(deps, ref));
}

async function verify(deps: StepDeps, ref: JobRef): Promise<StepResult> {
  const step = await loadForStep(deps, ref, 'published');
  if ('done' in step) return step.done;
  let { loaded } = step;
  const problem = await checkFinals(deps, loaded.manifest);
  if (problem) {
    await quarantineManifest(deps, loaded, problem);
    throw new VerificationFailedError(
      `${problem}; job ${ref.jobId} was quarantined and no input was deleted`,
    );
  }
  loaded = await writeManifest(deps, loaded, advance(deps, loaded.manifest, { state: 'verified' }));
  deps.onEvent?.({ type: 'verified', job: ref });
  return result(ref, 'done', 'verified', summary(loaded.manifest));
}

// ---- step 4: delete inputs ----

export async function deleteInputsStep(deps: StepDeps, ref: JobRef): Promise<StepResult> {
  return orTwinsWork(deps, ref, 'verified', () => deleteInputs(deps, ref));
}

async function deleteInputs(deps: StepDeps, ref: JobRef): Promise<StepResult> {
  const step = await loadForStep(deps, ref, 'verified');
  if ('done' in step) return step.done;
  let { loaded } = step;
  // Inputs a retention job already set aside at its commit stay on record.
  const kept: KeptInput[] = [...(loaded.manifest.keptInputs ?? [])];
  const failures: string[] = [];
  const inputs = loaded.manifest.inputs;
  for (let i = 0; i < inputs.length; i += MAX_DELETE_BATCH) {
    checkLease(deps, loaded.manifest);
    const batch = inputs
      .slice(i, i + MAX_DELETE_BATCH)
      .map((input) => ({ key: input.key, etag: input.etag }));
    for (const outcome of await deps.store.deleteMany(batch, withSignal(deps))) {
      if (outcome.status === 'precondition-failed') {
        kept.push({ key: outcome.key, reason: 'replaced after it was compacted: kept as new data' });
      } else if (outcome.status === 'error') {
        failures.push(`${outcome.key} (${outcome.code}: ${outcome.message})`);
      }
    }
  }
  if (failures.length > 0) {
    throw new DeleteFailedError(
      `could not delete ${failures.length} input(s) of job ${ref.jobId}, first ${failures[0]}; the step is safe to retry`,
    );
  }
  loaded = await writeManifest(
    deps,
    loaded,
    advance(deps, loaded.manifest, {
      state: 'inputs-deleted',
      ...(kept.length > 0 ? { keptInputs: kept } : {}),
    }),
  );
  deps.onEvent?.({ type: 'inputs-deleted', job: ref });
  return result(ref, 'done', 'inputs-deleted', summary(loaded.manifest));
}

// ---- step 5: clear ----

export async function clearStep(deps: StepDeps, ref: JobRef): Promise<StepResult> {
  return orTwinsWork(deps, ref, 'inputs-deleted', () => clear(deps, ref));
}

async function clear(deps: StepDeps, ref: JobRef): Promise<StepResult> {
  const step = await loadForStep(deps, ref, 'inputs-deleted');
  if ('done' in step) {
    return step.done.status === 'superseded' && step.done.state === 'none'
      ? { ...step.done, status: 'already-done', state: 'cleared' }
      : step.done;
  }
  const { loaded } = step;
  checkLease(deps, loaded.manifest);
  // The partition's failure record (if any) goes in the same DeleteObjects call as the staging.
  await deletePrefix(deps, stagingPrefix(deps.config.layout, ref.jobId), [
    failureKey(deps.config, ref.tier, ref.partition),
  ]);
  await deleteManifest(deps, loaded);
  deps.onEvent?.({ type: 'cleared', job: ref });
  return result(ref, 'done', 'cleared', summary(loaded.manifest));
}

// ---- shared pieces used by steps and recovery ----

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

/**
 * Moves a manifest into quarantine: a record that keeps the manifest text and the reason, then
 * the live manifest is removed if it is still the version we read. Quarantined jobs' inputs and
 * outputs are never candidates and nothing of theirs is deleted until an operator acts.
 */
export async function quarantineManifest(
  deps: StepDeps,
  target: {
    readonly key: string;
    readonly etag: string;
    readonly body?: Buffer;
    readonly manifest?: Manifest;
    /** For an invalid manifest, the job id it seems to name: its staging is kept with the record. */
    readonly jobId?: string;
  },
  reason: string,
): Promise<string> {
  const text =
    target.body?.toString('utf8') ??
    (target.manifest ? serializeManifest(target.manifest).toString('utf8') : '');
  // Only the manifest version we judged may be quarantined: a stale step (a zombie whose job
  // another attempt finished) must not raise a false alarm.
  const current = await deps.store.head(target.key);
  if (current?.etag !== target.etag) {
    throw new ManifestConflictError(`manifest ${target.key} changed before it could be quarantined`);
  }
  const recordKey = quarantinedManifestKey(
    deps.config.layout,
    target.key,
    target.etag.replace(/[^A-Za-z0-9]/g, ''),
  );
  const record = {
    manifestKey: target.key,
    etag: target.etag,
    reason,
    quarantinedAt: deps.clock.now().toISOString(),
    jobId: target.manifest?.jobId ?? target.jobId,
    manifest: text,
    fix: 'Inspect the job; when resolved, delete this record. Nothing of this job is deleted while it exists.',
  };
  await deps.store.put(recordKey, Buffer.from(`${JSON.stringify(record, null, 2)}\n`), {
    contentType: 'application/json',
  });
  const [outcome] = await deps.store.deleteMany([{ key: target.key, etag: target.etag }]);
  if (outcome?.status === 'error') {
    throw new DeleteFailedError(
      `could not remove quarantined manifest ${target.key}: ${describeOutcome(outcome)}`,
    );
  }
  deps.onEvent?.({ type: 'quarantined', key: target.key, reason });
  return recordKey;
}

/** Checks that the staged outputs are exactly what the manifest recorded. */
export async function checkStaged(deps: StepDeps, manifest: Manifest): Promise<string | undefined> {
  for (const output of manifest.outputs ?? []) {
    const head = await deps.store.head(output.stagingKey, withSignal(deps));
    if (!head) return `staged output ${output.stagingKey} is missing`;
    if (!isOurOutput(head, output, manifest.jobId))
      return `staged output ${output.stagingKey} does not match the manifest`;
  }
  return undefined;
}

export { advance, checkFinals, deleteManifest, isOurOutput, type Loaded, result, summary, writeManifest };
