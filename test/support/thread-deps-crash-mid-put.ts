/**
 * A helper-thread recipe (local-runner/child-thread.ts): the CLI's own deps, and an uncaught
 * error thrown in the thread while its first put is in flight (held-put-store.ts).
 */

import type { ParsedOptions } from '../../functions/cli/options.ts';
import type { LocalRunDeps } from '../../functions/local-runner/run.ts';
import { heldFirstPutDeps } from './held-put-store.ts';

export const THREAD_BUG = 'a bug in the helper thread while a put is in flight';

export function threadRunDeps(options: ParsedOptions): Promise<LocalRunDeps> {
  return heldFirstPutDeps(options, { ms: 300, bug: THREAD_BUG });
}
