/**
 * The local folder store's changes to a key. A write stages its data in its upload's files, then
 * commits it under the key's lock: the conditions are checked and the staged file (and sidecar) are
 * renamed into place. A delete also runs under the lock. Which fsyncs they make is decided once,
 * from the store's `durability` option (Durability).
 */

import { type BigIntStats, fstatSync } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { open } from 'node:fs/promises';
import { dirname } from 'node:path';
import { crc32 } from 'node:zlib';
import { errorCode, PreconditionFailedError, TransientStoreError } from '../../core/errors.ts';
import type { Checksum, DeleteOutcome, DeleteRequest } from '../../core/object-store.ts';
import {
  DurableFolders,
  fsyncDirShared,
  hardLink,
  inFolderOf,
  inFolderOfAsync,
  isMissing,
  pruneEmptyDirs,
  readThrough,
  renameIntoPlace,
  statObject,
  statOrUndefined,
  unlinkIfExists,
  writeNewFile,
} from './durable-fs.ts';
import { dataPath, etagOf, type StorePaths, sidecarPath, unquote } from './local-store-keys.ts';
import type { KeyLocks } from './local-store-lock.ts';
import { readSidecar, type Sidecar, type SidecarEntry } from './local-store-sidecar.ts';
import type { Upload } from './local-store-uploads.ts';

/**
 * The fsyncs the store makes, decided once from its `durability` option: all of them ('machine'),
 * or none ('process').
 */
export interface Durability {
  /** fsyncs a file written for the store, before it is renamed into place. */
  syncFile(file: FileHandle): Promise<void>;
  /** Writes a new file holding a small body (writeNewFile), synced as syncFile syncs; its stats. */
  writeFile(path: string, bytes: Uint8Array): Promise<BigIntStats>;
  /** fsyncs a folder after a rename or unlink in it, so the change survives power loss. */
  syncDir(dir: string): Promise<void>;
  /**
   * Makes a file just renamed to `path` durable: its folder fsynced, and the parent of each folder
   * between it and `root` not yet known durable (DurableFolders), so no folder holding it can be
   * lost either, whoever made it.
   */
  syncPlaced(path: string, root: string): Promise<void>;
}

const noSync = async (): Promise<void> => {};

export function durabilityOf(mode: 'machine' | 'process'): Durability {
  if (mode === 'machine') {
    const folders = new DurableFolders();
    return {
      syncFile: (file) => file.sync(),
      writeFile: (path, bytes) => writeNewFile(path, bytes, true),
      syncDir: fsyncDirShared,
      syncPlaced: async (path, root) => {
        const fresh = folders.unknown(dirname(path), root);
        await Promise.all(
          [dirname(path), ...fresh.map((folder) => dirname(folder.path))].map(fsyncDirShared),
        );
        folders.remember(fresh);
      },
    };
  }
  return {
    syncFile: noSync,
    writeFile: (path, bytes) => writeNewFile(path, bytes, false),
    syncDir: noSync,
    syncPlaced: noSync,
  };
}

/** What a change to a key needs: where the files are, the key's lock, which fsyncs to make. */
export interface KeyChanges {
  readonly paths: StorePaths;
  readonly locks: KeyLocks;
  readonly durability: Durability;
}

export interface Attributes {
  readonly metadata: Readonly<Record<string, string>>;
  readonly checksum?: Checksum;
}

/** A write's data, in its upload's file, ready to be committed. */
export interface StagedFile {
  readonly dataPath: string;
  /** Where its attributes are written before they go into place (the upload's). */
  readonly metaPath: string;
  readonly stat: BigIntStats;
  readonly etag: string;
}

/** Data written for the store, with the CRC32 of what was written. */
export interface Staged extends StagedFile {
  readonly crc: number;
}

export interface Conditions {
  readonly ifNoneMatch?: '*';
  readonly ifMatch?: string;
}

/** stageData for a small body held in memory (writeNewFile: two thread-pool hops, not four). */
export async function stageBytes(
  upload: Pick<Upload, 'dataPath' | 'metaPath'>,
  durability: Durability,
  body: Buffer,
): Promise<Staged> {
  const { dataPath, metaPath } = upload;
  const st = await inFolderOfAsync(dataPath, () => durability.writeFile(dataPath, body));
  return { dataPath, metaPath, stat: st, etag: etagOf(st), crc: crc32(body) };
}

/** Writes the upload's data with `fill`, fsyncs it (per `durability`), and returns its identity. */
export async function stageData(
  upload: Pick<Upload, 'dataPath' | 'metaPath'>,
  durability: Durability,
  fill: (out: FileHandle) => Promise<number>,
): Promise<Staged> {
  const { dataPath, metaPath } = upload;
  const out = await inFolderOfAsync(dataPath, () => open(dataPath, 'wx'));
  try {
    const crc = await fill(out);
    await durability.syncFile(out);
    // Rename keeps inode, size and mtime, so this is the ETag the object will have.
    const st = fstatSync(out.fd, { bigint: true });
    return { dataPath, metaPath, stat: st, etag: etagOf(st), crc };
  } finally {
    await out.close();
  }
}

/** Links `source` at an upload's data path (hardLink); undefined where no hard link can be made. */
function linkIntoUpload(source: string, dataPath: string): BigIntStats | undefined {
  return inFolderOf(dataPath, () => hardLink(source, dataPath));
}

/**
 * Stages a copy of an object as a hard link to its file, where the file system allows and the file
 * is still the version `source` opened: the store never writes the file of a version it wrote in
 * place, so the link holds that version's bytes without copying them. The copy keeps the version's
 * ETag, as S3's does: "The source and destination ETag is identical for a successfully copied
 * object" (https://docs.aws.amazon.com/AmazonS3/latest/API/API_CopyObjectResult.html). Undefined
 * when no link can be made or the version changed meanwhile: the caller copies the bytes from
 * `source.handle`.
 */
export async function stageLink(
  upload: Pick<Upload, 'dataPath' | 'metaPath'>,
  durability: Durability,
  source: { readonly path: string; readonly handle: FileHandle; readonly stat: BigIntStats },
): Promise<StagedFile | undefined> {
  const { dataPath, metaPath } = upload;
  let linked: BigIntStats | undefined;
  try {
    linked = linkIntoUpload(source.path, dataPath);
  } catch (error) {
    // Gone since it was opened: its bytes are copied from the handle.
    if (isMissing(error)) return undefined;
    throw error;
  }
  if (linked === undefined) return undefined;
  const etag = etagOf(linked);
  if (etag !== etagOf(source.stat)) {
    unlinkIfExists(dataPath);
    return undefined;
  }
  // Written through the store, its bytes are durable already unless a store of 'process'
  // durability wrote them: synced here, through the handle of the same inode.
  await durability.syncFile(source.handle);
  return { dataPath, metaPath, stat: linked, etag };
}

/**
 * Stages a file its writer hands off (it never writes it again) as a hard link, where the file
 * system allows: the file is read once for its CRC32 and synced, and no copy is written. Undefined
 * where no link can be made here: the caller copies it.
 */
export async function stageHandedOff(
  upload: Pick<Upload, 'dataPath' | 'metaPath'>,
  durability: Durability,
  file: string,
  signal: AbortSignal | undefined,
): Promise<Staged | undefined> {
  const { dataPath, metaPath } = upload;
  if (linkIntoUpload(file, dataPath) === undefined) return undefined;
  const handle = await open(dataPath, 'r');
  try {
    const crc = await readThrough(handle, signal);
    await durability.syncFile(handle);
    const st = fstatSync(handle.fd, { bigint: true });
    return { dataPath, metaPath, stat: st, etag: etagOf(st), crc };
  } finally {
    await handle.close();
  }
}

/** Checks the conditions and makes the staged data the object, all under the key's lock. */
export async function commit(
  store: KeyChanges,
  key: string,
  staged: StagedFile,
  conditions: Conditions,
  attrs: Attributes | undefined,
  signal: AbortSignal | undefined,
): Promise<void> {
  const { paths, durability } = store;
  const path = dataPath(paths, key);
  const sidecar = sidecarPath(paths, key);
  const release = await store.locks.lock(key, signal);
  try {
    const current = statObject(path);
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
          : (readSidecar(sidecar)?.entries.filter((e) => e.etag === currentEtag) ?? []);
      const entry: SidecarEntry = {
        etag: staged.etag,
        ino: staged.stat.ino.toString(),
        size: Number(staged.stat.size),
        metadata: attrs.metadata,
        ...(attrs.checksum === undefined ? {} : { checksum: attrs.checksum }),
      };
      const next: Sidecar = { version: 1, key, entries: [...kept, entry] };
      await durability.writeFile(staged.metaPath, Buffer.from(JSON.stringify(next)));
      await renameIntoPlace(staged.metaPath, sidecar, key);
      await durability.syncPlaced(sidecar, paths.root);
    }
    await renameIntoPlace(staged.dataPath, path, key);
    await durability.syncPlaced(path, paths.root);
    // Most writes without attributes (manifests, receipts) never had any: a stat finds that
    // without the error a failed unlink throws. Under the key's lock, no sidecar comes between.
    if (attrs === undefined && statOrUndefined(sidecar) !== undefined && unlinkIfExists(sidecar)) {
      await pruneEmptyDirs(dirname(sidecar), paths.metaDir);
    }
  } finally {
    release();
  }
}

/**
 * Deletes a batch of keys (each only if its ETag still matches), with one folder fsync per folder
 * instead of one per key (200 inputs of one partition: one fsync, not 200). Per key, under its
 * lock: the check and the unlink. Then each folder that lost a file is fsynced once, before the
 * call returns (the protocol records "inputs deleted" next; no delete may come back after a
 * crash). Only then are sidecars removed, each under its key's lock again and only while no new
 * version is there: a sidecar is never gone while the data it describes could still come back.
 * A per-key failure is an outcome (an fsync failure is one for every key of its folder).
 */
export async function deleteBatch(
  store: KeyChanges,
  requests: readonly DeleteRequest[],
  signal: AbortSignal | undefined,
): Promise<DeleteOutcome[]> {
  const { paths, durability } = store;
  const outcomes: DeleteOutcome[] = [];
  // Index of each outcome 'deleted' so far, by the folder its file left.
  const byFolder = new Map<string, number[]>();
  for (const request of requests) {
    signal?.throwIfAborted();
    const outcome = await asOutcome(request.key, () => unlinkChecked(store, request, signal));
    if (outcome.status === 'deleted') {
      const folder = dirname(dataPath(paths, request.key));
      byFolder.set(folder, [...(byFolder.get(folder) ?? []), outcomes.length]);
    }
    outcomes.push(outcome);
  }
  for (const [folder, indexes] of byFolder) {
    const failed = await failureOf(() => durability.syncDir(folder));
    if (failed === undefined) continue;
    for (const i of indexes) outcomes[i] = { key: (outcomes[i] as DeleteOutcome).key, ...failed };
    byFolder.delete(folder);
  }
  for (const [folder, indexes] of byFolder) {
    for (const i of indexes) {
      const { key } = outcomes[i] as DeleteOutcome;
      const failed = await failureOf(() => removeSidecar(store, key, signal));
      if (failed !== undefined) outcomes[i] = { key, ...failed };
    }
    const failed = await failureOf(() => pruneEmptyDirs(folder, paths.root));
    if (failed !== undefined)
      for (const i of indexes) outcomes[i] = { key: (outcomes[i] as DeleteOutcome).key, ...failed };
  }
  return outcomes;
}

/** The check and the unlink of one key's data, under its lock. */
async function unlinkChecked(
  store: KeyChanges,
  request: DeleteRequest,
  signal: AbortSignal | undefined,
): Promise<DeleteOutcome> {
  const { key } = request;
  const path = dataPath(store.paths, key);
  const release = await store.locks.lock(key, signal);
  try {
    const current = statObject(path);
    if (current === undefined) return { key, status: 'not-found' };
    if (request.etag !== undefined && etagOf(current) !== unquote(request.etag)) {
      return { key, status: 'precondition-failed' };
    }
    // Synchronous, right after the check: a producer writing the lake folder directly (not through
    // the store, so not under the lock) could replace the file while a promise call waits its
    // turn in the thread pool, and the delete would take the new version.
    if (!unlinkIfExists(path)) return { key, status: 'not-found' };
    return { key, status: 'deleted' };
  } finally {
    release();
  }
}

/** Removes a deleted key's sidecar, under its lock, unless a new version arrived meanwhile. */
async function removeSidecar(store: KeyChanges, key: string, signal: AbortSignal | undefined): Promise<void> {
  const { paths } = store;
  const sidecar = sidecarPath(paths, key);
  // No sidecar (most inputs: written by their producer, not through the store): nothing to lock.
  if (statOrUndefined(sidecar) === undefined) return;
  const release = await store.locks.lock(key, signal);
  try {
    if (statObject(dataPath(paths, key)) !== undefined) return;
    if (unlinkIfExists(sidecar)) await pruneEmptyDirs(dirname(sidecar), paths.metaDir);
  } finally {
    release();
  }
}

/** A per-key failure as DeleteObjects reports one; anything else (a bug, an abort) is thrown. */
async function failureOf(
  work: () => Promise<unknown>,
): Promise<{ status: 'error'; code: string; message: string } | undefined> {
  try {
    await work();
    return undefined;
  } catch (error) {
    const code = errorCode(error);
    if (code !== undefined && error instanceof Error)
      return { status: 'error', code, message: error.message };
    if (error instanceof TransientStoreError) {
      return { status: 'error', code: error.name, message: error.message };
    }
    throw error;
  }
}

async function asOutcome(key: string, work: () => Promise<DeleteOutcome>): Promise<DeleteOutcome> {
  let outcome: DeleteOutcome | undefined;
  const failed = await failureOf(async () => {
    outcome = await work();
  });
  return failed === undefined ? (outcome as DeleteOutcome) : { key, ...failed };
}
