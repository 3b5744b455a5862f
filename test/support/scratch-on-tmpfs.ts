/**
 * Vitest global setup: test scratch (every `mkdtemp(tmpdir())`, and the children tests spawn)
 * goes to a RAM-backed tmpfs when the machine has one with room. The sweeps create, rename and
 * unlink tens of thousands of small files; on ext4 the kernel's metadata work was half of the
 * recovery sweep's time (264 s on ext4, 138 s on /dev/shm, same load). The store's behaviour is
 * the same on either file system; only fsync becomes free, and no test can observe power loss.
 * Workers inherit this process's environment (https://vitest.dev/config/globalsetup).
 * COMPACTOR_TEST_TMPDIR names another folder; without tmpfs the OS default stays.
 */

import { mkdtempSync, rmSync, statfsSync } from 'node:fs';
import { join } from 'node:path';

/** Less free space than this (a container's 64 MiB /dev/shm) and the OS default stays. */
const MIN_FREE_BYTES = 2 * 1024 ** 3;
const TMPFS_MAGIC = 0x01021994;

function tmpfsRoot(): string | undefined {
  const candidate = '/dev/shm';
  let fs: ReturnType<typeof statfsSync>;
  try {
    fs = statfsSync(candidate);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'EACCES' || code === 'ENOTDIR') return undefined;
    throw error;
  }
  return fs.type === TMPFS_MAGIC && fs.bavail * fs.bsize >= MIN_FREE_BYTES ? candidate : undefined;
}

export function setup(): () => void {
  const root = process.env.COMPACTOR_TEST_TMPDIR ?? tmpfsRoot();
  if (root === undefined) return () => {};
  const dir = mkdtempSync(join(root, 'compactor-test-'));
  const previous = process.env.TMPDIR;
  process.env.TMPDIR = dir;
  return () => {
    if (previous === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = previous;
    rmSync(dir, { recursive: true, force: true });
  };
}
