/**
 * The store probe: before a cycle's first write, check that the store honours what the protocol's
 * safety rests on, on a few objects of its own under `<stateRoot>probe/<id>/`, removed afterwards.
 *
 * - put-if-absent: a create with If-None-Match: * of an existing key is refused (claims, I9);
 * - compare-and-swap: a replace with If-Match on a stale ETag is refused (every state change);
 * - conditional-copy: a copy with If-None-Match: * onto an existing key is refused (publish);
 * - conditional-delete: a DeleteObjects entry with a wrong ETag is refused and the object stays,
 *   and one with the object's own ETag deletes it (input deletes keep replaced inputs, I3);
 * - checksums: a head returns the full-object CRC32 of what was written and of its copy (verify).
 *
 * S3 honours all five: conditional writes (If-None-Match / If-Match on PutObject)
 * https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html, If-None-Match on
 * CopyObject https://docs.aws.amazon.com/AmazonS3/latest/API/API_CopyObject.html, per-key ETags in
 * DeleteObjects https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-deletes.html and
 * https://docs.aws.amazon.com/AmazonS3/latest/API/API_DeleteObjects.html, and checksums returned by
 * HeadObject with checksum mode https://docs.aws.amazon.com/AmazonS3/latest/userguide/checking-object-integrity.html.
 * S3-compatible servers often do not (some ignore the conditions and write or delete anyway).
 */

import type { Clock } from '../engine.ts';
import { ConfigError, StoreGuaranteesError } from '../errors.ts';
import { type ProbeDeps, type ProbeReport, probeStore } from './store-probe-checks.ts';

// The probe itself (store-probe-checks.ts) and its cleanup (store-probe-cleanup.ts); importers get them here.
export {
  type ProbeCheck,
  type ProbeDeps,
  type ProbeReport,
  probeRoot,
  probeStore,
  STORE_GUARANTEES,
  type StoreGuarantee,
} from './store-probe-checks.ts';
export { ABANDONED_PROBE_MS } from './store-probe-cleanup.ts';

/** How long a verdict is kept: a cycle pays one probe, not one per partition or step. */
export const PROBE_TTL_MS = 5 * 60_000;

/**
 * Probe verdicts by store location, each kept for a short while. The caller keeps one per
 * container (a Lambda's module scope, the CLI process), so every step and command that checks
 * the same store within the TTL shares one probe.
 */
export class ProbeCache {
  readonly #ttlMs: number;
  readonly #verdicts = new Map<string, { readonly report: ProbeReport; readonly at: number }>();

  constructor(options: { readonly ttlMs?: number } = {}) {
    this.#ttlMs = options.ttlMs ?? PROBE_TTL_MS;
  }

  /** The verdict for the location, if one was kept less than the TTL before `now`. */
  get(location: string, now: Date): ProbeReport | undefined {
    const entry = this.#verdicts.get(location);
    if (entry === undefined) return undefined;
    const age = now.getTime() - entry.at;
    // A clock that went backwards does not make a verdict fresh forever.
    if (age < 0 || age >= this.#ttlMs) {
      this.#verdicts.delete(location);
      return undefined;
    }
    return entry.report;
  }

  set(report: ProbeReport, now: Date): void {
    this.#verdicts.set(report.location, { report, at: now.getTime() });
  }
}

export interface GuaranteeDeps extends ProbeDeps {
  readonly clock: Clock;
  readonly cache?: ProbeCache;
  /**
   * The explicit opt-out for a store that provably has a single writer: the probe is skipped and
   * `onWarning` is told so on every call (it is required then).
   */
  readonly optOut?: boolean;
  readonly onWarning?: (message: string) => void;
}

/**
 * Throws StoreGuaranteesError, naming each missing guarantee, unless the store honours them all
 * (a verdict kept in `cache` is reused). Call it before a cycle's first write.
 */
export async function assertStoreGuarantees(deps: GuaranteeDeps): Promise<void> {
  if (deps.optOut === true) {
    // An opt-out nobody sees is not explicit: every caller must print it.
    if (deps.onWarning === undefined) {
      throw new ConfigError('the single-writer opt-out needs a warning sink: it is printed on every run');
    }
    deps.onWarning(
      `UNSAFE: the store ${deps.store.location} is not probed for put-if-absent, compare-and-swap, conditional copy, ETag-conditioned deletes and checksums (single-writer opt-out). This is safe only if nothing else writes to this lake or compacts it meanwhile: no second run, no deployed schedule, no other writer replacing files. With two writers on a store that lacks these guarantees, rows can be lost or duplicated.`,
    );
    return;
  }
  const cached = deps.cache?.get(deps.store.location, deps.clock.now());
  const report = cached ?? (await probeStore(deps));
  if (cached === undefined) deps.cache?.set(report, deps.clock.now());
  if (!report.ok) {
    throw new StoreGuaranteesError(
      report.location,
      report.checks.filter((c) => !c.ok).map((c) => ({ guarantee: c.guarantee, detail: c.detail })),
    );
  }
}
