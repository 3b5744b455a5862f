/**
 * The local folder store's per-key lock, which makes its conditional writes atomic across
 * processes: `locks/<sha256(key)>.lock`, linked into place from a fully written claim file, and
 * broken when its holder is dead (its pid is gone on this host) or it is older than staleLockMs.
 */

import { createHash, randomBytes } from 'node:crypto';
import { closeSync, fstatSync, mkdirSync, openSync, readFileSync, type Stats, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { TransientStoreError } from '../../core/errors.ts';
import { processAlive } from '../process-alive.ts';
import { errorCode, isMissing, removeIfSame, tryLink, unlinkIfExists } from './durable-fs.ts';
import { isRecord, parseJson } from './local-store-sidecar.ts';
import { paced } from './sync-calls.ts';

interface LockOwner {
  readonly pid: number;
  readonly host: string;
  readonly token: string;
}

interface LockFile {
  readonly stat: Stats;
  /** undefined when the file does not hold a lock record (foreign or damaged). */
  readonly owner: LockOwner | undefined;
}

/** The lock file name of a key (exported for tests and operators inspecting a stuck lock). */
export function lockFileName(key: string): string {
  return `${createHash('sha256').update(key, 'utf8').digest('hex')}.lock`;
}

function readLockFile(path: string): LockFile | undefined {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (error) {
    if (isMissing(error)) return undefined;
    throw error;
  }
  try {
    // fstat and read through one fd, so the content and the inode belong together.
    const st = fstatSync(fd);
    const text = readFileSync(fd, 'utf8');
    return { stat: st, owner: parseLockOwner(text) };
  } finally {
    closeSync(fd);
  }
}

function parseLockOwner(text: string): LockOwner | undefined {
  const value = parseJson(text);
  if (!isRecord(value)) return undefined;
  const { pid, host, token } = value;
  if (typeof pid !== 'number' || typeof host !== 'string' || typeof token !== 'string') return undefined;
  return { pid, host, token };
}

/** The locks of one store's keys, in its `locks/` folder. */
export class KeyLocks {
  readonly #locksDir: string;
  readonly #lockTimeoutMs: number;
  readonly #staleLockMs: number;

  constructor(locksDir: string, lockTimeoutMs: number, staleLockMs: number) {
    this.#locksDir = locksDir;
    this.#lockTimeoutMs = lockTimeoutMs;
    this.#staleLockMs = staleLockMs;
  }

  /**
   * Takes the key's lock: a lock file linked into place from a fully written claim file, so the
   * lock never exists half-written. Returns the release function. Its file calls are synchronous
   * (sync-calls.ts says why): the event loop runs only at `paced()`, once per lock, and while
   * waiting for a held lock.
   */
  async lock(key: string, signal: AbortSignal | undefined): Promise<() => void> {
    await paced();
    const lockPath = join(this.#locksDir, lockFileName(key));
    const owner: LockOwner = { pid: process.pid, host: hostname(), token: randomBytes(12).toString('hex') };
    const claimPath = join(this.#locksDir, `${owner.token}.claim`);
    this.#writeClaim(claimPath, owner);
    try {
      const deadline = Date.now() + this.#lockTimeoutMs;
      let delayMs = 1;
      for (;;) {
        signal?.throwIfAborted();
        if (tryLink(claimPath, lockPath)) {
          return () => this.#unlockIfOwned(lockPath, owner.token);
        }
        this.#breakIfStale(lockPath, claimPath, owner.token);
        if (Date.now() >= deadline) {
          throw new TransientStoreError(
            `timed out after ${this.#lockTimeoutMs} ms waiting for the lock on ${key}`,
          );
        }
        await sleep(delayMs * (0.5 + Math.random()));
        delayMs = Math.min(delayMs * 2, 20);
      }
    } finally {
      unlinkIfExists(claimPath);
    }
  }

  /** Writes the claim file; the locks folder is made only when missing (the first lock, or after a reset). */
  #writeClaim(claimPath: string, owner: LockOwner): void {
    const text = JSON.stringify(owner);
    try {
      writeFileSync(claimPath, text, { flag: 'wx' });
    } catch (error) {
      if (errorCode(error) !== 'ENOENT') throw error;
      mkdirSync(this.#locksDir, { recursive: true });
      writeFileSync(claimPath, text, { flag: 'wx' });
    }
  }

  #unlockIfOwned(lockPath: string, token: string): void {
    const current = readLockFile(lockPath);
    // Someone broke our lock as stale (we stalled past staleLockMs): theirs now, leave it.
    if (current?.owner?.token === token) unlinkIfExists(lockPath);
  }

  #isStale(lock: LockFile): boolean {
    // link() updates ctime, so ctime is when the lock was taken.
    if (Date.now() - lock.stat.ctimeMs > this.#staleLockMs) return true;
    if (lock.owner === undefined || lock.owner.host !== hostname()) return false;
    return !processAlive(lock.owner.pid, (error) => {
      throw error;
    });
  }

  /**
   * Removes a lock whose holder is dead. Breakers first take `<lock>.breaker` (same link trick),
   * then re-check the lock: two breakers cannot both remove it, and a fresh lock taken after one
   * breaker finished is never mistaken for the dead one.
   */
  #breakIfStale(lockPath: string, claimPath: string, token: string): void {
    const seen = readLockFile(lockPath);
    if (seen === undefined || !this.#isStale(seen)) return;
    const breakerPath = `${lockPath}.breaker`;
    if (!tryLink(claimPath, breakerPath)) {
      const breaker = readLockFile(breakerPath);
      // A breaker that died mid-break (a crash within microseconds of the holder's): set it aside.
      if (breaker !== undefined && this.#isStale(breaker)) removeIfSame(breakerPath, breaker.stat.ino);
      return;
    }
    try {
      const again = readLockFile(lockPath);
      if (again !== undefined && again.stat.ino === seen.stat.ino && this.#isStale(again)) {
        unlinkIfExists(lockPath);
        // The dead holder's claim file is litter now.
        if (again.owner !== undefined && /^[0-9a-f]+$/.test(again.owner.token)) {
          unlinkIfExists(join(this.#locksDir, `${again.owner.token}.claim`));
        }
      }
    } finally {
      this.#unlockIfOwned(breakerPath, token);
    }
  }
}
