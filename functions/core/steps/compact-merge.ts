/**
 * The compact step's merge: unify the inputs' schemas, run the engine (again with a smaller
 * target when an output is over the store's copy limit), and prove the outputs hold every row,
 * or with dedup exactly the distinct rows. Nothing is staged here: the outputs are local files.
 */

import type { CompactorConfig, TierName } from '../config.ts';
import { naiveTimestampsAreUtc, timeColumnOf } from '../config-tables.ts';
import type { DedupRequest, DistinctCount, Engine, MergeEngineName } from '../engine.ts';
import { DedupError, InputUnreadableError, OutputTooLargeError, RowCountMismatchError } from '../errors.ts';
import { type MergedFooterMetadata, mergeFooterMetadata } from '../footer-metadata.ts';
import { type CompactDeps, type Job, result, type StepResult, withSignal } from '../job.ts';
import type { DataFile } from '../layout.ts';
import type { InputRef } from '../manifest/manifest.ts';
import { checkLease, type Loaded, partitionDataFile, release } from '../manifest/manifest-cas.ts';
import { chooseMergeEngine } from '../merge-engine.ts';
import { compareKeys } from '../object-store.ts';
import { quarantineInput } from '../quarantine.ts';
import { integerFloatMixes, unifySchemas } from '../schema.ts';
import type { CheckedInputs } from './compact-inputs.ts';
import { emptyFolder } from './job-folders.ts';
import { dedupRequest, describeDedup, proveDoubles } from './merge-checks.ts';

/** What the merge wrote under `dir`/out, and what the staged manifest records of it. */
export interface Merged {
  readonly written: Awaited<ReturnType<Engine['compact']>>;
  readonly partitionFile: DataFile;
  readonly footerMetadata: MergedFooterMetadata;
  readonly inputRows: number;
  readonly dedup: DedupRequest | undefined;
  readonly distinctRows: number | undefined;
  /** With dedup: the kept rows' (keys') hash, the same over the inputs and the outputs. */
  readonly keysHash: string | undefined;
  /** Sort keys none of the inputs has (the engine sorts by the others). */
  readonly unsortedBy: readonly string[];
  /** The engine that wrote the outputs (merge-engine.ts). */
  readonly mergeEngine: MergeEngineName;
}

/**
 * Merges the checked inputs into local outputs in `outDir`, an empty folder. Resolves to them, or to the step's
 * result when an input proves unreadable past its footer (quarantined; the partition released).
 */
export async function mergeInputs(
  deps: CompactDeps,
  loaded: Loaded,
  ref: Job<TierName>,
  outDir: string,
  { good, corrupt }: CheckedInputs,
): Promise<Merged | StepResult> {
  const { columns, dedup, partitionFile } = await mergedShape(deps, loaded, ref, good);
  // Keys every input agrees on (and Arc's tag union) go into the outputs; the rest are named.
  const footerMetadata = mergeFooterMetadata(
    good.map((g) => ({ key: g.input.key, metadata: g.info.metadata ?? {} })),
  );
  const inputRows = good.reduce((sum, g) => sum + g.info.rows, 0);
  // 'last' keeps the row of the last input: give them oldest first.
  const merged = dedup?.mode === 'last' ? oldestFirst(deps.config, good) : good;
  const inputBytes = good.reduce((sum, g) => sum + g.input.size, 0);
  const mergeEngine = chooseMergeEngine(
    { columns: columns.length, inputs: good.length, inputBytes, dedup },
    () =>
      deps.engine.mergeEngines?.({ columns, inputColumns: good.map((g) => g.info.columns), inputBytes }) ?? [
        'duckdb',
      ],
  );
  let written: Awaited<ReturnType<Engine['compact']>>;
  try {
    written = await writeOutputs(deps, loaded, ref, outDir, {
      inputs: merged.map((g) => g.path),
      columns,
      timeColumn: timeColumnOf(deps.config, partitionFile.table),
      dedup,
      metadata: footerMetadata.kept,
      mergeEngine,
    });
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
      { key: bad.input.key, reason: error.reason.replaceAll(bad.path, bad.input.key), unreadable: true },
      loaded.manifest,
    );
    await release(deps, loaded);
    const reason = `input ${bad.input.key} is unreadable past its footer: quarantined; the rest is retried next cycle`;
    deps.onEvent?.({ type: 'skipped', job: ref, reason });
    return result(ref, 'skipped', 'none', { reason, quarantinedInputs: corrupt.length + 1 });
  }
  const distinct = await verifyRows(deps, loaded, ref, {
    inputs: good.map((g) => g.path),
    inputRows,
    written,
    columns,
    dedup,
  });
  const present = new Set(columns.map((c) => c.name.toLowerCase()));
  const unsortedBy = deps.config.sortKeys.filter((k) => !present.has(k.toLowerCase()));
  return {
    written,
    partitionFile,
    footerMetadata,
    inputRows,
    dedup,
    distinctRows: distinct?.rows,
    keysHash: distinct?.keysHash,
    unsortedBy,
    mergeEngine,
  };
}

/**
 * The outputs' columns (the inputs' schemas unified), the table's dedup, and the partition's
 * data file. A refusal gives the partition back before it propagates.
 */
async function mergedShape(
  deps: CompactDeps,
  loaded: Loaded,
  ref: Job<TierName>,
  good: CheckedInputs['good'],
): Promise<{
  readonly columns: ReturnType<typeof unifySchemas>;
  readonly dedup: DedupRequest | undefined;
  readonly partitionFile: DataFile;
}> {
  try {
    const schemas = good.map((g) => ({ key: g.input.key, columns: g.info.columns }));
    const doubleProofs = await proveDoubles(
      deps.engine,
      integerFloatMixes(schemas),
      new Map(good.map((g) => [g.input.key, g.path])),
    );
    const partitionFile = partitionDataFile(deps, ref.tier, ref.partition);
    const columns = unifySchemas(ref.partition, schemas, {
      doubleProofs,
      naiveTimestampsUtc: naiveTimestampsAreUtc(deps.config, partitionFile.table),
    });
    return { columns, dedup: dedupRequest(deps.config, partitionFile.table, columns), partitionFile };
  } catch (error) {
    await release(deps, loaded);
    throw error;
  }
}

interface OutputRequest {
  readonly inputs: readonly string[];
  readonly columns: ReturnType<typeof unifySchemas>;
  /** The table's time column: the first sort key. */
  readonly timeColumn: string;
  readonly dedup: DedupRequest | undefined;
  readonly metadata: Readonly<Record<string, string>>;
  readonly mergeEngine: MergeEngineName;
}

/**
 * Writes the merged outputs into `outDir`, an empty folder. The split is an estimate, and publish is one
 * server-side copy, which the store caps (S3: 5 GiB): an output over the cap is rewritten with a
 * smaller target, never staged; past OUTPUT_SIZE_ATTEMPTS the partition is given back.
 */
async function writeOutputs(
  deps: CompactDeps,
  loaded: Loaded,
  ref: Job<TierName>,
  outDir: string,
  request: OutputRequest,
): Promise<Awaited<ReturnType<Engine['compact']>>> {
  const { store, config, engine } = deps;
  checkLease(deps, loaded.manifest);
  const copyLimit = store.maxCopyBytes ?? Number.POSITIVE_INFINITY;
  let target = Math.min(config.targetFileBytes, copyLimit);
  for (let attempt = 1; ; attempt++) {
    const written = await engine.compact({
      inputs: request.inputs,
      columns: request.columns,
      sortBy: [request.timeColumn, ...config.sortKeys],
      outputDir: outDir,
      targetFileBytes: target,
      rowGroupSize: config.rowGroupSize,
      ...(request.dedup ? { dedup: request.dedup } : {}),
      ...(Object.keys(request.metadata).length > 0 ? { metadata: request.metadata } : {}),
      ...(request.mergeEngine === 'duckdb' ? {} : { mergeEngine: request.mergeEngine }),
      ...withSignal(deps),
    });
    const largest = Math.max(0, ...written.map((o) => o.bytes));
    if (largest <= copyLimit) return written;
    if (attempt >= OUTPUT_SIZE_ATTEMPTS) {
      await release(deps, loaded);
      throw new OutputTooLargeError(
        `partition ${ref.partition}: an output of ${largest} bytes is over the ${copyLimit}-byte limit of one server-side copy, even when split at ${target} bytes; lower targetFileBytes (now ${config.targetFileBytes}); nothing was staged`,
      );
    }
    // Aim below the limit by the size the estimate missed, with room to spare.
    target = Math.max(1, Math.floor(target * (copyLimit / largest) * 0.8));
    checkLease(deps, loaded.manifest);
    emptyFolder(outDir);
  }
}

/**
 * The outputs hold exactly the inputs' rows: all of them, or with dedup the distinct ones, each
 * once. Verified, not assumed: a dedup's rows are counted and hashed by separate queries over the
 * inputs and the outputs, so the outputs keep the very rows (keys) the inputs hold, not only as
 * many. Resolves to the distinct count and hash (with dedup); a mismatch gives the partition back.
 */
async function verifyRows(
  deps: CompactDeps,
  loaded: Loaded,
  ref: Job<TierName>,
  check: {
    readonly inputs: readonly string[];
    readonly inputRows: number;
    readonly written: Awaited<ReturnType<Engine['compact']>>;
    readonly columns: ReturnType<typeof unifySchemas>;
    readonly dedup: DedupRequest | undefined;
  },
): Promise<DistinctCount | undefined> {
  const { written, dedup, inputRows } = check;
  const outputRows = written.reduce((sum, o) => sum + o.rows, 0);
  if (!dedup) {
    if (outputRows === inputRows && written.length > 0) return undefined;
    await release(deps, loaded);
    throw new RowCountMismatchError(
      `partition ${ref.partition}: inputs hold ${inputRows} rows but the output holds ${outputRows}; nothing was published`,
    );
  }
  checkLease(deps, loaded.manifest);
  const count = (files: readonly string[]) =>
    deps.engine.countDistinct({ files, columns: check.columns, dedup, ...withSignal(deps) });
  const distinct = await count(check.inputs);
  const outputDistinct = await count(written.map((o) => o.path));
  if (
    outputRows !== distinct.rows ||
    outputDistinct.rows !== outputRows ||
    outputDistinct.keysHash !== distinct.keysHash ||
    written.length === 0
  ) {
    await release(deps, loaded);
    const sameSet = outputDistinct.keysHash === distinct.keysHash ? '' : ', and not the same ones';
    throw new RowCountMismatchError(
      `partition ${ref.partition}: with dedup ${describeDedup(dedup)} the inputs hold ${inputRows} rows, ${distinct.rows} distinct, but the output holds ${outputRows} rows, ${outputDistinct.rows} distinct${sameSet}; nothing was published`,
    );
  }
  return distinct;
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
