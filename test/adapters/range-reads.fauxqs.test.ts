/**
 * Ranged reads (ObjectStore.getRange): S3Store sends GetObject with `Range: bytes=first-last`
 * (https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html#API_GetObject_RequestSyntax)
 * to a real S3-protocol server (fauxqs, in process, real SDK); LocalFolderStore reads at the
 * offset. The Parquet check of extension-less inputs (parquet-sniff.ts) reads through them.
 */

import { afterAll, describe, expect, it } from 'vitest';
import { LocalFolderStore } from '../../functions/adapters/local-store/local-store.ts';
import { S3Store } from '../../functions/adapters/s3-store/s3-store.ts';
import { NotFoundError, PreconditionFailedError } from '../../functions/core/errors.ts';
import { type ObjectStore, readRange } from '../../functions/core/object-store.ts';
import { isParquetObject } from '../../functions/core/parquet-sniff.ts';
import { useTempDir } from '../support/engine-fixture.ts';
import { type FauxqsS3, startFauxqsS3 } from '../support/fauxqs-server.ts';
import { int96ParquetBytes } from '../support/int96-parquet.ts';

let s3: FauxqsS3;
let dir: string;
const stores: Record<string, ObjectStore> = {};

useTempDir('range-reads-', async (d) => {
  dir = d;
  s3 = await startFauxqsS3('ranges');
  stores.s3 = new S3Store({ client: s3.client, bucket: s3.bucket });
  stores.local = new LocalFolderStore(dir);
});

afterAll(async () => {
  await s3?.stop();
});

const body = Buffer.from(Array.from({ length: 300 }, (_, i) => i % 251));

describe.each(['s3', 'local'])('%s getRange', (name) => {
  const store = () => stores[name] as ObjectStore;

  it('returns bytes [start, end) and the ETag; a missing key is NotFoundError', async () => {
    const { etag } = await store().put('a/b.bin', body);
    expect(store().getRange).toBeDefined();
    for (const [start, end] of [
      [0, 4],
      [292, 300],
      [100, 101],
      [0, 300],
    ] as const) {
      const got = await readRange(store(), 'a/b.bin', start, end, { ifMatch: etag });
      expect(got.body).toEqual(body.subarray(start, end));
      expect(got.etag).toBe(etag);
    }
    await expect(readRange(store(), 'a/none.bin', 0, 4)).rejects.toBeInstanceOf(NotFoundError);
  });

  it('isParquetObject reads a Parquet file and a look-alike through it', async () => {
    const parquet = int96ParquetBytes([{ id: 1n, timeMicros: 0n }]);
    const p = await store().put('t/2026/11/01/05/s-1', parquet);
    const json = Buffer.from('{"id": 1}\n{"id": 2}\n');
    const j = await store().put('t/2026/11/01/05/s-2', json);
    expect(
      await isParquetObject(store(), { key: 't/2026/11/01/05/s-1', size: parquet.length, etag: p.etag }),
    ).toBe(true);
    expect(
      await isParquetObject(store(), { key: 't/2026/11/01/05/s-2', size: json.length, etag: j.etag }),
    ).toBe(false);
  });
});

describe('local getRange with a stale ETag', () => {
  it('is PreconditionFailedError, as getBytes', async () => {
    const store = stores.local as ObjectStore;
    await store.put('c.bin', body);
    await expect(readRange(store, 'c.bin', 0, 4, { ifMatch: 'stale' })).rejects.toBeInstanceOf(
      PreconditionFailedError,
    );
  });
});
