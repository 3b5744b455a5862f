/**
 * The ObjectStore on Amazon S3 (or any S3-compatible endpoint) through the AWS SDK v3.
 *
 * ETags are handled unquoted everywhere (as ObjectStore promises) and quoted again, in their
 * RFC 7232 form, whenever they go back to S3 as a condition header (If-Match); a DeleteObjects
 * entry's <ETag> element carries the bare value, as AWS's sample request does.
 *
 * This file holds the client, the store's API and its single-request calls (head, get, put, copy).
 * The listings are in s3-store-listing.ts, multipart uploads in s3-store-multipart.ts, the batch
 * deletes in s3-store-delete.ts, the error mapping and the retry of stream bodies in
 * s3-store-errors.ts, the header forms (ETags, conditions, metadata, copy source) in
 * s3-store-headers.ts.
 */

import { createReadStream, createWriteStream } from 'node:fs';
import { rm, stat } from 'node:fs/promises';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  CopyObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  type HeadObjectCommandOutput,
  PutObjectCommand,
  S3Client,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import { NotFoundError, TransientStoreError } from '../../core/errors.ts';
import {
  type CopyOptions,
  type DeleteOutcome,
  type DeleteRequest,
  type IncompleteUpload,
  type ListOptions,
  MAX_DELETE_BATCH,
  type ObjectHead,
  type ObjectStore,
  type ObjectSummary,
  type PutFile,
  type WriteOptions,
} from '../../core/object-store.ts';
import { deleteObjects } from './s3-store-delete.ts';
import { mapS3Error, retryTransient } from './s3-store-errors.ts';
import {
  assertHeaderSafeMetadata,
  conditionHeaders,
  contentHeaders,
  copySourceOf,
  fullObjectCrc32,
  lowerCaseKeys,
  quoteEtag,
  unquoteEtag,
} from './s3-store-headers.ts';
import { listFolders, listObjects } from './s3-store-listing.ts';
import {
  abortIncompleteUpload,
  copyMultipart,
  listIncompleteUploads,
  putMultipart,
} from './s3-store-multipart.ts';

export { mapS3Error } from './s3-store-errors.ts';
export { encodeKeyForCopySource, unquoteEtag } from './s3-store-headers.ts';

const MiB = 1024 * 1024;
/** S3's bounds on a multipart part (the last part may be smaller). */
const MIN_PART_SIZE = 5 * MiB;
const MAX_PART_SIZE = 5 * 1024 * MiB;
const MAX_COPY_OBJECT_BYTES = 5 * 1024 * MiB - 1;
/** The part size of multipart uploads and copies unless a store is given another. */
export const DEFAULT_PART_SIZE = 64 * MiB;
const DEFAULT_QUEUE_SIZE = 4;

export interface CreateS3ClientOptions {
  readonly region?: string;
  /** An S3-compatible endpoint (MinIO, a local emulator); implies path-style addressing. */
  readonly endpoint?: string;
  readonly forcePathStyle?: boolean;
  /** SDK attempts per request, the first included (standard retry mode). Default 5. */
  readonly maxAttempts?: number;
  /** Omit to use the SDK's default credential chain (the Lambda role). */
  readonly credentials?: S3ClientConfig['credentials'];
}

export function createS3Client(options: CreateS3ClientOptions = {}): S3Client {
  return new S3Client({
    retryMode: 'standard',
    maxAttempts: options.maxAttempts ?? 5,
    ...(options.region !== undefined && { region: options.region }),
    ...(options.endpoint !== undefined && { endpoint: options.endpoint }),
    // Emulators rarely resolve bucket subdomains, so an explicit endpoint defaults to path style.
    ...((options.forcePathStyle !== undefined || options.endpoint !== undefined) && {
      forcePathStyle: options.forcePathStyle ?? true,
    }),
    ...(options.credentials !== undefined && { credentials: options.credentials }),
  });
}

export interface S3StoreOptions {
  readonly client: S3Client;
  readonly bucket: string;
  /** Files larger than this go up as multipart uploads of parts this size. Default 64 MiB. */
  readonly partSizeBytes?: number;
  /** Parts uploaded concurrently. Default 4. */
  readonly queueSize?: number;
}

export class S3Store implements ObjectStore {
  readonly location: string;
  /**
   * "You can copy objects less than 5 GB in a single operation"; larger ones need UploadPartCopy
   * (https://docs.aws.amazon.com/AmazonS3/latest/userguide/CopyingObjctsMPUapi.html).
   */
  readonly maxCopyBytes = MAX_COPY_OBJECT_BYTES;
  readonly #client: S3Client;
  readonly #bucket: string;
  readonly #partSize: number;
  readonly #queueSize: number;

  constructor(options: S3StoreOptions) {
    const partSize = options.partSizeBytes ?? DEFAULT_PART_SIZE;
    const queueSize = options.queueSize ?? DEFAULT_QUEUE_SIZE;
    if (!Number.isInteger(partSize) || partSize < MIN_PART_SIZE || partSize > MAX_PART_SIZE) {
      throw new RangeError(`partSizeBytes must be an integer from ${MIN_PART_SIZE} to ${MAX_PART_SIZE}`);
    }
    if (!Number.isInteger(queueSize) || queueSize < 1) {
      throw new RangeError('queueSize must be a positive integer');
    }
    if (options.bucket === '') throw new RangeError('bucket must not be empty');
    this.#client = options.client;
    this.#bucket = options.bucket;
    this.#partSize = partSize;
    this.#queueSize = queueSize;
    this.location = `s3://${options.bucket}`;
  }

  async *list(prefix: string, options?: ListOptions): AsyncIterable<ObjectSummary> {
    yield* listObjects(this.#client, this.#bucket, prefix, options);
  }

  /** The folders under `prefix`, one ListObjectsV2 CommonPrefixes entry each (see s3-store-listing.ts). */
  async *listFolders(prefix: string, options?: { readonly signal?: AbortSignal }): AsyncIterable<string> {
    yield* listFolders(this.#client, this.#bucket, prefix, options);
  }

  async head(key: string, options?: { readonly signal?: AbortSignal }): Promise<ObjectHead | undefined> {
    let response: HeadObjectCommandOutput;
    try {
      response = await this.#headObject(key, options?.signal);
    } catch (error) {
      const mapped = mapS3Error(error, key);
      if (mapped instanceof NotFoundError) return undefined;
      throw mapped;
    }
    return headOf(key, response);
  }

  #headObject(key: string, signal: AbortSignal | undefined): Promise<HeadObjectCommandOutput> {
    return this.#client.send(
      new HeadObjectCommand({ Bucket: this.#bucket, Key: key, ChecksumMode: 'ENABLED' }),
      { abortSignal: signal },
    );
  }

  async getBytes(
    key: string,
    options?: { readonly ifMatch?: string; readonly signal?: AbortSignal },
  ): Promise<{ readonly body: Buffer; readonly etag: string }> {
    try {
      const response = await this.#getObject(key, options);
      if (response.Body === undefined || response.ETag === undefined) {
        throw new Error(`GetObject ${key} returned no body or ETag`);
      }
      const body = Buffer.from(await response.Body.transformToByteArray());
      return { body, etag: unquoteEtag(response.ETag) };
    } catch (error) {
      throw mapS3Error(error, key);
    }
  }

  /**
   * A ranged GetObject (`Range: bytes=first-last`, inclusive), so checking a Parquet file's magic
   * and footer reads bytes, not the object (https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html#API_GetObject_RequestSyntax).
   * No ChecksumMode: a full-object checksum cannot validate a range.
   */
  async getRange(
    key: string,
    start: number,
    end: number,
    options?: { readonly ifMatch?: string; readonly signal?: AbortSignal },
  ): Promise<{ readonly body: Buffer; readonly etag: string }> {
    if (end <= start) return { body: Buffer.alloc(0), etag: (await this.getBytes(key, options)).etag };
    try {
      const response = await this.#client.send(
        new GetObjectCommand({
          Bucket: this.#bucket,
          Key: key,
          Range: `bytes=${start}-${end - 1}`,
          ...(options?.ifMatch !== undefined && { IfMatch: quoteEtag(options.ifMatch) }),
        }),
        { abortSignal: options?.signal },
      );
      if (response.Body === undefined || response.ETag === undefined) {
        throw new Error(`GetObject ${key} (range) returned no body or ETag`);
      }
      const body = Buffer.from(await response.Body.transformToByteArray());
      return { body, etag: unquoteEtag(response.ETag) };
    } catch (error) {
      throw mapS3Error(error, key);
    }
  }

  async getToFile(
    key: string,
    path: string,
    options?: { readonly ifMatch?: string; readonly signal?: AbortSignal },
  ): Promise<{ readonly etag: string; readonly size: number }> {
    try {
      const response = await this.#getObject(key, options);
      if (!(response.Body instanceof Readable) || response.ETag === undefined) {
        throw new Error(`GetObject ${key} returned no readable body or no ETag`);
      }
      let size = 0;
      const counter = new Transform({
        transform(chunk: Buffer, _encoding, callback) {
          size += chunk.length;
          callback(null, chunk);
        },
      });
      await pipeline(response.Body, counter, createWriteStream(path), { signal: options?.signal });
      // A connection cut at a chunk boundary can end the stream "cleanly"; never keep a short file.
      if (response.ContentLength !== undefined && size !== response.ContentLength) {
        throw new TransientStoreError(
          `GetObject ${key} delivered ${size} of ${response.ContentLength} bytes to ${path}`,
        );
      }
      return { etag: unquoteEtag(response.ETag), size };
    } catch (error) {
      // A partial file must not be mistaken for a download by a later step.
      await rm(path, { force: true });
      throw mapS3Error(error, key);
    }
  }

  #getObject(key: string, options?: { readonly ifMatch?: string; readonly signal?: AbortSignal }) {
    return this.#client.send(
      new GetObjectCommand({
        Bucket: this.#bucket,
        Key: key,
        // The SDK then validates the body against a full-object CRC32 when S3 has one.
        ChecksumMode: 'ENABLED',
        ...(options?.ifMatch !== undefined && { IfMatch: quoteEtag(options.ifMatch) }),
      }),
      { abortSignal: options?.signal },
    );
  }

  async put(
    key: string,
    body: Buffer | PutFile,
    options: WriteOptions = {},
  ): Promise<{ readonly etag: string }> {
    if (options.metadata !== undefined) assertHeaderSafeMetadata(options.metadata);
    if (Buffer.isBuffer(body)) {
      return this.#putObject(key, () => body, body.length, options);
    }
    const size = (await stat(body.file)).size;
    if (size <= this.#partSize) {
      return retryTransient(
        () => this.#putObject(key, () => createReadStream(body.file), size, options),
        options.signal,
      );
    }
    return putMultipart(
      this.#client,
      this.#bucket,
      { partSize: this.#partSize, queueSize: this.#queueSize },
      key,
      body.file,
      size,
      options,
    );
  }

  async #putObject(
    key: string,
    makeBody: () => Buffer | Readable,
    size: number,
    options: WriteOptions,
  ): Promise<{ etag: string }> {
    const body = makeBody();
    try {
      const response = await this.#client.send(
        new PutObjectCommand({
          Bucket: this.#bucket,
          Key: key,
          Body: body,
          ContentLength: size,
          ...conditionHeaders(options),
          ...contentHeaders(options),
          // Without a given value the SDK computes the CRC32 itself, so S3 always keeps one.
          ChecksumAlgorithm: 'CRC32',
          ...(options.checksum !== undefined && { ChecksumCRC32: options.checksum.value }),
        }),
        { abortSignal: options.signal },
      );
      if (response.ETag === undefined) throw new Error(`PutObject ${key} returned no ETag`);
      return { etag: unquoteEtag(response.ETag) };
    } catch (error) {
      throw mapS3Error(error, key, { missingIsPrecondition: options.ifMatch !== undefined });
    } finally {
      if (body instanceof Readable) body.destroy();
    }
  }

  /**
   * One CopyObject, or, for a source the caller says is larger than a part, a copy in parts
   * (copyMultipart): then the source's HEAD gives its metadata, ETag and CRC32, and the target
   * gets another ETag but the same full-object CRC32.
   */
  async copy(source: string, target: string, options: CopyOptions = {}): Promise<{ readonly etag: string }> {
    if (options.size !== undefined && options.size > this.#partSize) {
      const response = await this.#headObject(source, options.signal).catch((error: unknown) => {
        throw mapS3Error(error, source);
      });
      const head = headOf(source, response);
      return copyMultipart(
        this.#client,
        this.#bucket,
        { partSize: this.#partSize, queueSize: this.#queueSize },
        { key: source, size: head.size, etag: head.etag },
        target,
        {
          metadata: head.metadata,
          ...(response.ContentType !== undefined && { contentType: response.ContentType }),
          ...(head.checksum !== undefined && { checksum: head.checksum }),
          ...(options.ifNoneMatch !== undefined && { ifNoneMatch: options.ifNoneMatch }),
          ...(options.signal !== undefined && { signal: options.signal }),
        },
      );
    }
    try {
      const response = await this.#client.send(
        new CopyObjectCommand({
          Bucket: this.#bucket,
          Key: target,
          CopySource: copySourceOf(this.#bucket, source),
          MetadataDirective: 'COPY',
          // Makes S3 compute a full-object CRC32 for the target (objects below 5 GB).
          ChecksumAlgorithm: 'CRC32',
          ...(options.ifNoneMatch !== undefined && { IfNoneMatch: options.ifNoneMatch }),
        }),
        { abortSignal: options.signal },
      );
      const etag = response.CopyObjectResult?.ETag;
      if (etag === undefined) throw new Error(`CopyObject ${source} -> ${target} returned no ETag`);
      return { etag: unquoteEtag(etag) };
    } catch (error) {
      throw mapS3Error(error, target, { notFoundKey: source });
    }
  }

  async deleteMany(
    requests: readonly DeleteRequest[],
    options?: { readonly signal?: AbortSignal },
  ): Promise<DeleteOutcome[]> {
    if (requests.length > MAX_DELETE_BATCH) {
      throw new RangeError(`deleteMany takes at most ${MAX_DELETE_BATCH} keys, got ${requests.length}`);
    }
    // S3 rejects an empty Delete list as malformed.
    if (requests.length === 0) return [];
    return deleteObjects(this.#client, this.#bucket, requests, options?.signal);
  }

  listIncompleteUploads(prefix: string): Promise<IncompleteUpload[]> {
    return listIncompleteUploads(this.#client, this.#bucket, prefix);
  }

  abortIncompleteUpload(upload: IncompleteUpload): Promise<void> {
    return abortIncompleteUpload(this.#client, this.#bucket, upload);
  }
}

function headOf(key: string, response: HeadObjectCommandOutput): ObjectHead {
  if (response.ETag === undefined || response.ContentLength === undefined) {
    throw new Error(`HeadObject ${key} returned no ETag or Content-Length`);
  }
  if (response.LastModified === undefined) {
    throw new Error(`HeadObject ${key} returned no Last-Modified`);
  }
  const checksum = fullObjectCrc32(response.ChecksumCRC32, response.ChecksumType);
  return {
    key,
    size: response.ContentLength,
    etag: unquoteEtag(response.ETag),
    lastModified: response.LastModified,
    ...(checksum !== undefined && { checksum: { algorithm: 'CRC32', value: checksum } }),
    metadata: lowerCaseKeys(response.Metadata ?? {}),
  };
}
