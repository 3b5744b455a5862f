/**
 * Reads a local Parquet file's footer in JS: the row counts and the two sanity checks the engine's
 * footer check makes, plus a signature of everything DuckDB derives column types from. DuckDB's
 * parquet_*metadata functions cost about 0.15 ms per file each, and a compact job of small files
 * needs four of them; this reads only the fields it reports (thrift-compact.ts), about 0.02 ms
 * per file of 500 rows, and DuckDB is then asked for column types once per distinct signature.
 *
 * It answers only "plainly fine": a file it cannot decode, or that fails a check, is left to
 * DuckDB's own per-file check, whose error names the file and the fault.
 *
 * readFooterColumns gives each top-level column's kind and its chunks' statistics, for the
 * engine's column statistics of an output (duckdb-engine-stats.ts), again only for the types it
 * knows how DuckDB reads; it decodes the whole footer with hyparquet's Thrift decoder.
 */

import { createHash } from 'node:crypto';
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { deserializeTCompactProtocol } from 'hyparquet/src/thrift.js';
import { CompactReader, ThriftType } from './thrift-compact.ts';

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
   * SHA-256 of the schema elements, key-value metadata and created_by exactly as stored (their
   * Thrift bytes): equal for files DuckDB gives equal column types, and small enough to key a cache.
   */
  readonly signature: string;
  /** FileMetaData.key_value_metadata: null for a key without a value or whose value is not UTF-8. */
  readonly metadata: Readonly<Record<string, string | null>>;
}

/** Thrift structs as hyparquet decodes them: `field_<id>` keys; i64 values are bigints. */
type Thrift = { readonly [field: `field_${number}`]: unknown };

/** The footer of a local Parquet file, or undefined if it does not decode as one. */
export async function readFooter(path: string): Promise<FooterSummary | undefined> {
  const footer = footerBytes(path);
  return footer === undefined ? undefined : summarize(footer);
}

/** A file's FileMetaData bytes: the Thrift struct from `start` to `end` of `view`. */
interface FooterBytes {
  readonly view: DataView;
  readonly start: number;
  readonly end: number;
  readonly fileBytes: number;
}

/** The footer's bytes of a local file, or undefined if its tail is not a Parquet footer's. */
function footerBytes(path: string): FooterBytes | undefined {
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
    return { view, start: tail.length - 8 - metadataBytes, end: tail.length - 8, fileBytes };
  } finally {
    closeSync(fd);
  }
}

/** FileMetaData of a local Parquet file as Thrift fields, or undefined if it does not decode as one. */
function decodeFooter(path: string): { metadata: Thrift; fileBytes: number } | undefined {
  const footer = footerBytes(path);
  if (footer === undefined) return undefined;
  const reader = { view: footer.view, offset: footer.start };
  let metadata: Thrift;
  try {
    metadata = deserializeTCompactProtocol(reader) as Thrift;
  } catch {
    // Not decodable here: DuckDB's check says why.
    return undefined;
  }
  // The footer must end exactly where its length says.
  if (reader.offset !== footer.end) return undefined;
  return { metadata, fileBytes: footer.fileBytes };
}

function readAt(fd: number, fileBytes: number, length: number): Buffer {
  const buffer = Buffer.allocUnsafe(length);
  const bytesRead = readSync(fd, buffer, 0, length, fileBytes - length);
  // Files are replaced by rename, never edited in place; a short read means it changed under us.
  if (bytesRead !== length) throw new Error(`short read: ${bytesRead} of ${length} bytes`);
  return buffer;
}

/**
 * The summary of a footer, read field by field (thrift-compact.ts): only the counts, offsets and
 * key-value pairs it reports are built; the schema, key-value list and created_by are hashed as
 * stored, and everything else (statistics, encodings, paths) is stepped over. Undefined where a
 * field is missing, of another type, or the bytes do not end where the footer's length says.
 */
function summarize(footer: FooterBytes): FooterSummary | undefined {
  const reader = new CompactReader(footer.view, footer.start);
  const stored = (from: number) =>
    new Uint8Array(footer.view.buffer, footer.view.byteOffset + from, reader.offset - from);
  let rows: number | undefined;
  let schema: Uint8Array | undefined;
  let schemaElements = 0;
  let groups: { rows: number; chunkEnd: number } | undefined;
  let keyValue: Record<string, string | null> | undefined = {};
  let keyValueBytes: Uint8Array | undefined;
  let createdBy: Uint8Array | undefined;
  try {
    reader.struct((id, type) => {
      const from = reader.offset;
      if (id === 2 && type === ThriftType.LIST) {
        const list = reader.list();
        for (let i = 0; i < list.size; i++) reader.skip(list.type, true);
        schemaElements = list.size;
        schema = stored(from);
      } else if (id === 3) {
        rows = reader.integerOf(type);
      } else if (id === 4 && type === ThriftType.LIST) {
        groups = rowGroupsOf(reader);
      } else if (id === 5 && type === ThriftType.LIST) {
        keyValue = keyValuesOf(reader);
        keyValueBytes = stored(from);
      } else {
        reader.skip(type);
        if (id === 2) schema = undefined;
        if (id === 4) groups = undefined;
        if (id === 5) keyValue = undefined;
        if (id === 6) createdBy = stored(from);
      }
    });
  } catch (error) {
    // Not decodable here: DuckDB's check says why.
    if (error instanceof RangeError) return undefined;
    throw error;
  }
  // The footer must end exactly where its length says.
  if (reader.offset !== footer.end) return undefined;
  if (rows === undefined || schema === undefined || schemaElements < 2 || groups === undefined)
    return undefined;
  if (keyValue === undefined) return undefined;
  const hash = createHash('sha256');
  for (const part of [createdBy, schema, keyValueBytes]) {
    const length = Buffer.alloc(4);
    length.writeInt32LE(part === undefined ? -1 : part.length);
    hash.update(length);
    if (part !== undefined) hash.update(part);
  }
  return {
    rows,
    rowGroupRows: groups.rows,
    chunkEnd: groups.chunkEnd,
    fileBytes: footer.fileBytes,
    metadata: keyValue,
    signature: hash.digest('hex'),
  };
}

/**
 * RowGroup structs (1: columns, 3: num_rows): their rows summed, and where their last column
 * chunk ends; undefined if a group or chunk lacks what that needs.
 */
function rowGroupsOf(reader: CompactReader): { rows: number; chunkEnd: number } | undefined {
  const list = reader.list();
  let rows = 0;
  let chunkEnd = 0;
  let whole = list.type === ThriftType.STRUCT;
  for (let g = 0; g < list.size; g++) {
    if (!whole) {
      reader.skip(list.type, true);
      continue;
    }
    let groupRows: number | undefined;
    let columns = false;
    reader.struct((id, type) => {
      if (id === 3) {
        groupRows = reader.integerOf(type);
      } else if (id === 1 && type === ThriftType.LIST) {
        const chunks = reader.list();
        columns = chunks.type === ThriftType.STRUCT || chunks.size === 0;
        for (let c = 0; c < chunks.size; c++) {
          if (!columns) {
            reader.skip(chunks.type, true);
            continue;
          }
          const end = chunkEndOf(reader);
          if (end === undefined) columns = false;
          else chunkEnd = Math.max(chunkEnd, end);
        }
      } else {
        reader.skip(type);
        if (id === 1) columns = false;
      }
    });
    if (groupRows === undefined || !columns) whole = false;
    else rows += groupRows;
  }
  return whole ? { rows, chunkEnd } : undefined;
}

/**
 * Where a ColumnChunk's data ends (its ColumnMetaData, field 3: the dictionary page, when there is
 * one, comes first, then the data pages, total_compressed_size in all), as the per-file check
 * computes it; undefined without those fields.
 */
function chunkEndOf(reader: CompactReader): number | undefined {
  let dataPage: number | undefined;
  let compressed: number | undefined;
  let dictionaryPage: number | undefined;
  let meta = false;
  reader.struct((id, type) => {
    if (id !== 3 || type !== ThriftType.STRUCT) {
      reader.skip(type);
      if (id === 3) meta = false;
      return;
    }
    meta = true;
    reader.struct((field, fieldType) => {
      if (field === 7) compressed = reader.integerOf(fieldType);
      else if (field === 9) dataPage = reader.integerOf(fieldType);
      else if (field === 11) dictionaryPage = reader.integerOf(fieldType);
      else reader.skip(fieldType);
    });
  });
  if (!meta || dataPage === undefined || compressed === undefined) return undefined;
  return Math.min(dictionaryPage || dataPage, dataPage) + compressed;
}

/**
 * KeyValue structs (1: key, 2: value) as a record, a key or value read as UTF-8 text; undefined
 * if a key is missing or not text.
 */
function keyValuesOf(reader: CompactReader): Record<string, string | null> | undefined {
  const out: Record<string, string | null> = {};
  let whole = true;
  const list = reader.list();
  for (let i = 0; i < list.size; i++) {
    if (!whole || list.type !== ThriftType.STRUCT) {
      reader.skip(list.type, true);
      whole = false;
      continue;
    }
    let key: string | undefined;
    let value: string | null = null;
    reader.struct((id, type) => {
      if (type === ThriftType.BINARY && (id === 1 || id === 2)) {
        const read = text(reader.binary());
        if (id === 1) key = read;
        else value = read ?? null;
      } else {
        reader.skip(type);
        if (id === 1) key = undefined;
        if (id === 2) value = null;
      }
    });
    if (key === undefined) whole = false;
    // A key written twice is ambiguous: no value for it.
    else out[key] = key in out ? null : value;
  }
  return whole ? out : undefined;
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
