/**
 * The store probe through the real S3Store against a mocked S3 client (aws-sdk-client-mock): no
 * local server honours S3's conditions, so this checks that the probe sends the request forms AWS
 * documents, against a small model of the bucket that evaluates them as documented:
 * - PutObject `If-None-Match: *` and `If-Match: "<etag>"`, 412 when they fail:
 *   https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html
 * - CopyObject `If-None-Match: *` on the destination, 412 when it exists:
 *   https://docs.aws.amazon.com/AmazonS3/latest/API/API_CopyObject.html
 * - DeleteObjects with `Objects[].ETag` (bare, as the sample request's <ETag>), a mismatch reported
 *   per key as PreconditionFailed: https://docs.aws.amazon.com/AmazonS3/latest/API/API_DeleteObjects.html
 *   and https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-deletes.html
 * - HeadObject `ChecksumMode: ENABLED`, without which S3 returns no checksum:
 *   https://docs.aws.amazon.com/AmazonS3/latest/API/API_HeadObject.html and
 *   https://docs.aws.amazon.com/AmazonS3/latest/userguide/checking-object-integrity.html
 */

import {
  CopyObjectCommand,
  type CopyObjectCommandInput,
  DeleteObjectsCommand,
  type DeleteObjectsCommandInput,
  HeadObjectCommand,
  type HeadObjectCommandInput,
  ListObjectsV2Command,
  type ListObjectsV2CommandInput,
  PutObjectCommand,
  type PutObjectCommandInput,
  S3Client,
  S3ServiceException,
} from '@aws-sdk/client-s3';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import { S3Store } from '../../functions/adapters/s3-store/s3-store.ts';
import { probeRoot, probeStore } from '../../functions/core/store-probe/store-probe.ts';

const client = new S3Client({ region: 'us-east-1', credentials: { accessKeyId: 'x', secretAccessKey: 'x' } });
const s3 = mockClient(client);
const store = new S3Store({ client, bucket: 'lake' });
const STATE_ROOT = 'data/_compaction/';

function s3Error(name: string, httpStatusCode: number): S3ServiceException {
  return new S3ServiceException({
    name,
    $fault: 'client',
    $metadata: { httpStatusCode },
    message: `${name} (mocked)`,
  });
}

interface Modelled {
  readonly etag: string;
  readonly checksum?: string;
  readonly lastModified: Date;
}

/** A bucket that evaluates the conditions as AWS documents them (or ignores them, as fauxqs does). */
function modelBucket(honoursConditions: boolean): Map<string, Modelled> {
  const objects = new Map<string, Modelled>();
  let version = 0;
  s3.on(PutObjectCommand).callsFake(async (input: PutObjectCommandInput) => {
    const key = input.Key ?? '';
    const existing = objects.get(key);
    if (honoursConditions && input.IfNoneMatch === '*' && existing) throw s3Error('PreconditionFailed', 412);
    if (honoursConditions && input.IfMatch !== undefined) {
      if (!existing) throw s3Error('NoSuchKey', 404);
      if (input.IfMatch !== `"${existing.etag}"` && input.IfMatch !== existing.etag)
        throw s3Error('PreconditionFailed', 412);
    }
    const etag = `e${++version}`;
    objects.set(key, {
      etag,
      lastModified: new Date(),
      ...(input.ChecksumCRC32 !== undefined && { checksum: input.ChecksumCRC32 }),
    });
    return { ETag: `"${etag}"` };
  });
  s3.on(CopyObjectCommand).callsFake(async (input: CopyObjectCommandInput) => {
    const source = objects.get(decodeURIComponent((input.CopySource ?? '').replace(/^lake\//, '')));
    if (!source) throw s3Error('NoSuchKey', 404);
    if (honoursConditions && input.IfNoneMatch === '*' && objects.has(input.Key ?? ''))
      throw s3Error('PreconditionFailed', 412);
    // A single-part copy has its source's content, so its MD5 ETag and CRC32.
    objects.set(input.Key ?? '', { ...source, lastModified: new Date() });
    return { CopyObjectResult: { ETag: `"${source.etag}"` } };
  });
  s3.on(HeadObjectCommand).callsFake(async (input: HeadObjectCommandInput) => {
    const object = objects.get(input.Key ?? '');
    if (!object) throw s3Error('NotFound', 404);
    return {
      ETag: `"${object.etag}"`,
      ContentLength: 40,
      LastModified: object.lastModified,
      Metadata: {},
      ...(input.ChecksumMode === 'ENABLED' &&
        object.checksum !== undefined && { ChecksumCRC32: object.checksum, ChecksumType: 'FULL_OBJECT' }),
    };
  });
  s3.on(ListObjectsV2Command).callsFake(async (input: ListObjectsV2CommandInput) => ({
    Contents: [...objects.entries()]
      .filter(([key]) => key.startsWith(input.Prefix ?? ''))
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([Key, o]) => ({ Key, Size: 40, ETag: `"${o.etag}"`, LastModified: o.lastModified })),
    IsTruncated: false,
  }));
  s3.on(DeleteObjectsCommand).callsFake(async (input: DeleteObjectsCommandInput) => {
    const Deleted: { Key: string }[] = [];
    const Errors: { Key: string; Code: string; Message: string }[] = [];
    for (const entry of input.Delete?.Objects ?? []) {
      const key = entry.Key ?? '';
      const object = objects.get(key);
      if (honoursConditions && entry.ETag !== undefined && object === undefined) {
        Errors.push({ Key: key, Code: 'NoSuchKey', Message: 'The specified key does not exist.' });
      } else if (honoursConditions && entry.ETag !== undefined && entry.ETag !== object?.etag) {
        Errors.push({
          Key: key,
          Code: 'PreconditionFailed',
          Message: 'At least one of the pre-conditions you specified did not hold',
        });
      } else {
        objects.delete(key);
        Deleted.push({ Key: key });
      }
    }
    return { Deleted, Errors };
  });
  return objects;
}

beforeEach(() => {
  s3.reset();
});

describe('the store probe over S3Store (mocked S3)', () => {
  it('sends the documented request forms, passes on a bucket that evaluates them, and leaves nothing', async () => {
    const objects = modelBucket(true);
    const report = await probeStore({ store, stateRoot: STATE_ROOT, randomHex: () => 'abc123' });
    expect(report.checks.filter((c) => !c.ok)).toEqual([]);
    expect(report).toMatchObject({ location: 's3://lake', ok: true });
    expect([...objects.keys()]).toEqual([]);

    const base = `${probeRoot(STATE_ROOT)}abc123/`;
    const puts = s3.commandCalls(PutObjectCommand).map((c) => c.args[0].input);
    expect(puts.every((p) => p.Bucket === 'lake' && p.Key === `${base}object`)).toBe(true);
    // Create, then a second create: If-None-Match "*".
    expect(puts[0]).toMatchObject({ IfNoneMatch: '*', ChecksumAlgorithm: 'CRC32' });
    expect(puts[1]).toMatchObject({ IfNoneMatch: '*' });
    // Replace on the current ETag, then on the stale one: If-Match with the quoted ETag.
    expect(puts[2]).toMatchObject({ IfMatch: '"e1"' });
    expect(puts[3]).toMatchObject({ IfMatch: '"e1"' });
    expect(puts.map((p) => p.ChecksumCRC32)).toEqual([
      expect.any(String),
      expect.any(String),
      expect.any(String),
      expect.any(String),
    ]);

    const copies = s3.commandCalls(CopyObjectCommand).map((c) => c.args[0].input);
    expect(copies).toHaveLength(2);
    for (const copy of copies) {
      expect(copy).toMatchObject({
        Bucket: 'lake',
        Key: `${base}copy`,
        CopySource: `lake/${base}object`,
        IfNoneMatch: '*',
      });
    }

    const deletes = s3.commandCalls(DeleteObjectsCommand).map((c) => c.args[0].input);
    // The wrong-ETag entry (the stale ETag), then the cleanup with each object's own: bare ETags.
    expect(deletes.map((d) => d.Delete?.Objects)).toEqual([
      [{ Key: `${base}object`, ETag: 'e1' }],
      [
        { Key: `${base}object`, ETag: 'e2' },
        { Key: `${base}copy`, ETag: 'e2' },
      ],
    ]);
    expect(deletes.every((d) => d.Delete?.Quiet === false)).toBe(true);

    // One listing of the probe root, for what earlier probes cut short may have left.
    expect(s3.commandCalls(ListObjectsV2Command).map((c) => c.args[0].input)).toEqual([
      { Bucket: 'lake', Prefix: probeRoot(STATE_ROOT) },
    ]);

    const heads = s3.commandCalls(HeadObjectCommand).map((c) => c.args[0].input);
    expect(heads).toEqual([
      { Bucket: 'lake', Key: `${base}object`, ChecksumMode: 'ENABLED' },
      { Bucket: 'lake', Key: `${base}copy`, ChecksumMode: 'ENABLED' },
    ]);
  });

  it('flags each conditional guarantee on a bucket that ignores the conditions (as fauxqs does)', async () => {
    const objects = modelBucket(false);
    const report = await probeStore({ store, stateRoot: STATE_ROOT, randomHex: () => 'def456' });
    expect(report.ok).toBe(false);
    expect(report.checks.filter((c) => !c.ok).map((c) => c.guarantee)).toEqual([
      'put-if-absent',
      'compare-and-swap',
      'conditional-copy',
      'conditional-delete',
    ]);
    expect([...objects.keys()]).toEqual([]);
  });
});
