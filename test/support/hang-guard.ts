/**
 * The timeout of the long sweeps and simulations: a hang guard, not a budget. Their time comes
 * from the work they do (cut points x calls x fault kinds, seeds, runs), which a loaded 2-core
 * machine stretches several times over; a fixed budget near the unloaded time fails them for
 * the load, not for a fault. Forty-five minutes still ends a hung test well inside CI's 90.
 */
export const HANG_GUARD_MS = 45 * 60_000;
