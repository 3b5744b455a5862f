/**
 * The one probe of whether a process of this host is still running, for the local store's lock
 * and upload owners (local-store.ts) and local executions (local-owner.ts): signal 0 checks that
 * the pid exists without signalling it.
 */

import { hostname } from 'node:os';

/**
 * ESRCH: no such process. EPERM: it exists under another user, so it is alive. Any other error
 * (process.kill refuses the pid) is `otherwise`'s to answer: a caller that must not guess rethrows
 * it, one that only wants to know "surely gone" answers alive.
 */
export function processAlive(pid: number, otherwise: (error: unknown) => boolean): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException | undefined)?.code;
    if (code === 'ESRCH') return false;
    if (code === 'EPERM') return true;
    return otherwise(error);
  }
}

/**
 * Whether the process that wrote an owner record (a lock's claim, an upload's intent, a local
 * execution's id) is surely gone: it ran on this host (a record without a host is of this host),
 * is not this process, and its pid no longer runs. Not surely gone is not gone.
 */
export function goneFromThisHost(owner: { readonly pid: number; readonly host?: string }): boolean {
  if (owner.host !== undefined && owner.host !== hostname()) return false;
  if (!Number.isInteger(owner.pid) || owner.pid <= 0 || owner.pid === process.pid) return false;
  return !processAlive(owner.pid, () => true);
}
