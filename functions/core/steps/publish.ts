/**
 * Step 2, publish (the Publish state and Lambda): copy each staged output to its final key with a
 * conditional create, then advance the manifest to `published`, the commit point.
 */

import {
  FinalKeyConflictError,
  ManifestConflictError,
  NotFoundError,
  PreconditionFailedError,
  TransientStoreError,
} from '../errors.ts';
import {
  type JobRef,
  META_JOB_ID,
  OUTPUTS_IN_FLIGHT,
  result,
  type StepDeps,
  type StepResult,
  summary,
  withSignal,
} from '../job.ts';
import { forEachLimit } from '../limit.ts';
import type { Manifest, OutputRef } from '../manifest/manifest.ts';
import { advance, checkLease, loadForStep, orTwinsWork, writeManifest } from '../manifest/manifest-cas.ts';
import type { ObjectHead } from '../object-store.ts';
import { quarantineManifest } from '../quarantine.ts';

export function isOurOutput(head: ObjectHead | undefined, output: OutputRef, jobId: string): boolean {
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
  const { manifest } = loaded;
  // Several at once (OUTPUTS_IN_FLIGHT says why). Nothing is awaited before a copy, so the copies
  // start in index order, as the outputs' staging puts do. A foreign object at a final key stops
  // new copies; the job is quarantined once those in flight have ended.
  try {
    await forEachLimit(manifest.outputs ?? [], OUTPUTS_IN_FLIGHT, async (output) => {
      checkLease(deps, manifest);
      await copyToFinalKey(deps, output, ref.jobId);
    });
  } catch (error) {
    if (!(error instanceof ForeignFinalKeyError)) throw error;
    await quarantineManifest(deps, loaded, error.message);
    throw new FinalKeyConflictError(`${error.message}; the job was quarantined and nothing was deleted`);
  }
  // The commit point: from here on the outputs replace the inputs.
  loaded = await writeManifest(deps, loaded, advance(deps, manifest, { state: 'published' }));
  deps.onEvent?.({ type: 'published', job: ref });
  return result(ref, 'done', 'published', summary(loaded.manifest));
}

/** A final key that holds an object other than this job's output (publish quarantines the job). */
class ForeignFinalKeyError extends Error {
  override readonly name = 'ForeignFinalKeyError';
}

/** Copies one staged output to its final key with a conditional create; our own copy there is done. */
async function copyToFinalKey(deps: StepDeps, output: OutputRef, jobId: string): Promise<void> {
  try {
    await deps.store.copy(output.stagingKey, output.finalKey, {
      ifNoneMatch: '*',
      size: output.size,
      ...withSignal(deps),
    });
  } catch (error) {
    if (error instanceof PreconditionFailedError) {
      // Ours only if it is exactly what we staged (our retried copy); otherwise fail closed.
      const head = await deps.store.head(output.finalKey, withSignal(deps));
      if (isOurOutput(head, output, jobId)) return;
      // Nothing there: a 409 from a concurrent conditional write that did not land. Retry.
      if (head === undefined) {
        throw new TransientStoreError(
          `conditional copy to ${output.finalKey} conflicted; the key is still free`,
          {
            cause: error,
          },
        );
      }
      throw new ForeignFinalKeyError(
        `final key ${output.finalKey} already holds an object that is not this job's output`,
      );
    }
    if (error instanceof NotFoundError) {
      throw new ManifestConflictError(
        `staged output ${output.stagingKey} of job ${jobId} is missing; recovery resolves the job`,
        { cause: error },
      );
    }
    throw error;
  }
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
