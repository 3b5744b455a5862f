/**
 * Step 1, compact: claim the partition, download and check every input, merge, and stage the
 * outputs under the job's staging prefix. Nothing outside the state root changes here.
 */

import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { crc32OfFile } from '../checksum.ts';
import { type CompactorConfig, naiveTimestampsAreUtc, timeUnitOf } from '../config.ts';
import { type DedupRequest, type Engine, type InputInfo, InputUnreadableError } from '../engine.ts';
import {
  ConfigError,
  DedupError,
  ErrorNames,
  ManifestConflictError,
  NotFoundError,
  OutputTooLargeError,
  PreconditionFailedError,
  RETRYABLE_ERRORS,
  RowCountMismatchError,
  SchemaConflictError,
} from '../errors.ts';
import { recordFailure } from '../failures.ts';
import { mergeFooterMetadata } from '../footer-metadata.ts';
import {
  type CompactDeps,
  type CompactionJob,
  isCompactionJob,
  type JobRef,
  type JobSpec,
  META_JOB_ID,
  META_ROWS,
  result,
  type StepDeps,
  type StepResult,
  summary,
  withSignal,
} from '../job.ts';
import type { DataFile } from '../layout.ts';
import { forEachLimit } from '../limit.ts';
import {
  type InputRef,
  type KeptInput,
  manifestKey,
  type OutputRef,
  outputKey,
  stagingPrefix,
} from '../manifest.ts';
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
} from '../manifest-cas.ts';
import { compareKeys } from '../object-store.ts';
import { quarantineInput } from '../quarantine.ts';
import { integerFloatMixes, unifySchemas } from '../schema.ts';
import { dedupRequest, describeDedup, epochMisfits, foreignReason, proveDoubles } from './merge-checks.ts';

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
