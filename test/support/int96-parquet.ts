/**
 * Writes a small Parquet file as Firehose's Parquet SerDe can: a `time` column of physical type
 * INT96 (no logical type), beside `id` (INT64). No writer installed here writes INT96 (DuckDB and
 * Polars never do), so the file is built by hand: one row group, one PLAIN uncompressed data page
 * per REQUIRED column, and the FileMetaData in Thrift's compact protocol
 * (https://github.com/apache/parquet-format/blob/master/src/main/thrift/parquet.thrift).
 * Deterministic: the same rows give the same bytes.
 */

import { writeFile } from 'node:fs/promises';

/** Thrift compact protocol, just what FileMetaData needs. */
class Compact {
  readonly bytes: number[] = [];
  #last: number[] = [0];

  #varint(value: bigint): void {
    let v = value;
    while (v >= 0x80n) {
      this.bytes.push(Number((v & 0x7fn) | 0x80n));
      v >>= 7n;
    }
    this.bytes.push(Number(v));
  }

  #zigzag(value: bigint): void {
    this.#varint(value >= 0n ? value << 1n : (-value << 1n) - 1n);
  }

  #field(id: number, type: number): void {
    const last = this.#last[this.#last.length - 1] ?? 0;
    const delta = id - last;
    if (delta > 0 && delta <= 15) this.bytes.push((delta << 4) | type);
    else {
      this.bytes.push(type);
      this.#zigzag(BigInt(id));
    }
    this.#last[this.#last.length - 1] = id;
  }

  /** The stop byte that ends the outermost struct. */
  end(): Buffer {
    return Buffer.from([...this.bytes, 0]);
  }

  i32(id: number, value: number): this {
    this.#field(id, 5);
    this.#zigzag(BigInt(value));
    return this;
  }

  i64(id: number, value: number | bigint): this {
    this.#field(id, 6);
    this.#zigzag(BigInt(value));
    return this;
  }

  string(id: number, value: string): this {
    this.#field(id, 8);
    const utf8 = Buffer.from(value, 'utf8');
    this.#varint(BigInt(utf8.length));
    this.bytes.push(...utf8);
    return this;
  }

  struct(id: number, body: (c: this) => void): this {
    this.#field(id, 12);
    this.#structBody(body);
    return this;
  }

  #structBody(body: (c: this) => void): void {
    this.#last.push(0);
    body(this);
    this.bytes.push(0);
    this.#last.pop();
  }

  /** A list of structs (type 12), i32s (5) or strings (8). */
  list<T>(id: number, type: 5 | 8 | 12, items: readonly T[], write: (c: this, item: T) => void): this {
    this.#field(id, 9);
    if (items.length < 15) this.bytes.push((items.length << 4) | type);
    else {
      this.bytes.push(0xf0 | type);
      this.#varint(BigInt(items.length));
    }
    for (const item of items) write(this, item);
    return this;
  }

  listStruct(c: this, body: (c: this) => void): void {
    c.#structBody(body);
  }

  listI32(value: number): void {
    this.#zigzag(BigInt(value));
  }

  listString(value: string): void {
    const utf8 = Buffer.from(value, 'utf8');
    this.#varint(BigInt(utf8.length));
    this.bytes.push(...utf8);
  }
}

const JULIAN_UNIX_EPOCH = 2_440_588;
const NANOS_PER_DAY = 86_400_000_000_000n;

/** INT96 as Impala/Hive/Firehose write it: nanoseconds of the day (8 bytes LE), Julian day (4 bytes LE). */
export function int96(epochMicros: bigint): Buffer {
  const nanos = epochMicros * 1000n;
  const days = nanos >= 0n ? nanos / NANOS_PER_DAY : (nanos - NANOS_PER_DAY + 1n) / NANOS_PER_DAY;
  const out = Buffer.alloc(12);
  out.writeBigUInt64LE(nanos - days * NANOS_PER_DAY, 0);
  out.writeUInt32LE(Number(days) + JULIAN_UNIX_EPOCH, 8);
  return out;
}

export interface Int96Row {
  readonly id: bigint;
  /** Microseconds since the Unix epoch (UTC). */
  readonly timeMicros: bigint;
}

/** The bytes of a Parquet file holding `rows` with `id` INT64 and `time` INT96. */
export function int96ParquetBytes(rows: readonly Int96Row[]): Buffer {
  const ids = Buffer.alloc(8 * rows.length);
  rows.forEach((r, i) => {
    ids.writeBigInt64LE(r.id, i * 8);
  });
  const times = Buffer.concat(rows.map((r) => int96(r.timeMicros)));
  const parts: Buffer[] = [Buffer.from('PAR1', 'latin1')];
  let offset = 4;
  const chunks: { name: string; type: number; offset: number; size: number }[] = [];
  for (const [name, type, data] of [
    ['id', 2, ids],
    ['time', 3, times],
  ] as const) {
    // PageHeader: DATA_PAGE, sizes, DataPageHeader(num_values, PLAIN, RLE, RLE).
    const header = new Compact()
      .i32(1, 0)
      .i32(2, data.length)
      .i32(3, data.length)
      .struct(5, (c) => c.i32(1, rows.length).i32(2, 0).i32(3, 3).i32(4, 3));
    const page = Buffer.concat([header.end(), data]);
    chunks.push({ name, type, offset, size: page.length });
    parts.push(page);
    offset += page.length;
  }
  const meta = new Compact()
    .i32(1, 1)
    .list(2, 12, [{ root: true }, ...chunks.map((c) => ({ root: false, ...c }))], (c, el) =>
      c.listStruct(c, (s) => {
        if (!el.root && 'type' in el) s.i32(1, el.type);
        if (!el.root) s.i32(3, 0); // REQUIRED
        s.string(4, el.root ? 'schema' : (el as { name: string }).name);
        if (el.root) s.i32(5, chunks.length);
      }),
    )
    .i64(3, rows.length)
    .list(4, 12, [0], (c) =>
      c.listStruct(c, (rg) => {
        rg.list(1, 12, chunks, (cc, chunk) =>
          cc.listStruct(cc, (col) => {
            col.i64(2, chunk.offset);
            col.struct(3, (m) => {
              m.i32(1, chunk.type);
              m.list(2, 5, [0], (l, e) => l.listI32(e));
              m.list(3, 8, [chunk.name], (l, e) => l.listString(e));
              m.i32(4, 0); // UNCOMPRESSED
              m.i64(5, rows.length);
              m.i64(6, chunk.size);
              m.i64(7, chunk.size);
              m.i64(9, chunk.offset);
            });
          }),
        );
        rg.i64(
          2,
          chunks.reduce((n, c) => n + c.size, 0),
        );
        rg.i64(3, rows.length);
      }),
    )
    .string(6, 'parquet-mr version 1.10.1 (hand-built INT96 fixture)');
  const footer = meta.end();
  const length = Buffer.alloc(4);
  length.writeUInt32LE(footer.length, 0);
  parts.push(footer, length, Buffer.from('PAR1', 'latin1'));
  return Buffer.concat(parts);
}

export async function writeInt96Parquet(path: string, rows: readonly Int96Row[]): Promise<void> {
  await writeFile(path, int96ParquetBytes(rows));
}
