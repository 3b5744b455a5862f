/**
 * The embedded object store: a local folder with S3's semantics.
 *
 * Object `a/b/c.parquet` is the file `<root>/a/b/c.parquet`, so DuckDB and people can glob the
 * folder as a data lake. Everything the store needs besides the data lives in the reserved
 * hidden folder `<root>/.compactor-store/`, which is never listed:
 *
 * - `tmp/<uploadId>.*` the files of a write in progress: `.data`, `.meta.json` (and, for a key
 *                      too long for the id to name, `.intent.json`). A write is whole-object
 *                      visible because its data is fsynced and then renamed into place; files left
 *                      behind by a crash are an incomplete upload.
 * - `meta/<key>.json`  sidecar holding user metadata and checksum, one entry per data-file version
 *                      (identified by its ETag, i.e. inode, size and mtime); entries for other
 *                      versions are stale and ignored.
 * - `locks/<sha256(key)>.lock`  per-key lock making conditional writes atomic across processes.
 *
 * This file holds the store's API and its options. Keys, paths and ETags are in local-store-keys.ts,
 * the listings in local-store-listing.ts, the reads in local-store-reads.ts, staging, commits and
 * deletes in local-store-commit.ts, the uploads in local-store-uploads.ts.
 */

import { type BigIntStats, readFileSync, readSync } from 'node:fs';
import { type FileHandle, open } from 'node:fs/promises';
import { crc32 } from 'node:zlib';
import { NotFoundError } from '../../core/errors.ts';
import type {
  Checksum,
  CopyOptions,
  DeleteOutcome,
  DeleteRequest,
  IncompleteUpload,
  ListOptions,
  ObjectHead,
  ObjectStore,
  ObjectSummary,
  PutFile,
  WriteOptions,
} from '../../core/object-store.ts';
import { MAX_DELETE_BATCH } from '../../core/object-store.ts';
import { readThrough, SMALL_BODY_BYTES, writeAll } from './durable-fs.ts';
import {
  commit,
  type Durability,
  deleteBatch,
  durabilityOf,
  type KeyChanges,
  type Staged,
  type StagedFile,
  stageBytes,
  stageData,
  stageHandedOff,
  stageLink,
} from './local-store-commit.ts';
import { assertKey, dataPath, type StorePaths, storePaths } from './local-store-keys.ts';
import { listFolders, listObjects } from './local-store-listing.ts';
import { KeyLocks } from './local-store-lock.ts';
import { fetchToFile, openWithAttributes, readHead, readOpened } from './local-store-reads.ts';
import type { SidecarEntry } from './local-store-sidecar.ts';
import {
  abortIncompleteUpload,
  beginUpload,
  listIncompleteUploads,
  removeUpload,
  type Upload,
} from './local-store-uploads.ts';

export { assertKey, RESERVED_DIR } from './local-store-keys.ts';

export interface LocalFolderStoreOptions {
  /** How long a write waits for another writer's lock on the same key before TransientStoreError. */
  readonly lockTimeoutMs?: number;
  /**
   * A lock older than this is broken even when its pid looks alive (pid reuse, or a holder on
   * another host sharing the folder). Locks are held only for the few syscalls of a commit.
   */
  readonly staleLockMs?: number;
  /**
   * 'machine' (the default): every write is fsynced before it is renamed into place, and its
   * folder after, so a write or delete survives the machine losing power
   * (https://man7.org/linux/man-pages/man2/fsync.2.html). 'process': no fsync; a write or delete
   * still survives its process being killed at any point (kill -9), since the page cache is the
   * kernel's, but not a kernel crash or power loss. For tests and throwaway lakes.
   */
  readonly durability?: 'machine' | 'process';
}

export class LocalFolderStore implements ObjectStore {
  readonly location: string;
  readonly #paths: StorePaths;
  readonly #changes: KeyChanges;

  constructor(rootDir: string, options: LocalFolderStoreOptions = {}) {
    const paths = storePaths(rootDir);
    this.#paths = paths;
    this.location = `file://${paths.root}`;
    this.#changes = {
      paths,
      locks: new KeyLocks(paths.locksDir, options.lockTimeoutMs ?? 30_000, options.staleLockMs ?? 60_000),
      durability: durabilityOf(options.durability ?? 'machine'),
    };
  }

  async *list(prefix: string, options: ListOptions = {}): AsyncIterable<ObjectSummary> {
    yield* listObjects(this.#paths.root, prefix, options);
  }

  /** The folders under `prefix` that hold an object (a folder left empty is none, as on S3). */
  async *listFolders(prefix: string, options: { readonly signal?: AbortSignal } = {}): AsyncIterable<string> {
    yield* listFolders(this.#paths.root, prefix, options);
  }

  head(key: string, options: { readonly signal?: AbortSignal } = {}): Promise<ObjectHead | undefined> {
    return readHead(this.#paths, key, options);
  }

  async getBytes(
    key: string,
    options: { readonly ifMatch?: string; readonly signal?: AbortSignal } = {},
  ): Promise<{ readonly body: Buffer; readonly etag: string }> {
    return readOpened(this.#paths, key, options, (fd, _stat, etag) => ({ body: readFileSync(fd), etag }));
  }

  async getRange(
    key: string,
    start: number,
    end: number,
    options: { readonly ifMatch?: string; readonly signal?: AbortSignal } = {},
  ): Promise<{ readonly body: Buffer; readonly etag: string }> {
    return readOpened(this.#paths, key, options, (fd, stat, etag) => {
      const size = Number(stat.size);
      const from = Math.min(Math.max(start, 0), size);
      const length = Math.max(Math.min(end, size) - from, 0);
      const body = Buffer.alloc(length);
      let read = 0;
      while (read < length) {
        const bytesRead = readSync(fd, body, read, length - read, from + read);
        if (bytesRead === 0) break;
        read += bytesRead;
      }
      return { body: body.subarray(0, read), etag };
    });
  }

  /** Fetches the version into `path`: a hard link where it can be, else a copy (see fetchToFile). */
  getToFile(
    key: string,
    path: string,
    options: { readonly ifMatch?: string; readonly signal?: AbortSignal } = {},
  ): Promise<{ readonly etag: string; readonly size: number }> {
    return fetchToFile(this.#paths, key, path, options);
  }

  async put(
    key: string,
    body: Buffer | PutFile,
    options: WriteOptions = {},
  ): Promise<{ readonly etag: string }> {
    assertKey(key);
    const { signal } = options;
    signal?.throwIfAborted();
    const wanted = options.checksum;
    if (wanted !== undefined && wanted.algorithm !== 'CRC32') {
      throw new Error(`put ${key}: unsupported checksum algorithm ${String(wanted.algorithm)}`);
    }
    const upload = beginUpload(this.#paths.tmpDir, key, 'put');
    let committed = false;
    try {
      const durability = this.#changes.durability;
      const handedOff =
        !Buffer.isBuffer(body) && body.handOff === true
          ? await stageHandedOff(upload, durability, body.file, signal)
          : undefined;
      signal?.throwIfAborted();
      const staged =
        handedOff ??
        (Buffer.isBuffer(body) && body.length <= SMALL_BODY_BYTES
          ? await stageBytes(upload, durability, body)
          : await stageData(upload, durability, async (out) => {
              if (Buffer.isBuffer(body)) {
                await writeAll(out, body);
                return crc32(body);
              }
              const src = await open(body.file, 'r');
              try {
                return await readThrough(src, signal, out);
              } finally {
                await src.close();
              }
            }));
      let checksum: Checksum | undefined;
      if (wanted !== undefined) {
        const value = crc32Base64(staged.crc);
        // S3 rejects a body whose checksum differs from the one the client declared.
        if (value !== wanted.value) {
          throw new Error(`put ${key}: body CRC32 is ${value}, the request declared ${wanted.value}`);
        }
        checksum = { algorithm: 'CRC32', value };
      }
      const metadata = lowerCaseKeys(options.metadata ?? {});
      const attrs =
        checksum !== undefined || Object.keys(metadata).length > 0
          ? { metadata, ...(checksum === undefined ? {} : { checksum }) }
          : undefined;
      signal?.throwIfAborted();
      await commit(this.#changes, key, staged, options, attrs, signal);
      committed = true;
      return { etag: staged.etag };
    } finally {
      removeUpload(upload, committed);
    }
  }

  async copy(source: string, target: string, options: CopyOptions = {}): Promise<{ readonly etag: string }> {
    assertKey(source);
    assertKey(target);
    const { signal } = options;
    signal?.throwIfAborted();
    const src = await openWithAttributes(this.#paths, source);
    if (src === undefined) throw new NotFoundError(source);
    let staged: StagedFile;
    let upload: Upload;
    let committed = false;
    try {
      upload = beginUpload(this.#paths.tmpDir, target, 'copy');
    } catch (error) {
      // The source stays open otherwise: the try below is what closes it.
      await src.handle.close();
      throw error;
    }
    const stored = src.entry?.checksum;
    try {
      try {
        // A version written through the store (it has attributes) is never written in place, so
        // the copy may share its file. A file written around the store (an input) may be, by its
        // producer: its bytes are copied, so a quarantined copy stays as it was.
        const opened = { path: dataPath(this.#paths, source), handle: src.handle, stat: src.stat };
        const linked =
          src.entry === undefined ? undefined : await stageLink(upload, this.#changes.durability, opened);
        staged = linked ?? (await stageCopy(upload, this.#changes.durability, source, src, signal));
      } finally {
        await src.handle.close();
      }
      const attrs =
        src.entry === undefined
          ? undefined
          : { metadata: src.entry.metadata, ...(stored === undefined ? {} : { checksum: stored }) };
      signal?.throwIfAborted();
      await commit(
        this.#changes,
        target,
        staged,
        options.ifNoneMatch === undefined ? {} : { ifNoneMatch: options.ifNoneMatch },
        attrs,
        signal,
      );
      committed = true;
      return { etag: staged.etag };
    } finally {
      removeUpload(upload, committed);
    }
  }

  async deleteMany(
    requests: readonly DeleteRequest[],
    options: { readonly signal?: AbortSignal } = {},
  ): Promise<DeleteOutcome[]> {
    if (requests.length > MAX_DELETE_BATCH) {
      throw new Error(`deleteMany: ${requests.length} keys, at most ${MAX_DELETE_BATCH} per request`);
    }
    // A malformed request is rejected whole, before anything is deleted (as S3 does).
    for (const request of requests) assertKey(request.key);
    return deleteBatch(this.#changes, requests, options.signal);
  }

  listIncompleteUploads(prefix: string): Promise<IncompleteUpload[]> {
    return listIncompleteUploads(this.#paths.tmpDir, prefix);
  }

  abortIncompleteUpload(upload: IncompleteUpload): Promise<void> {
    return abortIncompleteUpload(this.#paths.tmpDir, upload);
  }
}

/** Stages a copy of an opened object's bytes, checked against its size and stored CRC32. */
async function stageCopy(
  upload: Upload,
  durability: Durability,
  source: string,
  src: { readonly handle: FileHandle; readonly stat: BigIntStats; readonly entry: SidecarEntry | undefined },
  signal: AbortSignal | undefined,
): Promise<Staged> {
  const staged = await stageData(upload, durability, (out) => readThrough(src.handle, signal, out));
  if (staged.stat.size !== src.stat.size) {
    throw new Error(`copy ${source}: read ${staged.stat.size} bytes, expected ${src.stat.size}`);
  }
  const stored = src.entry?.checksum;
  if (stored !== undefined && crc32Base64(staged.crc) !== stored.value) {
    throw new Error(`copy ${source}: its bytes no longer match its stored CRC32 ${stored.value}`);
  }
  return staged;
}

function crc32Base64(crc: number): string {
  const bytes = Buffer.alloc(4);
  bytes.writeUInt32BE(crc >>> 0);
  return bytes.toString('base64');
}

function lowerCaseKeys(metadata: Readonly<Record<string, string>>): Record<string, string> {
  return Object.fromEntries(Object.entries(metadata).map(([k, v]) => [k.toLowerCase(), v]));
}
