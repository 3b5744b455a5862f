/**
 * The embedded object store: a local folder with S3's semantics.
 *
 * Object `a/b/c.parquet` is the file `<root>/a/b/c.parquet`, so DuckDB and people can glob the
 * folder as a data lake. Everything the store needs besides the data lives in the reserved
 * hidden folder `<root>/.compactor-store/`, which is never listed:
 *
 * - `tmp/<uploadId>/`  one folder per write in progress: `intent.json` (the target key), `data`,
 *                      `meta.json`. A write is whole-object visible because `data` is fsynced and
 *                      then renamed into place; a folder left behind by a crash is an incomplete upload.
 * - `meta/<key>.json`  sidecar holding user metadata and checksum, one entry per data-file version
 *                      (identified by its ETag, i.e. inode, size and mtime); entries for other
 *                      versions are stale and ignored.
 * - `locks/<sha256(key)>.lock`  per-key lock making conditional writes atomic across processes.
 */

import { createHash, randomBytes } from 'node:crypto';
import type { BigIntStats, Dirent } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { mkdir, open, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { crc32 } from 'node:zlib';
import { NotFoundError, PreconditionFailedError, TransientStoreError } from '../core/errors.ts';
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
  WriteOptions,
} from '../core/object-store.ts';
import { MAX_DELETE_BATCH } from '../core/object-store.ts';
import {
  copyHandle,
  errorCode,
  fsyncDir,
  isMissing,
  openObject,
  placeFile,
  pruneEmptyDirs,
  renameIntoPlace,
  statObject,
  statOrUndefined,
  unlinkIfExists,
  writeAll,
  writeDurably,
} from './durable-fs.ts';
import { KeyLocks } from './local-store-lock.ts';
import { isRecord, parseJson, parseSidecar, type Sidecar, type SidecarEntry } from './local-store-sidecar.ts';
import { processAlive } from './process-alive.ts';

/** A folder's entries, or undefined when it does not exist (or vanished while we walked). */
async function entriesOf(dirAbs: string): Promise<Dirent[] | undefined> {
  try {
    return await readdir(dirAbs, { withFileTypes: true });
  } catch (error) {
    const code = errorCode(error);
    if (code === 'ENOENT' || code === 'ENOTDIR') return undefined;
    throw error;
  }
}

/** Top-level folder reserved for the store's own bookkeeping; keys may not start with it. */
export const RESERVED_DIR = '.compactor-store';

const MAX_KEY_BYTES = 1024;
// File systems cap a name at 255 bytes; the last segment also gets the sidecar's '.json'.
const MAX_SEGMENT_BYTES = 255;
const SIDECAR_SUFFIX = '.json';
const MAX_LAST_SEGMENT_BYTES = MAX_SEGMENT_BYTES - SIDECAR_SUFFIX.length;
// Reads that race with writers retry; a key rewritten this many times in a row is a live-lock.
const MAX_READ_ATTEMPTS = 50;

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

interface Attributes {
  readonly metadata: Readonly<Record<string, string>>;
  readonly checksum?: Checksum;
}

interface Staged {
  readonly dir: string;
  readonly dataPath: string;
  readonly stat: BigIntStats;
  readonly etag: string;
  readonly crc: number;
}

interface Conditions {
  readonly ifNoneMatch?: '*';
  readonly ifMatch?: string;
}

export class LocalFolderStore implements ObjectStore {
  readonly location: string;
  readonly #root: string;
  readonly #tmpDir: string;
  readonly #metaDir: string;
  readonly #locks: KeyLocks;
  readonly #fsync: boolean;

  constructor(rootDir: string, options: LocalFolderStoreOptions = {}) {
    this.#root = resolve(rootDir);
    this.#fsync = (options.durability ?? 'machine') === 'machine';
    this.location = `file://${this.#root}`;
    const reserved = join(this.#root, RESERVED_DIR);
    this.#tmpDir = join(reserved, 'tmp');
    this.#metaDir = join(reserved, 'meta');
    this.#locks = new KeyLocks(
      join(reserved, 'locks'),
      options.lockTimeoutMs ?? 30_000,
      options.staleLockMs ?? 60_000,
    );
  }

  async *list(prefix: string, options: ListOptions = {}): AsyncIterable<ObjectSummary> {
    const { startAfter } = options;
    if (startAfter === undefined) {
      yield* this.#list(prefix, options);
      return;
    }
    // S3 compares keys as UTF-8 bytes; the walk yields them in that order.
    const after = Buffer.from(startAfter, 'utf8');
    for await (const object of this.#list(prefix, options)) {
      if (Buffer.compare(Buffer.from(object.key, 'utf8'), after) > 0) yield object;
    }
  }

  /** The folders under `prefix` that hold an object (a folder left empty is none, as on S3). */
  async *listFolders(prefix: string, options: { readonly signal?: AbortSignal } = {}): AsyncIterable<string> {
    if (prefix !== '' && !prefix.endsWith('/'))
      throw new RangeError(`listFolders: "${prefix}" must end in "/"`);
    const dirPart = prefix.slice(0, -1);
    const segments = dirPart === '' ? [] : dirPart.split('/');
    if (segments.some((s) => s === '' || s === '.' || s === '..') || segments[0] === RESERVED_DIR) return;
    const dirAbs = join(this.#root, ...segments);
    const dirents = await entriesOf(dirAbs);
    if (dirents === undefined) return;
    const names = dirents
      .filter((d) => d.isDirectory() && !(prefix === '' && d.name === RESERVED_DIR))
      .map((d) => d.name)
      .sort((a, b) => Buffer.compare(Buffer.from(`${a}/`), Buffer.from(`${b}/`)));
    for (const name of names) {
      for await (const _ of this.#walk(join(dirAbs, name), `${prefix}${name}/`, '', options.signal)) {
        yield `${prefix}${name}/`;
        break;
      }
    }
  }

  async *#list(prefix: string, options: { readonly signal?: AbortSignal }): AsyncIterable<ObjectSummary> {
    const { signal } = options;
    signal?.throwIfAborted();
    const slash = prefix.lastIndexOf('/');
    const dirPart = slash < 0 ? '' : prefix.slice(0, slash);
    const namePrefix = prefix.slice(slash + 1);
    if (prefix.includes('\0')) return;
    if (dirPart !== '') {
      const segments = dirPart.split('/');
      // No valid key lies under '', '.', '..' segments or inside the reserved folder.
      if (segments.some((s) => s === '' || s === '.' || s === '..') || segments[0] === RESERVED_DIR) return;
    }
    const dirAbs = dirPart === '' ? this.#root : join(this.#root, ...dirPart.split('/'));
    yield* this.#walk(dirAbs, dirPart === '' ? '' : `${dirPart}/`, namePrefix, signal);
  }

  async head(key: string, options: { readonly signal?: AbortSignal } = {}): Promise<ObjectHead | undefined> {
    assertKey(key);
    options.signal?.throwIfAborted();
    const path = this.#dataPath(key);
    for (let attempt = 0; attempt < MAX_READ_ATTEMPTS; attempt++) {
      const st = await statObject(path);
      if (st === undefined) return undefined;
      const etag = etagOf(st);
      const entry = await this.#sidecarEntry(key, etag);
      // The sidecar always holds the current version's entry, so if the data file is unchanged
      // across the sidecar read, the entry (or its absence) belongs to this version.
      const again = await statObject(path);
      if (again !== undefined && etagOf(again) === etag) return toHead(key, st, etag, entry);
      options.signal?.throwIfAborted();
    }
    throw new TransientStoreError(`head ${key}: the object kept changing while being read`);
  }

  async getBytes(
    key: string,
    options: { readonly ifMatch?: string; readonly signal?: AbortSignal } = {},
  ): Promise<{ readonly body: Buffer; readonly etag: string }> {
    return this.#readOpened(key, options, async (opened, etag) => ({
      body: await opened.handle.readFile(),
      etag,
    }));
  }

  /**
   * Opens the object, checks `ifMatch` against the version opened, and runs `read` on that open
   * handle (a later replace renames another file in, so the handle keeps the version checked).
   */
  async #readOpened<T>(
    key: string,
    options: { readonly ifMatch?: string; readonly signal?: AbortSignal },
    read: (opened: NonNullable<Awaited<ReturnType<typeof openObject>>>, etag: string) => Promise<T>,
  ): Promise<T> {
    assertKey(key);
    options.signal?.throwIfAborted();
    const opened = await openObject(this.#dataPath(key));
    if (opened === undefined) throw new NotFoundError(key);
    try {
      const etag = etagOf(opened.stat);
      if (options.ifMatch !== undefined && unquote(options.ifMatch) !== etag) {
        throw new PreconditionFailedError(key);
      }
      return await read(opened, etag);
    } finally {
      await opened.handle.close();
    }
  }

  async getRange(
    key: string,
    start: number,
    end: number,
    options: { readonly ifMatch?: string; readonly signal?: AbortSignal } = {},
  ): Promise<{ readonly body: Buffer; readonly etag: string }> {
    return this.#readOpened(key, options, async (opened, etag) => {
      const size = Number(opened.stat.size);
      const from = Math.min(Math.max(start, 0), size);
      const length = Math.max(Math.min(end, size) - from, 0);
      const body = Buffer.alloc(length);
      let read = 0;
      while (read < length) {
        const { bytesRead } = await opened.handle.read(body, read, length - read, from + read);
        if (bytesRead === 0) break;
        read += bytesRead;
      }
      return { body: body.subarray(0, read), etag };
    });
  }

  /**
   * Places the version into `path` as a hard link where the file system allows (one syscall; a job
   * of thousands of small inputs spends most of its fetch time copying otherwise), else as a copy.
   *
   * The ETag guarantee holds for a link too. The link is checked to be the very inode of the ETag
   * asked for (an ETag is device, inode, size and mtime). The store never writes a data file in
   * place: every put and copy renames a new file over the key, and a delete unlinks the key's name,
   * so neither can reach the linked inode. And no reader of a fetched file writes it: DuckDB reads
   * its inputs, and work folders are removed by unlinking. A file written in place by a process
   * outside the store would change its ETag (mtime), so the ETag-conditioned delete keeps it.
   */
  async getToFile(
    key: string,
    path: string,
    options: { readonly ifMatch?: string; readonly signal?: AbortSignal } = {},
  ): Promise<{ readonly etag: string; readonly size: number }> {
    assertKey(key);
    const { signal } = options;
    signal?.throwIfAborted();
    const source = this.#dataPath(key);
    for (let attempt = 0; attempt < MAX_READ_ATTEMPTS; attempt++) {
      const st = await statObject(source);
      if (st === undefined) throw new NotFoundError(key);
      const etag = etagOf(st);
      if (options.ifMatch !== undefined && unquote(options.ifMatch) !== etag) {
        throw new PreconditionFailedError(key);
      }
      let placed: BigIntStats | undefined;
      try {
        placed = await placeFile(source, path);
      } catch (error) {
        await rm(path, { force: true });
        if (!isMissing(error)) throw error;
        const now = await statObject(source);
        if (now === undefined) throw new NotFoundError(key);
        // Still the same version: the error is the destination's (a missing folder).
        if (etagOf(now) === etag) throw error;
        // Replaced meanwhile: link(2) fails with ENOENT on an inode a rename has just unlinked.
        signal?.throwIfAborted();
        continue;
      }
      if (placed !== undefined && etagOf(placed) === etag) return { etag, size: Number(st.size) };
      // Replaced between the stat and the link or copy (or edited during the copy): try again.
      await rm(path, { force: true });
      signal?.throwIfAborted();
    }
    throw new TransientStoreError(`get ${key}: the object kept changing while being read`);
  }

  async put(
    key: string,
    body: Buffer | { readonly file: string },
    options: WriteOptions = {},
  ): Promise<{ readonly etag: string }> {
    assertKey(key);
    const { signal } = options;
    signal?.throwIfAborted();
    const wanted = options.checksum;
    if (wanted !== undefined && wanted.algorithm !== 'CRC32') {
      throw new Error(`put ${key}: unsupported checksum algorithm ${String(wanted.algorithm)}`);
    }
    const dir = await this.#beginUpload(key, 'put');
    try {
      const staged = await stageData(dir, this.#fsync, async (out) => {
        if (Buffer.isBuffer(body)) {
          signal?.throwIfAborted();
          await writeAll(out, body);
          return crc32(body);
        }
        const src = await open(body.file, 'r');
        try {
          return (await copyHandle(src, out, signal)).crc;
        } finally {
          await src.close();
        }
      });
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
      await this.#commit(key, staged, options, attrs, signal);
      return { etag: staged.etag };
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  async copy(source: string, target: string, options: CopyOptions = {}): Promise<{ readonly etag: string }> {
    assertKey(source);
    assertKey(target);
    const { signal } = options;
    signal?.throwIfAborted();
    const src = await this.#openWithAttributes(source);
    if (src === undefined) throw new NotFoundError(source);
    let staged: Staged;
    const dir = await this.#beginUpload(target, 'copy');
    try {
      try {
        staged = await stageData(
          dir,
          this.#fsync,
          async (out) => (await copyHandle(src.handle, out, signal)).crc,
        );
      } finally {
        await src.handle.close();
      }
      if (staged.stat.size !== src.stat.size) {
        throw new Error(`copy ${source}: read ${staged.stat.size} bytes, expected ${src.stat.size}`);
      }
      const stored = src.entry?.checksum;
      if (stored !== undefined && crc32Base64(staged.crc) !== stored.value) {
        throw new Error(`copy ${source}: its bytes no longer match its stored CRC32 ${stored.value}`);
      }
      const attrs =
        src.entry === undefined
          ? undefined
          : { metadata: src.entry.metadata, ...(stored === undefined ? {} : { checksum: stored }) };
      signal?.throwIfAborted();
      await this.#commit(
        target,
        staged,
        options.ifNoneMatch === undefined ? {} : { ifNoneMatch: options.ifNoneMatch },
        attrs,
        signal,
      );
      return { etag: staged.etag };
    } finally {
      await rm(dir, { recursive: true, force: true });
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
    const outcomes: DeleteOutcome[] = [];
    for (const request of requests) {
      options.signal?.throwIfAborted();
      outcomes.push(await this.#deleteOne(request, options.signal));
    }
    return outcomes;
  }

  async listIncompleteUploads(prefix: string): Promise<IncompleteUpload[]> {
    let entries: string[];
    try {
      entries = await readdir(this.#tmpDir);
    } catch (error) {
      if (errorCode(error) === 'ENOENT') return [];
      throw error;
    }
    const uploads: IncompleteUpload[] = [];
    for (const uploadId of entries) {
      const intentPath = join(this.#tmpDir, uploadId, 'intent.json');
      let key = '';
      let initiated: Date;
      let abandoned: boolean;
      try {
        const text = await readFile(intentPath, 'utf8');
        initiated = (await stat(intentPath)).mtime;
        key = parseIntentKey(text) ?? '';
        abandoned = writerGone(text, uploadId);
      } catch (error) {
        const code = errorCode(error);
        if (code === 'ENOTDIR') continue; // not an upload folder
        if (code !== 'ENOENT') throw error;
        // Crashed (or is) between creating the folder and writing its intent: the target key is
        // unknown, so it is reported under '' and only a whole-store sweep cleans it up.
        const folder = await statOrUndefined(join(this.#tmpDir, uploadId));
        if (folder === undefined) continue; // finished meanwhile
        initiated = folder.mtime;
        abandoned = processGone(uploadIdPid(uploadId));
      }
      if (key.startsWith(prefix)) uploads.push({ key, uploadId, initiated, abandoned });
    }
    uploads.sort(
      (a, b) => a.initiated.getTime() - b.initiated.getTime() || compareUtf8(a.uploadId, b.uploadId),
    );
    return uploads;
  }

  async abortIncompleteUpload(upload: IncompleteUpload): Promise<void> {
    const id = upload.uploadId;
    if (
      id === '' ||
      id === '.' ||
      id === '..' ||
      id.includes('/') ||
      id.includes('\\') ||
      id.includes('\0')
    ) {
      throw new Error(`abortIncompleteUpload: invalid upload id ${JSON.stringify(id)}`);
    }
    // Idempotent: a finished or already aborted upload is simply gone.
    await rm(join(this.#tmpDir, id), { recursive: true, force: true });
  }

  // ---- internals ----

  #dataPath(key: string): string {
    return join(this.#root, ...key.split('/'));
  }

  #sidecarPath(key: string): string {
    return `${join(this.#metaDir, ...key.split('/'))}${SIDECAR_SUFFIX}`;
  }

  async *#walk(
    dirAbs: string,
    keyPrefix: string,
    namePrefix: string,
    signal: AbortSignal | undefined,
  ): AsyncGenerator<ObjectSummary> {
    signal?.throwIfAborted();
    const dirents = await entriesOf(dirAbs);
    if (dirents === undefined) return;
    const children: { name: string; isDir: boolean; order: Buffer }[] = [];
    for (const d of dirents) {
      if (!d.name.startsWith(namePrefix)) continue;
      if (keyPrefix === '' && d.name === RESERVED_DIR) continue;
      let isDir: boolean;
      if (d.isDirectory()) isDir = true;
      else if (d.isFile()) isDir = false;
      else if (d.isSymbolicLink()) {
        // Symlinked files are objects; symlinked folders are not walked (cycles).
        const target = await statOrUndefined(join(dirAbs, d.name));
        if (target === undefined || !target.isFile()) continue;
        isDir = false;
      } else continue;
      // Every key below folder `x` starts with `x/`, so that is where the folder sorts.
      children.push({ name: d.name, isDir, order: Buffer.from(isDir ? `${d.name}/` : d.name, 'utf8') });
    }
    children.sort((a, b) => Buffer.compare(a.order, b.order));
    for (const child of children) {
      const abs = join(dirAbs, child.name);
      if (child.isDir) {
        yield* this.#walk(abs, `${keyPrefix}${child.name}/`, '', signal);
        continue;
      }
      const st = await statObject(abs);
      if (st === undefined) continue; // deleted while listing
      yield {
        key: `${keyPrefix}${child.name}`,
        size: Number(st.size),
        etag: etagOf(st),
        lastModified: st.mtime,
      };
    }
  }

  async #beginUpload(key: string, kind: 'put' | 'copy'): Promise<string> {
    const uploadId = `${Date.now().toString(36)}-${process.pid}-${randomBytes(8).toString('hex')}`;
    const dir = join(this.#tmpDir, uploadId);
    await mkdir(dir, { recursive: true });
    await writeFile(
      join(dir, 'intent.json'),
      JSON.stringify({ key, kind, pid: process.pid, host: hostname() }),
      {
        flag: 'wx',
      },
    );
    return dir;
  }

  async #readSidecar(key: string): Promise<Sidecar | undefined> {
    const path = this.#sidecarPath(key);
    let text: string;
    try {
      text = await readFile(path, 'utf8');
    } catch (error) {
      const code = errorCode(error);
      if (code === 'ENOENT' || code === 'ENOTDIR') return undefined;
      throw error;
    }
    return parseSidecar(path, text);
  }

  async #sidecarEntry(key: string, etag: string): Promise<SidecarEntry | undefined> {
    return (await this.#readSidecar(key))?.entries.find((e) => e.etag === etag);
  }

  /** Opens the current version and reads its sidecar entry, consistently (retrying past writers). */
  async #openWithAttributes(
    key: string,
  ): Promise<{ handle: FileHandle; stat: BigIntStats; entry: SidecarEntry | undefined } | undefined> {
    const path = this.#dataPath(key);
    for (let attempt = 0; attempt < MAX_READ_ATTEMPTS; attempt++) {
      const opened = await openObject(path);
      if (opened === undefined) return undefined;
      const etag = etagOf(opened.stat);
      let keep = false;
      try {
        const entry = await this.#sidecarEntry(key, etag);
        const again = await statObject(path);
        if (again !== undefined && etagOf(again) === etag) {
          keep = true;
          return { handle: opened.handle, stat: opened.stat, entry };
        }
      } finally {
        if (!keep) await opened.handle.close();
      }
    }
    throw new TransientStoreError(`read ${key}: the object kept changing while being read`);
  }

  /** Checks the conditions and makes the staged data the object, all under the key's lock. */
  async #commit(
    key: string,
    staged: Staged,
    conditions: Conditions,
    attrs: Attributes | undefined,
    signal: AbortSignal | undefined,
  ): Promise<void> {
    const path = this.#dataPath(key);
    const sidecarPath = this.#sidecarPath(key);
    const release = await this.#locks.lock(key, signal);
    try {
      const current = await statObject(path);
      if (conditions.ifNoneMatch === '*' && current !== undefined) throw new PreconditionFailedError(key);
      if (
        conditions.ifMatch !== undefined &&
        (current === undefined || etagOf(current) !== unquote(conditions.ifMatch))
      ) {
        throw new PreconditionFailedError(key);
      }
      if (attrs !== undefined) {
        // The sidecar goes in first so the new data is never visible without its attributes; it
        // keeps the current version's entry so readers of the old data still find theirs.
        const currentEtag = current === undefined ? undefined : etagOf(current);
        const kept =
          currentEtag === undefined
            ? []
            : ((await this.#readSidecar(key))?.entries.filter((e) => e.etag === currentEtag) ?? []);
        const entry: SidecarEntry = {
          etag: staged.etag,
          ino: staged.stat.ino.toString(),
          size: Number(staged.stat.size),
          metadata: attrs.metadata,
          ...(attrs.checksum === undefined ? {} : { checksum: attrs.checksum }),
        };
        const sidecar: Sidecar = { version: 1, key, entries: [...kept, entry] };
        const tmp = join(staged.dir, 'meta.json');
        await writeDurably(tmp, JSON.stringify(sidecar), this.#fsync);
        await renameIntoPlace(tmp, sidecarPath, key);
        if (this.#fsync) await fsyncDir(dirname(sidecarPath));
      }
      await renameIntoPlace(staged.dataPath, path, key);
      if (this.#fsync) await fsyncDir(dirname(path));
      if (attrs === undefined && (await unlinkIfExists(sidecarPath))) {
        await pruneEmptyDirs(dirname(sidecarPath), this.#metaDir);
      }
    } finally {
      await release();
    }
  }

  async #deleteOne(request: DeleteRequest, signal: AbortSignal | undefined): Promise<DeleteOutcome> {
    const { key } = request;
    const path = this.#dataPath(key);
    try {
      const release = await this.#locks.lock(key, signal);
      try {
        const current = await statObject(path);
        if (current === undefined) return { key, status: 'not-found' };
        if (request.etag !== undefined && etagOf(current) !== unquote(request.etag)) {
          return { key, status: 'precondition-failed' };
        }
        if (!(await unlinkIfExists(path))) return { key, status: 'not-found' };
        // The protocol records "inputs deleted" next; the delete must not come back after a crash.
        if (this.#fsync) await fsyncDir(dirname(path));
        const sidecarPath = this.#sidecarPath(key);
        if (await unlinkIfExists(sidecarPath)) await pruneEmptyDirs(dirname(sidecarPath), this.#metaDir);
        await pruneEmptyDirs(dirname(path), this.#root);
        return { key, status: 'deleted' };
      } finally {
        await release();
      }
    } catch (error) {
      // Per-key failures are outcomes (as in DeleteObjects); anything else is a bug or an abort.
      const code = errorCode(error);
      if (code !== undefined && error instanceof Error) {
        return { key, status: 'error', code, message: error.message };
      }
      if (error instanceof TransientStoreError) {
        return { key, status: 'error', code: error.name, message: error.message };
      }
      throw error;
    }
  }

  // ---- per-key locks ----
}

/** Throws unless `key` is a key this store can hold. */
export function assertKey(key: string): void {
  const bad = (why: string): never => {
    throw new Error(`invalid object key ${JSON.stringify(key)}: ${why}`);
  };
  if (typeof key !== 'string' || key === '') bad('empty');
  if (Buffer.from(key, 'utf8').toString('utf8') !== key) bad('not well-formed Unicode');
  if (Buffer.byteLength(key, 'utf8') > MAX_KEY_BYTES) bad(`longer than ${MAX_KEY_BYTES} bytes`);
  if (key.includes('\0')) bad('contains NUL');
  if (key.startsWith('/')) bad("starts with '/'");
  const segments = key.split('/');
  if (segments[0] === RESERVED_DIR) bad(`${RESERVED_DIR}/ is reserved for the store`);
  segments.forEach((segment, i) => {
    if (segment === '') bad('empty path segment');
    if (segment === '.' || segment === '..') bad(`'${segment}' path segment`);
    const limit = i === segments.length - 1 ? MAX_LAST_SEGMENT_BYTES : MAX_SEGMENT_BYTES;
    if (Buffer.byteLength(segment, 'utf8') > limit) bad(`a path segment is longer than ${limit} bytes`);
  });
}

// ---- helpers ----

function etagOf(st: BigIntStats): string {
  // Every write renames a new file into place, so (inode, size, mtime) changes on every replace.
  return createHash('sha256')
    .update(`${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}`)
    .digest('hex')
    .slice(0, 32);
}

function unquote(etag: string): string {
  return etag.length >= 2 && etag.startsWith('"') && etag.endsWith('"') ? etag.slice(1, -1) : etag;
}

function crc32Base64(crc: number): string {
  const bytes = Buffer.alloc(4);
  bytes.writeUInt32BE(crc >>> 0);
  return bytes.toString('base64');
}

function lowerCaseKeys(metadata: Readonly<Record<string, string>>): Record<string, string> {
  return Object.fromEntries(Object.entries(metadata).map(([k, v]) => [k.toLowerCase(), v]));
}

function compareUtf8(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

function toHead(key: string, st: BigIntStats, etag: string, entry: SidecarEntry | undefined): ObjectHead {
  return {
    key,
    size: Number(st.size),
    etag,
    lastModified: st.mtime,
    metadata: { ...(entry?.metadata ?? {}) },
    ...(entry?.checksum === undefined ? {} : { checksum: entry.checksum }),
  };
}

/** Writes `<dir>/data` with `fill`, fsyncs it (with `sync`), and returns its identity. */
async function stageData(
  dir: string,
  sync: boolean,
  fill: (out: FileHandle) => Promise<number>,
): Promise<Staged> {
  const dataPath = join(dir, 'data');
  const out = await open(dataPath, 'wx');
  try {
    const crc = await fill(out);
    if (sync) await out.sync();
    // Rename keeps inode, size and mtime, so this is the ETag the object will have.
    const st = await out.stat({ bigint: true });
    return { dir, dataPath, stat: st, etag: etagOf(st), crc };
  } finally {
    await out.close();
  }
}

function parseIntentKey(text: string): string | undefined {
  const value = parseJson(text);
  return isRecord(value) && typeof value.key === 'string' ? value.key : undefined;
}

/** Whether the process that started an upload is gone (a writer on another host is unknown: not gone). */
function writerGone(intentText: string, uploadId: string): boolean {
  const intent = parseJson(intentText);
  // A writer killed while writing its intent leaves it empty or cut short: the upload id names
  // the writer's pid too (see #beginUpload).
  if (!isRecord(intent) || typeof intent.pid !== 'number') return processGone(uploadIdPid(uploadId));
  if (intent.host !== undefined && intent.host !== hostname()) return false;
  return processGone(intent.pid);
}

/** The writer's pid in an upload id (`<time>-<pid>-<random>`), NaN if it has none. */
function uploadIdPid(uploadId: string): number {
  return Number(uploadId.split('-')[1]);
}

function processGone(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid) return false;
  // Not surely gone is not gone: the upload is left alone.
  return !processAlive(pid, () => true);
}
