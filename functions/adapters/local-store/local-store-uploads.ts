/**
 * The local folder store's uploads: every write stages its files in the temp folder under its
 * upload id, `<uploadId>.data` and, with attributes, `<uploadId>.meta.json`. The id names the
 * writer (time, pid, a tag of its host) and, after a `~`, the target key in base64url, so a write
 * creates no file besides its data: creating a file is the costliest metadata call a local write
 * makes (0.45-0.67 ms of kernel CPU in most folders of one VM's ext4 disk, against 0.02 ms for a
 * rename or a link; docs/performance.md, "What a file creation costs here"). A key
 * too long for a file name gets `<uploadId>.intent.json` instead, naming the key and the writer
 * (pid, host). Files a crash left behind are an incomplete upload, reported abandoned once its
 * writer is surely gone, and removed by an abort. A store written before uploads were flat files
 * has `tmp/<uploadId>/` folders holding `intent.json`, `data` and `meta.json`: they are listed and
 * aborted too.
 */

import { createHash, randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, rmdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { errorCode } from '../../core/errors.ts';
import { isPlainObject } from '../../core/is-plain-object.ts';
import type { IncompleteUpload } from '../../core/object-store.ts';
import { goneFromThisHost } from '../process-alive.ts';
import { inFolderOf, statOrUndefined, unlinkIfExists } from './durable-fs.ts';
import { parseJson } from './local-store-sidecar.ts';
import { paced } from './sync-calls.ts';

const INTENT = '.intent.json';
const DATA = '.data';
const META = '.meta.json';
/** Between an upload id's writer part and its key. Not in base64url's alphabet nor in a writer part. */
const KEY_MARK = '~';
/** The longest file name most file systems take (NAME_MAX). */
const MAX_NAME_BYTES = 255;

/** A write in progress: its files in the temp folder, named after its upload id. */
export interface Upload {
  readonly dataPath: string;
  readonly metaPath: string;
  /** Only for a key too long to be named in the upload id. */
  readonly intentPath?: string;
}

function uploadFiles(tmpDir: string, uploadId: string, intent: boolean): Upload {
  const base = join(tmpDir, uploadId);
  return {
    dataPath: `${base}${DATA}`,
    metaPath: `${base}${META}`,
    ...(intent ? { intentPath: `${base}${INTENT}` } : {}),
  };
}

let hostTagOfThisHost: string | undefined;

/** A short tag of a host name, for upload ids (a host name may be 64 bytes). */
function hostTag(host: string): string {
  return createHash('sha256').update(host, 'utf8').digest('hex').slice(0, 8);
}

function thisHostTag(): string {
  hostTagOfThisHost ??= hostTag(hostname());
  return hostTagOfThisHost;
}

/**
 * Starts a write to `key` and returns its files, none created yet: the key is named in the upload
 * id, or, when it is too long for a file name, in an intent file written here (its calls are
 * synchronous: small metadata calls, as sync-calls.ts says).
 */
export function beginUpload(tmpDir: string, key: string, kind: 'put' | 'copy'): Upload {
  const writer = `${Date.now().toString(36)}-${process.pid}-${thisHostTag()}-${randomBytes(8).toString('hex')}`;
  const named = `${writer}${KEY_MARK}${Buffer.from(key, 'utf8').toString('base64url')}`;
  if (Buffer.byteLength(named) + META.length <= MAX_NAME_BYTES) return uploadFiles(tmpDir, named, false);
  const upload = uploadFiles(tmpDir, writer, true);
  const intentPath = upload.intentPath as string;
  const intent = JSON.stringify({ key, kind, pid: process.pid, host: hostname() });
  inFolderOf(intentPath, () => writeFileSync(intentPath, intent, { flag: 'wx' }));
  return upload;
}

/**
 * Removes an upload's files; nothing if they are gone. The intent goes last, so an upload a crash
 * leaves half removed still names its key. Once `committed`, its data and attributes were renamed
 * into place: only an intent is left to remove.
 */
export function removeUpload(upload: Upload, committed = false): void {
  if (!committed) {
    unlinkIfExists(upload.dataPath);
    unlinkIfExists(upload.metaPath);
  }
  if (upload.intentPath !== undefined) unlinkIfExists(upload.intentPath);
}

/** What a folder upload holds (its `data`, `meta.json`), its intent last. */
const FOLDER_FILES = ['data', 'meta.json', 'intent.json'];
const NOT_JUST_FILES = new Set(['ENOTEMPTY', 'EEXIST', 'EISDIR', 'EPERM', 'ENOTDIR']);

/**
 * Removes a folder upload and all it holds; nothing if it is gone. The known names are unlinked
 * and the folder removed, the intent last; anything else in it falls back to the recursive rm.
 */
function removeUploadFolder(dir: string): void {
  try {
    for (const name of FOLDER_FILES) unlinkIfExists(join(dir, name));
    rmdirSync(dir);
  } catch (error) {
    if (errorCode(error) === 'ENOENT') return;
    // Not empty, a name above is a folder (unlink: EISDIR, or EPERM on some systems), or `dir` is a file.
    if (!NOT_JUST_FILES.has(errorCode(error) ?? '')) throw error;
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function listIncompleteUploads(tmpDir: string, prefix: string): Promise<IncompleteUpload[]> {
  await paced();
  let entries: string[];
  try {
    entries = readdirSync(tmpDir);
  } catch (error) {
    if (errorCode(error) === 'ENOENT') return [];
    throw error;
  }
  const uploads: IncompleteUpload[] = [];
  // An upload named with its key is listed once, by its data or (left alone by a crashed abort)
  // its attributes.
  const named = new Set<string>();
  for (const entry of entries) {
    // Each entry is a few synchronous calls: a tmp folder of thousands of uploads still yields.
    const suffix = entry.endsWith(DATA) ? DATA : entry.endsWith(META) ? META : undefined;
    if (suffix !== undefined) {
      const uploadId = entry.slice(0, -suffix.length);
      // An upload with an intent is listed by its intent.
      if (!uploadId.includes(KEY_MARK) || named.has(uploadId)) continue;
      named.add(uploadId);
      await paced();
      const upload = namedUpload(tmpDir, uploadId, entry);
      if (upload?.key.startsWith(prefix)) uploads.push(upload);
      continue;
    }
    await paced();
    const flat = entry.endsWith(INTENT);
    const uploadId = flat ? entry.slice(0, -INTENT.length) : entry;
    const intentPath = flat ? join(tmpDir, entry) : join(tmpDir, entry, 'intent.json');
    let key = '';
    let initiated: Date;
    let abandoned: boolean;
    try {
      const text = readFileSync(intentPath, 'utf8');
      initiated = statSync(intentPath).mtime;
      key = parseIntentKey(text) ?? '';
      abandoned = writerGone(text, uploadId);
    } catch (error) {
      const code = errorCode(error);
      if (code === 'ENOTDIR') continue; // not an upload folder
      if (code !== 'ENOENT') throw error;
      if (flat) continue; // finished meanwhile
      // Crashed (or is) between creating the folder and writing its intent: the target key is
      // unknown, so it is reported under '' and only a whole-store sweep cleans it up.
      const folder = statOrUndefined(join(tmpDir, uploadId));
      if (folder === undefined) continue; // finished meanwhile
      initiated = folder.mtime;
      abandoned = goneFromThisHost({ pid: uploadIdPid(uploadId) });
    }
    if (key.startsWith(prefix)) uploads.push({ key, uploadId, initiated, abandoned });
  }
  uploads.sort(
    (a, b) => a.initiated.getTime() - b.initiated.getTime() || compareUtf8(a.uploadId, b.uploadId),
  );
  return uploads;
}

/** The upload named `uploadId` (writer and key), from its file `entry`; undefined once it is gone. */
function namedUpload(tmpDir: string, uploadId: string, entry: string): IncompleteUpload | undefined {
  const at = uploadId.indexOf(KEY_MARK);
  const [, pid, tag] = uploadId.slice(0, at).split('-');
  const key = Buffer.from(uploadId.slice(at + KEY_MARK.length), 'base64url').toString('utf8');
  const file = statOrUndefined(join(tmpDir, entry));
  if (file === undefined) return undefined; // finished meanwhile
  // A tag of another host names a writer this host cannot see: never gone.
  const host = tag === thisHostTag() ? hostname() : `another host (tag ${tag})`;
  return {
    key,
    uploadId,
    initiated: file.mtime,
    abandoned: goneFromThisHost({ pid: Number(pid), host }),
  };
}

export async function abortIncompleteUpload(tmpDir: string, upload: IncompleteUpload): Promise<void> {
  const id = upload.uploadId;
  if (id === '' || id === '.' || id === '..' || id.includes('/') || id.includes('\\') || id.includes('\0')) {
    throw new Error(`abortIncompleteUpload: invalid upload id ${JSON.stringify(id)}`);
  }
  // Recovery aborts one upload after another: each lets the event loop run (its rm is synchronous).
  await paced();
  // Idempotent: a finished or already aborted upload is simply gone.
  const folder = join(tmpDir, id);
  if (statOrUndefined(folder)?.isDirectory()) removeUploadFolder(folder);
  else removeUpload(uploadFiles(tmpDir, id, !id.includes(KEY_MARK)));
}

function compareUtf8(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

function parseIntentKey(text: string): string | undefined {
  const value = parseJson(text);
  return isPlainObject(value) && typeof value.key === 'string' ? value.key : undefined;
}

/** Whether the process that started an upload is gone (a writer on another host is unknown: not gone). */
function writerGone(intentText: string, uploadId: string): boolean {
  const intent = parseJson(intentText);
  // A writer killed while writing its intent leaves it empty or cut short: the upload id names
  // the writer's pid too (see beginUpload).
  if (!isPlainObject(intent) || typeof intent.pid !== 'number')
    return goneFromThisHost({ pid: uploadIdPid(uploadId) });
  return goneFromThisHost({
    pid: intent.pid,
    ...(intent.host === undefined ? {} : { host: String(intent.host) }),
  });
}

/** The writer's pid in an upload id (`<time>-<pid>-<random>`), NaN if it has none. */
function uploadIdPid(uploadId: string): number {
  return Number(uploadId.split('-')[1]);
}
