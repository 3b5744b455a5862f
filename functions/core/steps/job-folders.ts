/**
 * The compact step's local job folders (its downloads, and an `out` folder for its outputs), kept
 * for the next job of the process once emptied. Creating a folder is the costliest metadata call a
 * small job makes: on ext4 it allocates an inode by scanning for a free one away from recently
 * deleted ones, and over thousands of small partitions the two folders each job made took a fifth
 * of the main thread. Each folder is handed to one job at a time. One gone meanwhile (the work
 * folder was reset or removed) is made again.
 */

import { lstatSync, mkdirSync, mkdtempSync, readdirSync, rmSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { errorCode } from '../errors.ts';

export interface JobFolder {
  /** The job's own folder: its downloads go here. */
  readonly dir: string;
  /** An empty folder in `dir` for the job's outputs. */
  readonly outDir: string;
}

const OUTPUTS = 'out';

/** Folders kept per work folder: more than a process runs jobs at once. */
const MAX_KEPT = 64;

/** Work folders remembered; past this the oldest one's kept folders are forgotten (left on disk). */
const MAX_WORK_DIRS = 64;

/** Empty job folders ready for the next job, by work folder. */
const kept = new Map<string, string[]>();

/** An empty job folder under `workDir`: a kept one still there, else a new one. */
export function takeJobFolder(workDir: string): JobFolder {
  const free = kept.get(workDir);
  for (let dir = free?.pop(); dir !== undefined; dir = free?.pop()) {
    const outDir = join(dir, OUTPUTS);
    if (isFolder(outDir)) return { dir, outDir };
  }
  mkdirSync(workDir, { recursive: true });
  const dir = mkdtempSync(join(workDir, 'job-'));
  const outDir = join(dir, OUTPUTS);
  mkdirSync(outDir);
  return { dir, outDir };
}

/**
 * Empties a job's folder and keeps it for the next job. One that cannot be emptied is removed
 * instead (an error removing it is thrown); one already gone is forgotten.
 */
export function returnJobFolder(workDir: string, folder: JobFolder): void {
  try {
    emptyFolder(folder.dir, [OUTPUTS]);
    emptyFolder(folder.outDir);
  } catch (error) {
    if (errorCode(error) !== 'ENOENT') rmSync(folder.dir, { recursive: true, force: true });
    return;
  }
  let free = kept.get(workDir);
  if (free === undefined) {
    if (kept.size >= MAX_WORK_DIRS) kept.delete(kept.keys().next().value as string);
    free = [];
    kept.set(workDir, free);
  }
  if (free.length < MAX_KEPT) free.push(folder.dir);
  else rmSync(folder.dir, { recursive: true, force: true });
}

/**
 * Removes everything in `dir` but the entries named in `keep`; returns the names removed. An entry
 * gone meanwhile counts removed. Synchronous, as the job folder's other calls (compact.ts says why).
 */
export function emptyFolder(dir: string, keep: readonly string[] = []): string[] {
  const removed: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (keep.includes(entry.name)) continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) rmSync(path, { recursive: true, force: true });
    else unlinkIfThere(path);
    removed.push(entry.name);
  }
  return removed;
}

function unlinkIfThere(path: string): void {
  try {
    unlinkSync(path);
  } catch (error) {
    if (errorCode(error) !== 'ENOENT') throw error;
  }
}

function isFolder(path: string): boolean {
  try {
    return lstatSync(path).isDirectory();
  } catch (error) {
    if (errorCode(error) === 'ENOENT') return false;
    throw error;
  }
}
