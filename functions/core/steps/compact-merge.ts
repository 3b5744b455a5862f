/**
 * The compact step's merge: unify the inputs' schemas, run the engine (again with a smaller
 * target when an output is over the store's copy limit), and prove the outputs hold every row,
 * or with dedup exactly the distinct rows. Nothing is staged here: the outputs are local files.
 */

import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { CompactorConfig, TierName } from '../config.ts';
import { naiveTimestampsAreUtc } from '../config-tables.ts';
import { type DedupRequest, type Engine, InputUnreadableError } from '../engine.ts';
import { DedupError, OutputTooLargeError, RowCountMismatchError } from '../errors.ts';
import { type MergedFooterMetadata, mergeFooterMetadata } from '../footer-metadata.ts';
import { type CompactDeps, type Job, result, type StepResult, withSignal } from '../job.ts';
import type { DataFile } from '../layout.ts';
import type { InputRef } from '../manifest/manifest.ts';
import { checkLease, type Loaded, partitionDataFile, release } from '../manifest/manifest-cas.ts';
import { compareKeys } from '../object-store.ts';
import { quarantineInput } from '../quarantine.ts';
import { integerFloatMixes, unifySchemas } from '../schema.ts';
import type { CheckedInputs } from './compact-inputs.ts';
import { dedupRequest, describeDedup, proveDoubles } from './merge-checks.ts';

/** What the merge wrote under `dir`/out, and what the staged manifest records of it. */
export interface Merged {
  readonly written: Awaited<ReturnType<Engine['compact']>>;
  readonly partitionFile: DataFile;
  readonly footerMetadata: MergedFooterMetadata;
  readonly inputRows: number;
  readonly dedup: DedupRequest | undefined;
  readonly distinctRows: number | undefined;
}

/**
 * Merges the checked inputs into local outputs under `dir`. Resolves to them, or to the step's
 * result when an input proves unreadable past its footer (quarantined; the partition released).
 */
export async function mergeInputs(
  deps: CompactDeps,
  loaded: Loaded,
  ref: Job<TierName>,
  dir: string,
  { good, corrupt }: CheckedInputs,
): Promise<Merged | StepResult> {
  const { store, config, engine } = deps;
  const manifest = loaded.manifest;
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
  return { written, partitionFile, footerMetadata, inputRows, dedup, distinctRows };
}

/** Writes of a job's outputs before one over the store's copy limit fails the partition. */
const OUTPUT_SIZE_ATTEMPTS = 3;

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
