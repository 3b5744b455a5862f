/**
 * Step 1, compact: claim the partition, download and check every input, merge, and stage the
 * outputs under the job's staging prefix. Nothing outside the state root changes here.
 *
 * This file claims, stages the outputs and records a failed job; the inputs are downloaded and
 * checked in compact-inputs.ts, and merged in compact-merge.ts.
 */

import { randomBytes } from 'node:crypto';
import { crc32OfFile } from '../checksum.ts';
import type { TierName } from '../config.ts';
import type { ColumnStats } from '../engine.ts';
import { ConfigError, ErrorNames, ManifestConflictError, RETRYABLE_ERRORS } from '../errors.ts';
import { recordFailure } from '../failures.ts';
import {
  type CompactDeps,
  isCompactionJob,
  type Job,
  type JobRef,
  META_JOB_ID,
  META_ROWS,
  OUTPUTS_IN_FLIGHT,
  result,
  type StepDeps,
  type StepResult,
  summary,
  withSignal,
} from '../job.ts';
import { forEachLimit } from '../limit.ts';
import {
  MAX_STATS_TEXT,
  manifestKey,
  type OutputRef,
  outputKey,
  stagingPrefix,
} from '../manifest/manifest.ts';
import {
  advance,
  checkLease,
  claimOrLoad,
  type Loaded,
  newClaim,
  orTwinsWork,
  partitionDataFile,
  release,
  writeManifest,
} from '../manifest/manifest-cas.ts';
import { type CheckedInputs, type FooterChecks, fetchInputs } from './compact-inputs.ts';
import { type Merged, mergeInputs } from './compact-merge.ts';
import { returnJobFolder, takeJobFolder } from './job-folders.ts';

export async function compactStep(deps: CompactDeps, job: Job): Promise<StepResult> {
  if (!isCompactionJob(job)) {
    throw new ConfigError(`job ${job.jobId} is a ${job.tier} job: it is run by expireStep, not compactStep`);
  }
  return orTwinsWork(deps, job, 'claimed', () => compact(deps, job));
}

async function compact(deps: CompactDeps, job: Job<TierName>): Promise<StepResult> {
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
    await recordFailure(deps, job.tier, job.partition, `${error.name}: ${error.message}`, job.jobId).catch(
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

async function stage(deps: CompactDeps, loaded: Loaded, ref: Job<TierName>): Promise<StepResult> {
  // The job folder's calls are synchronous: metadata calls on a local disk, each cheaper than a
  // thread-pool hop (removing a job's folder of ten inputs took 27 hops as a promise call).
  const folder = takeJobFolder(deps.workDir);
  const footerChecks: FooterChecks = new Map();
  try {
    const inputs = await fetchInputs(deps, loaded, ref, folder.dir, footerChecks);
    // A result already: an input changed since planning, or none was readable.
    if ('status' in inputs) return inputs;
    const merged = await mergeInputs(deps, loaded, ref, folder.outDir, inputs);
    if ('status' in merged) return merged;
    return await writeStaged(deps, loaded, ref, inputs, merged);
  } finally {
    // No footer check may still be reading a file when the folder is emptied.
    await Promise.all(footerChecks.values());
    returnJobFolder(deps.workDir, folder);
  }
}

/** Puts the merged outputs under the job's staging prefix and advances the manifest to staged. */
async function writeStaged(
  deps: CompactDeps,
  loaded: Loaded,
  ref: Job<TierName>,
  { good, corrupt }: CheckedInputs,
  {
    written,
    partitionFile,
    footerMetadata,
    inputRows,
    dedup,
    distinctRows,
    keysHash,
    unsortedBy,
    mergeEngine,
  }: Merged,
): Promise<StepResult> {
  const { store, config } = deps;
  const manifest = loaded.manifest;
  // Staged under per-attempt names, so a concurrent attempt of the same job never overwrites ours:
  // in the job's staging folder itself, as a folder of their own costs a local store a mkdir and
  // an rmdir (and the same again for the outputs' attributes).
  const attempt = randomBytes(4).toString('hex');
  const staged: { readonly path: string; readonly output: OutputRef }[] = new Array(written.length);
  await forEachLimit(written, OUTPUTS_IN_FLIGHT, async (out, index) => {
    const [checksum, columns] = await Promise.all([crc32OfFile(out.path), columnStatsOf(deps, out.path)]);
    const output: OutputRef = {
      // Named by part, not by the final name: staging keys stay short whatever the table path.
      stagingKey: `${stagingPrefix(config.layout, ref.jobId)}${attempt}-${String(index).padStart(3, '0')}.parquet`,
      finalKey: outputKey(config.layout, ref.tier, partitionFile, ref.jobId, index),
      size: out.bytes,
      rows: out.rows,
      checksum,
      ...(columns ? { columns } : {}),
    };
    staged[index] = { path: out.path, output };
  });
  // Several at once (OUTPUTS_IN_FLIGHT says why). Nothing is awaited before a put, so the puts
  // start in index order: a run's writes are the same sequence every time, as the crash sweeps
  // and the pipeline-equivalence test replay them.
  await forEachLimit(staged, OUTPUTS_IN_FLIGHT, async ({ path, output }) => {
    checkLease(deps, manifest);
    await store.put(
      output.stagingKey,
      // The step only removes its output file after this.
      { file: path, handOff: true },
      {
        checksum: output.checksum,
        contentType: 'application/vnd.apache.parquet',
        metadata: { [META_JOB_ID]: ref.jobId, [META_ROWS]: String(output.rows) },
        ...withSignal(deps),
      },
    );
  });
  const outputs = staged.map((s) => s.output);
  const next = advance(deps, manifest, {
    state: 'staged',
    inputs: good.map((g) => ({ ...g.input, rows: g.info.rows })),
    inputRows,
    ...(dedup && distinctRows !== undefined ? { dedup, distinctRows } : {}),
    ...(dedup && keysHash !== undefined ? { keysHash } : {}),
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
  return result(ref, 'done', 'staged', {
    ...summary(loaded.manifest),
    ...(unsortedBy.length > 0 ? { unsortedBy } : {}),
    mergeEngine,
  });
}

/**
 * An output's column statistics for the manifest (and so the job's receipt), or undefined when
 * the engine gives none. A min or max too long to keep is recorded as unknown.
 */
async function columnStatsOf(deps: CompactDeps, path: string): Promise<ColumnStats[] | undefined> {
  const stats = await deps.engine.columnStats?.(path);
  const bounded = (text: string | null) => (text !== null && text.length > MAX_STATS_TEXT ? null : text);
  return stats?.map((c) => ({ ...c, min: bounded(c.min), max: bounded(c.max) }));
}
