/**
 * Whether an object whose name does not say Parquet (a Firehose object without an extension) is
 * one: "PAR1" at both ends, a footer length that fits the object, and a footer that starts as a
 * Thrift FileMetaData does (field 1, `version`, an i32). Reads the object's last 64 KiB at most,
 * and its first 4 bytes when the object is larger; the compact step's own footer check still
 * reads every input in full before anything is merged.
 */

import { NotFoundError, PreconditionFailedError } from './errors.ts';
import type { DataFile, Layout } from './layout.ts';
import { type ObjectStore, type ObjectSummary, readRange } from './object-store.ts';

const MAGIC = Buffer.from('PAR1', 'latin1');
const TAIL_BYTES = 64 * 1024;
/** Compact protocol field header: delta 1, type 5 (i32): FileMetaData.version. */
const FILE_METADATA_FIRST_BYTE = 0x15;
/** Verdicts by store, key and ETag: an object's bytes never change under one ETag. */
const verdicts = new Map<string, boolean>();
const MAX_VERDICTS = 50_000;

export async function isParquetObject(
  store: ObjectStore,
  object: Pick<ObjectSummary, 'key' | 'size' | 'etag'>,
): Promise<boolean> {
  const cacheKey = `${store.location}\u0000${object.key}\u0000${object.etag}`;
  const known = verdicts.get(cacheKey);
  if (known !== undefined) return known;
  const verdict = await sniff(store, object);
  if (verdict === undefined) return false;
  if (verdicts.size >= MAX_VERDICTS) verdicts.clear();
  verdicts.set(cacheKey, verdict);
  return verdict;
}

/** undefined: the object changed or went away since it was listed (decide on the next plan). */
async function sniff(
  store: ObjectStore,
  object: Pick<ObjectSummary, 'key' | 'size' | 'etag'>,
): Promise<boolean | undefined> {
  const { key, size, etag } = object;
  // Magic, footer length, magic: the smallest possible Parquet file is larger than that.
  if (size < 12) return false;
  try {
    const tailStart = Math.max(0, size - TAIL_BYTES);
    const tail = (await readRange(store, key, tailStart, size, { ifMatch: etag })).body;
    if (tail.length !== size - tailStart) return undefined;
    if (!tail.subarray(tail.length - 4).equals(MAGIC)) return false;
    const footerLength = tail.readUInt32LE(tail.length - 8);
    if (footerLength === 0 || footerLength + 12 > size) return false;
    const footerAt = size - 8 - footerLength;
    const first =
      footerAt >= tailStart
        ? tail[footerAt - tailStart]
        : (await readRange(store, key, footerAt, footerAt + 1, { ifMatch: etag })).body[0];
    if (first !== FILE_METADATA_FIRST_BYTE) return false;
    const head =
      tailStart === 0 ? tail.subarray(0, 4) : (await readRange(store, key, 0, 4, { ifMatch: etag })).body;
    return head.equals(MAGIC);
  } catch (error) {
    if (error instanceof NotFoundError || error instanceof PreconditionFailedError) return undefined;
    throw error;
  }
}

/**
 * The layout's parse of a listed object, checked by content when its name does not say Parquet
 * (`Layout.needsContentCheck`): undefined for an object that is not a data file, so a non-Parquet
 * object beside the data is never merged, expired or repaired.
 */
export async function parseDataObject(
  store: ObjectStore,
  layout: Layout,
  object: ObjectSummary,
): Promise<DataFile | undefined> {
  const file = layout.parse(object.key);
  if (!file || !layout.needsContentCheck(object.key)) return file;
  return (await isParquetObject(store, object)) ? file : undefined;
}
