/**
 * Sets a written Parquet file's footer key-value metadata (FileMetaData field 5) to exactly the
 * given entries: nodejs-polars cannot write them, and writes its own ARROW:schema there. The
 * footer's other fields are copied byte for byte; only their Thrift field headers are written
 * again (compact protocol headers carry the id as a delta from the previous field's).
 * Thrift compact protocol: https://github.com/apache/thrift/blob/master/doc/specs/thrift-compact-protocol.md
 * FileMetaData: https://github.com/apache/parquet-format/blob/master/src/main/thrift/parquet.thrift
 */

import { open } from 'node:fs/promises';
import { CompactReader, fieldHeader, ThriftType as T, varint } from '../thrift-compact.ts';

/** "PAR1": the magic at both ends of an unencrypted Parquet file. */
const MAGIC = Buffer.from('PAR1', 'latin1');
const KEY_VALUE_METADATA = 5;

/** Rewrites the footer of the Parquet file at `path` in place, with `metadata` as its key-value metadata. */
export async function setFooterMetadata(
  path: string,
  metadata: Readonly<Record<string, string>>,
): Promise<void> {
  const file = await open(path, 'r+');
  try {
    const { size } = await file.stat();
    const end = Buffer.alloc(8);
    await file.read(end, 0, 8, size - 8);
    if (size < 12 || !end.subarray(4).equals(MAGIC)) throw new Error(`${path} is not a Parquet file`);
    const length = end.readUInt32LE(0);
    const start = size - 8 - length;
    if (start < 4) throw new Error(`${path}: footer length ${length} is past the file's start`);
    const footer = Buffer.alloc(length);
    await file.read(footer, 0, length, start);
    const rewritten = withKeyValueMetadata(footer, metadata);
    const tail = Buffer.alloc(8);
    tail.writeUInt32LE(rewritten.length, 0);
    MAGIC.copy(tail, 4);
    await file.truncate(start);
    await file.write(Buffer.concat([rewritten, tail]), 0, rewritten.length + 8, start);
  } finally {
    await file.close();
  }
}

/** A serialized FileMetaData with field 5 replaced by `metadata` (absent when it is empty). */
export function withKeyValueMetadata(footer: Buffer, metadata: Readonly<Record<string, string>>): Buffer {
  const fields = topLevelFields(footer).filter((f) => f.id !== KEY_VALUE_METADATA);
  const entries = Object.entries(metadata);
  if (entries.length > 0) {
    fields.push({ id: KEY_VALUE_METADATA, type: T.LIST, value: keyValueList(entries) });
  }
  fields.sort((a, b) => a.id - b.id);
  const parts: Buffer[] = [];
  let last = 0;
  for (const field of fields) {
    parts.push(fieldHeader(field.id, field.type, last), field.value);
    last = field.id;
  }
  parts.push(Buffer.from([0]));
  return Buffer.concat(parts);
}

interface Field {
  readonly id: number;
  readonly type: number;
  /** The value's bytes as serialized (empty for a bool, whose value is its type). */
  readonly value: Buffer;
}

/** The fields of the struct `bytes` holds, each with its value's bytes; the struct must end the buffer. */
function topLevelFields(bytes: Buffer): Field[] {
  const reader = new CompactReader(new DataView(bytes.buffer, bytes.byteOffset, bytes.length), 0);
  const fields: Field[] = [];
  try {
    reader.struct((id, type) => {
      const start = reader.offset;
      reader.skip(type);
      fields.push({ id, type, value: bytes.subarray(start, reader.offset) });
    });
  } catch (error) {
    if (error instanceof RangeError) throw new Error(`Parquet footer: ${error.message}`, { cause: error });
    throw error;
  }
  if (reader.offset !== bytes.length) throw new Error('Parquet footer: bytes after FileMetaData');
  return fields;
}

function binary(text: string): Buffer {
  const bytes = Buffer.from(text, 'utf8');
  return Buffer.concat([varint(bytes.length), bytes]);
}

/** list<KeyValue>, KeyValue = struct { 1: required string key, 2: optional string value }. */
function keyValueList(entries: readonly (readonly [string, string])[]): Buffer {
  const header =
    entries.length < 15
      ? Buffer.from([(entries.length << 4) | T.STRUCT])
      : Buffer.concat([Buffer.from([0xf0 | T.STRUCT]), varint(entries.length)]);
  const items = entries.map(([key, value]) =>
    Buffer.concat([
      fieldHeader(1, T.BINARY, 0),
      binary(key),
      fieldHeader(2, T.BINARY, 1),
      binary(value),
      Buffer.from([0]),
    ]),
  );
  return Buffer.concat([header, ...items]);
}
