/**
 * Reads a local Parquet file's footer in JS (hyparquet's Thrift decoder): the row counts and the
 * two sanity checks the engine's footer check makes, plus a signature of everything DuckDB derives
 * column types from. DuckDB's parquet_*metadata functions cost about 0.15 ms per file each, and a
 * compact job of small files needs four of them; this is about 0.08 ms per file, and DuckDB is
 * then asked for column types once per distinct signature.
 *
 * It answers only "plainly fine": a file it cannot decode, or that fails a check, is left to
 * DuckDB's own per-file check, whose error names the file and the fault.
 */

import { createHash } from 'node:crypto';
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { deserializeTCompactProtocol } from 'hyparquet/src/thrift.js';

/** Bytes read from the end of the file first; a larger footer takes a second read. */
const TAIL_BYTES = 64 * 1024;

/** "PAR1", little-endian: the magic at both ends of an unencrypted Parquet file. */
const MAGIC = 0x31524150;

export interface FooterSummary {
  /** FileMetaData.num_rows. */
  readonly rows: number;
  /** The sum of the row groups' num_rows. */
  readonly rowGroupRows: number;
  /** Where the last column chunk ends (its first page's offset plus its compressed size); 0 if none. */
  readonly chunkEnd: number;
  readonly fileBytes: number;
  /**
   * SHA-256 of the schema elements, key-value metadata and created_by exactly as stored (Thrift
   * fields): equal for files DuckDB gives equal column types, and small enough to key a cache.
   */
  readonly signature: string;
  /** FileMetaData.key_value_metadata: null for a key without a value or whose value is not UTF-8. */
  readonly metadata: Readonly<Record<string, string | null>>;
}

/** Thrift structs as hyparquet decodes them: `field_<id>` keys; i64 values are bigints. */
type Thrift = { readonly [field: `field_${number}`]: unknown };

/** The footer of a local Parquet file, or undefined if it does not decode as one. */
export async function readFooter(path: string): Promise<FooterSummary | undefined> {
  const fd = openSync(path, 'r');
  try {
    const fileBytes = fstatSync(fd).size;
    if (fileBytes < 12) return undefined;
    let tail = readAt(fd, fileBytes, Math.min(fileBytes, TAIL_BYTES));
    if (tail.readUInt32LE(tail.length - 4) !== MAGIC) return undefined;
    const metadataBytes = tail.readUInt32LE(tail.length - 8);
    // Leading magic, footer, length, trailing magic.
    if (metadataBytes + 12 > fileBytes) return undefined;
    if (metadataBytes + 8 > tail.length) tail = readAt(fd, fileBytes, metadataBytes + 8);
    return summarize(tail, metadataBytes, fileBytes);
  } finally {
    closeSync(fd);
  }
}

function readAt(fd: number, fileBytes: number, length: number): Buffer {
  const buffer = Buffer.allocUnsafe(length);
  const bytesRead = readSync(fd, buffer, 0, length, fileBytes - length);
  // Files are replaced by rename, never edited in place; a short read means it changed under us.
  if (bytesRead !== length) throw new Error(`short read: ${bytesRead} of ${length} bytes`);
  return buffer;
}

function summarize(tail: Buffer, metadataBytes: number, fileBytes: number): FooterSummary | undefined {
  const view = new DataView(tail.buffer, tail.byteOffset, tail.length);
  const reader = { view, offset: tail.length - 8 - metadataBytes };
  let metadata: Thrift;
  try {
    metadata = deserializeTCompactProtocol(reader) as Thrift;
  } catch {
    // Not decodable here: DuckDB's check says why.
    return undefined;
  }
  // The footer must end exactly where its length says.
  if (reader.offset !== tail.length - 8) return undefined;
  const rows = integer(metadata.field_3);
  const schema = metadata.field_2;
  const rowGroups = metadata.field_4;
  if (rows === undefined || !Array.isArray(schema) || schema.length < 2 || !Array.isArray(rowGroups)) {
    return undefined;
  }
  const keyValue = keyValues(metadata.field_5);
  if (keyValue === undefined) return undefined;
  let rowGroupRows = 0;
  let chunkEnd = 0;
  for (const group of rowGroups as Thrift[]) {
    const groupRows = integer(group.field_3);
    if (groupRows === undefined || !Array.isArray(group.field_1)) return undefined;
    rowGroupRows += groupRows;
    for (const chunk of group.field_1 as Thrift[]) {
      const meta = chunk.field_3 as Thrift | undefined;
      if (meta === undefined) return undefined;
      const dataPage = integer(meta.field_9);
      const compressed = integer(meta.field_7);
      if (dataPage === undefined || compressed === undefined) return undefined;
      // As the per-file check computes it: the dictionary page, when there is one, comes first.
      const dictionaryPage = integer(meta.field_11) || dataPage;
      chunkEnd = Math.max(chunkEnd, Math.min(dictionaryPage, dataPage) + compressed);
    }
  }
  return {
    rows,
    rowGroupRows,
    chunkEnd,
    fileBytes,
    metadata: keyValue,
    signature: createHash('sha256')
      .update(JSON.stringify([metadata.field_6, schema, metadata.field_5], plainValue))
      .digest('hex'),
  };
}

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/** KeyValue structs (1: key, 2: value) as a record; undefined if they do not decode as such. */
function keyValues(value: unknown): Record<string, string | null> | undefined {
  const out: Record<string, string | null> = {};
  if (value === undefined) return out;
  if (!Array.isArray(value)) return undefined;
  for (const entry of value as Thrift[]) {
    const key = text(entry.field_1);
    if (key === undefined) return undefined;
    // A key written twice is ambiguous: no value for it.
    out[key] = key in out ? null : (text(entry.field_2) ?? null);
  }
  return out;
}

/** Thrift binary as UTF-8 text, else undefined. */
function text(value: unknown): string | undefined {
  if (!(value instanceof Uint8Array)) return undefined;
  try {
    return UTF8.decode(value);
  } catch (error) {
    if (error instanceof TypeError) return undefined;
    throw error;
  }
}

/** A Thrift integer (i32 number or i64 bigint) as a safe JS number, else undefined. */
function integer(value: unknown): number | undefined {
  const n = typeof value === 'bigint' ? Number(value) : value;
  return typeof n === 'number' && Number.isSafeInteger(n) ? n : undefined;
}

/** JSON for Thrift values: bigints as decimal strings, binary as hex. */
function plainValue(_key: string, value: unknown): unknown {
  if (typeof value === 'bigint') return `${value}n`;
  if (value instanceof Uint8Array) return `0x${Buffer.from(value).toString('hex')}`;
  return value;
}
