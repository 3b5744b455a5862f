/**
 * S3Store against a real S3-protocol server (fauxqs 2.4.1, in process) through the real SDK.
 *
 * fauxqs does not evaluate If-None-Match / If-Match on writes, ignores the ETag of a
 * DeleteObjects entry, has no ListMultipartUploads, stores checksums without validating
 * them, gives multipart uploads a COMPOSITE checksum only, and sorts listings with
 * localeCompare rather than by UTF-8 bytes. The last block pins those gaps down; the
 * conditional behaviour is covered by s3-store.mocked-conditional.test.ts.
 */

import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import { CreateMultipartUploadCommand, ListMultipartUploadsCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { S3Store } from '../../functions/adapters/s3-store/s3-store.ts';
import { NotFoundError, PreconditionFailedError } from '../../functions/core/errors.ts';
import type { ObjectSummary } from '../../functions/core/object-store.ts';
import { type FauxqsS3, startFauxqsS3 } from '../support/fauxqs-server.ts';

const MiB = 1024 * 1024;

/** S3's ChecksumCRC32: base64 of the big-endian CRC32, computed here independently of the SDK. */
function crc32Base64(data: Buffer): string {
  const bytes = Buffer.alloc(4);
  bytes.writeUInt32BE(crc32(data));
  return bytes.toString('base64');
}

async function collect(iterable: AsyncIterable<ObjectSummary>): Promise<ObjectSummary[]> {
  const items: ObjectSummary[] = [];
  for await (const item of iterable) items.push(item);
  return items;
}

function byUtf8Bytes(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

let s3: FauxqsS3;
let store: S3Store;
let dir: string;

beforeAll(async () => {
  s3 = await startFauxqsS3('lake');
  store = new S3Store({ client: s3.client, bucket: s3.bucket, partSizeBytes: 5 * MiB });
  dir = await mkdtemp(join(tmpdir(), 's3-store-fauxqs-'));
});

afterAll(async () => {
  await s3?.stop();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

describe('S3Store on fauxqs (in-process S3 server, real SDK)', () => {
  it('names its location after the bucket', () => {
    expect(store.location).toBe('s3://lake');
  });

  it('round-trips bytes with metadata, content type and an independently computed CRC32', async () => {
    const body = Buffer.from('{"state":"claimed","jobId":"j-1"}');
    const checksum = crc32Base64(body);
    const { etag } = await store.put('rt/manifest.json', body, {
      metadata: { 'Job-Id': 'j-1', tier: 'hourly' },
      contentType: 'application/json',
      checksum: { algorithm: 'CRC32', value: checksum },
    });
    expect(etag).not.toContain('"');

    const head = await store.head('rt/manifest.json');
    expect(head).toMatchObject({
      key: 'rt/manifest.json',
      size: body.length,
      etag,
      checksum: { algorithm: 'CRC32', value: checksum },
      // Metadata names come back lower-cased.
      metadata: { 'job-id': 'j-1', tier: 'hourly' },
    });
    expect(head?.lastModified).toBeInstanceOf(Date);

    const got = await store.getBytes('rt/manifest.json');
    expect(got.body.equals(body)).toBe(true);
    expect(got.etag).toBe(etag);
    // fauxqs does evaluate If-Match on GET (with the quoted ETag the adapter sends).
    await expect(store.getBytes('rt/manifest.json', { ifMatch: etag })).resolves.toMatchObject({ etag });
  });

  it('keeps a full-object CRC32 even when none is given (the SDK computes it)', async () => {
    const body = randomBytes(3000);
    await store.put('rt/no-checksum-given.bin', body);
    const head = await store.head('rt/no-checksum-given.bin');
    expect(head?.checksum).toEqual({ algorithm: 'CRC32', value: crc32Base64(body) });
  });

  it('uploads a small file with one PutObject and a CRC32', async () => {
    const file = join(dir, 'small.parquet');
    const body = randomBytes(200_000);
    await writeFile(file, body);
    const { etag } = await store.put('rt/small.parquet', { file }, { metadata: { 'job-id': 'j-2' } });
    expect(etag).toMatch(/^[0-9a-f]{32}$/);
    const head = await store.head('rt/small.parquet');
    expect(head).toMatchObject({ size: body.length, checksum: { value: crc32Base64(body) } });
    expect(head?.metadata).toEqual({ 'job-id': 'j-2' });
  });

  it('returns undefined from head for a missing key', async () => {
    await expect(store.head('rt/does-not-exist')).resolves.toBeUndefined();
  });

  it('throws NotFoundError from getBytes and getToFile for a missing key, leaving no file', async () => {
    await expect(store.getBytes('rt/does-not-exist')).rejects.toBeInstanceOf(NotFoundError);
    const path = join(dir, 'missing.out');
    await expect(store.getToFile('rt/does-not-exist', path)).rejects.toMatchObject({
      name: 'NotFoundError',
      key: 'rt/does-not-exist',
    });
    await expect(stat(path)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('streams an object to a file and honours If-Match on the download', async () => {
    const body = randomBytes(1_500_000);
    const { etag } = await store.put('rt/to-file.bin', body);
    const path = join(dir, 'to-file.out');
    await expect(store.getToFile('rt/to-file.bin', path, { ifMatch: etag })).resolves.toEqual({
      etag,
      size: body.length,
    });
    expect((await readFile(path)).equals(body)).toBe(true);

    const stale = join(dir, 'stale.out');
    await expect(
      store.getToFile('rt/to-file.bin', stale, { ifMatch: '0'.repeat(32) }),
    ).rejects.toBeInstanceOf(PreconditionFailedError);
    await expect(stat(stale)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('lists 1,205 keys under a prefix across pages, in key order, nothing outside it', async () => {
    const keys = Array.from({ length: 1205 }, (_, i) => `pages/p/k-${String(i).padStart(5, '0')}.parquet`);
    const outside = ['pages/o/k-00000.parquet', 'pages/pa', 'pages/q/x'];
    const all = [...keys, ...outside];
    for (let i = 0; i < all.length; i += 50) {
      await Promise.all(all.slice(i, i + 50).map((key) => store.put(key, Buffer.from(key))));
    }
    let listRequests = 0;
    s3.client.middlewareStack.add(
      (next, context) => async (args) => {
        if (context.commandName === 'ListObjectsV2Command') listRequests++;
        return next(args);
      },
      { step: 'initialize', name: 'countListRequests' },
    );
    const listed = await collect(store.list('pages/p/')).finally(() => {
      s3.client.middlewareStack.remove('countListRequests');
    });
    // S3 (and fauxqs) return at most 1,000 keys a page.
    expect(listRequests).toBe(2);
    expect(listed.map((item) => item.key)).toEqual([...keys].sort(byUtf8Bytes));
    const first = listed[0];
    expect(first).toMatchObject({
      size: Buffer.byteLength(keys[0] ?? ''),
      etag: expect.stringMatching(/^[0-9a-f]{32}$/),
    });
    expect(first?.lastModified).toBeInstanceOf(Date);
  });

  it('lists nothing under an empty prefix range', async () => {
    await expect(collect(store.list('pages/none/'))).resolves.toEqual([]);
  });

  it('uploads a file larger than one part as a multipart upload and downloads it intact', async () => {
    const file = join(dir, 'big.parquet');
    const body = randomBytes(12 * MiB + 12_345);
    await writeFile(file, body);
    const { etag } = await store.put(
      'mp/big.parquet',
      { file },
      {
        ifNoneMatch: '*',
        metadata: { 'job-id': 'j-3' },
        contentType: 'application/vnd.apache.parquet',
        checksum: { algorithm: 'CRC32', value: crc32Base64(body) },
      },
    );
    // 5 MiB parts: 5 + 5 + 2 MiB (and a bit).
    expect(etag).toMatch(/^[0-9a-f]{32}-3$/);

    const head = await store.head('mp/big.parquet');
    expect(head).toMatchObject({ size: body.length, etag, metadata: { 'job-id': 'j-3' } });
    // fauxqs only computes a COMPOSITE checksum for multipart uploads, which is not a
    // full-object checksum, so head leaves it out (real S3 keeps the FULL_OBJECT one).
    expect(head?.checksum).toBeUndefined();

    const path = join(dir, 'big.out');
    await expect(store.getToFile('mp/big.parquet', path)).resolves.toEqual({ etag, size: body.length });
    expect((await readFile(path)).equals(body)).toBe(true);
  });

  it('copies server-side with metadata and checksum travelling along', async () => {
    const body = randomBytes(10_000);
    await store.put('cp/source.parquet', body, {
      metadata: { 'job-id': 'j-4' },
      contentType: 'application/x-test',
    });
    const { etag } = await store.copy('cp/source.parquet', 'cp/target.parquet', { ifNoneMatch: '*' });
    expect(etag).toMatch(/^[0-9a-f]{32}$/);
    const head = await store.head('cp/target.parquet');
    expect(head).toMatchObject({
      size: body.length,
      etag,
      metadata: { 'job-id': 'j-4' },
      checksum: { algorithm: 'CRC32', value: crc32Base64(body) },
    });
    expect((await store.getBytes('cp/target.parquet')).body.equals(body)).toBe(true);
  });

  it('copies a source larger than one part in parts (UploadPartCopy), intact and with its metadata', async () => {
    const body = randomBytes(12 * MiB + 321);
    const file = join(dir, 'copy-source.parquet');
    await writeFile(file, body);
    await store.put('cpp/source.parquet', { file }, { metadata: { 'job-id': 'j-5' } });
    const { etag } = await store.copy('cpp/source.parquet', 'cpp/target.parquet', {
      ifNoneMatch: '*',
      size: body.length,
    });
    // Assembled from three part copies: 5 + 5 + 2 MiB (and a bit).
    expect(etag).toMatch(/^[0-9a-f]{32}-3$/);
    const head = await store.head('cpp/target.parquet');
    expect(head).toMatchObject({ size: body.length, etag, metadata: { 'job-id': 'j-5' } });
    expect((await store.getBytes('cpp/target.parquet')).body.equals(body)).toBe(true);
  });

  it('throws NotFoundError naming the source when the copy source is missing', async () => {
    await expect(store.copy('cp/missing.parquet', 'cp/never.parquet')).rejects.toMatchObject({
      name: 'NotFoundError',
      key: 'cp/missing.parquet',
    });
    await expect(store.head('cp/never.parquet')).resolves.toBeUndefined();
  });

  it('deletes several keys in one request and reports each', async () => {
    const a = await store.put('del/a', Buffer.from('a'));
    await store.put('del/b', Buffer.from('b'));
    const outcomes = await store.deleteMany([
      { key: 'del/a', etag: a.etag },
      { key: 'del/b' },
      // S3 reports an unconditional delete of a missing key as deleted, too.
      { key: 'del/never-existed' },
    ]);
    expect(outcomes).toEqual([
      { key: 'del/a', status: 'deleted' },
      { key: 'del/b', status: 'deleted' },
      { key: 'del/never-existed', status: 'deleted' },
    ]);
    expect(await collect(store.list('del/'))).toEqual([]);
  });

  it('sends no request for an empty batch and refuses more than 1000 keys', async () => {
    await expect(store.deleteMany([])).resolves.toEqual([]);
    const tooMany = Array.from({ length: 1001 }, (_, i) => ({ key: `del/${i}` }));
    await expect(store.deleteMany(tooMany)).rejects.toBeInstanceOf(RangeError);
  });

  it('aborts an incomplete multipart upload, and aborting it again is fine', async () => {
    const created = await s3.client.send(
      new CreateMultipartUploadCommand({ Bucket: s3.bucket, Key: 'inc/x' }),
    );
    const upload = { key: 'inc/x', uploadId: created.UploadId ?? '', initiated: new Date() };
    await expect(store.abortIncompleteUpload(upload)).resolves.toBeUndefined();
    await expect(store.abortIncompleteUpload(upload)).resolves.toBeUndefined();
  });
});

describe('S3Store on fauxqs with awkward keys', () => {
  const segment = "a b+c%d#e?f[g]=h&i;j,k@l$m!n'o(p)q*r~s ü é € 日本 😀";
  const keys = [
    'weird/space in name.parquet',
    'weird/plus+sign.parquet',
    'weird/percent%20not-an-escape%.parquet',
    'weird/hash#question?bracket[x]=y.parquet',
    `weird/${segment}/file.parquet`,
    'weird/ünïcödé/日本語/😀.parquet',
  ];
  // About 1,000 bytes of UTF-8 (S3's limit is 1,024).
  const longKey = `weird/long/${'ab cd+€/'.repeat(Math.floor(985 / Buffer.byteLength('ab cd+€/')))}end`;

  it('has a long key near the limit', () => {
    expect(Buffer.byteLength(longKey)).toBeGreaterThan(950);
    expect(Buffer.byteLength(longKey)).toBeLessThanOrEqual(1024);
  });

  it('puts, heads, lists, gets, copies and deletes them', async () => {
    const all = [...keys, longKey];
    for (const key of all) {
      await store.put(key, Buffer.from(key), { metadata: { 'job-id': 'w' } });
    }
    for (const key of all) {
      expect(await store.head(key)).toMatchObject({ key, size: Buffer.byteLength(key) });
      expect((await store.getBytes(key)).body.toString()).toBe(key);
    }
    expect((await collect(store.list('weird/'))).map((item) => item.key).sort(byUtf8Bytes)).toEqual(
      [...all].sort(byUtf8Bytes),
    );

    for (const key of all) {
      const target = key.replace(/^weird\//, 'weird-copy/');
      await store.copy(key, target, { ifNoneMatch: '*' });
      expect(await store.head(target)).toMatchObject({
        size: Buffer.byteLength(key),
        metadata: { 'job-id': 'w' },
      });
    }

    const originals = await collect(store.list('weird/'));
    const outcomes = await store.deleteMany(originals.map(({ key, etag }) => ({ key, etag })));
    expect(outcomes.every((outcome) => outcome.status === 'deleted')).toBe(true);
    expect(outcomes.map((outcome) => outcome.key).sort(byUtf8Bytes)).toEqual([...all].sort(byUtf8Bytes));
    expect(await collect(store.list('weird/'))).toEqual([]);
    expect(await collect(store.list('weird-copy/'))).toHaveLength(all.length);
  });
});

describe('what fauxqs 2.4.1 does not emulate (why the mocked tests exist)', () => {
  it('ignores If-None-Match on PutObject: the second create succeeds', async () => {
    await store.put('gap/once', Buffer.from('1'), { ifNoneMatch: '*' });
    await expect(store.put('gap/once', Buffer.from('2'), { ifNoneMatch: '*' })).resolves.toBeDefined();
  });

  it('ignores the ETag of a DeleteObjects entry: a stale ETag still deletes', async () => {
    await store.put('gap/stale', Buffer.from('x'));
    await expect(store.deleteMany([{ key: 'gap/stale', etag: '0'.repeat(32) }])).resolves.toEqual([
      { key: 'gap/stale', status: 'deleted' },
    ]);
  });

  it('accepts a wrong ChecksumCRC32 on upload without validating it', async () => {
    await store.put('gap/bad-crc', Buffer.from('data'), {
      checksum: { algorithm: 'CRC32', value: 'AAAAAA==' },
    });
    expect((await store.head('gap/bad-crc'))?.checksum?.value).toBe('AAAAAA==');
    // Downloads ask for the checksum, and the SDK checks the body against it.
    await expect(store.getBytes('gap/bad-crc')).rejects.toThrow(/Checksum mismatch/);
    const path = join(dir, 'bad-crc.out');
    await expect(store.getToFile('gap/bad-crc', path)).rejects.toThrow(/Checksum mismatch/);
    await expect(stat(path)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('answers ListMultipartUploads with an empty list even when an upload is open', async () => {
    await s3.client.send(new CreateMultipartUploadCommand({ Bucket: s3.bucket, Key: 'gap/open' }));
    const page = await s3.client.send(new ListMultipartUploadsCommand({ Bucket: s3.bucket, Prefix: 'gap/' }));
    expect(page.Uploads ?? []).toEqual([]);
    await expect(store.listIncompleteUploads('gap/')).resolves.toEqual([]);
  });

  it('sorts listings with localeCompare, not by UTF-8 bytes', async () => {
    await Promise.all(['gap/order/a', 'gap/order/B'].map((key) => store.put(key, Buffer.from(key))));
    const listed = (await collect(store.list('gap/order/'))).map((item) => item.key);
    // S3 would list 'B' (0x42) before 'a' (0x61).
    expect(listed).toEqual(['gap/order/a', 'gap/order/B']);
  });
});
