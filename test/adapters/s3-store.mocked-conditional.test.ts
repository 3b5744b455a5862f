/**
 * S3Store against a mocked S3 client (aws-sdk-client-mock): the requests it builds and how it
 * reads S3's answers. No local server honours conditional writes (fauxqs ignores them, see
 * s3-store.fauxqs.test.ts), so these tests check the request parameters and the mapping of
 * S3's documented responses, not S3's behaviour itself.
 */

import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  type GetObjectCommandOutput,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
  UploadPartCommand,
  UploadPartCopyCommand,
} from '@aws-sdk/client-s3';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  createS3Client,
  encodeKeyForCopySource,
  mapS3Error,
  S3Store,
} from '../../functions/adapters/s3-store/s3-store.ts';
import { NotFoundError, PreconditionFailedError, TransientStoreError } from '../../functions/core/errors.ts';

const MiB = 1024 * 1024;

function s3Error(
  name: string,
  httpStatusCode: number,
  fault: 'client' | 'server' = 'client',
): S3ServiceException {
  return new S3ServiceException({
    name,
    $fault: fault,
    $metadata: { httpStatusCode },
    message: `${name} (mocked)`,
  });
}

/** The SDK's GetObject body in Node: a Readable with transformTo* helpers. */
function sdkBody(bytes: Buffer): GetObjectCommandOutput['Body'] {
  const body = Object.assign(Readable.from([bytes]), {
    transformToByteArray: async () => new Uint8Array(bytes),
    transformToString: async () => bytes.toString(),
    transformToWebStream: () => {
      throw new Error('not used');
    },
  });
  return body as GetObjectCommandOutput['Body'];
}

function networkError(code: string): Error {
  return Object.assign(new Error(`socket: ${code}`), { code });
}

const client = new S3Client({ region: 'us-east-1', credentials: { accessKeyId: 'x', secretAccessKey: 'x' } });
const s3 = mockClient(client);
const store = new S3Store({ client, bucket: 'lake', partSizeBytes: 5 * MiB, queueSize: 2 });

let dir: string;
let bigFile: string;
let smallFile: string;
const bigSize = 11 * MiB + 7;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 's3-store-mock-'));
  bigFile = join(dir, 'big.parquet');
  smallFile = join(dir, 'small.parquet');
  await writeFile(bigFile, Buffer.alloc(bigSize, 1));
  await writeFile(smallFile, Buffer.alloc(1000, 2));
});

afterAll(async () => {
  s3.restore();
  client.destroy();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

beforeEach(() => {
  s3.reset();
});

describe('S3Store conditional requests (mocked S3: no local server honours If-None-Match/If-Match)', () => {
  it('creates with If-None-Match: * and returns the ETag unquoted', async () => {
    s3.on(PutObjectCommand).resolves({ ETag: '"abc123"' });
    const result = await store.put('m/a.json', Buffer.from('{}'), {
      ifNoneMatch: '*',
      metadata: { 'job-id': 'j-1' },
      contentType: 'application/json',
      checksum: { algorithm: 'CRC32', value: 'AAAAAA==' },
    });
    expect(result).toEqual({ etag: 'abc123' });
    const [call] = s3.commandCalls(PutObjectCommand);
    expect(call?.args[0].input).toMatchObject({
      Bucket: 'lake',
      Key: 'm/a.json',
      IfNoneMatch: '*',
      Metadata: { 'job-id': 'j-1' },
      ContentType: 'application/json',
      ContentLength: 2,
      ChecksumAlgorithm: 'CRC32',
      ChecksumCRC32: 'AAAAAA==',
    });
    expect(call?.args[0].input.IfMatch).toBeUndefined();
  });

  it('replaces with If-Match carrying the quoted ETag', async () => {
    s3.on(PutObjectCommand).resolves({ ETag: '"def456"' });
    await store.put('m/a.json', Buffer.from('{}'), { ifMatch: 'abc123' });
    expect(s3.commandCalls(PutObjectCommand)[0]?.args[0].input).toMatchObject({ IfMatch: '"abc123"' });
    expect(s3.commandCalls(PutObjectCommand)[0]?.args[0].input.IfNoneMatch).toBeUndefined();
  });

  it('maps a 412 PreconditionFailed to PreconditionFailedError', async () => {
    s3.on(PutObjectCommand).rejects(s3Error('PreconditionFailed', 412));
    const error = await store
      .put('m/a.json', Buffer.from('{}'), { ifNoneMatch: '*' })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PreconditionFailedError);
    expect(error).toMatchObject({ name: 'PreconditionFailedError', key: 'm/a.json' });
    expect((error as Error).cause).toBeInstanceOf(S3ServiceException);
  });

  it('maps a 409 ConditionalRequestConflict to PreconditionFailedError (the caller re-reads)', async () => {
    s3.on(PutObjectCommand).rejects(s3Error('ConditionalRequestConflict', 409));
    await expect(store.put('m/a.json', Buffer.from('{}'), { ifMatch: 'abc' })).rejects.toBeInstanceOf(
      PreconditionFailedError,
    );
  });

  it('maps If-Match on a key that is gone (404 NoSuchKey) to PreconditionFailedError', async () => {
    s3.on(PutObjectCommand).rejects(s3Error('NoSuchKey', 404));
    await expect(store.put('m/a.json', Buffer.from('{}'), { ifMatch: 'abc' })).rejects.toBeInstanceOf(
      PreconditionFailedError,
    );
  });

  it('puts a small file as one PutObject with a file stream, its length and the condition', async () => {
    s3.on(PutObjectCommand).resolves({ ETag: '"f1"' });
    await store.put('s/small.parquet', { file: smallFile }, { ifNoneMatch: '*' });
    const input = s3.commandCalls(PutObjectCommand)[0]?.args[0].input;
    expect(input?.Body).toBeInstanceOf(Readable);
    expect(input).toMatchObject({ ContentLength: 1000, IfNoneMatch: '*', ChecksumAlgorithm: 'CRC32' });
    expect(s3.commandCalls(CreateMultipartUploadCommand)).toHaveLength(0);
  });

  it('reads with If-Match (quoted) and checksum validation, and maps 412 on the read', async () => {
    s3.on(GetObjectCommand).rejects(s3Error('PreconditionFailed', 412));
    await expect(store.getBytes('m/a.json', { ifMatch: 'abc' })).rejects.toBeInstanceOf(
      PreconditionFailedError,
    );
    expect(s3.commandCalls(GetObjectCommand)[0]?.args[0].input).toMatchObject({
      IfMatch: '"abc"',
      ChecksumMode: 'ENABLED',
    });
  });

  it('returns the body and unquoted ETag of a read', async () => {
    s3.on(GetObjectCommand).resolves({
      ETag: '"e1"',
      Body: sdkBody(Buffer.from('hello')),
    });
    const result = await store.getBytes('m/a.json');
    expect(result.body.toString()).toBe('hello');
    expect(result.etag).toBe('e1');
  });

  it('copies with If-None-Match, MetadataDirective COPY, CRC32 and an encoded CopySource', async () => {
    s3.on(CopyObjectCommand).resolves({ CopyObjectResult: { ETag: '"c1"' } });
    const source = 'staging/j 1/a+b%c#d?e[f]=g/ü😀.parquet';
    await expect(store.copy(source, 'final/x.parquet', { ifNoneMatch: '*' })).resolves.toEqual({
      etag: 'c1',
    });
    expect(s3.commandCalls(CopyObjectCommand)[0]?.args[0].input).toEqual({
      Bucket: 'lake',
      Key: 'final/x.parquet',
      CopySource: 'lake/staging/j%201/a%2Bb%25c%23d%3Fe%5Bf%5D%3Dg/%C3%BC%F0%9F%98%80.parquet',
      MetadataDirective: 'COPY',
      ChecksumAlgorithm: 'CRC32',
      IfNoneMatch: '*',
    });
  });

  it('maps a copy 412 to PreconditionFailedError on the target and NoSuchKey to NotFoundError on the source', async () => {
    s3.on(CopyObjectCommand)
      .rejectsOnce(s3Error('PreconditionFailed', 412))
      .rejectsOnce(s3Error('NoSuchKey', 404));
    await expect(store.copy('staging/a', 'final/a', { ifNoneMatch: '*' })).rejects.toMatchObject({
      name: 'PreconditionFailedError',
      key: 'final/a',
    });
    await expect(store.copy('staging/a', 'final/a', { ifNoneMatch: '*' })).rejects.toMatchObject({
      name: 'NotFoundError',
      key: 'staging/a',
    });
  });

  // The <ETag> element carries the bare ETag, as the conditional-delete sample request in
  // https://docs.aws.amazon.com/AmazonS3/latest/API/API_DeleteObjects.html sends it
  // (<ETag>a0e05e3566754e04b1e0f18c6b1abe1d</ETag>; quoted by the S3 team in
  // https://github.com/aws/aws-sdk-js-v3/issues/6857); If-Match headers stay quoted (above).
  it('deletes with the bare (unquoted) ETag per key, as AWS documents it, Quiet false, and maps each result', async () => {
    s3.on(DeleteObjectsCommand).resolves({
      Deleted: [{ Key: 'd/ok' }, { Key: 'd/unconditional' }, { Key: 'd/given-quoted' }],
      Errors: [
        { Key: 'd/gone', Code: 'NoSuchKey', Message: 'The specified key does not exist.' },
        { Key: 'd/replaced', Code: 'PreconditionFailed', Message: 'At least one of the pre-conditions...' },
        { Key: 'd/denied', Code: 'AccessDenied', Message: 'Access Denied' },
      ],
    });
    const outcomes = await store.deleteMany([
      { key: 'd/ok', etag: 'e-ok' },
      { key: 'd/gone', etag: 'e-gone' },
      { key: 'd/replaced', etag: 'e-old' },
      { key: 'd/denied', etag: 'e-d' },
      { key: 'd/unconditional' },
      { key: 'd/unreported', etag: 'e-u' },
      { key: 'd/given-quoted', etag: '"e-q"' },
    ]);
    expect(s3.commandCalls(DeleteObjectsCommand)[0]?.args[0].input).toEqual({
      Bucket: 'lake',
      Delete: {
        Objects: [
          { Key: 'd/ok', ETag: 'e-ok' },
          { Key: 'd/gone', ETag: 'e-gone' },
          { Key: 'd/replaced', ETag: 'e-old' },
          { Key: 'd/denied', ETag: 'e-d' },
          { Key: 'd/unconditional' },
          { Key: 'd/unreported', ETag: 'e-u' },
          { Key: 'd/given-quoted', ETag: 'e-q' },
        ],
        Quiet: false,
      },
    });
    expect(outcomes).toEqual([
      { key: 'd/ok', status: 'deleted' },
      { key: 'd/gone', status: 'not-found' },
      { key: 'd/replaced', status: 'precondition-failed' },
      { key: 'd/denied', status: 'error', code: 'AccessDenied', message: 'Access Denied' },
      { key: 'd/unconditional', status: 'deleted' },
      { key: 'd/unreported', status: 'error', code: 'MissingResult', message: expect.any(String) },
      { key: 'd/given-quoted', status: 'deleted' },
    ]);
  });
});

describe('S3Store multipart uploads (mocked S3)', () => {
  function mockMultipart(): void {
    s3.on(CreateMultipartUploadCommand).resolves({ UploadId: 'up-1' });
    s3.on(UploadPartCommand).callsFake((input: { PartNumber: number }) => ({
      ETag: `"part-${input.PartNumber}"`,
      ChecksumCRC32: `crc-${input.PartNumber}`,
    }));
    s3.on(AbortMultipartUploadCommand).resolves({});
  }

  it('asks for a FULL_OBJECT CRC32 and puts the value and the condition on completion only', async () => {
    mockMultipart();
    s3.on(CompleteMultipartUploadCommand).resolves({ ETag: '"whole-3"' });
    const result = await store.put(
      'out/big.parquet',
      { file: bigFile },
      {
        ifNoneMatch: '*',
        metadata: { 'job-id': 'j-9' },
        contentType: 'application/vnd.apache.parquet',
        checksum: { algorithm: 'CRC32', value: 'FULLCRC=' },
      },
    );
    expect(result).toEqual({ etag: 'whole-3' });

    expect(s3.commandCalls(CreateMultipartUploadCommand)[0]?.args[0].input).toEqual({
      Bucket: 'lake',
      Key: 'out/big.parquet',
      Metadata: { 'job-id': 'j-9' },
      ContentType: 'application/vnd.apache.parquet',
      ChecksumAlgorithm: 'CRC32',
      ChecksumType: 'FULL_OBJECT',
    });

    const parts = s3
      .commandCalls(UploadPartCommand)
      .map((call) => call.args[0].input)
      .sort((a, b) => (a.PartNumber ?? 0) - (b.PartNumber ?? 0));
    expect(parts.map((part) => [part.PartNumber, part.ContentLength])).toEqual([
      [1, 5 * MiB],
      [2, 5 * MiB],
      [3, MiB + 7],
    ]);
    for (const part of parts) {
      expect(part).toMatchObject({ UploadId: 'up-1', ChecksumAlgorithm: 'CRC32' });
      // The full-object value must never be sent as a part's checksum.
      expect(part.ChecksumCRC32).toBeUndefined();
      expect(part).not.toHaveProperty('IfNoneMatch');
    }

    expect(s3.commandCalls(CompleteMultipartUploadCommand)[0]?.args[0].input).toEqual({
      Bucket: 'lake',
      Key: 'out/big.parquet',
      UploadId: 'up-1',
      MultipartUpload: {
        Parts: [
          { PartNumber: 1, ETag: '"part-1"', ChecksumCRC32: 'crc-1' },
          { PartNumber: 2, ETag: '"part-2"', ChecksumCRC32: 'crc-2' },
          { PartNumber: 3, ETag: '"part-3"', ChecksumCRC32: 'crc-3' },
        ],
      },
      ChecksumType: 'FULL_OBJECT',
      ChecksumCRC32: 'FULLCRC=',
      MpuObjectSize: bigSize,
      IfNoneMatch: '*',
    });
    expect(s3.commandCalls(AbortMultipartUploadCommand)).toHaveLength(0);
  });

  it('sends If-Match (quoted) on completion when replacing', async () => {
    mockMultipart();
    s3.on(CompleteMultipartUploadCommand).resolves({ ETag: '"whole-3"' });
    await store.put('out/big.parquet', { file: bigFile }, { ifMatch: 'old' });
    expect(s3.commandCalls(CompleteMultipartUploadCommand)[0]?.args[0].input).toMatchObject({
      IfMatch: '"old"',
    });
  });

  it('aborts the upload when completion fails its condition (412) and throws PreconditionFailedError', async () => {
    mockMultipart();
    s3.on(CompleteMultipartUploadCommand).rejects(s3Error('PreconditionFailed', 412));
    await expect(
      store.put('out/big.parquet', { file: bigFile }, { ifNoneMatch: '*' }),
    ).rejects.toBeInstanceOf(PreconditionFailedError);
    expect(s3.commandCalls(AbortMultipartUploadCommand)[0]?.args[0].input).toEqual({
      Bucket: 'lake',
      Key: 'out/big.parquet',
      UploadId: 'up-1',
    });
  });

  it('aborts the upload and rethrows when a part fails for good, without completing', async () => {
    mockMultipart();
    s3.on(UploadPartCommand).rejects(s3Error('AccessDenied', 403));
    const error = await store.put('out/big.parquet', { file: bigFile }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(S3ServiceException);
    expect((error as Error).name).toBe('AccessDenied');
    expect(s3.commandCalls(AbortMultipartUploadCommand)).toHaveLength(1);
    expect(s3.commandCalls(CompleteMultipartUploadCommand)).toHaveLength(0);
  });

  it('retries a part that failed transiently with a fresh stream', async () => {
    mockMultipart();
    s3.on(UploadPartCommand, { PartNumber: 2 })
      .rejectsOnce(s3Error('SlowDown', 503, 'server'))
      .resolves({ ETag: '"part-2"', ChecksumCRC32: 'crc-2' });
    s3.on(CompleteMultipartUploadCommand).resolves({ ETag: '"whole-3"' });
    await expect(store.put('out/big.parquet', { file: bigFile })).resolves.toEqual({ etag: 'whole-3' });
    const part2 = s3
      .commandCalls(UploadPartCommand, { PartNumber: 2 })
      .map((call) => call.args[0].input.Body);
    expect(part2).toHaveLength(2);
    expect(part2[0]).not.toBe(part2[1]);
    expect(s3.commandCalls(AbortMultipartUploadCommand)).toHaveLength(0);
  });

  it('reports the failure that stopped the upload, not the abort it caused in other parts', async () => {
    mockMultipart();
    s3.on(UploadPartCommand, { PartNumber: 1 }).rejects(s3Error('SlowDown', 503, 'server'));
    s3.on(UploadPartCommand, { PartNumber: 2 }).rejects(s3Error('AccessDenied', 403));
    await expect(store.put('out/big.parquet', { file: bigFile })).rejects.toMatchObject({
      name: 'AccessDenied',
    });
    expect(s3.commandCalls(AbortMultipartUploadCommand)).toHaveLength(1);
    expect(s3.commandCalls(CompleteMultipartUploadCommand)).toHaveLength(0);
  });

  it('gives up after three transient failures of a part, aborting the upload', async () => {
    mockMultipart();
    s3.on(UploadPartCommand).rejects(s3Error('InternalError', 500, 'server'));
    await expect(store.put('out/big.parquet', { file: bigFile })).rejects.toBeInstanceOf(TransientStoreError);
    expect(s3.commandCalls(AbortMultipartUploadCommand)).toHaveLength(1);
  });

  it('keeps the original error when the abort itself fails, and warns about the leftover upload', async () => {
    mockMultipart();
    s3.on(CompleteMultipartUploadCommand).rejects(s3Error('PreconditionFailed', 412));
    s3.on(AbortMultipartUploadCommand).rejects(s3Error('AccessDenied', 403));
    const warnings: string[] = [];
    const onWarning = (warning: Error): void => {
      warnings.push(warning.message);
    };
    process.on('warning', onWarning);
    try {
      await expect(
        store.put('out/big.parquet', { file: bigFile }, { ifNoneMatch: '*' }),
      ).rejects.toBeInstanceOf(PreconditionFailedError);
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off('warning', onWarning);
    }
    expect(warnings.some((message) => message.includes('up-1'))).toBe(true);
  });
});

describe('S3Store copies in parts (mocked S3)', () => {
  function mockCopyInParts(): void {
    s3.on(HeadObjectCommand).resolves({
      ETag: '"src-etag"',
      ContentLength: bigSize,
      LastModified: new Date(0),
      Metadata: { 'job-id': 'j-7' },
      ContentType: 'application/vnd.apache.parquet',
      ChecksumCRC32: 'FULLCRC=',
      ChecksumType: 'FULL_OBJECT',
    });
    s3.on(CreateMultipartUploadCommand).resolves({ UploadId: 'cp-1' });
    s3.on(UploadPartCopyCommand).callsFake((input: { PartNumber: number }) => ({
      CopyPartResult: { ETag: `"copy-${input.PartNumber}"`, ChecksumCRC32: `crc-${input.PartNumber}` },
    }));
    s3.on(AbortMultipartUploadCommand).resolves({});
  }

  it('copies a source larger than a part in ranged part copies, keeping its metadata and full-object CRC32', async () => {
    mockCopyInParts();
    s3.on(CompleteMultipartUploadCommand).resolves({ ETag: '"whole-3"' });
    const result = await store.copy('st/j-7/a b.parquet', 'db/t/out.parquet', {
      ifNoneMatch: '*',
      size: bigSize,
    });
    expect(result).toEqual({ etag: 'whole-3' });
    expect(s3.commandCalls(CopyObjectCommand)).toHaveLength(0);
    expect(s3.commandCalls(HeadObjectCommand)[0]?.args[0].input).toMatchObject({
      Key: 'st/j-7/a b.parquet',
      ChecksumMode: 'ENABLED',
    });
    // UploadPartCopy carries no metadata: the upload gets the source's, as CopyObject's COPY would.
    expect(s3.commandCalls(CreateMultipartUploadCommand)[0]?.args[0].input).toEqual({
      Bucket: 'lake',
      Key: 'db/t/out.parquet',
      Metadata: { 'job-id': 'j-7' },
      ContentType: 'application/vnd.apache.parquet',
      ChecksumAlgorithm: 'CRC32',
      ChecksumType: 'FULL_OBJECT',
    });
    const parts = s3
      .commandCalls(UploadPartCopyCommand)
      .map((call) => call.args[0].input)
      .sort((a, b) => (a.PartNumber ?? 0) - (b.PartNumber ?? 0));
    expect(parts.map((part) => [part.PartNumber, part.CopySourceRange])).toEqual([
      [1, `bytes=0-${5 * MiB - 1}`],
      [2, `bytes=${5 * MiB}-${10 * MiB - 1}`],
      [3, `bytes=${10 * MiB}-${bigSize - 1}`],
    ]);
    for (const part of parts) {
      expect(part).toMatchObject({
        Bucket: 'lake',
        Key: 'db/t/out.parquet',
        UploadId: 'cp-1',
        CopySource: `lake/${encodeKeyForCopySource('st/j-7/a b.parquet')}`,
        // Every part from the version HEAD read.
        CopySourceIfMatch: '"src-etag"',
      });
    }
    expect(s3.commandCalls(CompleteMultipartUploadCommand)[0]?.args[0].input).toEqual({
      Bucket: 'lake',
      Key: 'db/t/out.parquet',
      UploadId: 'cp-1',
      MultipartUpload: {
        Parts: [
          { PartNumber: 1, ETag: '"copy-1"', ChecksumCRC32: 'crc-1' },
          { PartNumber: 2, ETag: '"copy-2"', ChecksumCRC32: 'crc-2' },
          { PartNumber: 3, ETag: '"copy-3"', ChecksumCRC32: 'crc-3' },
        ],
      },
      ChecksumType: 'FULL_OBJECT',
      // S3 checks the assembled object against the source's value.
      ChecksumCRC32: 'FULLCRC=',
      MpuObjectSize: bigSize,
      IfNoneMatch: '*',
    });
  });

  it('copies with one CopyObject when the size is not given or fits a part', async () => {
    s3.on(CopyObjectCommand).resolves({ CopyObjectResult: { ETag: '"one"' } });
    await store.copy('st/a.parquet', 'db/a.parquet', { ifNoneMatch: '*' });
    await store.copy('st/a.parquet', 'db/b.parquet', { ifNoneMatch: '*', size: 5 * MiB });
    expect(s3.commandCalls(CopyObjectCommand)).toHaveLength(2);
    expect(s3.commandCalls(UploadPartCopyCommand)).toHaveLength(0);
    expect(s3.commandCalls(HeadObjectCommand)).toHaveLength(0);
  });

  it('aborts the copy when the target exists at completion (412) and throws PreconditionFailedError', async () => {
    mockCopyInParts();
    s3.on(CompleteMultipartUploadCommand).rejects(s3Error('PreconditionFailed', 412));
    await expect(
      store.copy('st/a.parquet', 'db/a.parquet', { ifNoneMatch: '*', size: bigSize }),
    ).rejects.toBeInstanceOf(PreconditionFailedError);
    expect(s3.commandCalls(AbortMultipartUploadCommand)[0]?.args[0].input).toEqual({
      Bucket: 'lake',
      Key: 'db/a.parquet',
      UploadId: 'cp-1',
    });
  });

  it('a source replaced during the copy (a part fails If-Match) is a transient failure, and the upload is aborted', async () => {
    mockCopyInParts();
    s3.on(UploadPartCopyCommand, { PartNumber: 2 }).rejects(s3Error('PreconditionFailed', 412));
    const error = await store
      .copy('st/a.parquet', 'db/a.parquet', { ifNoneMatch: '*', size: bigSize })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TransientStoreError);
    expect((error as Error).message).toContain('st/a.parquet changed while it was copied to db/a.parquet');
    expect(s3.commandCalls(AbortMultipartUploadCommand)).toHaveLength(1);
    expect(s3.commandCalls(CompleteMultipartUploadCommand)).toHaveLength(0);
  });

  it('throws NotFoundError naming the source when it is gone before the copy', async () => {
    s3.on(HeadObjectCommand).rejects(s3Error('NotFound', 404));
    await expect(store.copy('st/gone.parquet', 'db/a.parquet', { size: bigSize })).rejects.toMatchObject({
      name: 'NotFoundError',
      key: 'st/gone.parquet',
    });
    expect(s3.commandCalls(CreateMultipartUploadCommand)).toHaveLength(0);
  });
});

describe('S3Store error mapping (mocked S3 responses)', () => {
  it('maps 503 SlowDown, 500 InternalError, ECONNRESET and timeouts to TransientStoreError', async () => {
    s3.on(GetObjectCommand)
      .rejectsOnce(s3Error('SlowDown', 503, 'server'))
      .rejectsOnce(s3Error('InternalError', 500, 'server'))
      .rejectsOnce(networkError('ECONNRESET'))
      .rejectsOnce(Object.assign(new Error('request timed out'), { name: 'TimeoutError' }));
    for (let i = 0; i < 4; i++) {
      const error = await store.getBytes('k').catch((e: unknown) => e);
      expect(error).toBeInstanceOf(TransientStoreError);
      expect((error as Error).name).toBe('TransientStoreError');
      expect((error as Error).cause).toBeDefined();
    }
  });

  it('maps NoSuchKey on a read to NotFoundError and leaves other errors unchanged', async () => {
    const denied = s3Error('AccessDenied', 403);
    s3.on(GetObjectCommand).rejectsOnce(s3Error('NoSuchKey', 404)).rejectsOnce(denied);
    await expect(store.getBytes('k')).rejects.toMatchObject({ name: 'NotFoundError', key: 'k' });
    await expect(store.getBytes('k')).rejects.toBe(denied);
  });

  it('does not call a missing bucket "not found"', () => {
    const error = s3Error('NoSuchBucket', 404);
    expect(mapS3Error(error, 'k')).toBe(error);
  });

  it('head: 404 is undefined, 403 throws, 503 is transient', async () => {
    s3.on(HeadObjectCommand)
      .rejectsOnce(s3Error('NotFound', 404))
      .rejectsOnce(s3Error('Forbidden', 403))
      .rejectsOnce(s3Error('ServiceUnavailable', 503, 'server'));
    await expect(store.head('k')).resolves.toBeUndefined();
    await expect(store.head('k')).rejects.toMatchObject({ name: 'Forbidden' });
    await expect(store.head('k')).rejects.toBeInstanceOf(TransientStoreError);
    expect(s3.commandCalls(HeadObjectCommand)[0]?.args[0].input).toMatchObject({ ChecksumMode: 'ENABLED' });
  });

  it('list: a transient failure is an error, never an empty listing', async () => {
    s3.on(ListObjectsV2Command).rejects(s3Error('SlowDown', 503, 'server'));
    const consume = async (): Promise<number> => {
      let count = 0;
      for await (const _ of store.list('p/')) count++;
      return count;
    };
    await expect(consume()).rejects.toBeInstanceOf(TransientStoreError);
  });
});

describe('S3Store head checksums (mocked S3 responses)', () => {
  const base = { ETag: '"e"', ContentLength: 10, LastModified: new Date(0), Metadata: { 'job-id': 'j' } };

  it('returns a FULL_OBJECT CRC32 and one without a type', async () => {
    s3.on(HeadObjectCommand)
      .resolvesOnce({ ...base, ChecksumCRC32: 'AAAAAA==', ChecksumType: 'FULL_OBJECT' })
      .resolvesOnce({ ...base, ChecksumCRC32: 'BBBBBB==' });
    expect((await store.head('k'))?.checksum).toEqual({ algorithm: 'CRC32', value: 'AAAAAA==' });
    expect((await store.head('k'))?.checksum).toEqual({ algorithm: 'CRC32', value: 'BBBBBB==' });
  });

  it('omits a COMPOSITE multipart checksum', async () => {
    s3.on(HeadObjectCommand)
      .resolvesOnce({ ...base, ChecksumCRC32: 'CCCCCC==-3', ChecksumType: 'COMPOSITE' })
      .resolvesOnce({ ...base, ChecksumCRC32: 'DDDDDD==-2' });
    const composite = await store.head('k');
    expect(composite).toMatchObject({ key: 'k', size: 10, etag: 'e', metadata: { 'job-id': 'j' } });
    expect(composite?.checksum).toBeUndefined();
    expect((await store.head('k'))?.checksum).toBeUndefined();
  });
});

describe('S3Store listings (mocked S3 responses)', () => {
  it('follows continuation tokens and unquotes ETags', async () => {
    s3.on(ListObjectsV2Command)
      .resolvesOnce({
        IsTruncated: true,
        NextContinuationToken: 't1',
        Contents: [{ Key: 'p/a', Size: 1, ETag: '"a1"', LastModified: new Date(1) }],
      })
      .resolvesOnce({
        IsTruncated: false,
        Contents: [{ Key: 'p/b', Size: 2, ETag: '"b2"', LastModified: new Date(2) }],
      });
    const items = [];
    for await (const item of store.list('p/')) items.push(item);
    expect(items).toEqual([
      { key: 'p/a', size: 1, etag: 'a1', lastModified: new Date(1) },
      { key: 'p/b', size: 2, etag: 'b2', lastModified: new Date(2) },
    ]);
    const inputs = s3.commandCalls(ListObjectsV2Command).map((call) => call.args[0].input);
    expect(inputs).toEqual([
      { Bucket: 'lake', Prefix: 'p/' },
      { Bucket: 'lake', Prefix: 'p/', ContinuationToken: 't1' },
    ]);
  });

  it('refuses a truncated page without a continuation token', async () => {
    s3.on(ListObjectsV2Command).resolves({ IsTruncated: true, Contents: [] });
    const consume = async (): Promise<void> => {
      for await (const _ of store.list('p/')) {
        // drain
      }
    };
    await expect(consume()).rejects.toThrow(/truncated/);
  });

  it('lists incomplete uploads across pages and aborts them, NoSuchUpload meaning already gone', async () => {
    s3.on(ListMultipartUploadsCommand)
      .resolvesOnce({
        IsTruncated: true,
        NextKeyMarker: 'staging/a',
        NextUploadIdMarker: 'u1',
        Uploads: [{ Key: 'staging/a', UploadId: 'u1', Initiated: new Date(5) }],
      })
      .resolvesOnce({
        IsTruncated: false,
        Uploads: [{ Key: 'staging/b', UploadId: 'u2', Initiated: new Date(6) }],
      });
    const uploads = await store.listIncompleteUploads('staging/');
    expect(uploads).toEqual([
      { key: 'staging/a', uploadId: 'u1', initiated: new Date(5) },
      { key: 'staging/b', uploadId: 'u2', initiated: new Date(6) },
    ]);
    expect(s3.commandCalls(ListMultipartUploadsCommand)[1]?.args[0].input).toEqual({
      Bucket: 'lake',
      Prefix: 'staging/',
      KeyMarker: 'staging/a',
      UploadIdMarker: 'u1',
    });

    s3.on(AbortMultipartUploadCommand)
      .rejectsOnce(s3Error('NoSuchUpload', 404))
      .rejectsOnce(s3Error('AccessDenied', 403));
    const [first] = uploads;
    if (first === undefined) throw new Error('no upload listed');
    await expect(store.abortIncompleteUpload(first)).resolves.toBeUndefined();
    await expect(store.abortIncompleteUpload(first)).rejects.toMatchObject({ name: 'AccessDenied' });
  });
});

describe('S3 client and key helpers', () => {
  it('uses the standard retry mode with 5 attempts and path style for an explicit endpoint', async () => {
    const local = createS3Client({ endpoint: 'http://127.0.0.1:1', region: 'us-east-1' });
    expect(local.config.retryMode).toBe('standard');
    expect(await local.config.maxAttempts()).toBe(5);
    expect(local.config.forcePathStyle).toBe(true);
    local.destroy();
    const aws = createS3Client({ region: 'eu-west-1', maxAttempts: 8 });
    expect(aws.config.forcePathStyle).toBe(false);
    expect(await aws.config.maxAttempts()).toBe(8);
    aws.destroy();
  });

  it('encodes each key segment of a copy source, keeping the slashes', () => {
    expect(encodeKeyForCopySource("a b/c+d/e%f/g#h?i/j[k]=l/m!n'o(p)q*r~s/ü")).toBe(
      'a%20b/c%2Bd/e%25f/g%23h%3Fi/j%5Bk%5D%3Dl/m%21n%27o%28p%29q%2Ar~s/%C3%BC',
    );
  });

  it('refuses metadata S3 would not return intact, and out-of-range part sizes', async () => {
    await expect(store.put('k', Buffer.from(''), { metadata: { 'job-id': 'jöb' } })).rejects.toBeInstanceOf(
      TypeError,
    );
    expect(() => new S3Store({ client, bucket: 'lake', partSizeBytes: MiB })).toThrow(RangeError);
    expect(s3.commandCalls(PutObjectCommand)).toHaveLength(0);
  });

  it('keeps NotFoundError and PreconditionFailedError as they are when mapped twice', () => {
    const notFound = new NotFoundError('k');
    expect(mapS3Error(notFound, 'other')).toBe(notFound);
  });
});
