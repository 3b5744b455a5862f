/**
 * Step 5, clear: the job's receipt is written, its staging and failure record go, then its manifest.
 */

import { failureKey } from '../failures.ts';
import { type JobRef, result, type StepDeps, type StepResult, summary } from '../job.ts';
import { stagingPrefix } from '../manifest/manifest.ts';
import {
  checkLease,
  deleteManifest,
  deletePrefix,
  loadForStep,
  orTwinsWork,
} from '../manifest/manifest-cas.ts';
import { writeReceipt } from '../receipts.ts';

export async function clearManifestStep(deps: StepDeps, ref: JobRef): Promise<StepResult> {
  return orTwinsWork(deps, ref, 'inputs-deleted', () => clear(deps, ref));
}

async function clear(deps: StepDeps, ref: JobRef): Promise<StepResult> {
  const step = await loadForStep(deps, ref, 'inputs-deleted');
  if ('done' in step) {
    return step.done.status === 'superseded' && step.done.state === 'none'
      ? { ...step.done, status: 'already-done', state: 'cleared' }
      : step.done;
  }
  const { loaded } = step;
  checkLease(deps, loaded.manifest);
  // The receipt first: once the manifest goes, nothing else records what the job did.
  await writeReceipt(deps, loaded.manifest);
  // The partition's failure record (if any) goes in the same DeleteObjects call as the staging.
  await deletePrefix(deps, stagingPrefix(deps.config.layout, ref.jobId), [
    failureKey(deps.config, ref.tier, ref.partition),
  ]);
  await deleteManifest(deps, loaded);
  deps.onEvent?.({ type: 'cleared', job: ref });
  return result(ref, 'done', 'cleared', summary(loaded.manifest));
}
