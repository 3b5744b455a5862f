/**
 * The way back out of quarantine. `release` re-admits quarantined inputs once their cause is
 * fixed: it reads each with the compact step's footer and time-column checks, keeps the record
 * of one that still fails them, and deletes the others' records, each conditioned on the version
 * read, so the next plan sees the inputs again and the compact step checks them in full (a file
 * still bad is quarantined again). `prune` removes records whose objects are gone: they hold
 * nothing, and would keep `compactor status` failing forever. A quarantined job is never
 * released here: its outputs may be published beside its inputs, and only an operator can say
 * which copy stays.
 */

import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { CompactorConfig } from './config.ts';
import { timeColumnOf } from './config-tables.ts';
import type { Engine } from './engine.ts';
import { DeleteFailedError, InputUnreadableError, NotFoundError } from './errors.ts';
import { readQuarantineRecord } from './exclusions.ts';
import {
  hashedQuarantineRoot,
  inputOfReadableRecord,
  quarantinedManifestsRoot,
  readableQuarantineRoot,
} from './manifest/manifest.ts';
import { describeOutcome } from './manifest/manifest-cas.ts';
import { getBytesIfExists, type ObjectStore } from './object-store.ts';
import { parseInputRecord } from './quarantine.ts';
import { inScratchFolder } from './scratch.ts';
import { foreignReason } from './steps/merge-checks.ts';

interface LifecycleDeps {
  readonly store: ObjectStore;
  readonly config: CompactorConfig;
}

/** A quarantined input's record, as read. */
export interface QuarantinedInput {
  readonly recordKey: string;
  readonly recordEtag: string;
  /** The data key it holds. */
  readonly key: string;
  readonly partition: string | undefined;
  readonly reason: string;
}

/** What a release or a prune did (or, dry, would do) to each record. */
export interface QuarantineChange {
  readonly recordKey: string;
  /** The input it held, or for a job's record the manifest key. */
  readonly holds: string;
  readonly action: 'released' | 'pruned' | 'changed-meanwhile' | 'still-bad';
  readonly reason: string;
}

/** Every quarantined-input record: readable and hash-named; one that names no key of the lake is skipped. */
export async function listQuarantinedInputs(deps: LifecycleDeps): Promise<QuarantinedInput[]> {
  const { store, config } = deps;
  const out: QuarantinedInput[] = [];
  for (const root of [readableQuarantineRoot(config.layout), hashedQuarantineRoot(config.layout)]) {
    for await (const object of store.list(root)) {
      const got = await getBytesIfExists(store, object.key);
      if (!got) continue;
      const record = parseInputRecord(got.body);
      // As exclusions.ts reads it: a readable record's key names its input, a hashed one's body.
      const key = inputOfReadableRecord(config.layout, object.key) ?? record.key;
      if (key === undefined || !key.startsWith(config.layout.dataPrefix)) continue;
      out.push({
        recordKey: object.key,
        recordEtag: got.etag,
        key,
        partition: record.partition,
        reason: record.reason ?? 'unreadable quarantine record',
      });
    }
  }
  return out;
}

/** Which inputs to release: those of one partition (a folder key, ending in '/'), or all. */
export type ReleaseSelection = { readonly partition: string } | { readonly all: true };

/** Whether a data key (an input, or a partition folder) lies in the selection. */
export function selects(selection: ReleaseSelection, key: string): boolean {
  return 'all' in selection || key.startsWith(selection.partition);
}

/** What the release's re-check reads an input with: the compact step's own footer checks. */
export interface RecheckDeps extends LifecycleDeps {
  readonly engine: Engine;
  readonly workDir: string;
}

/**
 * Re-admits quarantined inputs (records as listQuarantinedInputs read them): deletes each record
 * (unless `dryRun`) if it is still the version read. A record whose input is gone is pruned
 * instead. Each input is read
 * first with the compact step's footer and time-column checks: one that still fails them keeps
 * its record ('still-bad', with why). Checks that need the whole partition (the epoch period,
 * pages past the footer) are left to the next compaction, which quarantines again what fails.
 */
export async function releaseInputs(
  deps: RecheckDeps,
  records: readonly QuarantinedInput[],
  options: { readonly dryRun: boolean },
): Promise<QuarantineChange[]> {
  const changes: QuarantineChange[] = [];
  await inScratchFolder(deps.workDir, 'release-', async (dir) => {
    for (const [index, record] of records.entries()) {
      const base = { recordKey: record.recordKey, holds: record.key };
      const problem = await recheck(deps, record.key, join(dir, `${index}.parquet`));
      const change: QuarantineChange =
        problem === 'gone'
          ? { ...base, action: 'pruned', reason: 'the input is gone' }
          : problem !== undefined
            ? { ...base, action: 'still-bad', reason: problem }
            : { ...base, action: 'released', reason: record.reason };
      const apply = !options.dryRun && change.action !== 'still-bad';
      changes.push(apply ? await removeRecord(deps, record.recordKey, record.recordEtag, change) : change);
    }
  });
  return changes;
}

/** Why an input would be quarantined again ('gone' when it is), or undefined when it passes. */
async function recheck(deps: RecheckDeps, key: string, path: string): Promise<string | undefined> {
  try {
    await deps.store.getToFile(key, path);
  } catch (error) {
    if (error instanceof NotFoundError) return 'gone';
    throw error;
  }
  try {
    const info = await deps.engine.inspect(path);
    const file = deps.config.layout.parse(key);
    const timeColumn = file ? timeColumnOf(deps.config, file.table) : deps.config.timeColumn;
    const foreign = foreignReason(timeColumn, info);
    return foreign === undefined ? undefined : `still ${foreign}`;
  } catch (error) {
    if (error instanceof InputUnreadableError)
      return `still unreadable: ${error.reason.replaceAll(path, key)}`;
    throw error;
  } finally {
    await rm(path, { force: true });
  }
}

/**
 * Removes every quarantine record whose objects are all gone: an input's record once the input
 * is, a job's once every input and output it names is. Records that name nothing are kept.
 */
export async function pruneQuarantine(
  deps: LifecycleDeps,
  options: { readonly dryRun: boolean } = { dryRun: false },
): Promise<QuarantineChange[]> {
  const inputs = await pruneInputRecords(deps, await listQuarantinedInputs(deps), options);
  return [...inputs, ...(await pruneJobRecords(deps, options)).pruned];
}

/** Removes the records (as listQuarantinedInputs read them) whose input is gone. */
export async function pruneInputRecords(
  deps: LifecycleDeps,
  records: readonly QuarantinedInput[],
  options: { readonly dryRun: boolean },
): Promise<QuarantineChange[]> {
  const changes: QuarantineChange[] = [];
  for (const record of records) {
    if ((await deps.store.head(record.key)) !== undefined) continue;
    const change: QuarantineChange = {
      recordKey: record.recordKey,
      holds: record.key,
      action: 'pruned',
      reason: 'the input is gone',
    };
    changes.push(
      options.dryRun ? change : await removeRecord(deps, record.recordKey, record.recordEtag, change),
    );
  }
  return changes;
}

/**
 * Removes the records of quarantined jobs every input and output of which is gone; `kept`: the
 * keys of the others.
 */
export async function pruneJobRecords(
  deps: LifecycleDeps,
  options: { readonly dryRun: boolean },
): Promise<{ readonly pruned: QuarantineChange[]; readonly kept: string[] }> {
  const { store, config } = deps;
  const pruned: QuarantineChange[] = [];
  const kept: string[] = [];
  for await (const object of store.list(quarantinedManifestsRoot(config.layout))) {
    const record = await readQuarantineRecord(store, config, object.key);
    const named = record.manifest
      ? [
          ...record.manifest.inputs.map((i) => i.key),
          ...(record.manifest.outputs ?? []).map((o) => o.finalKey),
        ]
      : [...record.inputKeys, ...record.outputKeys];
    let allGone = named.length > 0;
    for (const key of named) {
      if ((await store.head(key)) !== undefined) {
        allGone = false;
        break;
      }
    }
    if (!allGone) {
      kept.push(object.key);
      continue;
    }
    const change: QuarantineChange = {
      recordKey: object.key,
      holds: record.manifestKey ?? object.key,
      action: 'pruned',
      reason: `every input and output of the job is gone (${named.length})`,
    };
    pruned.push(options.dryRun ? change : await removeRecord(deps, object.key, object.etag, change));
  }
  return { pruned, kept };
}

/** Deletes a record if it is still the version read; a record rewritten meanwhile stays. */
async function removeRecord(
  deps: LifecycleDeps,
  recordKey: string,
  etag: string,
  change: QuarantineChange,
): Promise<QuarantineChange> {
  const [outcome] = await deps.store.deleteMany([{ key: recordKey, etag }]);
  if (outcome?.status === 'error') {
    throw new DeleteFailedError(
      `could not remove quarantine record ${recordKey}: ${describeOutcome(outcome)}`,
    );
  }
  if (outcome?.status === 'precondition-failed') {
    return { ...change, action: 'changed-meanwhile', reason: 'the record was rewritten meanwhile: kept' };
  }
  return change;
}
