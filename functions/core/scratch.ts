/** Local scratch folders of the steps and commands that download objects to check them. */

import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';

/** A fresh folder under `workDir` (made if missing) for `use`, removed after it, whatever happens. */
export async function inScratchFolder<T>(
  workDir: string,
  prefix: string,
  use: (dir: string) => Promise<T>,
): Promise<T> {
  await mkdir(workDir, { recursive: true });
  const dir = await mkdtemp(join(workDir, prefix));
  try {
    return await use(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
