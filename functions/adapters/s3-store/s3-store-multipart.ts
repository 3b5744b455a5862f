/**
 * The S3 store's multipart uploads: a file larger than a part goes up in parts, and an object
 * larger than a part is copied in parts, several at once; each is completed with its full-object
 * CRC32 and its write condition. An upload that fails is aborted, and uploads left behind are
 * listed and aborted by recovery (staging) or by the bucket's lifecycle rule (final keys).
 */

import { createReadStream } from 'node:fs';
import {
  AbortMultipartUploadCommand,
  type CompletedPart,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  ListMultipartUploadsCommand,
  type S3Client,
  UploadPartCommand,
  UploadPartCopyCommand,
} from '@aws-sdk/client-s3';
import { PreconditionFailedError, TransientStoreError } from '../../core/errors.ts';
import type { IncompleteUpload, WriteOptions } from '../../core/object-store.ts';
import { errorName, mapS3Error, retryTransient } from './s3-store-errors.ts';
import {
  conditionHeaders,
  contentHeaders,
  copySourceOf,
  quoteEtag,
  unquoteEtag,
} from './s3-store-headers.ts';

/** S3's bound on the parts of one upload. */
const MAX_PARTS = 10_000;

/**
 * Multipart upload driven here rather than by lib-storage's Upload: Upload copies every
 * parameter onto every UploadPart, so a full-object ChecksumCRC32 would be sent as each
 * part's checksum (and rejected); here it goes only on CompleteMultipartUpload, together
 * with the If-None-Match / If-Match condition, which S3 evaluates at completion.
 */
export async function putMultipart(
  client: S3Client,
  bucket: string,
  sizing: MultipartSizing,
  key: string,
  file: string,
  size: number,
  options: WriteOptions,
): Promise<{ etag: string }> {
  return multipart(client, bucket, sizing, key, size, options, (uploadId, index, partSize, signal) =>
    uploadPart(client, bucket, key, uploadId, file, index, partSize, size, signal),
  );
}

/**
 * A server-side copy in parts (UploadPartCopy), several at once, for a source larger than one
 * part: CopyObject must stay connected until S3 has copied the whole object and AWS states no
 * copy rate (https://docs.aws.amazon.com/AmazonS3/latest/API/API_CopyObject.html), so one
 * request's time grows with the object; a part's is bounded by the part size, and the copy
 * takes about ceil(parts / queueSize) part copies one after another
 * (https://docs.aws.amazon.com/AmazonS3/latest/userguide/CopyingObjctsMPUapi.html).
 * A multipart object has another ETag than its source; its full-object CRC32 is the source's:
 * the upload is created with ChecksumType FULL_OBJECT and completed with the source's CRC32,
 * which S3 checks against the parts (https://docs.aws.amazon.com/AmazonS3/latest/userguide/checking-object-integrity-upload.html).
 * User metadata and content type do not travel with UploadPartCopy, so they are set on the
 * upload from the source's HEAD, and every part is copied only if the source still has the
 * ETag that HEAD read (x-amz-copy-source-if-match,
 * https://docs.aws.amazon.com/AmazonS3/latest/API/API_UploadPartCopy.html).
 */
export async function copyMultipart(
  client: S3Client,
  bucket: string,
  sizing: MultipartSizing,
  source: CopySource,
  target: string,
  options: WriteOptions,
): Promise<{ etag: string }> {
  return multipart(
    client,
    bucket,
    sizing,
    target,
    source.size,
    options,
    (uploadId, index, partSize, signal) =>
      copyPart(client, bucket, source, target, uploadId, index, partSize, signal),
  );
}

/** The source of copyMultipart, as its HEAD read it. */
export interface CopySource {
  readonly key: string;
  readonly size: number;
  readonly etag: string;
}

export interface MultipartSizing {
  readonly partSize: number;
  readonly queueSize: number;
}

type SendPart = (
  uploadId: string,
  index: number,
  partSize: number,
  signal: AbortSignal,
) => Promise<CompletedPart>;

async function multipart(
  client: S3Client,
  bucket: string,
  sizing: MultipartSizing,
  key: string,
  size: number,
  options: WriteOptions,
  sendPart: SendPart,
): Promise<{ etag: string }> {
  const partSize = Math.max(sizing.partSize, Math.ceil(size / MAX_PARTS));
  const partCount = Math.ceil(size / partSize);
  const created = await client
    .send(
      new CreateMultipartUploadCommand({
        Bucket: bucket,
        Key: key,
        // The condition goes on CompleteMultipartUpload, where S3 evaluates it.
        ...contentHeaders(options),
        ChecksumAlgorithm: 'CRC32',
        ChecksumType: 'FULL_OBJECT',
      }),
      { abortSignal: options.signal },
    )
    .catch((error: unknown) => {
      throw mapS3Error(error, key);
    });
  const uploadId = created.UploadId;
  if (uploadId === undefined) throw new Error(`CreateMultipartUpload ${key} returned no UploadId`);

  // Stops the other parts as soon as one fails or the caller aborts.
  const stop = new AbortController();
  const signal = options.signal === undefined ? stop.signal : AbortSignal.any([options.signal, stop.signal]);
  try {
    const parts: CompletedPart[] = new Array(partCount);
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < partCount && !signal.aborted) {
        const index = next++;
        parts[index] = await sendPart(uploadId, index, partSize, signal);
      }
    };
    // The first failure is the cause; the others are mostly the AbortErrors it triggered.
    let failure: { readonly error: unknown } | undefined;
    const workers = Array.from({ length: Math.min(sizing.queueSize, partCount) }, () =>
      worker().catch((error: unknown) => {
        failure ??= { error };
        stop.abort();
      }),
    );
    // Wait for every worker: no part may still be in flight when the upload is aborted.
    await Promise.all(workers);
    if (failure !== undefined) throw failure.error;
    options.signal?.throwIfAborted();

    const completed = await client
      .send(
        new CompleteMultipartUploadCommand({
          Bucket: bucket,
          Key: key,
          UploadId: uploadId,
          MultipartUpload: { Parts: parts },
          ChecksumType: 'FULL_OBJECT',
          ...(options.checksum !== undefined && { ChecksumCRC32: options.checksum.value }),
          // S3 rejects the completion if the assembled object has another size.
          MpuObjectSize: size,
          ...conditionHeaders(options),
        }),
        { abortSignal: options.signal },
      )
      .catch((error: unknown) => {
        throw mapS3Error(error, key, {
          missingIsPrecondition: options.ifMatch !== undefined,
          // Gone at completion: completed by a lost earlier attempt, or aborted by recovery.
          noSuchUploadIsTransient: true,
        });
      });
    if (completed.ETag === undefined) throw new Error(`CompleteMultipartUpload ${key} returned no ETag`);
    return { etag: unquoteEtag(completed.ETag) };
  } catch (error) {
    await abortUpload(client, bucket, key, uploadId, error);
    throw error;
  }
}

async function copyPart(
  client: S3Client,
  bucket: string,
  source: CopySource,
  target: string,
  uploadId: string,
  index: number,
  partSize: number,
  signal: AbortSignal,
): Promise<CompletedPart> {
  const start = index * partSize;
  const end = Math.min(start + partSize, source.size) - 1;
  const partNumber = index + 1;
  try {
    const response = await client.send(
      new UploadPartCopyCommand({
        Bucket: bucket,
        Key: target,
        UploadId: uploadId,
        PartNumber: partNumber,
        CopySource: copySourceOf(bucket, source.key),
        CopySourceRange: `bytes=${start}-${end}`,
        CopySourceIfMatch: quoteEtag(source.etag),
      }),
      { abortSignal: signal },
    );
    const result = response.CopyPartResult;
    if (result?.ETag === undefined) {
      throw new Error(`UploadPartCopy ${partNumber} of ${source.key} -> ${target} returned no ETag`);
    }
    return {
      PartNumber: partNumber,
      ETag: result.ETag,
      ...(result.ChecksumCRC32 !== undefined && { ChecksumCRC32: result.ChecksumCRC32 }),
    };
  } catch (error) {
    const mapped = mapS3Error(error, target, { notFoundKey: source.key });
    // The source's ETag is not the one its HEAD read: it was replaced meanwhile. Copy it again
    // from a fresh HEAD; the target's condition is evaluated at completion, not here.
    if (mapped instanceof PreconditionFailedError) {
      throw new TransientStoreError(`${source.key} changed while it was copied to ${target}; copy again`, {
        cause: error,
      });
    }
    throw mapped;
  }
}

async function uploadPart(
  client: S3Client,
  bucket: string,
  key: string,
  uploadId: string,
  file: string,
  index: number,
  partSize: number,
  size: number,
  signal: AbortSignal,
): Promise<CompletedPart> {
  const start = index * partSize;
  const length = Math.min(partSize, size - start);
  const partNumber = index + 1;
  return retryTransient(async () => {
    const body = createReadStream(file, { start, end: start + length - 1 });
    try {
      const response = await client.send(
        new UploadPartCommand({
          Bucket: bucket,
          Key: key,
          UploadId: uploadId,
          PartNumber: partNumber,
          Body: body,
          ContentLength: length,
          // The SDK computes each part's CRC32; S3 combines them into the full-object CRC32.
          ChecksumAlgorithm: 'CRC32',
        }),
        { abortSignal: signal },
      );
      if (response.ETag === undefined) throw new Error(`UploadPart ${partNumber} of ${key} returned no ETag`);
      return {
        PartNumber: partNumber,
        ETag: response.ETag,
        ...(response.ChecksumCRC32 !== undefined && { ChecksumCRC32: response.ChecksumCRC32 }),
      };
    } catch (error) {
      throw mapS3Error(error, key);
    } finally {
      body.destroy();
    }
  }, signal);
}

/** Best effort: an upload left behind is found by listIncompleteUploads during recovery. */
async function abortUpload(
  client: S3Client,
  bucket: string,
  key: string,
  uploadId: string,
  reason: unknown,
): Promise<void> {
  try {
    await abortIncompleteUpload(client, bucket, { key, uploadId, initiated: new Date() });
  } catch (abortError) {
    // The original failure is what the caller must see; this one is reported, not lost.
    process.emitWarning(
      `could not abort multipart upload ${uploadId} of ${key} after ${describe(reason)}: ${describe(abortError)}`,
      { code: 'S3_ABORT_MULTIPART_FAILED' },
    );
  }
}

export async function listIncompleteUploads(
  client: S3Client,
  bucket: string,
  prefix: string,
): Promise<IncompleteUpload[]> {
  const uploads: IncompleteUpload[] = [];
  let keyMarker: string | undefined;
  let uploadIdMarker: string | undefined;
  for (;;) {
    const page = await client
      .send(
        new ListMultipartUploadsCommand({
          Bucket: bucket,
          Prefix: prefix,
          ...(keyMarker !== undefined && { KeyMarker: keyMarker }),
          ...(uploadIdMarker !== undefined && { UploadIdMarker: uploadIdMarker }),
        }),
      )
      .catch((error: unknown) => {
        throw mapS3Error(error, prefix);
      });
    for (const upload of page.Uploads ?? []) {
      if (upload.Key === undefined || upload.UploadId === undefined || upload.Initiated === undefined) {
        throw new Error(
          `ListMultipartUploads under ${prefix} returned an entry without Key, UploadId or Initiated`,
        );
      }
      uploads.push({ key: upload.Key, uploadId: upload.UploadId, initiated: upload.Initiated });
    }
    if (page.IsTruncated !== true) return uploads;
    keyMarker = page.NextKeyMarker;
    uploadIdMarker = page.NextUploadIdMarker;
    if (keyMarker === undefined) {
      throw new Error(`ListMultipartUploads under ${prefix} is truncated but has no next key marker`);
    }
  }
}

export async function abortIncompleteUpload(
  client: S3Client,
  bucket: string,
  upload: IncompleteUpload,
): Promise<void> {
  try {
    await client.send(
      new AbortMultipartUploadCommand({ Bucket: bucket, Key: upload.key, UploadId: upload.uploadId }),
    );
  } catch (error) {
    // Already completed or aborted: the goal (no such upload) holds.
    if (errorName(error) === 'NoSuchUpload') return;
    throw mapS3Error(error, upload.key);
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
