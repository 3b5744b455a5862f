/**
 * The store probe for commands that write (run, recover, repair, retention): before their first
 * write, a store lacking a guarantee is refused with StoreGuaranteesError (exit 2), unless
 * --unsafe-single-writer-store opts out, which is then printed on stderr on every run.
 */

import { randomBytes } from 'node:crypto';
import type { CompactorConfig } from '../core/config.ts';
import type { Clock } from '../core/engine.ts';
import type { ObjectStore } from '../core/object-store.ts';
import { assertStoreGuarantees } from '../core/store-probe/store-probe.ts';
import { CONTAINER_PROBE_CACHE } from '../lambda/store-guarantees.ts';

/** The opt-out's flag: long and alarming on purpose. */
export const UNSAFE_SINGLE_WRITER_FLAG = 'unsafe-single-writer-store';

export async function assertCliStore(
  ctx: {
    readonly target: { readonly store: ObjectStore };
    readonly config: CompactorConfig;
    readonly clock: Clock;
  },
  err: (line: string) => void,
): Promise<void> {
  await assertStoreGuarantees({
    store: ctx.target.store,
    stateRoot: ctx.config.layout.stateRoot,
    clock: ctx.clock,
    randomHex: () => randomBytes(8).toString('hex'),
    // The process's cache is the one the locally bound Recover handler uses: one probe per run.
    cache: CONTAINER_PROBE_CACHE,
    optOut: ctx.config.unsafeSingleWriterStore,
    onWarning: (message) => err(`WARNING (--${UNSAFE_SINGLE_WRITER_FLAG}): ${message}`),
  });
}
