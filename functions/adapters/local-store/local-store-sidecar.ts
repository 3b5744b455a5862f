/**
 * The local folder store's sidecar format: `meta/<key>.json` holds an object's user metadata and
 * checksum, one entry per data-file version (its ETag: inode, size and mtime), so an entry of a
 * replaced version is stale and ignored; readSidecar reads a key's. Also the lenient JSON reading the
 * store's own files share.
 */

import { readFileSync } from 'node:fs';
import { errorCode } from '../../core/errors.ts';
import { isPlainObject } from '../../core/is-plain-object.ts';
import type { Checksum } from '../../core/object-store.ts';

export interface SidecarEntry {
  readonly etag: string;
  readonly ino: string;
  readonly size: number;
  readonly metadata: Readonly<Record<string, string>>;
  readonly checksum?: Checksum;
}

export interface Sidecar {
  readonly version: 1;
  readonly key: string;
  readonly entries: readonly SidecarEntry[];
}

export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    if (error instanceof SyntaxError) return undefined;
    throw error;
  }
}

export function parseSidecar(path: string, text: string): Sidecar {
  const value = parseJson(text);
  const corrupt = (): never => {
    throw new Error(`corrupt metadata sidecar ${path}`);
  };
  if (!isPlainObject(value) || value.version !== 1 || !Array.isArray(value.entries)) return corrupt();
  const entries: SidecarEntry[] = value.entries.map((raw: unknown): SidecarEntry => {
    if (!isPlainObject(raw) || typeof raw.etag !== 'string' || !isPlainObject(raw.metadata)) return corrupt();
    const metadata: Record<string, string> = {};
    for (const [k, v] of Object.entries(raw.metadata)) {
      if (typeof v !== 'string') return corrupt();
      metadata[k] = v;
    }
    const checksum = raw.checksum;
    if (checksum !== undefined) {
      if (!isPlainObject(checksum) || checksum.algorithm !== 'CRC32' || typeof checksum.value !== 'string') {
        return corrupt();
      }
    }
    return {
      etag: raw.etag,
      ino: typeof raw.ino === 'string' ? raw.ino : '',
      size: typeof raw.size === 'number' ? raw.size : -1,
      metadata,
      ...(checksum === undefined
        ? {}
        : { checksum: { algorithm: 'CRC32', value: checksum.value as string } }),
    };
  });
  return { version: 1, key: typeof value.key === 'string' ? value.key : '', entries };
}

/** The sidecar at `path`, or undefined when the key has none (read synchronously: sync-calls.ts). */
export function readSidecar(path: string): Sidecar | undefined {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    const code = errorCode(error);
    if (code === 'ENOENT' || code === 'ENOTDIR') return undefined;
    throw error;
  }
  return parseSidecar(path, text);
}
