/**
 * The local folder store's listings: a walk of the folder tree that yields keys in S3's order
 * (UTF-8 bytes), skipping the reserved folder, and the folders under a prefix that hold an object.
 */

import { type Dirent, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { errorCode } from '../../core/errors.ts';
import type { ListOptions, ObjectSummary } from '../../core/object-store.ts';
import { statObject, statOrUndefined } from './durable-fs.ts';
import { etagOf, RESERVED_DIR } from './local-store-keys.ts';
import { paced } from './sync-calls.ts';

/** The objects under `prefix` (after `startAfter`, when given), as ObjectStore.list yields them. */
export async function* listObjects(
  root: string,
  prefix: string,
  options: ListOptions,
): AsyncIterable<ObjectSummary> {
  const { startAfter } = options;
  if (startAfter === undefined) {
    yield* listUnder(root, prefix, options);
    return;
  }
  // S3 compares keys as UTF-8 bytes; the walk yields them in that order.
  const after = Buffer.from(startAfter, 'utf8');
  for await (const object of listUnder(root, prefix, options)) {
    if (Buffer.compare(Buffer.from(object.key, 'utf8'), after) > 0) yield object;
  }
}

/** The folders under `prefix` that hold an object (a folder left empty is none, as on S3). */
export async function* listFolders(
  root: string,
  prefix: string,
  options: { readonly signal?: AbortSignal },
): AsyncIterable<string> {
  if (prefix !== '' && !prefix.endsWith('/'))
    throw new RangeError(`listFolders: "${prefix}" must end in "/"`);
  const dirPart = prefix.slice(0, -1);
  if (holdsNoKey(dirPart)) return;
  const dirAbs = join(root, ...(dirPart === '' ? [] : dirPart.split('/')));
  const dirents = entriesOf(dirAbs);
  if (dirents === undefined) return;
  const names = dirents
    .filter((d) => d.isDirectory() && !(prefix === '' && d.name === RESERVED_DIR))
    .map((d) => d.name)
    .sort((a, b) => Buffer.compare(Buffer.from(`${a}/`), Buffer.from(`${b}/`)));
  for (const name of names) {
    for await (const _ of walk(join(dirAbs, name), `${prefix}${name}/`, '', options.signal)) {
      yield `${prefix}${name}/`;
      break;
    }
  }
}

async function* listUnder(
  root: string,
  prefix: string,
  options: { readonly signal?: AbortSignal },
): AsyncIterable<ObjectSummary> {
  const { signal } = options;
  signal?.throwIfAborted();
  const slash = prefix.lastIndexOf('/');
  const dirPart = slash < 0 ? '' : prefix.slice(0, slash);
  const namePrefix = prefix.slice(slash + 1);
  if (prefix.includes('\0')) return;
  if (holdsNoKey(dirPart)) return;
  const dirAbs = dirPart === '' ? root : join(root, ...dirPart.split('/'));
  yield* walk(dirAbs, dirPart === '' ? '' : `${dirPart}/`, namePrefix, signal);
}

/** No valid key lies under '', '.', '..' segments or inside the reserved folder. */
function holdsNoKey(dirPart: string): boolean {
  if (dirPart === '') return false;
  const segments = dirPart.split('/');
  return segments.some((s) => s === '' || s === '.' || s === '..') || segments[0] === RESERVED_DIR;
}

/**
 * A folder's entries, or undefined when it does not exist (or vanished while we walked). Read
 * synchronously, as the walk's stats are (sync-calls.ts says why).
 */
function entriesOf(dirAbs: string): Dirent[] | undefined {
  try {
    return readdirSync(dirAbs, { withFileTypes: true });
  } catch (error) {
    const code = errorCode(error);
    if (code === 'ENOENT' || code === 'ENOTDIR') return undefined;
    throw error;
  }
}

async function* walk(
  dirAbs: string,
  keyPrefix: string,
  namePrefix: string,
  signal: AbortSignal | undefined,
): AsyncGenerator<ObjectSummary> {
  signal?.throwIfAborted();
  await paced();
  const dirents = entriesOf(dirAbs);
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
      const target = statOrUndefined(join(dirAbs, d.name));
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
      yield* walk(abs, `${keyPrefix}${child.name}/`, '', signal);
      continue;
    }
    await paced();
    const st = statObject(abs);
    if (st === undefined) continue; // deleted while listing
    yield {
      key: `${keyPrefix}${child.name}`,
      size: Number(st.size),
      etag: etagOf(st),
      lastModified: st.mtime,
    };
  }
}
