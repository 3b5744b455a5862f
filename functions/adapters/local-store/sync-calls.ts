/**
 * The local folder store makes its small metadata calls synchronously: readdir, stat, open, read
 * of a sidecar, a small object (getBytes reads manifests, plans and markers; getRange, Parquet
 * footers), close, and the writes' lock, link and unlink. What writes, copies or fsyncs data
 * stays a promise call, and so do a write's rename into place and the prune of the folders a
 * delete emptied (durable-fs.ts says why). The promise form costs a thread-pool hop, a promise
 * and kernel wake-ups per call, several times the call itself on a cached tree: walking a
 * 20-folder lake took 1.5 ms of CPU against 0.26 ms synchronously, and the daily recovery sweep,
 * back to back at the same load, 102 CPU-s against 63, and with the writes' lock, link and
 * unlink synchronous too, 67 s against 100. On a tree that waits on the disk a call is no longer
 * brief: there a rename or a prune as a promise call lets the event loop run meanwhile. Each
 * synchronous call is brief; `paced` lets the event loop run every SYNC_BURST of them (a write
 * counts once), so a long walk or a run of reads does not hold it. At 256 a reader polling one key
 * in a loop starved a writer's promise calls (a 150-put race took 55 s instead of 5); at 32 the
 * turns cost nothing measurable.
 */

import { setImmediate as nextTurn } from 'node:timers/promises';

const SYNC_BURST = 32;
let syncCalls = 0;

/** Counts one synchronous call; every SYNC_BURST of them, lets the event loop run. */
export async function paced(): Promise<void> {
  if (++syncCalls % SYNC_BURST === 0) await nextTurn();
}
