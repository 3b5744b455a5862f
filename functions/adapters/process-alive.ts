/**
 * The one probe of whether a process of this host is still running, for the local store's lock
 * and upload owners (local-store.ts) and local executions (local-owner.ts): signal 0 checks that
 * the pid exists without signalling it.
 */

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
