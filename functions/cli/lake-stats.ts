/** Files, bytes and footer row counts of a set of data objects, read in place when the store is a folder. */

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Column, Engine } from '../core/engine.ts';
import { InputUnreadableError, NotFoundError, PreconditionFailedError } from '../core/errors.ts';
import type { ObjectStore, ObjectSummary } from '../core/object-store.ts';

export interface FileRows {
  readonly key: string;
  readonly size: number;
  /** undefined when the file is not readable Parquet. */
  readonly rows: number | undefined;
  /** The file's columns (footer), when it is readable Parquet. */
  readonly columns?: readonly Column[];
  readonly error?: string;
}

export async function footerRows(
  store: ObjectStore,
  localRoot: string | undefined,
  engine: Engine,
  objects: readonly ObjectSummary[],
): Promise<FileRows[]> {
  const scratch = localRoot ? undefined : await mkdtemp(join(tmpdir(), 'compactor-stats-'));
  try {
    const out: FileRows[] = [];
    for (const [i, object] of objects.entries()) {
      let path = localRoot ? join(localRoot, object.key) : join(scratch ?? '', `f${i}.parquet`);
      if (!localRoot) {
        try {
          await store.getToFile(object.key, path, { ifMatch: object.etag });
        } catch (error) {
          // Deleted or replaced since it was listed: the caller sees the listing change.
          if (!(error instanceof NotFoundError || error instanceof PreconditionFailedError)) throw error;
          out.push({ key: object.key, size: object.size, rows: undefined, error: 'changed since listed' });
          continue;
        }
      }
      try {
        const info = await engine.inspect(path);
        out.push({ key: object.key, size: object.size, rows: info.rows, columns: info.columns });
      } catch (error) {
        if (!(error instanceof InputUnreadableError)) throw error;
        out.push({ key: object.key, size: object.size, rows: undefined, error: error.message });
      }
      if (!localRoot) await rm(path, { force: true });
      path = '';
    }
    return out;
  } finally {
    if (scratch) await rm(scratch, { recursive: true, force: true });
  }
}

export async function listData(store: ObjectStore, isData: (key: string) => boolean, prefix: string) {
  const objects: ObjectSummary[] = [];
  for await (const object of store.list(prefix)) if (isData(object.key)) objects.push(object);
  return objects;
}
