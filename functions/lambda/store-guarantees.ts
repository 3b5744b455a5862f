/**
 * The store probe at container scope: one verdict per store location, kept for PROBE_TTL_MS and
 * shared by every handler in this process. In a local run the CLI probes through the same cache
 * before the workflow starts, so the Recover step finds the verdict and does not probe again.
 */

import { assertStoreGuarantees, ProbeCache } from '../core/store-probe/store-probe.ts';
import type { HandlerDeps, HandlerTools } from './handler-kit.ts';

export const CONTAINER_PROBE_CACHE = new ProbeCache();

/** Refuses (StoreGuaranteesError) a store that lacks a guarantee, unless the config opts out. */
export async function assertHandlerStore(deps: HandlerDeps, tools: HandlerTools): Promise<void> {
  await assertStoreGuarantees({
    store: deps.store,
    stateRoot: deps.config.layout.stateRoot,
    clock: deps.clock,
    randomHex: deps.randomHex,
    signal: tools.signal,
    cache: CONTAINER_PROBE_CACHE,
    optOut: deps.config.unsafeSingleWriterStore,
    onWarning: (message) => tools.logger.warn(message, { setting: 'unsafeSingleWriterStore' }),
  });
}
