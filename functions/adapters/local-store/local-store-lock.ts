/**
 * The local folder store's per-key lock, which makes its conditional writes atomic across
 * processes: `locks/<sha256(key)>.lock`, a hard link to its holder's claim file, and broken when
 * its holder is dead (its pid is gone on this host) or it is older than staleLockMs.
 *
 * A process writes one claim file (its pid, host and a token) once, and links it as each lock it
 * takes: taking a lock is one link(2), releasing it an lstat and an unlink, where a claim written,
 * linked and removed for every lock cost four changes of the locks folder and a read of the lock.
 * A lock is never half-written: link makes it whole or not at all.
 */

import { createHash, randomBytes } from 'node:crypto';
import {
  closeSync,
  fstatSync,
  lstatSync,
  openSync,
  readdirSync,
  readFileSync,
  type Stats,
  writeFileSync,
} from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { errorCode, TransientStoreError } from '../../core/errors.ts';
import { isPlainObject } from '../../core/is-plain-object.ts';
import { goneFromThisHost, processAlive } from '../process-alive.ts';
import { inFolderOf, isMissing, removeIfSame, tryLink, unlinkIfExists } from './durable-fs.ts';
import { parseJson } from './local-store-sidecar.ts';
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

/** The inode at `path`, undefined when nothing is there. */
function inoOf(path: string): number | undefined {
  try {
    return lstatSync(path).ino;
  } catch (error) {
    if (isMissing(error)) return undefined;
    throw error;
  }
}

function parseLockOwner(text: string): LockOwner | undefined {
  const value = parseJson(text);
  if (!isPlainObject(value)) return undefined;
  const { pid, host, token } = value;
  if (typeof pid !== 'number' || typeof host !== 'string' || typeof token !== 'string') return undefined;
  return { pid, host, token };
}

/**
 * The claim files this process wrote, removed when it exits normally (one listener for them all).
 * A claim of a process killed outright stays until another process's first claim removes it.
 */
const claimsToRemove = new Set<string>();

function removeAtExit(path: string): void {
  if (claimsToRemove.size === 0) {
    process.once('exit', () => {
      for (const claim of claimsToRemove) unlinkIfExists(claim);
    });
  }
  claimsToRemove.add(path);
}

/** This process's claim file: linked as every lock it takes. */
interface Claim {
  readonly path: string;
  readonly ino: number;
  readonly owner: LockOwner;
}

/** The locks of one store's keys, in its `locks/` folder. */
export class KeyLocks {
  readonly #locksDir: string;
  readonly #lockTimeoutMs: number;
  readonly #staleLockMs: number;
  #claim: Claim | undefined;
  /** Each lock this store holds, by path, with the claim it linked (what its release checks). */
  readonly #held = new Map<string, { readonly ino: number }>();

  constructor(locksDir: string, lockTimeoutMs: number, staleLockMs: number) {
    this.#locksDir = locksDir;
    this.#lockTimeoutMs = lockTimeoutMs;
    this.#staleLockMs = staleLockMs;
  }

  /**
   * Takes the key's lock: this process's claim file linked at the lock's path. Returns the release
   * function. Its file calls are synchronous (sync-calls.ts says why): the event loop runs only at
   * `paced()`, once per lock, and while waiting for a held lock.
   */
  async lock(key: string, signal: AbortSignal | undefined): Promise<() => void> {
    await paced();
    const lockPath = join(this.#locksDir, lockFileName(key));
    const deadline = Date.now() + this.#lockTimeoutMs;
    let delayMs = 1;
    for (;;) {
      signal?.throwIfAborted();
      const claim = this.#linkClaim(lockPath);
      if (claim !== undefined) {
        const held = { ino: claim.ino };
        this.#held.set(lockPath, held);
        return () => this.#release(lockPath, held);
      }
      this.#breakIfStale(lockPath);
      if (Date.now() >= deadline) {
        throw new TransientStoreError(
          `timed out after ${this.#lockTimeoutMs} ms waiting for the lock on ${key}`,
        );
      }
      await sleep(delayMs * (0.5 + Math.random()));
      delayMs = Math.min(delayMs * 2, 20);
    }
  }

  /** Links the claim at `path`: the claim, or undefined when `path` is taken. */
  #linkClaim(path: string): Claim | undefined {
    for (let attempt = 0; ; attempt++) {
      const claim = this.#claim ?? this.#writeClaim();
      try {
        return tryLink(claim.path, path) ? claim : undefined;
      } catch (error) {
        // The claim file or the locks folder is gone (a reset of the folder), or the claim holds
        // as many links as the file system allows (EMLINK): write a new claim.
        if (!(isMissing(error) || errorCode(error) === 'EMLINK') || attempt > 0) throw error;
        this.#claim = undefined;
      }
    }
  }

  /** Writes this process's claim file; the locks folder is made only when missing. */
  #writeClaim(): Claim {
    const owner: LockOwner = { pid: process.pid, host: hostname(), token: randomBytes(12).toString('hex') };
    const path = join(this.#locksDir, `${owner.token}.claim`);
    const text = JSON.stringify(owner);
    inFolderOf(path, () => writeFileSync(path, text, { flag: 'wx' }));
    this.#claim = { path, ino: lstatSync(path).ino, owner };
    removeAtExit(path);
    this.#removeDeadClaims();
    return this.#claim;
  }

  /**
   * Removes the claim files of processes gone from this host, once per claim written: a process
   * leaves its claim behind when it ends. A lock a dead process still holds keeps its inode, and
   * names its holder itself, so it is still broken as before.
   */
  #removeDeadClaims(): void {
    for (const name of readdirSync(this.#locksDir)) {
      if (!name.endsWith('.claim') || join(this.#locksDir, name) === this.#claim?.path) continue;
      const owner = readLockFile(join(this.#locksDir, name))?.owner;
      if (owner !== undefined && goneFromThisHost(owner)) unlinkIfExists(join(this.#locksDir, name));
    }
  }

  /** Releases a lock this store took, unless it was broken meanwhile (then it may be another's). */
  #release(lockPath: string, held: { readonly ino: number }): void {
    if (this.#held.get(lockPath) !== held) return;
    this.#held.delete(lockPath);
    if (inoOf(lockPath) === held.ino) unlinkIfExists(lockPath);
  }

  #isStale(lock: LockFile): boolean {
    // Every lock of a process links its one claim file, and link() and unlink() update the
    // inode's ctime: ctime is when its holder last took or released a lock. A holder at work
    // renews it; a stopped or dead one lets it age.
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
  #breakIfStale(lockPath: string): void {
    const seen = readLockFile(lockPath);
    if (seen === undefined || !this.#isStale(seen)) return;
    const breakerPath = `${lockPath}.breaker`;
    const claim = this.#linkClaim(breakerPath);
    if (claim === undefined) {
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
      if (inoOf(breakerPath) === claim.ino) unlinkIfExists(breakerPath);
    }
  }
}
