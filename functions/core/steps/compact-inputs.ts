/**
 * The compact step's inputs: download each exactly as planned (an input that changed ends the job
 * cleanly), check every footer, and quarantine what is corrupt, foreign or outside the folder's
 * period (integer epoch tables), leaving it in place. What remains is what the merge reads.
 */

import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { TierName } from '../config.ts';
import { timeColumnOf, timeUnitOf } from '../config-tables.ts';
import type { Engine, InputInfo } from '../engine.ts';
import {
  InputUnreadableError,
  ManifestConflictError,
  NotFoundError,
  PreconditionFailedError,
  SchemaConflictError,
} from '../errors.ts';
import { type CompactDeps, type Job, result, type StepResult, withSignal } from '../job.ts';
import type { DataFile } from '../layout.ts';
import { forEachLimit } from '../limit.ts';
import type { KeptInput } from '../manifest/manifest.ts';
import {
  checkLease,
  committedBefore,
  type Loaded,
  partitionDataFile,
  release,
} from '../manifest/manifest-cas.ts';
import { quarantineInput } from '../quarantine.ts';
import { epochMisfits, foreignReason, type GoodInput, shownColumns } from './merge-checks.ts';

/**
 * The footer checks started as each download ends, by local path: the caller awaits them all
 * before it removes the files.
 */
export type FooterChecks = Map<string, Promise<{ info: InputInfo } | { error: unknown }>>;

/** The inputs the merge reads, and those quarantined (left in place). */
export interface CheckedInputs {
  readonly good: GoodInput[];
  readonly corrupt: KeptInput[];
}

/**
 * Downloads the claimed job's inputs into `dir` and checks them. Resolves to the inputs to merge,
 * or to the step's result when there is nothing to merge (the partition is released).
 */
export async function fetchInputs(
  deps: CompactDeps,
  loaded: Loaded,
  ref: Job<TierName>,
  dir: string,
  footerChecks: FooterChecks,
): Promise<CheckedInputs | StepResult> {
  const { store, config, engine } = deps;
  const manifest = loaded.manifest;
  // Download every input exactly as planned: an input that changed ends the job cleanly.
  const paths = inputPaths(dir, manifest.inputs.length);
  const files = manifest.inputs.map((input, i) => ({ input, path: paths[i] as string }));
  const changed: string[] = [];
  await forEachLimit(files, downloadConcurrency(manifest.inputs), async ({ input, path }) => {
    checkLease(deps, manifest);
    try {
      await store.getToFile(input.key, path, { ifMatch: input.etag, ...withSignal(deps) });
    } catch (error) {
      if (error instanceof PreconditionFailedError || error instanceof NotFoundError) changed.push(input.key);
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
    // Gone because this job deleted them: a redriven Map item runs its committed jobs again.
    const committed = await committedBefore(deps, ref);
    if (committed !== undefined) return committed;
    const reason = `input changed or vanished since planning: ${changed.sort()[0]}`;
    deps.onEvent?.({ type: 'skipped', job: ref, reason });
    return result(ref, 'skipped', 'none', { reason });
  }

  // Validate every footer; a corrupt or foreign input is left in place, quarantined, never deleted.
  let partitionFile: DataFile;
  try {
    partitionFile = partitionDataFile(deps, ref.tier, ref.partition);
  } catch (error) {
    await release(deps, loaded);
    throw error;
  }
  const timeColumn = timeColumnOf(config, partitionFile.table);
  const good: GoodInput[] = [];
  const corrupt: KeptInput[] = [];
  const foreign: { kept: KeptInput; info: InputInfo }[] = [];
  for (const { input, path } of files) {
    let info: InputInfo;
    try {
      info = await footerCheck(footerChecks, engine, path);
    } catch (error) {
      if (!(error instanceof InputUnreadableError)) throw error;
      corrupt.push({ key: input.key, reason: error.reason.replaceAll(path, input.key), unreadable: true });
      continue;
    }
    const reason = foreignReason(timeColumn, info);
    if (reason === undefined) good.push({ input, path, info });
    else foreign.push({ kept: { key: input.key, reason }, info });
  }
  // No readable input has the time column: the setting names the wrong column (or the table is
  // not a time series), not a file foreign to its partition. Nothing is set aside: once the
  // setting is fixed, the next run compacts the partition.
  const [firstForeign] = foreign;
  if (good.length === 0 && firstForeign !== undefined) {
    for (const bad of corrupt) await quarantineInput(deps, bad, manifest);
    await release(deps, loaded);
    const reason = noTimeColumnReason(config, partitionFile, timeColumn, firstForeign.info, foreign.length);
    deps.onEvent?.({ type: 'skipped', job: ref, reason });
    return result(ref, 'skipped', 'none', {
      reason,
      misconfigured: 'timeColumn',
      ...(corrupt.length > 0 ? { quarantinedInputs: corrupt.length } : {}),
    });
  }
  corrupt.push(...foreign.map((f) => f.kept));
  // An integer epoch table (timeUnits): each input's times must lie in the folder's period.
  try {
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
  return { good, corrupt };
}

/** Why a partition none of whose inputs has its table's time column was skipped, and the fix. */
function noTimeColumnReason(
  config: CompactDeps['config'],
  partitionFile: DataFile,
  timeColumn: string,
  sample: InputInfo,
  count: number,
): string {
  const table = partitionFile.table.slice(config.layout.dataPrefix.length);
  return `no input has the time column "${timeColumn}" (${count} readable, columns: ${shownColumns(sample)}): set timeColumns[${JSON.stringify(table)}] to the table's time column, or timeColumn for every table; nothing was quarantined`;
}

/** Local folders a job's inputs are spread over, at most. */
const INPUT_FOLDERS = 16;

/** Inputs one local folder takes before the next folder is used. */
const INPUTS_PER_FOLDER = 128;

/**
 * The local paths a job's `count` inputs are downloaded to under `dir` (an existing folder),
 * spread over a few folders (created here): creating a file takes its folder's lock, so thousands
 * of small inputs in one folder are created one at a time (2,000 took twice as long on one VM
 * disk). A job of a few inputs puts them in `dir` itself: a folder costs a mkdir and an rmdir, and
 * creating a folder is among the costliest metadata calls.
 */
export function inputPaths(dir: string, count: number): string[] {
  const folders = Math.max(1, Math.min(INPUT_FOLDERS, Math.ceil(count / INPUTS_PER_FOLDER)));
  const folderOf = (i: number) => (folders === 1 ? dir : join(dir, `in-${i % folders}`));
  if (folders > 1) for (let f = 0; f < folders; f++) mkdirSync(folderOf(f));
  return Array.from({ length: count }, (_, i) => join(folderOf(i), `${i}.parquet`));
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
