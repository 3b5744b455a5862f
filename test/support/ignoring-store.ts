/**
 * A real store (usually the local folder store) behind a wrapper that ignores chosen guarantees,
 * the way some S3-compatible servers do (fauxqs ignores every condition): the condition is
 * dropped before the call reaches the real store, or the checksum dropped from its answer.
 */

import {
  type CopyOptions,
  type DeleteOutcome,
  type DeleteRequest,
  ForwardingStore,
  type ObjectHead,
  type ObjectStore,
  type PutFile,
  type WriteOptions,
} from '../../functions/core/object-store.ts';
import type { StoreGuarantee } from '../../functions/core/store-probe/store-probe.ts';

export class IgnoringStore extends ForwardingStore {
  readonly #ignored: ReadonlySet<StoreGuarantee>;

  constructor(inner: ObjectStore, ignored: readonly StoreGuarantee[]) {
    super(inner);
    this.#ignored = new Set(ignored);
  }

  override put(key: string, body: Buffer | PutFile, options: WriteOptions = {}) {
    const { ifNoneMatch, ifMatch, ...rest } = options;
    return this.inner.put(key, body, {
      ...rest,
      ...(ifNoneMatch !== undefined && !this.#ignored.has('put-if-absent') ? { ifNoneMatch } : {}),
      ...(ifMatch !== undefined && !this.#ignored.has('compare-and-swap') ? { ifMatch } : {}),
    });
  }

  override copy(source: string, target: string, options: CopyOptions = {}) {
    const { ifNoneMatch, ...rest } = options;
    return this.inner.copy(source, target, {
      ...rest,
      ...(ifNoneMatch !== undefined && !this.#ignored.has('conditional-copy') ? { ifNoneMatch } : {}),
    });
  }

  override deleteMany(
    requests: readonly DeleteRequest[],
    options?: { readonly signal?: AbortSignal },
  ): Promise<DeleteOutcome[]> {
    if (!this.#ignored.has('conditional-delete')) return this.inner.deleteMany(requests, options);
    return this.inner.deleteMany(
      requests.map((r) => ({ key: r.key })),
      options,
    );
  }

  override async head(
    key: string,
    options?: { readonly signal?: AbortSignal },
  ): Promise<ObjectHead | undefined> {
    const head = await this.inner.head(key, options);
    if (head === undefined || !this.#ignored.has('checksums')) return head;
    const { checksum: _dropped, ...rest } = head;
    return rest;
  }
}

/** What fauxqs ignores: every condition (it keeps checksums). */
export const ALL_CONDITIONS: readonly StoreGuarantee[] = [
  'put-if-absent',
  'compare-and-swap',
  'conditional-copy',
  'conditional-delete',
];
