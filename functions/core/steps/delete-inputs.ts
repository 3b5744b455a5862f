/**
 * Step 4, delete inputs: each input deleted only if it is still the version compacted (ETag);
 * a replaced one is kept as new data.
 */

import { DeleteFailedError } from '../errors.ts';
import { type JobRef, result, type StepDeps, type StepResult, summary, withSignal } from '../job.ts';
import type { KeptInput } from '../manifest/manifest.ts';
import { advance, checkLease, loadForStep, orTwinsWork, writeManifest } from '../manifest/manifest-cas.ts';
import { MAX_DELETE_BATCH } from '../object-store.ts';

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
