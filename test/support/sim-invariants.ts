/**
 * Invariants the seeded simulation checks after every change, on top of LakeChecker's
 * (I1 rows present, the visible view exact, I3 delete audit):
 * - I9: never two live manifests for one tier and partition (by content, not only by key), and
 *   one input version (key + ETag) is published by at most one job;
 * - I8: no key is ever an input of both tiers;
 * - I7: a manifest at or past `published` has final outputs whose size, checksum and job id
 *   match it, and whose rows (read back with DuckDB) add up to its input rows;
 * - quarantine: a key named by a quarantine record is never in a delete request.
 * Violations are recorded, never thrown: the code under test must not get to handle them.
 */

import type { CompactorConfig, TierName } from '../../functions/core/config.ts';
import {
  isAtOrPast,
  type Manifest,
  manifestsRoot,
  parseManifest,
} from '../../functions/core/manifest/manifest.ts';
import type { ObjectStore } from '../../functions/core/object-store.ts';
import { META_JOB_ID } from '../../functions/core/protocol.ts';
import type { CallRecord } from './fault-store.ts';

export class SimInvariants {
  readonly violations: string[] = [];
  readonly #store: ObjectStore;
  readonly #config: CompactorConfig;
  readonly #protected: ReadonlySet<string>;
  readonly #rowsOf: (key: string) => Promise<number>;
  readonly #inputs: Record<TierName, Map<string, string>> = {
    hourly: new Map(),
    daily: new Map(),
    monthly: new Map(),
  };
  readonly #publishedBy = new Map<string, string>();
  readonly #checkedFinals = new Set<string>();
  readonly #parsed = new Map<string, Manifest>();

  constructor(
    store: ObjectStore,
    config: CompactorConfig,
    protectedKeys: Iterable<string>,
    rowsOf: (key: string) => Promise<number>,
  ) {
    this.#store = store;
    this.#config = config;
    this.#protected = new Set(protectedKeys);
    this.#rowsOf = rowsOf;
  }

  #fail(call: CallRecord | undefined, message: string): void {
    this.violations.push(`${message} (at call ${call?.n} ${call?.op} ${call?.key})`);
  }

  beforeCall = (call: CallRecord): void => {
    for (const request of call.deletes ?? []) {
      if (this.#protected.has(request.key))
        this.#fail(call, `quarantined key ${request.key} is in a delete request`);
    }
  };

  async liveManifests(call?: CallRecord): Promise<Manifest[]> {
    const live: Manifest[] = [];
    for await (const object of this.#store.list(manifestsRoot(this.#config.layout))) {
      const cacheKey = `${object.key}\0${object.etag}`;
      let manifest = this.#parsed.get(cacheKey);
      if (!manifest) {
        try {
          const { body } = await this.#store.getBytes(object.key);
          manifest = parseManifest(this.#config, this.#store.location, object.key, body);
        } catch (error) {
          this.#fail(call, `live manifest ${object.key} unreadable: ${(error as Error).message}`);
          continue;
        }
        this.#parsed.set(cacheKey, manifest);
      }
      live.push(manifest);
    }
    return live;
  }

  observe = async (call?: CallRecord): Promise<void> => {
    const live = await this.liveManifests(call);
    const leases = new Map<string, string>();
    for (const m of live) {
      // I9: one live manifest per tier and partition.
      const lease = `${m.tier}:${m.partition}`;
      const holder = leases.get(lease);
      if (holder) this.#fail(call, `I9: jobs ${holder} and ${m.jobId} both hold ${lease}`);
      leases.set(lease, m.jobId);
      // I8: the tiers never share an input (the simulation runs no retention jobs).
      if (m.tier === 'retention') continue;
      const other = m.tier === 'hourly' ? 'daily' : 'hourly';
      for (const input of m.inputs) {
        this.#inputs[m.tier].set(input.key, m.jobId);
        const there = this.#inputs[other].get(input.key);
        if (there)
          this.#fail(
            call,
            `I8: ${input.key} is an input of ${other} job ${there} and ${m.tier} job ${m.jobId}`,
          );
      }
      if (!isAtOrPast(m, 'published')) continue;
      // I9: one version of an input is published by one job only.
      for (const input of m.inputs) {
        const version = `${m.tier}\0${input.key}\0${input.etag}`;
        const first = this.#publishedBy.get(version);
        if (first && first !== m.jobId)
          this.#fail(call, `I9: ${input.key} (${input.etag}) published by jobs ${first} and ${m.jobId}`);
        this.#publishedBy.set(version, m.jobId);
      }
      // I7: the published outputs are what the manifest says.
      if (this.#checkedFinals.has(m.jobId)) continue;
      this.#checkedFinals.add(m.jobId);
      let rows = 0;
      for (const output of m.outputs ?? []) {
        const head = await this.#store.head(output.finalKey);
        if (!head) {
          this.#fail(call, `I7: published output ${output.finalKey} of ${m.jobId} is missing`);
          continue;
        }
        if (
          head.size !== output.size ||
          head.checksum?.value !== output.checksum.value ||
          head.metadata[META_JOB_ID] !== m.jobId
        ) {
          this.#fail(call, `I7: published output ${output.finalKey} does not match manifest ${m.jobId}`);
        }
        const actual = await this.#rowsOf(output.finalKey);
        if (actual !== output.rows)
          this.#fail(call, `I7: ${output.finalKey} holds ${actual} rows, its manifest says ${output.rows}`);
        rows += actual;
      }
      // With dedup the outputs hold the inputs' distinct rows, counted when the job staged.
      const expected = m.distinctRows ?? m.inputRows;
      if (rows !== expected)
        this.#fail(call, `I7: outputs of ${m.jobId} hold ${rows} rows, its inputs ${expected}`);
    }
  };
}
