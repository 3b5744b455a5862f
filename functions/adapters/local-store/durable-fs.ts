/**
 * Durable file-system primitives of the local folder store (local-store.ts): a file is written and
 * fsynced before it is renamed or linked into place, and the folder is fsynced after, so a crash
 * leaves either the old file or the new one, never a torn one.
 *
 * The metadata calls (stat, link, unlink, mkdir, and the open and close of a folder to fsync)
 * are synchronous, as the reads' are (sync-calls.ts says why). What writes, copies or fsyncs data
 * stays a promise call, so a large or durable write never holds the event loop; so does
 * openObject, whose handle a copy streams from. So do the rename into place, the folder made
 * when it finds none, and the prune of emptied folders: they change the folders every write
 * passes through (the store's `tmp`, the new folders of a job), where a rename waits for a create
 * in the same folder to finish allocating its inode; over 2,400 small partitions on this VM's
 * disk, made as promise calls they let the event loop run meanwhile, and the run took 6-8% less
 * time (three rounds, alternated).
 */

import { randomBytes } from 'node:crypto';
import fs, {
  type BigIntStats,
  closeSync,
  constants,
  fstatSync,
  linkSync,
  lstatSync,
  mkdirSync,
  openSync,
  renameSync,
  type Stats,
  statSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { copyFile, open, rename as renameAsync, rmdir as rmdirAsync } from 'node:fs/promises';
import { dirname, sep } from 'node:path';
import { crc32 } from 'node:zlib';
import { errorCode } from '../../core/errors.ts';

const COPY_CHUNK_BYTES = 1 << 20;

const MAX_RENAME_ATTEMPTS = 20;

export function isMissing(error: unknown): boolean {
  const code = errorCode(error);
  return code === 'ENOENT' || code === 'ENOTDIR';
}

/** The stats of the object's file; undefined when there is no file (or a folder) there. */
export function statObject(path: string): BigIntStats | undefined {
  try {
    // throwIfNoEntry: most paths looked up are missing ones (a key's sidecar, a new key), and a
    // thrown error costs the event loop several times the stat itself.
    const st = statSync(path, { bigint: true, throwIfNoEntry: false });
    return st?.isFile() ? st : undefined;
  } catch (error) {
    if (isMissing(error)) return undefined;
    throw error;
  }
}

/** The stats of what is at `path`; undefined when nothing is, or a parent is a file. */
export function statOrUndefined(path: string): Stats | undefined {
  try {
    return statSync(path, { throwIfNoEntry: false });
  } catch (error) {
    if (isMissing(error)) return undefined;
    throw error;
  }
}

export async function openObject(
  path: string,
): Promise<{ handle: FileHandle; stat: BigIntStats } | undefined> {
  let handle: FileHandle;
  try {
    handle = await open(path, 'r');
  } catch (error) {
    if (isMissing(error) || errorCode(error) === 'EISDIR') return undefined;
    throw error;
  }
  let keep = false;
  try {
    const st = await handle.stat({ bigint: true });
    if (!st.isFile()) return undefined;
    keep = true;
    return { handle, stat: st };
  } finally {
    if (!keep) await handle.close();
  }
}

/**
 * link(2) errors that mean no hard link can be made here, so the file is copied instead: another
 * file system (EXDEV), one without hard links or a protected one (EPERM, EOPNOTSUPP, ENOTSUP,
 * ENOSYS), or an inode at its link limit (EMLINK). https://man7.org/linux/man-pages/man2/link.2.html
 */
const NO_HARD_LINK = new Set(['EXDEV', 'EPERM', 'EOPNOTSUPP', 'ENOTSUP', 'ENOSYS', 'EMLINK']);

/**
 * link(2) of `source` at `path`: the linked file's stats, or undefined where no hard link can be
 * made here (NO_HARD_LINK) or `source` is a symlink, which link(2) links itself and whose target
 * may be relative to its folder (the link is removed again).
 */
export function hardLink(source: string, path: string): BigIntStats | undefined {
  try {
    linkSync(source, path);
  } catch (error) {
    const code = errorCode(error);
    if (code !== undefined && NO_HARD_LINK.has(code)) return undefined;
    throw error;
  }
  const linked = lstatSync(path, { bigint: true });
  if (linked.isFile()) return linked;
  unlinkSync(path);
  return undefined;
}

/**
 * A hard link of `source` at `path`, replacing what is there (hardLink): the linked inode's stats,
 * which say which version `path` holds, or undefined where no hard link can be made here.
 */
export function linkInPlace(source: string, path: string): BigIntStats | undefined {
  try {
    return hardLink(source, path);
  } catch (error) {
    if (errorCode(error) !== 'EEXIST') throw error;
    unlinkSync(path);
    return hardLink(source, path);
  }
}

/**
 * A copy of the file at `source` at `path` (a copy-on-write clone where the file system can
 * clone), replacing what is there; nothing is ever written through an existing `path` (it may be a
 * link to an object). Returns the source's stats after the copy: the version before the copy, if
 * unchanged, is then the one copied; undefined if the source is gone.
 */
export async function copyInPlace(source: string, path: string): Promise<BigIntStats | undefined> {
  unlinkIfExists(path);
  await copyFile(source, path, constants.COPYFILE_EXCL | constants.COPYFILE_FICLONE);
  return statObject(source);
}

export async function writeAll(out: FileHandle, chunk: Uint8Array): Promise<void> {
  let offset = 0;
  while (offset < chunk.length) {
    const { bytesWritten } = await out.write(chunk, offset, chunk.length - offset, null);
    offset += bytesWritten;
  }
}

/**
 * Reads src from its current position to its end, writing each chunk to `out` when one is given
 * (a copy), and returns the CRC32 of what it read.
 */
export async function readThrough(
  src: FileHandle,
  signal: AbortSignal | undefined,
  out?: FileHandle,
): Promise<number> {
  const buffer = Buffer.allocUnsafe(COPY_CHUNK_BYTES);
  let crc = 0;
  for (;;) {
    signal?.throwIfAborted();
    // Sequential reads (position null) so pipes work as put sources too.
    const { bytesRead } = await src.read(buffer, 0, buffer.length, null);
    if (bytesRead === 0) return crc;
    const chunk = buffer.subarray(0, bytesRead);
    crc = crc32(chunk, crc);
    if (out !== undefined) await writeAll(out, chunk);
  }
}

/** The largest body writeNewFile is given: a manifest, a receipt, a sidecar, a plan. */
export const SMALL_BODY_BYTES = 1 << 20;

/**
 * Creates `path` holding `bytes` (at most SMALL_BODY_BYTES) and, with `sync`, fsyncs it; returns
 * its stats. The create, which allocates an inode (its costly part on some disks), and the fsync
 * are promise calls; the write of a small body and the close are made synchronously: two
 * thread-pool hops, not four.
 */
export async function writeNewFile(path: string, bytes: Uint8Array, sync: boolean): Promise<BigIntStats> {
  if (bytes.length > SMALL_BODY_BYTES)
    throw new RangeError(`writeNewFile: ${bytes.length} bytes is not a small body`);
  // fs.open and fs.fsync looked up at the call, so a test can count them.
  const fd = await new Promise<number>((resolve, reject) =>
    fs.open(path, 'wx', (error, opened) => (error ? reject(error) : resolve(opened))),
  );
  try {
    for (let offset = 0; offset < bytes.length; ) offset += writeSync(fd, bytes, offset);
    if (sync) await fsyncFd(fd);
    return fstatSync(fd, { bigint: true });
  } finally {
    closeSync(fd);
  }
}

function fsyncFd(fd: number): Promise<void> {
  return new Promise<void>((resolve, reject) => fs.fsync(fd, (error) => (error ? reject(error) : resolve())));
}

/**
 * rename(2) into place, creating parent folders. A missing folder is made and the file renamed
 * into it while the folder and those above it are held (holdFolders), so no prune this process
 * starts meanwhile removes them; one already running may remove one once, and another process's
 * prune may, between our mkdir and rename, or while mkdir makes the path one folder at a time:
 * each is retried. A folder made here is durable only once its parent is fsynced: DurableFolders
 * finds it for the caller.
 */
export async function renameIntoPlace(from: string, to: string, key: string): Promise<void> {
  try {
    await renameAsync(from, to);
    return;
  } catch (error) {
    if (errorCode(error) !== 'ENOENT') throw placingError(error, key);
    // The staged file itself is gone: the upload was aborted.
    if (statOrUndefined(from) === undefined) throw error;
  }
  const release = holdFolders(dirname(to));
  try {
    await renameMakingFolders(from, to, key);
  } finally {
    release();
  }
}

function placingError(error: unknown, key: string): unknown {
  const code = errorCode(error);
  if (code !== 'ENOTDIR' && code !== 'EISDIR') return error;
  return new Error(
    `cannot store ${key}: a folder of that name holds other objects, or one of its parent ` +
      'folders is an object (a local folder cannot hold both "a" and "a/b")',
    { cause: error },
  );
}

/** Makes `to`'s folder and renames `from` into it, again while another process prunes it. */
async function renameMakingFolders(from: string, to: string, key: string): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      // fs.promises.mkdir looked up at the call, so a test can stand in for a concurrent prune.
      await fs.promises.mkdir(dirname(to), { recursive: true });
    } catch (mkdirError) {
      const mkdirCode = errorCode(mkdirError);
      if (mkdirCode === 'ENOENT' && attempt < MAX_RENAME_ATTEMPTS) continue;
      if (mkdirCode === 'EEXIST' || mkdirCode === 'ENOTDIR') {
        // mkdir -p also fails so when a prune removes a folder between its mkdir and its stat
        // of that folder: only an object where a folder should be is the caller's to fix.
        if (!objectInPath(dirname(to)) && attempt < MAX_RENAME_ATTEMPTS) continue;
        throw new Error(`cannot store ${key}: one of its parent folders is an object`, {
          cause: mkdirError,
        });
      }
      throw mkdirError;
    }
    try {
      await renameAsync(from, to);
      return;
    } catch (error) {
      if (errorCode(error) !== 'ENOENT' || attempt >= MAX_RENAME_ATTEMPTS) throw placingError(error, key);
      if (statOrUndefined(from) === undefined) throw error;
    }
  }
}

/** The folders this process is making and renaming a file into, each with how many such writes. */
const heldFolders = new Map<string, number>();

/**
 * Holds `dir` and every folder above it until the returned release is called: a prune of this
 * process (pruneEmptyDirs) leaves a held folder. As promise calls, a prune and a write needing
 * the folder would otherwise interleave, and the prune could remove it between the write's mkdir
 * and its rename, again and again. Writes and prunes of folders no write holds run at once.
 */
function holdFolders(dir: string): () => void {
  const held: string[] = [];
  for (let folder = dir; ; folder = dirname(folder)) {
    held.push(folder);
    heldFolders.set(folder, (heldFolders.get(folder) ?? 0) + 1);
    if (dirname(folder) === folder) break;
  }
  return () => {
    for (const folder of held) {
      const left = (heldFolders.get(folder) ?? 1) - 1;
      if (left === 0) heldFolders.delete(folder);
      else heldFolders.set(folder, left);
    }
  };
}

/**
 * Whether `dir` or a folder above it is something other than a folder (an object's file); a link
 * to a folder counts as a folder.
 */
function objectInPath(dir: string): boolean {
  for (let folder = dir; ; folder = dirname(folder)) {
    // undefined also where a folder above is a file (ENOTDIR): the walk goes on up to it.
    const st = statOrUndefined(folder);
    if (st !== undefined) return !st.isDirectory();
    if (dirname(folder) === folder) return false;
  }
}

/**
 * A folder as found: its path and identity (inode and birth time); no identity where the file
 * system keeps no birth time, since an inode freed and used again for a folder made anew would
 * look known.
 */
interface FolderFound {
  readonly path: string;
  readonly id: string | undefined;
}

/**
 * The folders whose own entry, in their parent, this process has made durable (fsynced the parent
 * once they existed). A file renamed into a folder survives power loss only if the folder and each
 * one above it does: one made a moment ago, by this process or by another, may not yet, since its
 * maker's fsync of the parent may still be to come. Known by path and identity, so a folder
 * removed and made again, by any process, is new again.
 */
export class DurableFolders {
  readonly #known = new Map<string, string>();

  /** The folders from `dir` up to `root` (not included) not known durable, innermost first. */
  unknown(dir: string, root: string): FolderFound[] {
    const found: FolderFound[] = [];
    const inside = root.endsWith(sep) ? root : `${root}${sep}`;
    for (let folder = dir; folder.startsWith(inside) && folder !== root; folder = dirname(folder)) {
      const st = statSync(folder, { bigint: true, throwIfNoEntry: false });
      // Removed since (emptied by a delete): nothing left under it to make durable.
      if (st === undefined) break;
      const id = st.birthtimeNs === 0n ? undefined : `${st.ino}:${st.birthtimeNs}`;
      if (id !== undefined && this.#known.get(folder) === id) break;
      found.push({ path: folder, id });
    }
    return found;
  }

  /** Records `folders` as durable (their parents were fsynced after they were found), those it can know. */
  remember(folders: readonly FolderFound[]): void {
    for (const { path, id } of folders) if (id !== undefined) this.#known.set(path, id);
  }
}

/**
 * fsync(2) of a folder. Opening and closing it are metadata calls, made synchronously as the
 * others are; the fsync, which may wait on the disk, is a promise call: one thread-pool hop, not
 * three (each costs the event loop tens of microseconds, and a chain fsyncs some 14 folders).
 */
export async function fsyncDir(dir: string): Promise<void> {
  const fd = openSync(dir, 'r');
  try {
    await fsyncFd(fd);
  } catch (error) {
    // Some file systems cannot fsync a directory; the rename is then as durable as they allow.
    if (errorCode(error) !== 'EINVAL') throw error;
  } finally {
    closeSync(fd);
  }
}

/** A folder's fsyncs in this process: whether one is running, and who waits for the next. */
interface FolderSync {
  running: boolean;
  waiting: { done: () => void; failed: (e: unknown) => void }[];
}

const folderSyncs = new Map<string, FolderSync>();

/**
 * fsyncDir, shared by the callers of one folder: an fsync of a folder makes every change to it
 * made before the fsync began durable, so callers that arrive while one runs share the next one,
 * started when it ends, instead of each making their own. Several jobs writing one folder at once
 * (the manifests of a table's hours) then wait on one fsync, not one each.
 */
export function fsyncDirShared(dir: string): Promise<void> {
  return new Promise<void>((done, failed) => {
    let folder = folderSyncs.get(dir);
    if (folder === undefined) {
      folder = { running: false, waiting: [] };
      folderSyncs.set(dir, folder);
    }
    folder.waiting.push({ done, failed });
    if (!folder.running) startFolderSync(dir, folder);
  });
}

function startFolderSync(dir: string, folder: FolderSync): void {
  const round = folder.waiting;
  folder.waiting = [];
  folder.running = true;
  fsyncDir(dir)
    .then(
      () => {
        for (const w of round) w.done();
      },
      (error: unknown) => {
        for (const w of round) w.failed(error);
      },
    )
    .finally(() => {
      folder.running = false;
      if (folder.waiting.length > 0) startFolderSync(dir, folder);
      else folderSyncs.delete(dir);
    });
}

/**
 * Runs `make`, which creates `path`; on ENOENT makes its folder (made by the first file, or again
 * after a reset) and runs `make` once more. The folder is made whether or not it is there by now:
 * another process may have made it since `make` failed.
 */
export function inFolderOf<T>(path: string, make: () => T): T {
  try {
    return make();
  } catch (error) {
    makeFolderIfMissing(path, error);
    return make();
  }
}

/** inFolderOf for a `make` that settles later. */
export async function inFolderOfAsync<T>(path: string, make: () => Promise<T>): Promise<T> {
  try {
    return await make();
  } catch (error) {
    makeFolderIfMissing(path, error);
    return make();
  }
}

function makeFolderIfMissing(path: string, error: unknown): void {
  if (errorCode(error) !== 'ENOENT') throw error;
  mkdirSync(dirname(path), { recursive: true });
}

export function unlinkIfExists(path: string): boolean {
  try {
    unlinkSync(path);
    return true;
  } catch (error) {
    if (isMissing(error)) return false;
    throw error;
  }
}

/**
 * S3 has no folders: remove folders a delete left empty, up to (not including) `stopAt`, and
 * short of any folder a write of this process holds (holdFolders): that write is about to fill it.
 */
export async function pruneEmptyDirs(from: string, stopAt: string): Promise<void> {
  for (let dir = from; dir !== stopAt && dir.startsWith(stopAt + sep); dir = dirname(dir)) {
    if (heldFolders.has(dir)) return;
    try {
      await rmdirAsync(dir);
    } catch (error) {
      const code = errorCode(error);
      // Not empty (a concurrent write landed there): done. Gone already: keep going up.
      if (code === 'ENOTEMPTY' || code === 'EEXIST') return;
      if (code !== 'ENOENT') throw error;
    }
  }
}

export function tryLink(from: string, to: string): boolean {
  try {
    linkSync(from, to);
    return true;
  } catch (error) {
    if (errorCode(error) === 'EEXIST') return false;
    throw error;
  }
}

/** Removes `path` only if it is still the file `ino`; puts back anything else it took. */
export function removeIfSame(path: string, ino: number): void {
  const aside = `${path}.stale-${randomBytes(8).toString('hex')}`;
  try {
    renameSync(path, aside);
  } catch (error) {
    if (isMissing(error)) return;
    throw error;
  }
  if (lstatSync(aside).ino !== ino) {
    // Took a fresh one: restore it (if someone raced in meanwhile, theirs stands).
    tryLink(aside, path);
  }
  unlinkSync(aside);
}
