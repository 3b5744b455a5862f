/**
 * A store its thread closes before it ends (child-thread-worker.ts): `close` refuses every call
 * made after it and resolves once the calls in flight have ended.
 *
 * A store call can hold what only its own end gives back: the local folder store's key lock, taken
 * for a commit and released when it returns. A thread that ended in the middle of one would leave
 * that lock to its stale-lock age, since the lock names this process, which is still alive, and
 * every later write of the key (the next run's) would wait for it or time out. Waiting for the
 * calls in flight ends each of them whole; refusing new ones lets the thread's other children fail
 * at their next call instead of going on in a thread that is ending (after a bug, in a state
 * nobody knows).
 */

import { CallsInFlight } from '../core/limit.ts';
import {
  type CopyOptions,
  type DeleteOutcome,
  type DeleteRequest,
  ForwardingStore,
  type IncompleteUpload,
  type ListOptions,
  type ObjectHead,
  type ObjectStore,
  type ObjectSummary,
  type PutFile,
  type WriteOptions,
} from '../core/object-store.ts';

/** The error of a call made after the store closed. */
export class StoreClosedError extends Error {
  override readonly name = 'StoreClosedError';
}

export class ClosingStore extends ForwardingStore {
  readonly #calls = new CallsInFlight();
  #closed: Error | undefined;

  /** Refuses every later call (StoreClosedError, its cause `reason`); resolves once none is in flight. */
  close(reason: Error): Promise<void> {
    this.#closed ??= reason;
    return this.#calls.idle();
  }

  #call<T>(work: () => Promise<T>): Promise<T> {
    if (this.#closed !== undefined) {
      return Promise.reject(
        new StoreClosedError(`the store is closed: ${this.#closed.message}`, { cause: this.#closed }),
      );
    }
    return this.#calls.run(work);
  }

  /** A listing whose every page (each `next`) is a call; ending it early is always allowed. */
  #listing<T>(open: () => AsyncIterable<T>): AsyncIterable<T> {
    return {
      [Symbol.asyncIterator]: () => {
        const items = open()[Symbol.asyncIterator]();
        return {
          next: () => this.#call(() => items.next()),
          return: (value?: unknown) =>
            this.#calls.run(async () => (await items.return?.(value)) ?? { done: true, value: undefined }),
        };
      },
    };
  }

  override list(prefix: string, options?: ListOptions): AsyncIterable<ObjectSummary> {
    return this.#listing(() => this.inner.list(prefix, options));
  }

  override get listFolders(): ObjectStore['listFolders'] {
    const folders = super.listFolders;
    return folders === undefined
      ? undefined
      : (prefix, options) => this.#listing(() => folders(prefix, options));
  }

  override head(key: string, options?: { readonly signal?: AbortSignal }): Promise<ObjectHead | undefined> {
    return this.#call(() => super.head(key, options));
  }

  override getBytes(
    key: string,
    options?: { readonly ifMatch?: string; readonly signal?: AbortSignal },
  ): Promise<{ readonly body: Buffer; readonly etag: string }> {
    return this.#call(() => super.getBytes(key, options));
  }

  override get getRange(): ObjectStore['getRange'] {
    const range = super.getRange;
    return range === undefined
      ? undefined
      : (key, start, end, options) => this.#call(() => range(key, start, end, options));
  }

  override getToFile(
    key: string,
    path: string,
    options?: { readonly ifMatch?: string; readonly signal?: AbortSignal },
  ): Promise<{ readonly etag: string; readonly size: number }> {
    return this.#call(() => super.getToFile(key, path, options));
  }

  override put(
    key: string,
    body: Buffer | PutFile,
    options?: WriteOptions,
  ): Promise<{ readonly etag: string }> {
    return this.#call(() => super.put(key, body, options));
  }

  override copy(source: string, target: string, options?: CopyOptions): Promise<{ readonly etag: string }> {
    return this.#call(() => super.copy(source, target, options));
  }

  override deleteMany(
    requests: readonly DeleteRequest[],
    options?: { readonly signal?: AbortSignal },
  ): Promise<DeleteOutcome[]> {
    return this.#call(() => super.deleteMany(requests, options));
  }

  override listIncompleteUploads(prefix: string): Promise<IncompleteUpload[]> {
    return this.#call(() => super.listIncompleteUploads(prefix));
  }

  override abortIncompleteUpload(upload: IncompleteUpload): Promise<void> {
    return this.#call(() => super.abortIncompleteUpload(upload));
  }
}
