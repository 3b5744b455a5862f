/**
 * A store that counts the S3 requests of what runs through it: a listing by its pages (one per
 * 1,000 keys or folders), a read as one GET. The plan is priced with the requests its own
 * listing took.
 */

import { ForwardingStore, type ListOptions, type ObjectStore, type ObjectSummary } from '../object-store.ts';
import { type RequestClass, type RequestCounts, requestsOfListing } from './prices.ts';
import { NO_REQUESTS } from './requests.ts';

export class RequestCountingStore extends ForwardingStore {
  readonly #counts: Record<RequestClass, number> = { ...NO_REQUESTS };

  /** The requests counted so far. */
  get requests(): RequestCounts {
    return { ...this.#counts };
  }

  override list(prefix: string, options?: ListOptions): AsyncIterable<ObjectSummary> {
    return this.#listing(this.inner.list(prefix, options));
  }

  override get listFolders(): ObjectStore['listFolders'] {
    const folders = super.listFolders;
    return folders === undefined ? undefined : (prefix, options) => this.#listing(folders(prefix, options));
  }

  override getBytes(
    key: string,
    options?: { readonly ifMatch?: string; readonly signal?: AbortSignal },
  ): Promise<{ readonly body: Buffer; readonly etag: string }> {
    this.#counts.get++;
    return super.getBytes(key, options);
  }

  override get getRange(): ObjectStore['getRange'] {
    const range = super.getRange;
    if (range === undefined) return undefined;
    return (key, start, end, options) => {
      this.#counts.get++;
      return range(key, start, end, options);
    };
  }

  override head(key: string, options?: { readonly signal?: AbortSignal }) {
    this.#counts.get++;
    return super.head(key, options);
  }

  async *#listing<T>(items: AsyncIterable<T>): AsyncIterable<T> {
    let n = 0;
    try {
      for await (const item of items) {
        n++;
        yield item;
      }
    } finally {
      this.#counts.list += requestsOfListing(n);
    }
  }
}
