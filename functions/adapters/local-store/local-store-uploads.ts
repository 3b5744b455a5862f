/**
 * The local folder store's uploads: every write stages in its own folder `tmp/<uploadId>/`, whose
 * `intent.json` names the target key and the writer (pid, host). A folder a crash left behind is an
 * incomplete upload, reported abandoned once its writer is surely gone, and removed by an abort.
 */

import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, rmdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import type { IncompleteUpload } from '../../core/object-store.ts';
import { processAlive } from '../process-alive.ts';
import { errorCode, statOrUndefined, unlinkIfExists } from './durable-fs.ts';
import { isRecord, parseJson } from './local-store-sidecar.ts';
import { paced } from './sync-calls.ts';

/**
 * Creates the upload folder of a write to `key` and returns its path. Its calls, and the listing's,
 * are synchronous: small metadata calls, as sync-calls.ts says.
 */
export function beginUpload(tmpDir: string, key: string, kind: 'put' | 'copy'): string {
  const uploadId = `${Date.now().toString(36)}-${process.pid}-${randomBytes(8).toString('hex')}`;
  const dir = join(tmpDir, uploadId);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'intent.json'), JSON.stringify({ key, kind, pid: process.pid, host: hostname() }), {
    flag: 'wx',
  });
  return dir;
}

/** What an upload folder holds (stageData's `data`, commit's `meta.json`), its intent last. */
const UPLOAD_FILES = ['data', 'meta.json', 'intent.json'];
const NOT_JUST_FILES = new Set(['ENOTEMPTY', 'EEXIST', 'EISDIR', 'EPERM', 'ENOTDIR']);

/**
 * Removes an upload folder and all it holds; nothing if it is gone. A finished write's folder
 * holds only its intent, so the known names are unlinked and the folder removed: four calls where
 * a recursive rm makes nine (a failed rmdir, a readdir, an lstat per entry), and the intent goes
 * last, so a folder a crash leaves half removed still names its key. Anything else in it falls
 * back to the recursive rm.
 */
export function removeUpload(dir: string): void {
  try {
    for (const name of UPLOAD_FILES) unlinkIfExists(join(dir, name));
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
  for (const uploadId of entries) {
    // Each entry is a few synchronous calls: a tmp folder of thousands of uploads still yields.
    await paced();
    const intentPath = join(tmpDir, uploadId, 'intent.json');
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
      // Crashed (or is) between creating the folder and writing its intent: the target key is
      // unknown, so it is reported under '' and only a whole-store sweep cleans it up.
      const folder = statOrUndefined(join(tmpDir, uploadId));
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

export async function abortIncompleteUpload(tmpDir: string, upload: IncompleteUpload): Promise<void> {
  const id = upload.uploadId;
  if (id === '' || id === '.' || id === '..' || id.includes('/') || id.includes('\\') || id.includes('\0')) {
    throw new Error(`abortIncompleteUpload: invalid upload id ${JSON.stringify(id)}`);
  }
  // Recovery aborts one upload after another: each lets the event loop run (its rm is synchronous).
  await paced();
  // Idempotent: a finished or already aborted upload is simply gone.
  removeUpload(join(tmpDir, id));
}

function compareUtf8(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

function parseIntentKey(text: string): string | undefined {
  const value = parseJson(text);
  return isRecord(value) && typeof value.key === 'string' ? value.key : undefined;
}

/** Whether the process that started an upload is gone (a writer on another host is unknown: not gone). */
function writerGone(intentText: string, uploadId: string): boolean {
  const intent = parseJson(intentText);
  // A writer killed while writing its intent leaves it empty or cut short: the upload id names
  // the writer's pid too (see beginUpload).
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
