/**
 * The simulation's view of the object store for one actor: every call waits for the scheduler,
 * then may get a transient fault the seed chose, as S3 produces them:
 * - 'slowdown' (503 SlowDown) and 'internal' (500 InternalError): TransientStoreError, not applied;
 * - 'lost-response': applied, and the response never arrived; then either TransientStoreError
 *   (the SDK's retries failed too) or the retry is applied and answered, as the SDK re-sends it
 *   (a conditional write whose first attempt landed is answered 412);
 * - 'partial-delete': DeleteObjects deletes some keys and reports `InternalError` for the others;
 * - 'conflict' (409 ConditionalRequestConflict, which the S3 adapter maps to
 *   PreconditionFailedError): a conditional write refused before it is applied;
 * - 'crash': the actor dies before the call and never calls again (CrashedError).
 * Underneath sits the shared FaultStore whose hooks audit every delete and observe every change.
 */

import { PreconditionFailedError, TransientStoreError } from '../../functions/core/errors.ts';
import type {
  CopyOptions,
  DeleteOutcome,
  DeleteRequest,
  IncompleteUpload,
  ObjectHead,
  ObjectStore,
  ObjectSummary,
  PutFile,
  WriteOptions,
} from '../../functions/core/object-store.ts';
import { CrashedError } from './fault-store.ts';
import type { Rng, Scheduler, SimActor } from './sim-scheduler.ts';

export const SIM_FAULT_KINDS = [
  'slowdown',
  'internal',
  'lost-response',
  'partial-delete',
  'conflict',
  'crash',
] as const;
export type SimFaultKind = (typeof SIM_FAULT_KINDS)[number];

export interface FaultPolicy {
  /** Probability that a call gets a fault (0 = none). */
  rate: number;
  /** Whether a conditional CopyObject may get a 409 (off: see the publish-conflict test). */
  conflictOnCopy: boolean;
  /** The actor that crashes, and before which of its calls. */
  crash?: { readonly actor: string; readonly atCall: number };
  /** Test-only sabotage: strip the ETag condition from deletes of data keys. */
  dropDeleteEtags?: (key: string) => boolean;
}

export type FaultCounts = Record<SimFaultKind, number>;

export function noFaults(): FaultCounts {
  return { slowdown: 0, internal: 0, 'lost-response': 0, 'partial-delete': 0, conflict: 0, crash: 0 };
}

interface CallInfo {
  readonly mutating: boolean;
  readonly conditional: boolean;
  readonly copy?: boolean;
  readonly deletes?: number;
}

export class SimStore implements ObjectStore {
  readonly location: string;
  readonly #inner: ObjectStore;
  readonly #scheduler: Scheduler;
  readonly #actor: SimActor;
  readonly #policy: FaultPolicy;
  readonly #counts: FaultCounts;
  readonly #onCrash: (actor: SimActor) => void;

  constructor(
    inner: ObjectStore,
    scheduler: Scheduler,
    actor: SimActor,
    policy: FaultPolicy,
    counts: FaultCounts,
    onCrash: (actor: SimActor) => void,
  ) {
    this.location = inner.location;
    this.#inner = inner;
    this.#scheduler = scheduler;
    this.#actor = actor;
    this.#policy = policy;
    this.#counts = counts;
    this.#onCrash = onCrash;
  }

  get #rng(): Rng {
    return this.#scheduler.rng;
  }

  #decide(info: CallInfo): SimFaultKind | undefined {
    const crash = this.#policy.crash;
    if (crash && crash.actor === this.#actor.name && crash.atCall === this.#actor.calls) return 'crash';
    if (this.#policy.rate <= 0 || !this.#rng.chance(this.#policy.rate)) return undefined;
    const kinds: [SimFaultKind, number][] = [
      ['slowdown', 3],
      ['internal', 2],
    ];
    if (info.mutating) kinds.push(['lost-response', 3]);
    if ((info.deletes ?? 0) > 0) kinds.push(['partial-delete', 4]);
    if (info.conditional && (!info.copy || this.#policy.conflictOnCopy)) kinds.push(['conflict', 3]);
    return this.#rng.weighted(kinds);
  }

  async #call<T>(
    op: string,
    key: string,
    info: CallInfo,
    apply: () => Promise<T>,
    partial?: () => Promise<T>,
  ): Promise<T> {
    await this.#scheduler.acquire(this.#actor, op, key);
    try {
      if (this.#actor.crashed)
        throw new CrashedError(`${this.#actor.name} crashed: ${op} ${key} never happens`);
      const fault = this.#decide(info);
      if (fault) {
        this.#counts[fault]++;
        this.#scheduler.note(`  fault ${fault}`);
      }
      switch (fault) {
        case 'crash':
          this.#actor.crashed = true;
          this.#onCrash(this.#actor);
          throw new CrashedError(`${this.#actor.name} crashed before ${op} ${key}`);
        case 'slowdown':
          throw new TransientStoreError(`503 SlowDown on ${op} ${key} (injected)`);
        case 'internal':
          throw new TransientStoreError(`500 InternalError on ${op} ${key} (injected)`);
        case 'conflict':
          throw new PreconditionFailedError(key, {
            cause: new Error('409 ConditionalRequestConflict (injected)'),
          });
        case 'partial-delete':
          if (!partial) throw new Error('partial-delete on a call that is not a delete');
          return await partial();
        case 'lost-response':
          await apply();
          // Either every retry the SDK makes fails too, or its retry gets through: then the
          // caller sees the retry's own answer (a conditional write that landed: 412).
          if (this.#rng.chance(0.5)) {
            throw new TransientStoreError(`lost response of ${op} ${key} (injected, applied)`);
          }
          return await apply();
        default:
          return await apply();
      }
    } finally {
      this.#scheduler.completed(this.#actor);
    }
  }

  list(prefix: string, options?: { readonly signal?: AbortSignal }): AsyncIterable<ObjectSummary> {
    const self = this;
    return {
      async *[Symbol.asyncIterator]() {
        const items = await self.#call('list', prefix, { mutating: false, conditional: false }, async () => {
          const all: ObjectSummary[] = [];
          for await (const item of self.#inner.list(prefix, options)) all.push(item);
          return all;
        });
        yield* items;
      },
    };
  }

  head(key: string, options?: { readonly signal?: AbortSignal }): Promise<ObjectHead | undefined> {
    return this.#call('head', key, { mutating: false, conditional: false }, () =>
      this.#inner.head(key, options),
    );
  }

  getBytes(key: string, options?: { readonly ifMatch?: string; readonly signal?: AbortSignal }) {
    return this.#call('getBytes', key, { mutating: false, conditional: false }, () =>
      this.#inner.getBytes(key, options),
    );
  }

  getToFile(
    key: string,
    path: string,
    options?: { readonly ifMatch?: string; readonly signal?: AbortSignal },
  ) {
    return this.#call('getToFile', key, { mutating: false, conditional: false }, () =>
      this.#inner.getToFile(key, path, options),
    );
  }

  put(key: string, body: Buffer | PutFile, options?: WriteOptions) {
    const conditional = options?.ifMatch !== undefined || options?.ifNoneMatch !== undefined;
    return this.#call('put', key, { mutating: true, conditional }, () => this.#inner.put(key, body, options));
  }

  copy(source: string, target: string, options?: CopyOptions) {
    const conditional = options?.ifNoneMatch !== undefined;
    return this.#call('copy', target, { mutating: true, conditional, copy: true }, () =>
      this.#inner.copy(source, target, options),
    );
  }

  deleteMany(
    requests: readonly DeleteRequest[],
    options?: { readonly signal?: AbortSignal },
  ): Promise<DeleteOutcome[]> {
    const sabotage = this.#policy.dropDeleteEtags;
    const sent = sabotage ? requests.map((r) => (sabotage(r.key) ? { key: r.key } : r)) : requests;
    const info: CallInfo = { mutating: true, conditional: false, deletes: requests.length };
    return this.#call(
      'deleteMany',
      requests.map((r) => r.key).join(','),
      info,
      () => this.#inner.deleteMany(sent, options),
      async () => {
        // Some keys fail with InternalError (at least one), the others are deleted.
        const failed = new Set<string>();
        for (const r of sent) if (this.#rng.chance(0.5)) failed.add(r.key);
        if (failed.size === 0) failed.add(this.#rng.pick(sent).key);
        const rest = sent.filter((r) => !failed.has(r.key));
        const done = rest.length > 0 ? await this.#inner.deleteMany(rest, options) : [];
        const byKey = new Map(done.map((o) => [o.key, o]));
        return sent.map(
          (r): DeleteOutcome =>
            byKey.get(r.key) ?? {
              key: r.key,
              status: 'error',
              code: 'InternalError',
              message: 'We encountered an internal error. Please try again. (injected)',
            },
        );
      },
    );
  }

  listIncompleteUploads(prefix: string): Promise<IncompleteUpload[]> {
    return this.#call('listIncompleteUploads', prefix, { mutating: false, conditional: false }, () =>
      this.#inner.listIncompleteUploads(prefix),
    );
  }

  abortIncompleteUpload(upload: IncompleteUpload): Promise<void> {
    return this.#call('abortIncompleteUpload', upload.key, { mutating: true, conditional: false }, () =>
      this.#inner.abortIncompleteUpload(upload),
    );
  }
}
