/**
 * Reads a local Parquet file's footer in JS (hyparquet's Thrift decoder): the row counts and the
 * two sanity checks the engine's footer check makes, plus a signature of everything DuckDB derives
 * column types from. DuckDB's parquet_*metadata functions cost about 0.15 ms per file each, and a
 * compact job of small files needs four of them; this is about 0.08 ms per file, and DuckDB is
 * then asked for column types once per distinct signature.
 *
 * It answers only "plainly fine": a file it cannot decode, or that fails a check, is left to
 * DuckDB's own per-file check, whose error names the file and the fault.
 *
 * readFooterColumns gives each top-level column's kind and its chunks' statistics, for the
 * engine's column statistics of an output (duckdb-engine-stats.ts), again only for the types it
 * knows how DuckDB reads.
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
  const decoded = decodeFooter(path);
  return decoded === undefined ? undefined : summarize(decoded.metadata, decoded.fileBytes);
}

/** FileMetaData of a local Parquet file as Thrift fields, or undefined if it does not decode as one. */
function decodeFooter(path: string): { metadata: Thrift; fileBytes: number } | undefined {
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
    return { metadata, fileBytes };
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

function summarize(metadata: Thrift, fileBytes: number): FooterSummary | undefined {
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

/**
 * The DuckDB type of a top-level column whose footer statistics this module reads (see
 * columnKind), or 'nested' for a group or repeated column, which has none per column.
 */
export type FooterColumnKind =
  | 'BOOLEAN'
  | 'TINYINT'
  | 'SMALLINT'
  | 'INTEGER'
  | 'BIGINT'
  | 'DOUBLE'
  | 'VARCHAR'
  | 'DATE'
  | 'TIMESTAMP'
  | 'TIMESTAMP WITH TIME ZONE'
  | 'nested';

/** One column chunk's statistics as stored (Statistics.min_value/max_value, plain encoded). */
export interface FooterChunkStats {
  readonly numValues: number;
  readonly nullCount: number | undefined;
  readonly min: Uint8Array | undefined;
  readonly max: Uint8Array | undefined;
}

export interface FooterColumn {
  readonly name: string;
  readonly kind: FooterColumnKind;
  /** One per row group, in order; empty for a nested column. */
  readonly chunks: readonly FooterChunkStats[];
}

/**
 * Each top-level column of a local Parquet file with its kind and its chunks' statistics, or
 * undefined when the file does not decode, two columns share a name (DuckDB would rename one),
 * or a column is of a type not in FooterColumnKind: the caller then asks DuckDB.
 */
export function readFooterColumns(path: string): readonly FooterColumn[] | undefined {
  const decoded = decodeFooter(path);
  if (decoded === undefined) return undefined;
  const { metadata } = decoded;
  const schema = metadata.field_2;
  const rowGroups = metadata.field_4;
  if (!Array.isArray(schema) || schema.length < 1 || !Array.isArray(rowGroups)) return undefined;
  const elements = schema as Thrift[];
  const top: { name: string; kind: FooterColumnKind }[] = [];
  const names = new Set<string>();
  // Schema elements are a depth-first list: the root, then each child followed by its subtree.
  let index = 1;
  const topCount = integer(elements[0]?.field_5) ?? 0;
  for (let i = 0; i < topCount; i++) {
    const element = elements[index];
    if (element === undefined) return undefined;
    const name = text(element.field_4);
    if (name === undefined || names.has(name.toLowerCase())) return undefined;
    names.add(name.toLowerCase());
    const kind = columnKind(element);
    if (kind === undefined) return undefined;
    top.push({ name, kind });
    const end = subtreeEnd(elements, index);
    if (end === undefined) return undefined;
    index = end;
  }
  if (index !== elements.length) return undefined;
  const columns: FooterColumn[] = top.map(({ name, kind }) => ({ name, kind, chunks: [] }));
  for (const group of rowGroups as Thrift[]) {
    if (!Array.isArray(group.field_1)) return undefined;
    const byPath = new Map<string, Thrift>();
    for (const chunk of group.field_1 as Thrift[]) {
      const meta = chunk.field_3 as Thrift | undefined;
      const path = meta?.field_3;
      if (meta === undefined || !Array.isArray(path) || path.length !== 1) continue;
      const name = text(path[0]);
      if (name !== undefined) byPath.set(name, meta);
    }
    for (const column of columns) {
      if (column.kind === 'nested') continue;
      const meta = byPath.get(column.name);
      const numValues = integer(meta?.field_5);
      if (meta === undefined || numValues === undefined) return undefined;
      const stats = meta.field_12 as Thrift | undefined;
      const bytes = (value: unknown) => (value instanceof Uint8Array ? value : undefined);
      (column.chunks as FooterChunkStats[]).push({
        numValues,
        nullCount: integer(stats?.field_3),
        min: bytes(stats?.field_6),
        max: bytes(stats?.field_5),
      });
    }
  }
  return columns;
}

/** Index just past the subtree of the element at `index`; undefined if the list is cut short. */
function subtreeEnd(elements: readonly Thrift[], index: number): number | undefined {
  let next = index + 1;
  const children = integer(elements[index]?.field_5) ?? 0;
  for (let i = 0; i < children; i++) {
    if (next >= elements.length) return undefined;
    const end = subtreeEnd(elements, next);
    if (end === undefined) return undefined;
    next = end;
  }
  return next;
}

// parquet.thrift: Type, FieldRepetitionType and ConvertedType values; LogicalType union fields.
const BOOLEAN = 0;
const INT32 = 1;
const INT64 = 2;
const DOUBLE = 5;
const BYTE_ARRAY = 6;
const REPEATED = 2;
const CONVERTED_UTF8 = 0;
const CONVERTED_DATE = 6;
const CONVERTED_TIMESTAMP_MICROS = 10;
const CONVERTED_INT: Readonly<Record<number, FooterColumnKind>> = {
  15: 'TINYINT',
  16: 'SMALLINT',
  17: 'INTEGER',
  18: 'BIGINT',
};

/**
 * The DuckDB type a top-level schema element reads as, for the types whose statistics this
 * module renders; undefined for any other (unsigned, decimal, float, time, other timestamp
 * units, binary, enum, JSON, UUID, INT96...).
 */
function columnKind(element: Thrift): FooterColumnKind | undefined {
  if ((integer(element.field_5) ?? 0) > 0 || element.field_3 === REPEATED) return 'nested';
  const physical = element.field_1;
  const converted = element.field_6;
  const logical = element.field_10 as Thrift | undefined;
  const logicalKeys = logical === undefined ? [] : Object.keys(logical);
  if (logicalKeys.length > 1) return undefined;
  const logicalField = logicalKeys[0];
  switch (physical) {
    case BOOLEAN:
      return converted === undefined && logical === undefined ? 'BOOLEAN' : undefined;
    case DOUBLE:
      return converted === undefined && logical === undefined ? 'DOUBLE' : undefined;
    case BYTE_ARRAY:
      if (logical === undefined) return converted === CONVERTED_UTF8 ? 'VARCHAR' : undefined;
      return logicalField === 'field_1' && (converted === undefined || converted === CONVERTED_UTF8)
        ? 'VARCHAR'
        : undefined;
    case INT32:
    case INT64: {
      const wide = physical === INT64;
      if (logical === undefined) {
        if (converted === undefined) return wide ? 'BIGINT' : 'INTEGER';
        if (!wide && converted === CONVERTED_DATE) return 'DATE';
        const kind = CONVERTED_INT[converted as number];
        return kind !== undefined && (kind === 'BIGINT') === wide ? kind : undefined;
      }
      if (logicalField === 'field_6')
        return !wide && (converted === undefined || converted === CONVERTED_DATE) ? 'DATE' : undefined;
      if (logicalField === 'field_10') {
        const int = logical?.field_10 as Thrift;
        const bits = integer(int.field_1);
        const kind =
          bits === 8
            ? 'TINYINT'
            : bits === 16
              ? 'SMALLINT'
              : bits === 32
                ? 'INTEGER'
                : bits === 64
                  ? 'BIGINT'
                  : undefined;
        if (int.field_2 !== true || kind === undefined || (kind === 'BIGINT') !== wide) return undefined;
        return converted === undefined || CONVERTED_INT[converted as number] === kind ? kind : undefined;
      }
      if (logicalField === 'field_8' && wide) {
        const timestamp = logical?.field_8 as Thrift;
        const unit = timestamp.field_2 as Thrift | undefined;
        const micros = unit !== undefined && Object.keys(unit).length === 1 && 'field_2' in unit;
        if (!micros || (converted !== undefined && converted !== CONVERTED_TIMESTAMP_MICROS))
          return undefined;
        return timestamp.field_1 === true ? 'TIMESTAMP WITH TIME ZONE' : 'TIMESTAMP';
      }
      return undefined;
    }
    default:
      return undefined;
  }
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
