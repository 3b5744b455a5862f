/**
 * An ObjectStore wrapper that counts every call and injects one fault at call N:
 * - 'fail-before': the call is not made and a transient error is thrown;
 * - 'fail-after': the call is made, then a transient error is thrown (its response was lost and
 *   every retry of the SDK failed too);
 * - 'lost-response': the call is made and its response lost, so the call is made again, as the
 *   SDK's standard retry re-sends a request with a rewindable body (and the S3 store re-sends a
 *   file upload); the caller gets the retry's answer. For a conditional write whose first attempt
 *   landed, that answer is 412 PreconditionFailed (If-Match, If-None-Match) or a delete's NoSuchKey,
 *   exactly what S3 answers the retry
 *   (https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-requests.html);
 * - 'crash': the call is not made and this store never calls again (the run is abandoned).
 * An observer sees the inner store after every call that reached it (for invariant checks).
 */

import { TransientStoreError } from '../../functions/core/errors.ts';
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

export type FaultKind = 'fail-before' | 'fail-after' | 'lost-response' | 'crash';
export const FAULT_KINDS: readonly FaultKind[] = ['fail-before', 'fail-after', 'lost-response', 'crash'];

/** The calls that can change a store; every other call only reads it. */
export const MUTATING_OPS: ReadonlySet<string> = new Set([
  'put',
  'copy',
  'deleteMany',
  'abortIncompleteUpload',
]);

export class CrashedError extends Error {
  override readonly name = 'CrashedError';
}

export interface CallRecord {
  readonly n: number;
  readonly op: string;
  readonly key: string;
  /** deleteMany's requests, for the delete audit (I3). */
  readonly deletes?: readonly DeleteRequest[];
  /** A put with an If-Match condition (a compare-and-swap). */
  readonly ifMatch?: boolean;
}

export interface FaultStoreOptions {
  /** At call number `at`, or at every call `at` matches. */
  readonly fault?: { readonly at: number | ((call: CallRecord) => boolean); readonly kind: FaultKind };
  /** Runs before a call reaches the inner store (audits). */
  readonly beforeCall?: (call: CallRecord) => Promise<void>;
  /** Runs after a call reached the inner store (invariant checks). */
  readonly afterCall?: (call: CallRecord) => Promise<void>;
  /** Holds a call before it reaches the inner store (zombie pauses). */
  readonly gate?: (call: CallRecord) => Promise<void>;
}

export class FaultStore implements ObjectStore {
  readonly location: string;
  readonly calls: CallRecord[] = [];
  crashed = false;
  readonly #inner: ObjectStore;
  readonly #options: FaultStoreOptions;

  constructor(inner: ObjectStore, options: FaultStoreOptions = {}) {
    this.#inner = inner;
    this.location = inner.location;
    this.#options = options;
  }

  get injected(): boolean {
    const fault = this.#options.fault;
    if (fault === undefined) return false;
    const { at } = fault;
    return typeof at === 'number' ? this.calls.length >= at : this.calls.some((call) => at(call));
  }

  async #call<T>(
    op: string,
    key: string,
    run: () => Promise<T>,
    deletes?: readonly DeleteRequest[],
    ifMatch?: boolean,
  ): Promise<T> {
    if (this.crashed) throw new CrashedError(`crashed: ${op} ${key} never happens`);
    const call: CallRecord = {
      n: this.calls.length + 1,
      op,
      key,
      ...(deletes ? { deletes } : {}),
      ...(ifMatch ? { ifMatch } : {}),
    };
    this.calls.push(call);
    await this.#options.gate?.(call);
    if (this.crashed) throw new CrashedError(`crashed: ${op} ${key} never happens`);
    const at = this.#options.fault?.at;
    const hit = typeof at === 'number' ? at === call.n : (at?.(call) ?? false);
    const fault = hit ? this.#options.fault?.kind : undefined;
    if (fault === 'crash') {
      this.crashed = true;
      throw new CrashedError(`injected crash before call ${call.n} (${op} ${key})`);
    }
    if (fault === 'fail-before')
      throw new TransientStoreError(`injected failure before call ${call.n} (${op} ${key})`);
    await this.#options.beforeCall?.(call);
    let value: T;
    try {
      value = await run();
    } finally {
      await this.#options.afterCall?.(call);
    }
    if (fault === 'lost-response') {
      // The retry reaches the store too (audited and observed like any call), and its answer,
      // value or error, is what the caller sees.
      await this.#options.beforeCall?.(call);
      try {
        return await run();
      } finally {
        await this.#options.afterCall?.(call);
      }
    }
    if (fault === 'fail-after') {
      throw new TransientStoreError(`injected lost response after call ${call.n} (${op} ${key})`);
    }
    return value;
  }

  list(prefix: string, options?: { readonly signal?: AbortSignal }): AsyncIterable<ObjectSummary> {
    // A listing is one call: it is read whole, then replayed.
    const self = this;
    return {
      async *[Symbol.asyncIterator]() {
        const items = await self.#call('list', prefix, async () => {
          const all: ObjectSummary[] = [];
          for await (const item of self.#inner.list(prefix, options)) all.push(item);
          return all;
        });
        yield* items;
      },
    };
  }

  head(key: string, options?: { readonly signal?: AbortSignal }): Promise<ObjectHead | undefined> {
    return this.#call('head', key, () => this.#inner.head(key, options));
  }

  getBytes(key: string, options?: { readonly ifMatch?: string; readonly signal?: AbortSignal }) {
    return this.#call('getBytes', key, () => this.#inner.getBytes(key, options));
  }

  getToFile(
    key: string,
    path: string,
    options?: { readonly ifMatch?: string; readonly signal?: AbortSignal },
  ) {
    return this.#call('getToFile', key, () => this.#inner.getToFile(key, path, options));
  }

  put(key: string, body: Buffer | PutFile, options?: WriteOptions) {
    return this.#call(
      'put',
      key,
      () => this.#inner.put(key, body, options),
      undefined,
      options?.ifMatch !== undefined,
    );
  }

  copy(source: string, target: string, options?: CopyOptions) {
    return this.#call('copy', target, () => this.#inner.copy(source, target, options));
  }

  deleteMany(
    requests: readonly DeleteRequest[],
    options?: { readonly signal?: AbortSignal },
  ): Promise<DeleteOutcome[]> {
    return this.#call(
      'deleteMany',
      requests.map((r) => r.key).join(','),
      () => this.#inner.deleteMany(requests, options),
      requests,
    );
  }

  listIncompleteUploads(prefix: string): Promise<IncompleteUpload[]> {
    return this.#call('listIncompleteUploads', prefix, () => this.#inner.listIncompleteUploads(prefix));
  }

  abortIncompleteUpload(upload: IncompleteUpload): Promise<void> {
    return this.#call('abortIncompleteUpload', upload.key, () => this.#inner.abortIncompleteUpload(upload));
  }
}
