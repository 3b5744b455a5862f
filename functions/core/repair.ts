/**
 * Repair of a lake a non-atomic compactor already duplicated (the seed bug: an Arc
 * `_compacted.parquet` left next to the raw files it was made from). A raw file is removed only
 * when every one of its rows is present, by content and as many times, in outputs of the same
 * folder: containment is checked on the data, never inferred from names.
 *
 * The fix goes through the protocol: a manifest leases the partition and names the inputs and,
 * as `repairOf`, the outputs that hold their rows (at the ETags checked); the switch to
 * `verified` is the commit point (readers of the visible view stop counting the inputs); inputs
 * are deleted with their ETag; recovery resolves a repair cut short at any step.
 */

import { join } from 'node:path';
import { TIERS, type TierName } from './config.ts';
import type { RowContainment } from './engine.ts';
import { NotFoundError, PreconditionFailedError } from './errors.ts';
import { type Exclusions, isExcluded, readExclusions } from './exclusions.ts';
import type { JobRef, StepDeps, StepResult } from './job.ts';
import type { DataFile } from './layout.ts';
import { type InputRef, manifestKey, newJobId } from './manifest/manifest.ts';
import { loadManifest, newClaim, writeManifest } from './manifest/manifest-cas.ts';
import { compareKeys, type ObjectStore, type ObjectSummary } from './object-store.ts';
import { parseDataObject } from './parquet-sniff.ts';
import { inScratchFolder } from './scratch.ts';
import { clearManifestStep } from './steps/clear-manifest.ts';
import { deleteInputsStep } from './steps/delete-inputs.ts';
import { outputFolderOf, TIER_SPECS, tierFolder } from './tiers.ts';

export interface RepairDeps extends StepDeps {
  readonly engine: RowContainment;
  readonly workDir: string;
}

export interface RepairCandidate {
  readonly tier: TierName;
  readonly partition: string;
  /** Outputs of the folder that hold the inputs' rows. */
  readonly evidence: readonly InputRef[];
  /** Inputs whose rows are all in the evidence: duplicates, safe to delete. */
  readonly inputs: readonly InputRef[];
  readonly duplicatedRows: number;
  /** Inputs that must stay, and why. */
  readonly kept: readonly { readonly key: string; readonly reason: string }[];
}

const ref = (o: ObjectSummary): InputRef => ({ key: o.key, size: o.size, etag: o.etag });

async function download(
  store: ObjectStore,
  objects: readonly InputRef[],
  dir: string,
  role: string,
): Promise<string[]> {
  const paths: string[] = [];
  for (const [i, o] of objects.entries()) {
    const path = join(dir, `${role}-${i}.parquet`);
    await store.getToFile(o.key, path, { ifMatch: o.etag });
    paths.push(path);
  }
  return paths;
}

/** The objects of one folder repair looks at: the tier's inputs and its outputs there. */
export interface RepairFolder {
  readonly tier: TierName;
  readonly inputs: ObjectSummary[];
  readonly outputs: ObjectSummary[];
}

/**
 * Adds a data file to the folders repair looks at (keyed `tier:folder`): raw files under hourly
 * outputs, hourly under daily, daily under monthly.
 */
export function addToRepairFolders(
  folders: Map<string, RepairFolder>,
  object: ObjectSummary,
  file: DataFile,
): void {
  for (const tier of TIERS) {
    const folder = tierFolder(tier, file);
    if (!folder) continue;
    const entry = folders.get(`${tier}:${folder}`) ?? { tier, inputs: [], outputs: [] };
    if (file.level === TIER_SPECS[tier].input) entry.inputs.push(object);
    else if (file.level === TIER_SPECS[tier].output && outputFolderOf(tier, file) === folder)
      entry.outputs.push(object);
    else continue;
    folders.set(`${tier}:${folder}`, entry);
  }
}

/**
 * Finds folders where outputs coexist with inputs whose rows they already hold. Folders a job
 * holds (a live manifest) and files named by any manifest or quarantine are left alone.
 */
export async function findRepairs(deps: RepairDeps): Promise<RepairCandidate[]> {
  const { store, config } = deps;
  const { layout } = config;
  const folders = new Map<string, RepairFolder>();
  for await (const object of store.list(layout.dataPrefix)) {
    const file = await parseDataObject(store, layout, object);
    if (file) addToRepairFolders(folders, object, file);
  }
  return checkRepairFolders(deps, folders, await readExclusions(store, config));
}

/** Each folder with outputs beside inputs no manifest names, checked by content, in key order. */
export async function checkRepairFolders(
  deps: RepairDeps,
  folders: ReadonlyMap<string, RepairFolder>,
  exclusions: Exclusions,
): Promise<RepairCandidate[]> {
  const { layout } = deps.config;
  const candidates: RepairCandidate[] = [];
  for (const [id, entry] of [...folders.entries()].sort(([a], [b]) => compareKeys(a, b))) {
    const partition = id.slice(id.indexOf(':') + 1);
    const inputs = entry.inputs.filter((o) => !isExcluded(exclusions, o.key));
    const outputs = entry.outputs.filter((o) => !isExcluded(exclusions, o.key));
    if (inputs.length === 0 || outputs.length === 0) continue;
    if (exclusions.leasedManifests.has(manifestKey(layout, entry.tier, partition))) continue;
    const candidate = await checkContainment(deps, entry.tier, partition, inputs.map(ref), outputs.map(ref));
    if (candidate.inputs.length > 0 || candidate.kept.length > 0) candidates.push(candidate);
  }
  return candidates;
}

async function checkContainment(
  deps: RepairDeps,
  tier: TierName,
  partition: string,
  inputs: readonly InputRef[],
  evidence: readonly InputRef[],
): Promise<RepairCandidate> {
  return inScratchFolder(deps.workDir, 'repair-', async (dir) => {
    const evidencePaths = await download(deps.store, evidence, dir, 'output');
    const inputPaths = await download(deps.store, inputs, dir, 'input');
    const contained: { input: InputRef; path: string }[] = [];
    const kept: { key: string; reason: string }[] = [];
    for (const [i, input] of inputs.entries()) {
      const path = inputPaths[i] as string;
      const missing = await deps.engine.countMissing([path], evidencePaths);
      if (missing === 0) contained.push({ input, path });
      else kept.push({ key: input.key, reason: `${missing} of its rows are in no output of the folder` });
    }
    // Each file alone may be inside the outputs while two overlapping files together are not.
    if (contained.length > 1) {
      const missing = await deps.engine.countMissing(
        contained.map((c) => c.path),
        evidencePaths,
      );
      if (missing > 0) {
        for (const c of contained) {
          kept.push({
            key: c.input.key,
            reason: `together with the others, ${missing} rows are not in the outputs`,
          });
        }
        contained.length = 0;
      }
    }
    const duplicatedRows =
      contained.length === 0
        ? 0
        : await deps.engine.countMissing(
            contained.map((c) => c.path),
            [],
          );
    return { tier, partition, evidence, inputs: contained.map((c) => c.input), duplicatedRows, kept };
  });
}

/**
 * Removes one candidate's duplicate inputs through the protocol: claim, re-check containment
 * on the exact versions, commit (`verified`), delete inputs with their ETags, clear.
 */
export async function repairPartition(
  deps: RepairDeps & { readonly executionId: string; readonly randomHex: () => string },
  candidate: RepairCandidate,
): Promise<StepResult> {
  const { store } = deps;
  const job: JobRef = {
    tier: candidate.tier,
    partition: candidate.partition,
    jobId: newJobId(deps.clock.now(), deps.randomHex),
    executionId: deps.executionId,
  };
  const skipped = (reason: string): StepResult => ({ ...job, status: 'skipped', state: 'none', reason });
  const { key, body } = newClaim(deps, job, candidate.inputs, { repairOf: candidate.evidence });
  try {
    await store.put(key, body, { ifNoneMatch: '*', contentType: 'application/json' });
  } catch (error) {
    if (error instanceof PreconditionFailedError) return skipped('a job holds this partition');
    throw error;
  }
  const loaded = await loadManifest(deps, job.tier, job.partition);
  if (!loaded || loaded.manifest.jobId !== job.jobId) return skipped('the claim was lost');

  // Containment again, on exactly the versions the manifest names: anything changed, nothing is deleted.
  let recheck: RepairCandidate;
  try {
    recheck = await checkContainment(
      deps,
      candidate.tier,
      job.partition,
      candidate.inputs,
      candidate.evidence,
    );
  } catch (error) {
    if (!(error instanceof PreconditionFailedError || error instanceof NotFoundError)) throw error;
    await deleteClaim(store, loaded.key, loaded.etag);
    return skipped('a file changed since it was checked');
  }
  if (recheck.inputs.length !== candidate.inputs.length) {
    await deleteClaim(store, loaded.key, loaded.etag);
    return skipped('containment no longer holds');
  }
  await writeManifest(deps, loaded, {
    ...loaded.manifest,
    state: 'verified',
    updatedAt: deps.clock.now().toISOString(),
  });
  await deleteInputsStep(deps, job);
  return clearManifestStep(deps, job);
}

async function deleteClaim(store: ObjectStore, key: string, etag: string): Promise<void> {
  await store.deleteMany([{ key, etag }]);
}
