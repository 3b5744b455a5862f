/**
 * Sets a written Parquet file's footer key-value metadata (FileMetaData field 5) to exactly the
 * given entries: nodejs-polars cannot write them, and writes its own ARROW:schema there. The
 * footer's other fields are copied byte for byte; only their Thrift field headers are written
 * again (compact protocol headers carry the id as a delta from the previous field's).
 * Thrift compact protocol: https://github.com/apache/thrift/blob/master/doc/specs/thrift-compact-protocol.md
 * FileMetaData: https://github.com/apache/parquet-format/blob/master/src/main/thrift/parquet.thrift
 */

import { open } from 'node:fs/promises';

/** "PAR1": the magic at both ends of an unencrypted Parquet file. */
const MAGIC = Buffer.from('PAR1', 'latin1');
const KEY_VALUE_METADATA = 5;

const T_BOOL_TRUE = 1;
const T_BOOL_FALSE = 2;
const T_BYTE = 3;
const T_I16 = 4;
const T_I32 = 5;
const T_I64 = 6;
const T_DOUBLE = 7;
const T_BINARY = 8;
const T_LIST = 9;
const T_SET = 10;
const T_MAP = 11;
const T_STRUCT = 12;

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
    fields.push({ id: KEY_VALUE_METADATA, type: T_LIST, value: keyValueList(entries) });
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
  const reader = { bytes, offset: 0 };
  const fields: Field[] = [];
  let id = 0;
  for (;;) {
    const header = readByte(reader);
    if (header === 0) break;
    const type = header & 0x0f;
    const delta = header >> 4;
    id = delta === 0 ? zigzag(readVarint(reader)) : id + delta;
    const start = reader.offset;
    skipValue(reader, type);
    fields.push({ id, type, value: bytes.subarray(start, reader.offset) });
  }
  if (reader.offset !== bytes.length) throw new Error('Parquet footer: bytes after FileMetaData');
  return fields;
}

interface Reader {
  readonly bytes: Buffer;
  offset: number;
}

function readByte(reader: Reader): number {
  const value = reader.bytes[reader.offset];
  if (value === undefined) throw new Error('Parquet footer: truncated');
  reader.offset++;
  return value;
}

function readVarint(reader: Reader): bigint {
  let value = 0n;
  let shift = 0n;
  for (;;) {
    const byte = readByte(reader);
    value |= BigInt(byte & 0x7f) << shift;
    if ((byte & 0x80) === 0) return value;
    shift += 7n;
    if (shift > 70n) throw new Error('Parquet footer: varint too long');
  }
}

function zigzag(value: bigint): number {
  return Number((value >> 1n) ^ -(value & 1n));
}

function skip(reader: Reader, bytes: number): void {
  if (reader.offset + bytes > reader.bytes.length) throw new Error('Parquet footer: truncated');
  reader.offset += bytes;
}

function skipValue(reader: Reader, type: number): void {
  switch (type) {
    case T_BOOL_TRUE:
    case T_BOOL_FALSE:
      return;
    case T_BYTE:
      skip(reader, 1);
      return;
    case T_I16:
    case T_I32:
    case T_I64:
      readVarint(reader);
      return;
    case T_DOUBLE:
      skip(reader, 8);
      return;
    case T_BINARY:
      skip(reader, Number(readVarint(reader)));
      return;
    case T_LIST:
    case T_SET: {
      const header = readByte(reader);
      const count = header >> 4 === 15 ? Number(readVarint(reader)) : header >> 4;
      const element = header & 0x0f;
      for (let i = 0; i < count; i++) skipElement(reader, element);
      return;
    }
    case T_MAP: {
      const count = Number(readVarint(reader));
      if (count === 0) return;
      const types = readByte(reader);
      for (let i = 0; i < count; i++) {
        skipElement(reader, types >> 4);
        skipElement(reader, types & 0x0f);
      }
      return;
    }
    case T_STRUCT:
      for (;;) {
        const header = readByte(reader);
        if (header === 0) return;
        if (header >> 4 === 0) readVarint(reader);
        skipValue(reader, header & 0x0f);
      }
    default:
      throw new Error(`Parquet footer: unknown Thrift type ${type}`);
  }
}

/** A collection's element: a bool there is one byte, not a type. */
function skipElement(reader: Reader, type: number): void {
  if (type === T_BOOL_TRUE || type === T_BOOL_FALSE) skip(reader, 1);
  else skipValue(reader, type);
}

function varint(value: number): Buffer {
  const out: number[] = [];
  let rest = value;
  while (rest >= 0x80) {
    out.push((rest & 0x7f) | 0x80);
    rest = Math.floor(rest / 128);
  }
  out.push(rest);
  return Buffer.from(out);
}

function fieldHeader(id: number, type: number, previous: number): Buffer {
  const delta = id - previous;
  if (delta > 0 && delta <= 15) return Buffer.from([(delta << 4) | type]);
  return Buffer.concat([Buffer.from([type]), varint(id >= 0 ? id * 2 : -id * 2 - 1)]);
}

function binary(text: string): Buffer {
  const bytes = Buffer.from(text, 'utf8');
  return Buffer.concat([varint(bytes.length), bytes]);
}

/** list<KeyValue>, KeyValue = struct { 1: required string key, 2: optional string value }. */
function keyValueList(entries: readonly (readonly [string, string])[]): Buffer {
  const header =
    entries.length < 15
      ? Buffer.from([(entries.length << 4) | T_STRUCT])
      : Buffer.concat([Buffer.from([0xf0 | T_STRUCT]), varint(entries.length)]);
  const items = entries.map(([key, value]) =>
    Buffer.concat([
      fieldHeader(1, T_BINARY, 0),
      binary(key),
      fieldHeader(2, T_BINARY, 1),
      binary(value),
      Buffer.from([0]),
    ]),
  );
  return Buffer.concat([header, ...items]);
}
