import { deserializeTCompactProtocol } from 'hyparquet/src/thrift.js';
import { describe, expect, it } from 'vitest';
import { CompactReader, ThriftType as T } from '../../functions/adapters/thrift-compact.ts';

/** Bytes written by hand from the compact protocol spec (thrift-compact-protocol.md). */
function varint(n: bigint): number[] {
  const out: number[] = [];
  let v = n;
  do {
    let b = Number(v & 0x7fn);
    v >>= 7n;
    if (v > 0n) b |= 0x80;
    out.push(b);
  } while (v > 0n);
  return out;
}
const zigzag = (n: bigint): number[] => varint(n >= 0n ? n * 2n : -n * 2n - 1n);
const reader = (bytes: number[]) => new CompactReader(new DataView(Uint8Array.from(bytes).buffer), 0);

// A struct exercising every type the reader steps over: short and long field ids, a boolean field
// (its value in the header), a list of booleans (a byte each), a list of 20 elements (its size in
// a varint), a map, a set, a nested struct, then the fields the test reads.
// biome-ignore format: one field per line
const struct: number[] = [
  0x11, // field 1, TRUE
  0x13, 0x7f, // field 2, BYTE
  0x14, ...zigzag(-300n), // field 3, I16
  0x16, ...zigzag(-(2n ** 62n)), // field 4, I64 beyond 2^53: stepped over, never read
  0x17, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, // field 5, DOUBLE 1.0
  0x18, ...varint(3n), 0x61, 0x62, 0x63, // field 6, BINARY "abc"
  0x19, 0x31, 1, 2, 1, // field 7, LIST of 3 booleans
  0x19, 0xf5, ...varint(20n), ...Array.from({ length: 20 }, (_, i) => zigzag(BigInt(i))).flat(), // field 8
  0x1b, ...varint(2n), 0x85, 1, 0x78, ...zigzag(5n), 1, 0x79, ...zigzag(6n), // field 9, MAP<binary,i32>
  0x1a, 0x25, ...zigzag(1n), ...zigzag(2n), // field 10, SET<i32>
  0x1c, 0x15, ...zigzag(9n), 0x12, 0x00, // field 11, STRUCT {1: 9, 2: false}
  0x08, ...zigzag(200n), ...varint(1n), 0x7a, // field 200 (long form), BINARY "z"
  0x15, ...zigzag(-7n), // field 201, I32 -7
  0x16, ...zigzag(2n ** 53n - 1n), // field 202, I64 2^53 - 1
  0x00,
];

describe('CompactReader', () => {
  it('steps over every type and reads long-form ids, text and integers up to 2^53', () => {
    const r = reader(struct);
    const seen: Record<number, unknown> = {};
    r.struct((id, type) => {
      if (id === 200 && type === T.BINARY) seen[id] = Buffer.from(r.binary()).toString();
      else if (id >= 201) seen[id] = r.integer();
      else r.skip(type);
    });
    expect(r.offset).toBe(struct.length);
    expect(seen).toEqual({ 200: 'z', 201: -7, 202: 2 ** 53 - 1 });
  });

  it('steps over a whole struct as one value, long-form ids and all', () => {
    const r = reader(struct);
    r.skip(T.STRUCT);
    expect(r.offset).toBe(struct.length);
  });

  it('agrees with hyparquet on a struct of the types Parquet uses', () => {
    // biome-ignore format: one field per line
    const parquetTypes = [
      0x11, // field 1, TRUE
      0x13, 0x7f, // field 2, BYTE
      0x14, ...zigzag(-300n), // field 3, I16
      0x18, ...varint(3n), 0x61, 0x62, 0x63, // field 4, BINARY "abc"
      0x19, 0x31, 1, 2, 1, // field 5, LIST of 3 booleans
      0x1c, 0x15, ...zigzag(9n), 0x00, // field 6, STRUCT {1: 9}
      0x05, ...zigzag(200n), ...zigzag(-7n), // field 200 (long form), I32 -7
      0x00,
    ];
    const lib = { view: new DataView(Uint8Array.from(parquetTypes).buffer), offset: 0 };
    const decoded = deserializeTCompactProtocol(lib) as Record<string, unknown>;
    const r = reader(parquetTypes);
    const ids: number[] = [];
    let last: number | undefined;
    r.struct((id, type) => {
      ids.push(id);
      if (id === 200) last = r.integer();
      else r.skip(type);
    });
    expect(r.offset).toBe(lib.offset);
    expect(ids.map((id) => `field_${id}`)).toEqual(Object.keys(decoded));
    expect(last).toBe(decoded.field_200);
  });

  it('throws RangeError for malformed input: past the end, an unknown type, a number beyond 2^53, too deep', () => {
    const cut = reader([0x18, ...varint(10n), 0x61]);
    expect(() => cut.struct((_id, type) => cut.skip(type))).toThrow(RangeError);
    // A fixed-size value cut short fails where it is stepped over, not at some later read.
    for (const type of [T.DOUBLE, T.BYTE]) expect(() => reader([]).skip(type)).toThrow(RangeError);
    expect(() => reader([]).skip(T.TRUE, true)).toThrow(RangeError);
    const unknown = reader([0x1d, 0x00]);
    expect(() => unknown.struct((_id, type) => unknown.skip(type))).toThrow(RangeError);
    const huge = reader([0x16, ...zigzag(2n ** 53n), 0x00]);
    const negative = reader([0x16, ...zigzag(-(2n ** 53n) + 1n), 0x00]);
    let read: number | undefined;
    negative.struct(() => {
      read = negative.integer();
    });
    expect(read).toBe(-(2 ** 53) + 1);
    expect(() => huge.struct(() => huge.integer())).toThrow(RangeError);
    const nested = reader([
      ...Array.from({ length: 100 }, () => 0x1c),
      ...Array.from({ length: 101 }, () => 0),
    ]);
    expect(() => nested.struct((_id, type) => nested.skip(type))).toThrow(RangeError);
  });
});
