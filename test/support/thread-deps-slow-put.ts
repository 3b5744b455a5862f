/**
 * A helper-thread recipe (local-runner/child-thread.ts): the CLI's own deps, the thread's first
 * put held SLOW_PUT_MS (held-put-store.ts), longer than a child's timeout in the test that uses it.
 */

import type { ParsedOptions } from '../../functions/cli/options.ts';
import type { LocalRunDeps } from '../../functions/local-runner/run.ts';
import { heldFirstPutDeps } from './held-put-store.ts';

export const SLOW_PUT_MS = 8_000;

export function threadRunDeps(options: ParsedOptions): Promise<LocalRunDeps> {
  return heldFirstPutDeps(options, { ms: SLOW_PUT_MS });
}
