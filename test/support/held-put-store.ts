/**
 * The CLI's own helper-thread deps (cli/thread-deps.ts) with a store whose first put is held a
 * while before it goes on, as a commit holding its key's lock would be; optionally an uncaught
 * error is thrown in the thread as that put starts (a bug with a store call half done). The
 * thread records in the run's work dir whether that put finished and how many store calls were
 * made after the error: the thread recipes thread-deps-crash-mid-put.ts and thread-deps-slow-put.ts.
 */

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ParsedOptions } from '../../functions/cli/options.ts';
import { threadRunDeps as cliThreadRunDeps } from '../../functions/cli/thread-deps.ts';
import {
  type CopyOptions,
  type DeleteRequest,
  ForwardingStore,
  type PutFile,
  type WriteOptions,
} from '../../functions/core/object-store.ts';
import type { LocalRunDeps } from '../../functions/local-runner/run.ts';

/** The record's file name in the run's work dir. */
export const PUT_RECORD = 'held-put.json';

export interface PutRecord {
  /** The key of the held put, once it has finished. */
  readonly finished?: string;
  /** Store calls that reached the recipe's store after the error. */
  readonly callsAfterBug: number;
}

export async function heldFirstPutDeps(
  options: ParsedOptions,
  hold: { readonly ms: number; readonly bug?: string },
): Promise<LocalRunDeps> {
  const deps = await cliThreadRunDeps(options);
  const recordPath = join(String(options['work-dir']), PUT_RECORD);
  let record: PutRecord = { callsAfterBug: 0 };
  let held = false;
  let thrown = false;
  const save = (next: PutRecord) => {
    record = next;
    writeFileSync(recordPath, JSON.stringify(record));
  };
  const seen = () => {
    if (thrown) save({ ...record, callsAfterBug: record.callsAfterBug + 1 });
  };
  const store = new (class extends ForwardingStore {
    override async put(key: string, body: Buffer | PutFile, opts?: WriteOptions) {
      seen();
      if (held) return super.put(key, body, opts);
      held = true;
      const { bug } = hold;
      if (bug !== undefined) {
        setImmediate(() => {
          thrown = true;
          throw new Error(bug);
        });
      }
      await sleep(hold.ms);
      const written = await super.put(key, body, opts);
      save({ ...record, finished: key });
      return written;
    }
    override head(key: string, opts?: { readonly signal?: AbortSignal }) {
      seen();
      return super.head(key, opts);
    }
    override getBytes(key: string, opts?: { readonly ifMatch?: string; readonly signal?: AbortSignal }) {
      seen();
      return super.getBytes(key, opts);
    }
    override getToFile(
      key: string,
      path: string,
      opts?: { readonly ifMatch?: string; readonly signal?: AbortSignal },
    ) {
      seen();
      return super.getToFile(key, path, opts);
    }
    override copy(source: string, target: string, opts?: CopyOptions) {
      seen();
      return super.copy(source, target, opts);
    }
    override deleteMany(requests: readonly DeleteRequest[], opts?: { readonly signal?: AbortSignal }) {
      seen();
      return super.deleteMany(requests, opts);
    }
  })(deps.store);
  return { ...deps, store };
}
