/**
 * Recovery: resolves every manifest whose owner is gone, exactly as the design's table says,
 * then removes staging objects and incomplete uploads that no manifest refers to, and quarantine
 * records whose objects are gone.
 *
 * It takes a job over with a conditional write (new execution id, new lease) before acting,
 * so the old owner's next step fails its own conditional write and stops. A list or head
 * error is an error, never "nothing there". Running it twice equals running it once.
 */

import {
  DeleteFailedError,
  FinalKeyConflictError,
  InvalidManifestError,
  NotFoundError,
  VerificationFailedError,
} from './errors.ts';
import { recordFailure } from './failures.ts';
import type { JobRef, StepDeps } from './job.ts';
import {
  type Manifest,
  manifestsRoot,
  parseManifest,
  quarantinedManifestsRoot,
  stagingPrefix,
  stagingRoot,
} from './manifest/manifest.ts';
import { deleteManifest, deletePrefix, type Loaded, takeOver } from './manifest/manifest-cas.ts';
import { getBytesIfExists, MAX_DELETE_BATCH } from './object-store.ts';
import { quarantineManifest } from './quarantine.ts';
import { pruneQuarantine } from './quarantine-lifecycle.ts';
import { clearManifestStep } from './steps/clear-manifest.ts';
import { deleteInputsStep } from './steps/delete-inputs.ts';
import { checkStaged, isOurOutput, publishStep } from './steps/publish.ts';
import { checkFinals, verifyStep } from './steps/verify.ts';

export interface RecoveryDeps extends StepDeps {
  /** The recovering execution: it becomes the owner of every job it takes over. */
  readonly executionId: string;
  /**
   * Whether the owner may still act. Adapters answer for their kind of owner: a local process
   * that is gone cannot act; a Step Functions execution's Lambdas may run on until their
   * timeout, so that adapter answers true until then.
   */
  readonly isOwnerAlive: (executionId: string) => Promise<boolean>;
}

export type RecoveryAction =
  | 'left-alone'
  | 'rolled-back'
  | 'rolled-forward'
  | 'cleared'
  | 'quarantined'
  | 'gone'
  | 'failed';

export interface RecoveryEntry {
  readonly manifestKey: string;
  readonly jobId?: string;
  readonly state?: string;
  readonly action: RecoveryAction;
  readonly reason: string;
}

export interface RecoveryReport {
  readonly entries: readonly RecoveryEntry[];
  readonly orphanStagingDeleted: number;
  readonly uploadsAborted: number;
  /** Quarantine records removed because every object they held is gone (quarantine-lifecycle.ts). */
  readonly quarantinePruned: number;
  /** Whether anything was changed: recovery run until this is false has reached a fixed point. */
  readonly changed: boolean;
  readonly failures: number;
}

export class RecoveryIncompleteError extends Error {
  override readonly name = 'RecoveryIncompleteError';
  readonly report: RecoveryReport;
  constructor(report: RecoveryReport) {
    const failed = report.entries.filter((e) => e.action === 'failed');
    super(
      `recovery could not resolve ${failed.length} manifest(s), first ${failed[0]?.manifestKey}: ${failed[0]?.reason}; run it again`,
    );
    this.report = report;
  }
}

export async function recover(deps: RecoveryDeps): Promise<RecoveryReport> {
  const { store, config } = deps;
  const layout = config.layout;

  // Staging first, then manifests: a staging object is written after its manifest's claim,
  // so if its job's manifest is not listed afterwards, the job is over and the object is garbage.
  const stagingJobs = new Map<string, number>();
  for await (const object of store.list(stagingRoot(layout))) {
    const jobId = object.key.slice(stagingRoot(layout).length).split('/')[0] ?? '';
    stagingJobs.set(jobId, (stagingJobs.get(jobId) ?? 0) + 1);
  }
  // Our multipart uploads are staging uploads; elsewhere only uploads the store knows were
  // abandoned (a local writer that died) are ours to abort: others may be a live ingester's.
  const uploads = await store.listIncompleteUploads(layout.dataPrefix);

  const entries: RecoveryEntry[] = [];
  const keepJobs = new Set<string>();
  for await (const object of store.list(manifestsRoot(layout))) {
    const entry = await resolveOne(deps, object.key, keepJobs);
    entries.push(entry);
  }
  // Quarantined jobs keep their staging as evidence.
  for await (const object of store.list(quarantinedManifestsRoot(layout))) {
    const jobId = await quarantinedJobId(deps, object.key);
    if (jobId) keepJobs.add(jobId);
  }

  // A manifest that could not be read may name any job: sweep nothing this pass.
  const sweep = !entries.some((e) => e.action === 'failed' && e.jobId === undefined);
  let orphanStagingDeleted = 0;
  let uploadsAborted = 0;
  if (sweep) {
    for (const jobId of stagingJobs.keys()) {
      if (keepJobs.has(jobId) || jobId === '') continue;
      orphanStagingDeleted += await deletePrefix(deps, stagingPrefix(layout, jobId));
    }
    for (const upload of uploads) {
      const inStaging = upload.key.startsWith(stagingRoot(layout));
      const jobId = inStaging ? (upload.key.slice(stagingRoot(layout).length).split('/')[0] ?? '') : '';
      if (inStaging ? keepJobs.has(jobId) : !upload.abandoned) continue;
      await store.abortIncompleteUpload(upload);
      uploadsAborted++;
    }
  }

  const quarantinePruned = (await pruneQuarantine(deps)).filter((c) => c.action === 'pruned').length;

  const report: RecoveryReport = {
    entries,
    orphanStagingDeleted,
    uploadsAborted,
    quarantinePruned,
    changed:
      orphanStagingDeleted > 0 ||
      uploadsAborted > 0 ||
      quarantinePruned > 0 ||
      entries.some((e) => e.action !== 'left-alone' && e.action !== 'gone' && e.action !== 'failed'),
    failures: entries.filter((e) => e.action === 'failed').length,
  };
  if (report.failures > 0) throw new RecoveryIncompleteError(report);
  return report;
}

async function quarantinedJobId(deps: RecoveryDeps, key: string): Promise<string | undefined> {
  const body = (await getBytesIfExists(deps.store, key))?.body;
  if (!body) return undefined;
  let record: { jobId?: unknown; manifest?: unknown };
  try {
    record = JSON.parse(body.toString('utf8')) as { jobId?: unknown; manifest?: unknown };
  } catch {
    // An unreadable record: look for a job id anywhere in it.
    return jobIdIn(body.toString('utf8'));
  }
  if (typeof record.jobId === 'string') return record.jobId;
  return typeof record.manifest === 'string' ? jobIdIn(record.manifest) : undefined;
}

/** Best effort on a manifest that failed validation: the job id it names, if any. */
export function jobIdIn(text: string): string | undefined {
  return /"jobId"\s*:\s*"([^"\\]{1,64})"/.exec(text)?.[1];
}

/** Resolves one manifest; errors are recorded so one bad partition never blocks the others. */
async function resolveOne(deps: RecoveryDeps, key: string, keepJobs: Set<string>): Promise<RecoveryEntry> {
  let body: Buffer;
  let etag: string;
  try {
    ({ body, etag } = await deps.store.getBytes(key));
  } catch (error) {
    if (error instanceof NotFoundError)
      return { manifestKey: key, action: 'gone', reason: 'cleared meanwhile' };
    return failed(key, undefined, error);
  }
  let manifest: Manifest;
  try {
    manifest = parseManifest(deps.config, deps.store.location, key, body);
  } catch (error) {
    if (!(error instanceof InvalidManifestError)) throw error;
    const jobId = jobIdIn(body.toString('utf8'));
    // Its staging stays as evidence with the quarantine record.
    if (jobId) keepJobs.add(jobId);
    try {
      await quarantineManifest(deps, { key, etag, body, ...(jobId ? { jobId } : {}) }, error.message);
      return { manifestKey: key, action: 'quarantined', reason: error.message };
    } catch (quarantineError) {
      return failed(key, undefined, quarantineError);
    }
  }
  keepJobs.add(manifest.jobId);
  try {
    return await resolveValid(deps, { key, etag, manifest }, keepJobs);
  } catch (error) {
    return failed(key, manifest, error);
  }
}

function failed(key: string, manifest: Manifest | undefined, error: unknown): RecoveryEntry {
  const reason = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  return {
    manifestKey: key,
    action: 'failed',
    reason,
    ...(manifest ? { jobId: manifest.jobId, state: manifest.state } : {}),
  };
}

async function resolveValid(
  deps: RecoveryDeps,
  found: Loaded,
  keepJobs: Set<string>,
): Promise<RecoveryEntry> {
  const { manifest } = found;
  const base = { manifestKey: found.key, jobId: manifest.jobId, state: manifest.state };
  const leaseLive = deps.clock.now().getTime() < Date.parse(manifest.leaseExpiresAt);
  if (manifest.executionId === deps.executionId) {
    // Our own job (a retried recovery or the current run's): resolve it as its owner.
  } else if (leaseLive && (await deps.isOwnerAlive(manifest.executionId))) {
    return { ...base, action: 'left-alone', reason: `owner ${manifest.executionId} is still running` };
  }
  // Take over: the old owner's next conditional write fails, so it can no longer act.
  const loaded = await takeOver(deps, found, deps.executionId);
  const ref: JobRef = {
    tier: manifest.tier,
    partition: manifest.partition,
    jobId: manifest.jobId,
    executionId: deps.executionId,
  };

  switch (manifest.state) {
    case 'claimed':
      await rollBack(deps, loaded);
      keepJobs.delete(manifest.jobId);
      return {
        ...base,
        action: 'rolled-back',
        reason: 'claimed, nothing published: inputs are candidates again',
      };
    case 'staged': {
      const problem = await checkStaged(deps, loaded.manifest);
      if (problem) {
        await rollBack(deps, loaded);
        keepJobs.delete(manifest.jobId);
        return { ...base, action: 'rolled-back', reason: `${problem}: retried next cycle` };
      }
      try {
        await publishStep(deps, ref);
      } catch (error) {
        if (error instanceof FinalKeyConflictError)
          return { ...base, action: 'quarantined', reason: error.message };
        throw error;
      }
      return rollForward(deps, ref, base, keepJobs, 'staged outputs intact: published');
    }
    case 'published':
    case 'verified': {
      // A verified job is checked again: its outputs may have been removed since.
      const checked = await checkFinals(deps, loaded.manifest);
      if ('problem' in checked) {
        await quarantineManifest(deps, loaded, `${checked.problem}; no input was deleted`);
        return { ...base, action: 'quarantined', reason: checked.problem };
      }
      return rollForward(deps, ref, base, keepJobs, 'outputs published');
    }
    case 'inputs-deleted':
      await clearManifestStep(deps, ref);
      keepJobs.delete(manifest.jobId);
      return { ...base, action: 'cleared', reason: 'inputs were deleted: cleared' };
  }
}

async function rollForward(
  deps: RecoveryDeps,
  ref: JobRef,
  base: Omit<RecoveryEntry, 'action' | 'reason'>,
  keepJobs: Set<string>,
  why: string,
): Promise<RecoveryEntry> {
  try {
    await verifyStep(deps, ref);
  } catch (error) {
    if (error instanceof VerificationFailedError)
      return { ...base, action: 'quarantined', reason: error.message };
    throw error;
  }
  await deleteInputsStep(deps, ref);
  await clearManifestStep(deps, ref);
  keepJobs.delete(ref.jobId);
  return { ...base, action: 'rolled-forward', reason: `${why}, verified, inputs deleted, cleared` };
}

/**
 * Undoes a job that never reached `published`: removes any final output that is provably this
 * job's (a publish cut short), its staging, then the manifest, so the inputs become candidates.
 * Only recovery calls this, after taking the job over.
 */
async function rollBack(deps: RecoveryDeps, loaded: Loaded): Promise<void> {
  const { manifest } = loaded;
  const finals: { key: string; etag: string }[] = [];
  for (const output of manifest.outputs ?? []) {
    const head = await deps.store.head(output.finalKey);
    if (head && isOurOutput(head, output, manifest.jobId))
      finals.push({ key: output.finalKey, etag: head.etag });
  }
  for (let i = 0; i < finals.length; i += MAX_DELETE_BATCH) {
    const outcomes = await deps.store.deleteMany(finals.slice(i, i + MAX_DELETE_BATCH));
    const bad = outcomes.find((o) => o.status === 'error' || o.status === 'precondition-failed');
    if (bad) throw new DeleteFailedError(`could not remove unpublished output ${bad.key}: ${bad.status}`);
  }
  await deletePrefix(deps, stagingPrefix(deps.config.layout, manifest.jobId));
  await deleteManifest(deps, loaded);
  // A job that died (a Lambda killed by its timeout or memory) counts as a failure of its partition.
  await recordFailure(
    deps,
    manifest.tier,
    manifest.partition,
    `job ${manifest.jobId} died in state ${manifest.state}; rolled back by recovery`,
    manifest.jobId,
  );
}
