/**
 * A helper-thread recipe (local-runner/child-thread.ts) that builds the CLI's own deps and holds a
 * handle open for the thread's whole life, as an S3 client's keep-alive sockets do: the thread
 * must still end when the run closes it.
 */

import type { ParsedOptions } from '../../functions/cli/options.ts';
import { threadRunDeps as cliThreadRunDeps } from '../../functions/cli/thread-deps.ts';
import type { LocalRunDeps } from '../../functions/local-runner/run.ts';

export async function threadRunDeps(options: ParsedOptions): Promise<LocalRunDeps> {
  setInterval(() => undefined, 2 ** 30);
  return cliThreadRunDeps(options);
}
