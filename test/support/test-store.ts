/**
 * The local folder store as in-process tests use it: without fsync (durability 'process'). These
 * tests crash code paths and processes, never the machine, and a write outlives its process
 * without fsync (test/adapters/local-store-durability.test.ts). fsync was half of the recovery
 * sweep's time on this VM's disk.
 */

import { LocalFolderStore } from '../../functions/adapters/local-store/local-store.ts';

export function testStore(root: string): LocalFolderStore {
  return new LocalFolderStore(root, { durability: 'process' });
}
