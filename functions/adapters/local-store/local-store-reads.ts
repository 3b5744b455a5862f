/**
 * The local folder store's reads. A read never holds the key's lock: it opens or stats the data
 * file, reads the sidecar entry of that version (its ETag), and checks the data file is still that
 * version after, retrying past writers that replace it meanwhile. An open handle keeps the version
 * it opened, since every replace renames another file over the key.
 */

import { type BigIntStats, closeSync, fstatSync, openSync } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { dirname } from 'node:path';
import { errorCode, NotFoundError, PreconditionFailedError, TransientStoreError } from '../../core/errors.ts';
import type { ObjectHead } from '../../core/object-store.ts';
import {
  copyInPlace,
  isMissing,
  linkInPlace,
  openObject,
  statObject,
  statOrUndefined,
  unlinkIfExists,
} from './durable-fs.ts';
import { assertKey, dataPath, etagOf, type StorePaths, sidecarPath, unquote } from './local-store-keys.ts';
import { readSidecar, type SidecarEntry } from './local-store-sidecar.ts';
import { paced } from './sync-calls.ts';

// Reads that race with writers retry; a key rewritten this many times in a row is a live-lock.
const MAX_READ_ATTEMPTS = 50;

/** The object's head, its sidecar entry read consistently with its data file. */
export async function readHead(
  paths: StorePaths,
  key: string,
  options: { readonly signal?: AbortSignal },
): Promise<ObjectHead | undefined> {
  assertKey(key);
  options.signal?.throwIfAborted();
  const path = dataPath(paths, key);
  for (let attempt = 0; attempt < MAX_READ_ATTEMPTS; attempt++) {
    await paced();
    const st = statObject(path);
    if (st === undefined) return undefined;
    const etag = etagOf(st);
    const entry = sidecarEntry(paths, key, etag);
    // The sidecar always holds the current version's entry, so if the data file is unchanged
    // across the sidecar read, the entry (or its absence) belongs to this version.
    const again = statObject(path);
    if (again !== undefined && etagOf(again) === etag) return toHead(key, st, etag, entry);
    options.signal?.throwIfAborted();
  }
  throw new TransientStoreError(`head ${key}: the object kept changing while being read`);
}

/**
 * Opens the object, checks `ifMatch` against the version opened, and runs `read` on that open
 * descriptor, synchronously (sync-calls.ts says why). The descriptor keeps the version checked:
 * a later replace renames another file over the key. `read` must be synchronous: the descriptor
 * is closed as soon as it returns.
 */
export async function readOpened<T>(
  paths: StorePaths,
  key: string,
  options: { readonly ifMatch?: string; readonly signal?: AbortSignal },
  read: (fd: number, stat: BigIntStats, etag: string) => T,
): Promise<T> {
  assertKey(key);
  options.signal?.throwIfAborted();
  await paced();
  let fd: number;
  try {
    fd = openSync(dataPath(paths, key), 'r');
  } catch (error) {
    if (isMissing(error) || errorCode(error) === 'EISDIR') throw new NotFoundError(key);
    throw error;
  }
  try {
    const st = fstatSync(fd, { bigint: true });
    if (!st.isFile()) throw new NotFoundError(key);
    const etag = etagOf(st);
    if (options.ifMatch !== undefined && unquote(options.ifMatch) !== etag) {
      throw new PreconditionFailedError(key);
    }
    return read(fd, st, etag);
  } finally {
    closeSync(fd);
  }
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
export async function fetchToFile(
  paths: StorePaths,
  key: string,
  path: string,
  options: { readonly ifMatch?: string; readonly signal?: AbortSignal },
): Promise<{ readonly etag: string; readonly size: number }> {
  assertKey(key);
  const { signal } = options;
  signal?.throwIfAborted();
  const source = dataPath(paths, key);
  const wanted = options.ifMatch === undefined ? undefined : unquote(options.ifMatch);
  for (let attempt = 0; attempt < MAX_READ_ATTEMPTS; attempt++) {
    // A hard link pins the version it links, and its own stats name that version: no stat before.
    let linked: BigIntStats | undefined;
    try {
      linked = linkInPlace(source, path);
    } catch (error) {
      if (!isMissing(error)) throw error;
      if (statObject(source) === undefined) throw new NotFoundError(key);
      // The source is there: the error is the destination's (a missing folder), or link(2) met an
      // inode a rename had just unlinked (the key replaced meanwhile: try again).
      if (statOrUndefined(dirname(path))?.isDirectory() !== true) throw error;
      signal?.throwIfAborted();
      continue;
    }
    if (linked === undefined) return copyToFile(source, key, path, wanted, signal);
    const etag = etagOf(linked);
    if (wanted !== undefined && wanted !== etag) {
      unlinkIfExists(path);
      throw new PreconditionFailedError(key);
    }
    return { etag, size: Number(linked.size) };
  }
  throw new TransientStoreError(`get ${key}: the object kept changing while being read`);
}

/** fetchToFile where no hard link can be made: a copy, checked to be of one version throughout. */
async function copyToFile(
  source: string,
  key: string,
  path: string,
  wanted: string | undefined,
  signal: AbortSignal | undefined,
): Promise<{ readonly etag: string; readonly size: number }> {
  for (let attempt = 0; attempt < MAX_READ_ATTEMPTS; attempt++) {
    const st = statObject(source);
    if (st === undefined) throw new NotFoundError(key);
    const etag = etagOf(st);
    if (wanted !== undefined && wanted !== etag) throw new PreconditionFailedError(key);
    let copied: BigIntStats | undefined;
    try {
      copied = await copyInPlace(source, path);
    } catch (error) {
      unlinkIfExists(path);
      if (!isMissing(error)) throw error;
      const now = statObject(source);
      if (now === undefined) throw new NotFoundError(key);
      // Still the same version: the error is the destination's (a missing folder).
      if (etagOf(now) === etag) throw error;
      signal?.throwIfAborted();
      continue;
    }
    if (copied !== undefined && etagOf(copied) === etag) return { etag, size: Number(st.size) };
    // Replaced during the copy: try again.
    unlinkIfExists(path);
    signal?.throwIfAborted();
  }
  throw new TransientStoreError(`get ${key}: the object kept changing while being read`);
}

/** Opens the current version and reads its sidecar entry, consistently (retrying past writers). */
export async function openWithAttributes(
  paths: StorePaths,
  key: string,
): Promise<{ handle: FileHandle; stat: BigIntStats; entry: SidecarEntry | undefined } | undefined> {
  const path = dataPath(paths, key);
  for (let attempt = 0; attempt < MAX_READ_ATTEMPTS; attempt++) {
    const opened = await openObject(path);
    if (opened === undefined) return undefined;
    const etag = etagOf(opened.stat);
    let keep = false;
    try {
      const entry = sidecarEntry(paths, key, etag);
      const again = statObject(path);
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

function sidecarEntry(paths: StorePaths, key: string, etag: string): SidecarEntry | undefined {
  return readSidecar(sidecarPath(paths, key))?.entries.find((e) => e.etag === etag);
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
