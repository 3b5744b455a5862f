/**
 * Removes the column chunk statistics (ColumnMetaData field 12) from a Parquet file's footer, as a
 * writer that writes none would leave it; pages and everything else stay byte for byte. DuckDB
 * always writes statistics, and no other writer is installed here. Thrift compact protocol:
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
  readonly struct?: readonly Field[];
  readonly list?: readonly (readonly Field[] | undefined)[];
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
): { end: number; struct?: Field[]; list?: (Field[] | undefined)[] } {
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
      return { end: at + length };
    }
    case LIST: {
      const header = buf[pos++] as number;
      const elementType = header & 0x0f;
      let size = header >> 4;
      if (size === 15) [size, pos] = varint(buf, pos);
      const list: (Field[] | undefined)[] = [];
      for (let i = 0; i < size; i++) {
        if (elementType === 1 || elementType === 2) {
          pos += 1;
          list.push(undefined);
          continue;
        }
        const element = value(buf, pos, elementType);
        list.push(element.struct);
        pos = element.end;
      }
      return { end: pos, list };
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
