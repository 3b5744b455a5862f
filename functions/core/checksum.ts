import { createReadStream } from 'node:fs';
import { crc32 } from 'node:zlib';
import type { Checksum } from './object-store.ts';

/** S3's full-object CRC32 (`ChecksumCRC32`): base64 of the big-endian value, streamed. */
export async function crc32OfFile(path: string): Promise<Checksum> {
  let value = 0;
  for await (const chunk of createReadStream(path, { highWaterMark: 1 << 20 })) {
    value = crc32(chunk as Buffer, value);
  }
  return crc32Checksum(value);
}

export function crc32OfBytes(bytes: Buffer): Checksum {
  return crc32Checksum(crc32(bytes));
}

function crc32Checksum(value: number): Checksum {
  const out = Buffer.alloc(4);
  out.writeUInt32BE(value >>> 0);
  return { algorithm: 'CRC32', value: out.toString('base64') };
}
