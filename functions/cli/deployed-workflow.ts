/**
 * The state machine `cdk deploy` would deploy with a command's settings, synthesized once and
 * cached under the work dir (keyed by everything the synthesis reads), as `run` executes it and
 * `plan` counts its transitions.
 */

import { join } from 'node:path';
import type { SynthesizedWorkflow } from '../local-runner/run.ts';
import { type CliOptions, workDirOf } from './context.ts';

export async function deployedWorkflow(
  compactorContext: Record<string, unknown>,
  options: Pick<CliOptions, 'work-dir'>,
  say: (line: string) => void,
): Promise<{ readonly workflow: SynthesizedWorkflow; readonly cacheDir: string }> {
  const { synthesizeWorkflow } = await import('../local-runner/run.ts');
  const cacheDir = join(workDirOf(options), 'definitions');
  const workflow = await synthesizeWorkflow(compactorContext, {
    cacheDir,
    onSynthesize: () =>
      say(
        `synthesizing the state machine cdk deploy would deploy (a few seconds; cached in ${cacheDir} until the code or settings change)`,
      ),
  });
  return { workflow, cacheDir };
}
