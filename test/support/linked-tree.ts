/**
 * A folder of files kept as a template and lent out as hard links (the simulation's lake, the
 * recovery sweep's cut states). A link shares the template file's inode, so each object keeps its
 * ETag (device, inode, size, mtime); the store never writes a file in place (a new file is renamed
 * over the old), and `changedFiles` proves no borrower wrote through a link.
 */

import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { link, mkdir, readdir } from 'node:fs/promises';
import { join, relative } from 'node:path';

/** The files under `dir`, as paths relative to it, sorted. */
export async function filesUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) out.push(relative(dir, join(entry.parentPath, entry.name)));
  }
  return out.sort();
}

/** The SHA-256 of a file's bytes (also the lake checker's key for a file's row ids). */
export function fileHash(path: string): string {
  return createHash('sha256').update(readFileSync(path)).digest('hex');
}

/** Each file under `dir` (relative path) with the hash of its bytes. */
export async function hashFiles(dir: string): Promise<Map<string, string>> {
  const hashes = new Map<string, string>();
  for (const file of await filesUnder(dir)) hashes.set(file, fileHash(join(dir, file)));
  return hashes;
}

/** Hard links at `to` for each of `files` (relative paths) under `from`. */
export async function linkFiles(from: string, to: string, files: Iterable<string>): Promise<void> {
  for (const file of files) {
    await mkdir(join(to, file, '..'), { recursive: true });
    await link(join(from, file), join(to, file));
  }
}

/** The files of `hashes` whose bytes under `dir` are no longer the ones hashed. */
export async function changedFiles(dir: string, hashes: ReadonlyMap<string, string>): Promise<string[]> {
  const changed: string[] = [];
  for (const [file, hash] of hashes) if (fileHash(join(dir, file)) !== hash) changed.push(file);
  return changed;
}
