/**
 * Step 3, verify: the published outputs are exactly what the manifest recorded, or the job is
 * quarantined and no input is deleted.
 */

import { VerificationFailedError } from '../errors.ts';
import {
  type JobRef,
  META_JOB_ID,
  result,
  type StepDeps,
  type StepResult,
  summary,
  withSignal,
} from '../job.ts';
import type { Manifest, OutputRef } from '../manifest/manifest.ts';
import { advance, loadForStep, orTwinsWork, writeManifest } from '../manifest/manifest-cas.ts';
import { quarantineManifest } from '../quarantine.ts';
import { isOurOutput } from './publish.ts';

/**
 * Checks the published outputs against the manifest: why they do not match, or the outputs with
 * the ETags the store gave them (the receipt records them).
 */
export async function checkFinals(
  deps: StepDeps,
  manifest: Manifest,
): Promise<{ readonly problem: string } | { readonly outputs: readonly OutputRef[] }> {
  const outputs: OutputRef[] = [];
  for (const output of manifest.outputs ?? []) {
    const head = await deps.store.head(output.finalKey, withSignal(deps));
    if (!head) return { problem: `published output ${output.finalKey} is missing` };
    if (!isOurOutput(head, output, manifest.jobId)) {
      return {
        problem: `published output ${output.finalKey} does not match the manifest (size ${head.size} vs ${output.size}, checksum ${head.checksum?.value ?? 'n/a'} vs ${output.checksum.value}, job ${head.metadata[META_JOB_ID] ?? 'none'})`,
      };
    }
    outputs.push({ ...output, etag: head.etag });
  }
  // A repair job's inputs are stood for by existing outputs: they must be exactly the versions checked.
  for (const evidence of manifest.repairOf ?? []) {
    const head = await deps.store.head(evidence.key, withSignal(deps));
    if (!head)
      return { problem: `output ${evidence.key}, which holds the repaired inputs' rows, is missing` };
    if (head.etag !== evidence.etag)
      return { problem: `output ${evidence.key} changed since its rows were checked` };
  }
  return { outputs };
}

export async function verifyStep(deps: StepDeps, ref: JobRef): Promise<StepResult> {
  return orTwinsWork(deps, ref, 'published', () => verify(deps, ref));
}

async function verify(deps: StepDeps, ref: JobRef): Promise<StepResult> {
  const step = await loadForStep(deps, ref, 'published');
  if ('done' in step) return step.done;
  let { loaded } = step;
  const checked = await checkFinals(deps, loaded.manifest);
  if ('problem' in checked) {
    await quarantineManifest(deps, loaded, checked.problem);
    throw new VerificationFailedError(
      `${checked.problem}; job ${ref.jobId} was quarantined and no input was deleted`,
    );
  }
  const outputs = loaded.manifest.outputs === undefined ? {} : { outputs: checked.outputs };
  loaded = await writeManifest(
    deps,
    loaded,
    advance(deps, loaded.manifest, { state: 'verified', ...outputs }),
  );
  deps.onEvent?.({ type: 'verified', job: ref });
  return result(ref, 'done', 'verified', summary(loaded.manifest));
}
