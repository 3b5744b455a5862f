/**
 * The compact Lambda's scratch folder under /tmp. /tmp outlives an invocation: an invocation the
 * timeout killed leaves its job folder (up to the job's size) for the next one on the same
 * execution environment, whose /tmp is then short of room. An environment runs one invocation at
 * a time ("for each concurrent request, Lambda provisions a separate instance of your execution
 * environment", https://docs.aws.amazon.com/lambda/latest/dg/lambda-concurrency.html), so whatever
 * the folder holds when an invocation starts belongs to no running job and can go.
 */

import { mkdir } from 'node:fs/promises';
import { emptyFolder } from '../core/steps/job-folders.ts';

/** The engine's spill folder inside the work dir. */
export const SPILL_DIR = 'spill';

/**
 * Empties `workDir` except the entries named in `keep` (the engine's spill folder, which the warm
 * engine owns), creating it when missing. Returns the names it removed.
 */
export async function clearWorkDir(workDir: string, keep: readonly string[] = []): Promise<string[]> {
  await mkdir(workDir, { recursive: true });
  return emptyFolder(workDir, keep);
}
