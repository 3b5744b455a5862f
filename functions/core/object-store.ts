/**
 * The object-store interface the protocol is written against. Two adapters implement it:
 * a local folder with S3's semantics, and S3 (or any S3-compatible endpoint).
 *
 * Contract shared by every adapter:
 * - keys are S3 keys ('/'-separated, no leading '/'); listing is in UTF-8 binary key order;
 * - an object becomes visible whole, never partially;
 * - `ifNoneMatch: '*'` / `ifMatch: etag` conditions are atomic against every other writer
 *   and throw PreconditionFailedError when they do not hold;
 * - "not found" is reported as such (undefined or NotFoundError); any other failure throws,
 *   so a failed list or head is never mistaken for "nothing there".
 */

import { NotFoundError } from './errors.ts';

export interface ObjectSummary {
  readonly key: string;
  readonly size: number;
  readonly etag: string;
  readonly lastModified: Date;
}

/** A full-object checksum as S3 reports it (`ChecksumCRC32`: base64 of the big-endian CRC32). */
export interface Checksum {
  readonly algorithm: 'CRC32';
  readonly value: string;
}

export interface ObjectHead extends ObjectSummary {
  /** Present when the store computed and returned a full-object checksum. */
  readonly checksum?: Checksum;
  /** User metadata (x-amz-meta-*), keys lower-case. */
  readonly metadata: Readonly<Record<string, string>>;
}

/** A local file to write as an object. */
export interface PutFile {
  readonly file: string;
  /**
   * The caller never writes the file again (it may remove it): a store on the same file system may
   * take the file itself instead of copying its bytes.
   */
  readonly handOff?: boolean;
}

export interface WriteOptions {
  /** '*' = create only if the key does not exist. */
  readonly ifNoneMatch?: '*';
  /** Replace only if the current ETag equals this. */
  readonly ifMatch?: string;
  readonly metadata?: Readonly<Record<string, string>>;
  readonly contentType?: string;
  /** Ask the store to compute and keep a full-object checksum of this algorithm. */
  readonly checksum?: Checksum;
  readonly signal?: AbortSignal;
}

export interface CopyOptions {
  readonly ifNoneMatch?: '*';
  /**
   * The source's size, when the caller knows it: a store may then copy a large source in parts,
   * several at once, so no one request runs for the whole object.
   */
  readonly size?: number;
  readonly signal?: AbortSignal;
}

export interface DeleteRequest {
  readonly key: string;
  /** Delete only if the current ETag equals this. */
  readonly etag?: string;
}

export type DeleteOutcome =
  | { readonly key: string; readonly status: 'deleted' }
  | { readonly key: string; readonly status: 'not-found' }
  | { readonly key: string; readonly status: 'precondition-failed' }
  | { readonly key: string; readonly status: 'error'; readonly code: string; readonly message: string };

export interface IncompleteUpload {
  readonly key: string;
  readonly uploadId: string;
  readonly initiated: Date;
  /**
   * True when the store knows the writer is gone (a local writer process that no longer
   * exists). Only such uploads outside the state root may be aborted: others may belong to a
   * live ingester.
   */
  readonly abandoned?: boolean;
}

export interface ListOptions {
  readonly signal?: AbortSignal;
  /**
   * Only keys after this one in key order (S3's StartAfter). A store may ignore it and list more:
   * callers filter what they do not want, never rely on its absence.
   */
  readonly startAfter?: string;
}

export interface ObjectStore {
  /** A stable name of the bucket (or folder) this store addresses; manifests record it. */
  readonly location: string;
  /** The largest object `copy` can copy in one request; absent means no limit. */
  readonly maxCopyBytes?: number;
  /** All objects under the prefix, in key order, paging internally. */
  list(prefix: string, options?: ListOptions): AsyncIterable<ObjectSummary>;
  /**
   * The folders directly under `prefix` (which ends in '/' or is ''): each distinct
   * `prefix + segment + '/'` that some key under `prefix` starts with, in key order (S3's
   * ListObjectsV2 with Delimiter '/': its CommonPrefixes). A folder holding no object is not one.
   * Optional: planning lists the whole data root in one listing without it.
   */
  listFolders?(prefix: string, options?: { readonly signal?: AbortSignal }): AsyncIterable<string>;
  /** undefined when the key does not exist; throws on any other failure. */
  head(key: string, options?: { readonly signal?: AbortSignal }): Promise<ObjectHead | undefined>;
  /** Small objects (manifests). Throws NotFoundError. */
  getBytes(
    key: string,
    options?: { readonly ifMatch?: string; readonly signal?: AbortSignal },
  ): Promise<{ readonly body: Buffer; readonly etag: string }>;
  /**
   * Bytes [start, end) of an object (a ranged GET), `ifMatch` as getBytes. Optional: without it,
   * readRange falls back to the whole object.
   */
  getRange?(
    key: string,
    start: number,
    end: number,
    options?: { readonly ifMatch?: string; readonly signal?: AbortSignal },
  ): Promise<{ readonly body: Buffer; readonly etag: string }>;
  /** Streams the object to a local file. `ifMatch` fails with PreconditionFailedError if it changed. */
  getToFile(
    key: string,
    path: string,
    options?: { readonly ifMatch?: string; readonly signal?: AbortSignal },
  ): Promise<{ readonly etag: string; readonly size: number }>;
  /** Writes a whole object from bytes or a local file. */
  put(key: string, body: Buffer | PutFile, options?: WriteOptions): Promise<{ readonly etag: string }>;
  /** Server-side copy; user metadata and checksum travel with the object. Throws NotFoundError for the source. */
  copy(source: string, target: string, options?: CopyOptions): Promise<{ readonly etag: string }>;
  /** Deletes up to 1000 keys in one request, each optionally conditioned on its ETag. */
  deleteMany(
    requests: readonly DeleteRequest[],
    options?: { readonly signal?: AbortSignal },
  ): Promise<DeleteOutcome[]>;
  /** Uploads started and never completed under a prefix (multipart uploads, temp files). */
  listIncompleteUploads(prefix: string): Promise<IncompleteUpload[]>;
  abortIncompleteUpload(upload: IncompleteUpload): Promise<void>;
}

/**
 * Keys (and partitions) in code-unit order: locale-free and total, so plans, reports and deletes
 * come out in the same order on every machine.
 */
export function compareKeys(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * An object's bytes, or undefined when there is none (e.g. deleted since it was listed). Any other
 * failure is thrown: a read error is never "nothing there".
 */
export async function getBytesIfExists(
  store: ObjectStore,
  key: string,
  options?: { readonly signal?: AbortSignal },
): Promise<{ readonly body: Buffer; readonly etag: string } | undefined> {
  try {
    return await store.getBytes(key, options);
  } catch (error) {
    if (error instanceof NotFoundError) return undefined;
    throw error;
  }
}

/** The largest batch DeleteObjects accepts. */
export const MAX_DELETE_BATCH = 1000;

/**
 * A store that passes every call to another one unchanged. Wrappers that observe or alter a few
 * calls (timing, recording, test hooks) extend it and override only those.
 */
export class ForwardingStore implements ObjectStore {
  protected readonly inner: ObjectStore;

  constructor(inner: ObjectStore) {
    this.inner = inner;
  }

  get location(): string {
    return this.inner.location;
  }

  get maxCopyBytes(): number | undefined {
    return this.inner.maxCopyBytes;
  }

  list(prefix: string, options?: ListOptions): AsyncIterable<ObjectSummary> {
    return this.inner.list(prefix, options);
  }

  get listFolders(): ObjectStore['listFolders'] {
    const inner = this.inner;
    const folders = inner.listFolders;
    return folders === undefined ? undefined : (prefix, options) => folders.call(inner, prefix, options);
  }

  head(key: string, options?: { readonly signal?: AbortSignal }): Promise<ObjectHead | undefined> {
    return this.inner.head(key, options);
  }

  getBytes(
    key: string,
    options?: { readonly ifMatch?: string; readonly signal?: AbortSignal },
  ): Promise<{ readonly body: Buffer; readonly etag: string }> {
    return this.inner.getBytes(key, options);
  }

  get getRange(): ObjectStore['getRange'] {
    const inner = this.inner;
    const range = inner.getRange;
    return range === undefined
      ? undefined
      : (key, start, end, options) => range.call(inner, key, start, end, options);
  }

  getToFile(
    key: string,
    path: string,
    options?: { readonly ifMatch?: string; readonly signal?: AbortSignal },
  ): Promise<{ readonly etag: string; readonly size: number }> {
    return this.inner.getToFile(key, path, options);
  }

  put(key: string, body: Buffer | PutFile, options?: WriteOptions): Promise<{ readonly etag: string }> {
    return this.inner.put(key, body, options);
  }

  copy(source: string, target: string, options?: CopyOptions): Promise<{ readonly etag: string }> {
    return this.inner.copy(source, target, options);
  }

  deleteMany(
    requests: readonly DeleteRequest[],
    options?: { readonly signal?: AbortSignal },
  ): Promise<DeleteOutcome[]> {
    return this.inner.deleteMany(requests, options);
  }

  listIncompleteUploads(prefix: string): Promise<IncompleteUpload[]> {
    return this.inner.listIncompleteUploads(prefix);
  }

  abortIncompleteUpload(upload: IncompleteUpload): Promise<void> {
    return this.inner.abortIncompleteUpload(upload);
  }
}

/**
 * Bytes [start, end) of an object: a ranged read where the store has one, else the whole object
 * sliced. NotFoundError as getBytes.
 */
export async function readRange(
  store: ObjectStore,
  key: string,
  start: number,
  end: number,
  options?: { readonly ifMatch?: string; readonly signal?: AbortSignal },
): Promise<{ readonly body: Buffer; readonly etag: string }> {
  if (store.getRange) return store.getRange(key, start, end, options);
  const whole = await store.getBytes(key, options);
  return { body: whole.body.subarray(start, end), etag: whole.etag };
}
