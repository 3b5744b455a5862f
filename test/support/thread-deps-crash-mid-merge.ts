/**
 * A helper-thread recipe (local-runner/child-thread.ts) that builds the CLI's own deps, then
 * throws an uncaught error in the thread while its first merge runs in DuckDB: a bug that escapes
 * a child, with a DuckDB call in flight.
 */

import type { ParsedOptions } from '../../functions/cli/options.ts';
import { threadRunDeps as cliThreadRunDeps } from '../../functions/cli/thread-deps.ts';
import type { CompactRequest, Engine } from '../../functions/core/engine.ts';
import type { LocalRunDeps } from '../../functions/local-runner/run.ts';

export const THREAD_BUG = 'a bug in the helper thread';

export async function threadRunDeps(options: ParsedOptions): Promise<LocalRunDeps> {
  const deps = await cliThreadRunDeps(options);
  const inner = await deps.engine();
  let thrown = false;
  const engine: Engine = Object.assign(Object.create(inner) as Engine, {
    compact: (request: CompactRequest) => {
      const merging = inner.compact(request);
      if (!thrown) {
        thrown = true;
        setImmediate(() => {
          throw new Error(THREAD_BUG);
        });
      }
      return merging;
    },
    close: () => inner.close(),
  });
  return { ...deps, engine: async () => engine };
}
