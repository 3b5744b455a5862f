/**
 * What names what in the local folder store: which keys it can hold, the paths a key maps to
 * (its data file under the root, its sidecar under `.compactor-store/meta/`), and the ETag that
 * names a data file's version.
 */

import { hash } from 'node:crypto';
import type { BigIntStats } from 'node:fs';
import { join, resolve, sep } from 'node:path';

/** Top-level folder reserved for the store's own bookkeeping; keys may not start with it. */
export const RESERVED_DIR = '.compactor-store';

const MAX_KEY_BYTES = 1024;
// File systems cap a name at 255 bytes; the last segment also gets the sidecar's '.json'.
const MAX_SEGMENT_BYTES = 255;
const SIDECAR_SUFFIX = '.json';
const MAX_LAST_SEGMENT_BYTES = MAX_SEGMENT_BYTES - SIDECAR_SUFFIX.length;

/** Where a store's files live: the data under `root`, its bookkeeping under `RESERVED_DIR`. */
export interface StorePaths {
  readonly root: string;
  /** One folder per write in progress (an upload). */
  readonly tmpDir: string;
  /** The sidecars. */
  readonly metaDir: string;
  readonly locksDir: string;
}

export function storePaths(rootDir: string): StorePaths {
  const root = resolve(rootDir);
  const reserved = join(root, RESERVED_DIR);
  return {
    root,
    tmpDir: join(reserved, 'tmp'),
    metaDir: join(reserved, 'meta'),
    locksDir: join(reserved, 'locks'),
  };
}

/**
 * `key` under `folder`. A key assertKey accepts has no empty, `.` or `..` segment, so this is what
 * path.join would make, without its normalizing pass and the array it splits the key into.
 */
function under(folder: string, key: string): string {
  const tail = sep === '/' ? key : key.replaceAll('/', sep);
  return folder.endsWith(sep) ? `${folder}${tail}` : `${folder}${sep}${tail}`;
}

export function dataPath(paths: StorePaths, key: string): string {
  return under(paths.root, key);
}

export function sidecarPath(paths: StorePaths, key: string): string {
  return `${under(paths.metaDir, key)}${SIDECAR_SUFFIX}`;
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

export function etagOf(st: BigIntStats): string {
  // Every write renames a new file into place, so (inode, size, mtime) changes on every replace.
  // crypto.hash: the one-shot form, the same digest at half the cost of a Hash object.
  return hash('sha256', `${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}`, 'hex').slice(0, 32);
}

export function unquote(etag: string): string {
  return etag.length >= 2 && etag.startsWith('"') && etag.endsWith('"') ? etag.slice(1, -1) : etag;
}
