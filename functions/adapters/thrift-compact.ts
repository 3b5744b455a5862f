/**
 * Thrift's compact protocol, as the Parquet footer code needs it: a reader that builds only the
 * values its caller asks for and steps over the rest (summarising a footer needs a few integers
 * per column chunk, and building every field, as hyparquet's deserializer does with an object per
 * struct, cost several times the walk), and the few encoders a footer rewrite needs.
 * Encoding: https://github.com/apache/thrift/blob/master/doc/specs/thrift-compact-protocol.md
 *
 * Malformed input (a value past the end, an unknown type, an integer beyond 2^53) throws a
 * RangeError, as DataView does for a read past its end, so a caller catches one error class.
 */

/** Compact protocol type ids (field headers and list headers). */
export const ThriftType = {
  STOP: 0,
  TRUE: 1,
  FALSE: 2,
  BYTE: 3,
  I16: 4,
  I32: 5,
  I64: 6,
  DOUBLE: 7,
  BINARY: 8,
  LIST: 9,
  SET: 10,
  MAP: 11,
  STRUCT: 12,
} as const;

const T = ThriftType;

/** Deeper nesting than any Parquet footer has is refused, so a crafted footer cannot overflow the stack. */
const MAX_DEPTH = 64;

export class CompactReader {
  readonly view: DataView;
  offset: number;

  constructor(view: DataView, offset: number) {
    this.view = view;
    this.offset = offset;
  }

  byte(): number {
    return this.view.getUint8(this.offset++);
  }

  /** An unsigned varint (a size or length) as a number; a RangeError past 2^49. */
  varint(): number {
    const value = this.#shortVarint();
    if (value === undefined) throw new RangeError('thrift varint beyond 2^49');
    return value;
  }

  /** An i16, i32 or i64 (zigzag varint) as a safe integer; a RangeError beyond. */
  integer(): number {
    const start = this.offset;
    const zigzag = this.#shortVarint();
    if (zigzag !== undefined) return zigzag % 2 === 0 ? zigzag / 2 : -(zigzag + 1) / 2;
    // Past seven bytes a double may not hold the sum exactly: read it again as a bigint.
    this.offset = start;
    return this.#wideInteger();
  }

  /** A field's value as an integer when `type` is one; else undefined, the value stepped over. */
  integerOf(type: number): number | undefined {
    if (isInteger(type)) return this.integer();
    this.skip(type);
    return undefined;
  }

  /** A varint of at most seven bytes (under 2^49, exact in a double); undefined if longer. */
  #shortVarint(): number | undefined {
    let result = 0;
    let scale = 1;
    for (;;) {
      const b = this.byte();
      result += (b & 0x7f) * scale;
      if ((b & 0x80) === 0) return result;
      scale *= 128;
      if (scale >= 2 ** 49) return undefined;
    }
  }

  #wideInteger(): number {
    let zigzag = 0n;
    let shift = 0n;
    for (;;) {
      const b = this.byte();
      zigzag |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) break;
      shift += 7n;
      if (shift > 63n) throw new RangeError('thrift varint longer than ten bytes');
    }
    const value = Number((zigzag >> 1n) ^ -(zigzag & 1n));
    if (!Number.isSafeInteger(value)) throw new RangeError('thrift integer beyond 2^53');
    return value;
  }

  /** Bytes of a binary or string value, as a view of the input (not a copy). */
  binary(): Uint8Array {
    const length = this.varint();
    const start = this.offset;
    this.#advance(length);
    return new Uint8Array(this.view.buffer, this.view.byteOffset + start, length);
  }

  /** Steps over `bytes` bytes, which must lie within the input. */
  #advance(bytes: number): void {
    if (this.offset + bytes > this.view.byteLength) throw new RangeError('thrift value past the end');
    this.offset += bytes;
  }

  /**
   * The struct starting here: `field` is called with each field's id and type and must read or
   * skip its value (skip); returns after the struct's STOP.
   */
  struct(field: (id: number, type: number) => void): void {
    let id = 0;
    for (;;) {
      const header = this.byte();
      const type = header & 0x0f;
      if (type === T.STOP) return;
      id = this.#fieldId(header, id);
      field(id, type);
    }
  }

  /** A field's id from its header: a delta from the last field's, or a long-form id after it. */
  #fieldId(header: number, previous: number): number {
    const delta = header >> 4;
    return delta === 0 ? this.integer() : previous + delta;
  }

  /** The list header starting here: its element type and size (elements follow). */
  list(): { readonly type: number; readonly size: number } {
    const header = this.byte();
    return { type: header & 0x0f, size: this.#listSize(header) };
  }

  /** A list's size from its header: in its high bits, or a varint after it when they are all set. */
  #listSize(header: number): number {
    const short = header >> 4;
    return short === 15 ? this.varint() : short;
  }

  /**
   * Steps over one value of `type` (a field's value, or a list element's when `inList`). It makes
   * no object on the way (no view of a binary, no list header, no callback per struct): most of a
   * footer is stepped over, statistics above all.
   */
  skip(type: number, inList = false, depth = 0): void {
    if (depth > MAX_DEPTH) throw new RangeError('thrift value nested too deep');
    switch (type) {
      case T.TRUE:
      case T.FALSE:
        // A boolean field's value is in its header; a list's booleans are a byte each.
        if (inList) this.#advance(1);
        return;
      case T.BYTE:
        this.#advance(1);
        return;
      case T.I16:
      case T.I32:
      case T.I64:
        while ((this.byte() & 0x80) !== 0) {}
        return;
      case T.DOUBLE:
        this.#advance(8);
        return;
      case T.BINARY:
        this.#advance(this.varint());
        return;
      case T.LIST:
      case T.SET: {
        const header = this.byte();
        const size = this.#listSize(header);
        for (let i = 0; i < size; i++) this.skip(header & 0x0f, true, depth + 1);
        return;
      }
      case T.MAP: {
        const size = this.varint();
        if (size === 0) return;
        const types = this.byte();
        for (let i = 0; i < size; i++) {
          this.skip(types >> 4, true, depth + 1);
          this.skip(types & 0x0f, true, depth + 1);
        }
        return;
      }
      case T.STRUCT:
        for (;;) {
          const header = this.byte();
          const fieldType = header & 0x0f;
          if (fieldType === T.STOP) return;
          this.#fieldId(header, 0); // steps over a long-form id
          this.skip(fieldType, false, depth + 1);
        }
      default:
        throw new RangeError(`thrift type ${type} unknown`);
    }
  }
}

/** Whether a field or element of `type` holds an integer (i16, i32 or i64). */
function isInteger(type: number): boolean {
  return type === T.I16 || type === T.I32 || type === T.I64;
}

/** An unsigned varint's bytes. */
export function varint(value: number): Buffer {
  const out: number[] = [];
  let rest = value;
  while (rest >= 0x80) {
    out.push((rest & 0x7f) | 0x80);
    rest = Math.floor(rest / 128);
  }
  out.push(rest);
  return Buffer.from(out);
}

/** A field header: the id as a delta from the previous field's when it fits, else in full. */
export function fieldHeader(id: number, type: number, previous: number): Buffer {
  const delta = id - previous;
  if (delta > 0 && delta <= 15) return Buffer.from([(delta << 4) | type]);
  return Buffer.concat([Buffer.from([type]), varint(id >= 0 ? id * 2 : -id * 2 - 1)]);
}
