/**
 * Removes the column chunk statistics (ColumnMetaData field 12) from a Parquet file's footer, as a
 * writer that writes none would leave it, or rewrites an INT64 column's min/max as a writer with a
 * statistics bug would; pages and everything else stay byte for byte. DuckDB always writes true
 * statistics, and no other writer is installed here. Thrift compact protocol:
 * https://github.com/apache/thrift/blob/master/doc/specs/thrift-compact-protocol.md
 */

import { readFile, writeFile } from 'node:fs/promises';

interface Field {
  readonly id: number;
  readonly type: number;
  /** Offset of the field header. */
  readonly start: number;
  /** Offset just past the value. */
  readonly end: number;
  /** Whether the header is one byte (delta form). */
  readonly short: boolean;
  /** Where a binary value's bytes are. */
  readonly bytes?: readonly [number, number];
  readonly struct?: readonly Field[];
  readonly list?: readonly (readonly Field[] | undefined)[];
  /** A list of binaries: where each one's bytes are. */
  readonly binaries?: readonly (readonly [number, number])[];
}

const STRUCT = 12;
const LIST = 9;

function varint(buf: Buffer, pos: number): [number, number] {
  let result = 0;
  let shift = 0;
  for (;;) {
    const byte = buf[pos++] as number;
    result += (byte & 0x7f) * 2 ** shift;
    if (!(byte & 0x80)) return [result, pos];
    shift += 7;
  }
}

/** Skips (or parses, for structs and lists) one value of `type` at `pos`. */
function value(
  buf: Buffer,
  pos: number,
  type: number,
): {
  end: number;
  bytes?: [number, number];
  struct?: Field[];
  list?: (Field[] | undefined)[];
  binaries?: [number, number][];
} {
  switch (type) {
    case 1:
    case 2:
      return { end: pos };
    case 3:
      return { end: pos + 1 };
    case 4:
    case 5:
    case 6:
      return { end: varint(buf, pos)[1] };
    case 7:
      return { end: pos + 8 };
    case 8: {
      const [length, at] = varint(buf, pos);
      return { end: at + length, bytes: [at, at + length] };
    }
    case LIST: {
      const header = buf[pos++] as number;
      const elementType = header & 0x0f;
      let size = header >> 4;
      if (size === 15) [size, pos] = varint(buf, pos);
      const list: (Field[] | undefined)[] = [];
      const binaries: [number, number][] = [];
      for (let i = 0; i < size; i++) {
        if (elementType === 1 || elementType === 2) {
          pos += 1;
          list.push(undefined);
          continue;
        }
        const element = value(buf, pos, elementType);
        list.push(element.struct);
        if (element.bytes) binaries.push(element.bytes);
        pos = element.end;
      }
      return { end: pos, list, binaries };
    }
    case STRUCT: {
      const fields = struct(buf, pos);
      return { end: fields.end, struct: fields.fields };
    }
    default:
      throw new Error(`unexpected thrift type ${type} at ${pos}`);
  }
}

function struct(buf: Buffer, pos: number): { fields: Field[]; end: number } {
  const fields: Field[] = [];
  let id = 0;
  for (;;) {
    const start = pos;
    const header = buf[pos++] as number;
    const type = header & 0x0f;
    if (type === 0) return { fields, end: pos };
    const delta = header >> 4;
    if (delta !== 0) id += delta;
    else {
      const [zigzag, at] = varint(buf, pos);
      pos = at;
      id = (zigzag >>> 1) ^ -(zigzag & 1);
    }
    const parsed = value(buf, pos, type);
    fields.push({ id, type, start, short: delta !== 0, ...parsed });
    pos = parsed.end;
  }
}

/** Rewrites `path` without column statistics; returns how many chunks lost theirs. */
export async function stripStatistics(path: string): Promise<number> {
  const file = await readFile(path);
  const footerLength = file.readUInt32LE(file.length - 8);
  const footerStart = file.length - 8 - footerLength;
  const footer = file.subarray(footerStart, file.length - 8);
  const { fields } = struct(footer, 0);
  // [start, end) ranges to cut and [offset, byte] header rewrites, in footer coordinates.
  const cuts: [number, number][] = [];
  const rewrites: [number, number][] = [];
  const rowGroups = fields.find((f) => f.id === 4)?.list ?? [];
  for (const group of rowGroups) {
    for (const chunk of group?.find((f) => f.id === 1)?.list ?? []) {
      const meta = chunk?.find((f) => f.id === 3)?.struct ?? [];
      const at = meta.findIndex((f) => f.id === 12);
      const stats = meta[at];
      if (stats === undefined) continue;
      const previous = at > 0 ? (meta[at - 1]?.id ?? 0) : 0;
      const next = meta[at + 1];
      if (next !== undefined) {
        const delta = next.id - previous;
        if (!next.short || delta > 15) throw new Error('cannot renumber the field after the statistics');
        rewrites.push([next.start, (delta << 4) | next.type]);
      }
      cuts.push([stats.start, stats.end]);
    }
  }
  const edited = Buffer.from(footer);
  for (const [offset, byte] of rewrites) edited[offset] = byte;
  const parts: Buffer[] = [];
  let from = 0;
  for (const [start, end] of cuts) {
    parts.push(edited.subarray(from, start));
    from = end;
  }
  parts.push(edited.subarray(from));
  const newFooter = Buffer.concat(parts);
  const length = Buffer.alloc(4);
  length.writeUInt32LE(newFooter.length);
  await writeFile(
    path,
    Buffer.concat([file.subarray(0, footerStart), newFooter, length, Buffer.from('PAR1')]),
  );
  return cuts.length;
}

/**
 * Rewrites the min/max statistics (min_value/max_value and the legacy min/max) of every chunk of
 * the INT64 column `column` to `min` and `max`, leaving its pages as they are: statistics that lie.
 * Returns how many chunks were changed.
 */
export async function forgeInt64Statistics(
  path: string,
  column: string,
  min: bigint,
  max: bigint,
): Promise<number> {
  const file = await readFile(path);
  const footerLength = file.readUInt32LE(file.length - 8);
  const footerStart = file.length - 8 - footerLength;
  const footer = file.subarray(footerStart, file.length - 8);
  const { fields } = struct(footer, 0);
  let changed = 0;
  for (const group of fields.find((f) => f.id === 4)?.list ?? []) {
    for (const chunk of group?.find((f) => f.id === 1)?.list ?? []) {
      const meta = chunk?.find((f) => f.id === 3)?.struct ?? [];
      const [name] = meta.find((f) => f.id === 3)?.binaries ?? [];
      if (name === undefined || footer.subarray(name[0], name[1]).toString('utf8') !== column) continue;
      const stats = meta.find((f) => f.id === 12)?.struct ?? [];
      for (const field of stats) {
        const value =
          field.id === 1 || field.id === 5 ? max : field.id === 2 || field.id === 6 ? min : undefined;
        if (value === undefined || field.bytes === undefined) continue;
        if (field.bytes[1] - field.bytes[0] !== 8) throw new Error('not an INT64 statistic');
        footer.writeBigInt64LE(value, field.bytes[0]);
      }
      changed++;
    }
  }
  await writeFile(path, file);
  return changed;
}
