/**
 * The ObjectStore on Amazon S3 (or any S3-compatible endpoint) through the AWS SDK v3.
 *
 * ETags are handled unquoted everywhere (as ObjectStore promises) and quoted again, in their
 * RFC 7232 form, whenever they go back to S3 as a condition header (If-Match); a DeleteObjects
 * entry's <ETag> element carries the bare value, as AWS's sample request does.
 */

import { createReadStream, createWriteStream } from 'node:fs';
import { rm, stat } from 'node:fs/promises';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  AbortMultipartUploadCommand,
  type CompletedPart,
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadObjectCommand,
  type HeadObjectCommandOutput,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  type ListObjectsV2CommandOutput,
  PutObjectCommand,
  S3Client,
  type S3ClientConfig,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { NotFoundError, PreconditionFailedError, TransientStoreError } from '../core/errors.ts';
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
  type WriteOptions,
} from '../core/object-store.ts';

const MiB = 1024 * 1024;
/** S3's bounds on a multipart part (the last part may be smaller). */
const MIN_PART_SIZE = 5 * MiB;
const MAX_PART_SIZE = 5 * 1024 * MiB;
const MAX_PARTS = 10_000;
const MAX_COPY_OBJECT_BYTES = 5 * 1024 * MiB - 1;
const DEFAULT_PART_SIZE = 64 * MiB;
const DEFAULT_QUEUE_SIZE = 4;
/**
 * The SDK never retries a request whose body is a stream (it cannot rewind it), so file
 * uploads retry transient failures here, each attempt with a fresh stream.
 */
const STREAM_BODY_ATTEMPTS = 3;
const STREAM_RETRY_BASE_MS = 200;

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
    // StartAfter: S3 lists only keys after it in UTF-8 binary order; it "can be any key"
    // (https://docs.aws.amazon.com/AmazonS3/latest/API/API_ListObjectsV2.html).
    const request = options?.startAfter !== undefined ? { StartAfter: options.startAfter } : {};
    for await (const page of this.#pages(prefix, request, options?.signal)) {
      for (const object of page.Contents ?? []) {
        if (object.Key === undefined || object.Size === undefined || object.ETag === undefined) {
          throw new Error(`ListObjectsV2 under ${prefix} returned an entry without Key, Size or ETag`);
        }
        if (object.LastModified === undefined) {
          throw new Error(`ListObjectsV2 returned ${object.Key} without LastModified`);
        }
        yield {
          key: object.Key,
          size: object.Size,
          etag: unquoteEtag(object.ETag),
          lastModified: object.LastModified,
        };
      }
    }
  }

  /**
   * ListObjectsV2 with Delimiter '/': keys under `prefix` sharing the text up to the next '/' are
   * rolled up into one CommonPrefixes entry, which counts once against the page's 1,000 results
   * (https://docs.aws.amazon.com/AmazonS3/latest/API/API_ListObjectsV2.html). Objects directly
   * under `prefix` come back in Contents and are not folders.
   */
  async *listFolders(prefix: string, options?: { readonly signal?: AbortSignal }): AsyncIterable<string> {
    for await (const page of this.#pages(prefix, { Delimiter: '/' }, options?.signal)) {
      for (const common of page.CommonPrefixes ?? []) {
        if (
          common.Prefix === undefined ||
          !common.Prefix.startsWith(prefix) ||
          !common.Prefix.endsWith('/')
        ) {
          throw new Error(
            `ListObjectsV2 under ${prefix} returned a common prefix ${common.Prefix} not ending in "/"`,
          );
        }
        yield common.Prefix;
      }
    }
  }

  /** Every ListObjectsV2 page under `prefix`, following continuation tokens. */
  async *#pages(
    prefix: string,
    request: { readonly StartAfter?: string; readonly Delimiter?: string },
    signal: AbortSignal | undefined,
  ): AsyncIterable<ListObjectsV2CommandOutput> {
    let continuationToken: string | undefined;
    do {
      const page = await this.#client
        .send(
          new ListObjectsV2Command({
            Bucket: this.#bucket,
            Prefix: prefix,
            ...request,
            ...(continuationToken !== undefined && { ContinuationToken: continuationToken }),
          }),
          { abortSignal: signal },
        )
        .catch((error: unknown) => {
          throw mapS3Error(error, prefix);
        });
      yield page;
      continuationToken = page.NextContinuationToken;
      // A truncated page without a token would otherwise end the listing early, silently.
      if (page.IsTruncated === true && continuationToken === undefined) {
        throw new Error(`ListObjectsV2 under ${prefix} is truncated but has no continuation token`);
      }
    } while (continuationToken !== undefined);
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
    body: Buffer | { readonly file: string },
    options: WriteOptions = {},
  ): Promise<{ readonly etag: string }> {
    if (options.metadata !== undefined) assertHeaderSafeMetadata(options.metadata);
    if (Buffer.isBuffer(body)) {
      return this.#putObject(key, () => body, body.length, options);
    }
    const size = (await stat(body.file)).size;
    if (size <= this.#partSize) {
      return this.#retryTransient(
        () => this.#putObject(key, () => createReadStream(body.file), size, options),
        options.signal,
      );
    }
    return this.#putMultipart(key, body.file, size, options);
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
   * Multipart upload driven here rather than by lib-storage's Upload: Upload copies every
   * parameter onto every UploadPart, so a full-object ChecksumCRC32 would be sent as each
   * part's checksum (and rejected); here it goes only on CompleteMultipartUpload, together
   * with the If-None-Match / If-Match condition, which S3 evaluates at completion.
   */
  async #putMultipart(
    key: string,
    file: string,
    size: number,
    options: WriteOptions,
  ): Promise<{ etag: string }> {
    const partSize = Math.max(this.#partSize, Math.ceil(size / MAX_PARTS));
    const partCount = Math.ceil(size / partSize);
    const created = await this.#client
      .send(
        new CreateMultipartUploadCommand({
          Bucket: this.#bucket,
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

    // Stops the other part uploads as soon as one fails or the caller aborts.
    const stop = new AbortController();
    const signal =
      options.signal === undefined ? stop.signal : AbortSignal.any([options.signal, stop.signal]);
    try {
      const parts: CompletedPart[] = new Array(partCount);
      let next = 0;
      const worker = async (): Promise<void> => {
        while (next < partCount && !signal.aborted) {
          const index = next++;
          parts[index] = await this.#uploadPart(key, uploadId, file, index, partSize, size, signal);
        }
      };
      // The first failure is the cause; the others are mostly the AbortErrors it triggered.
      let failure: { readonly error: unknown } | undefined;
      const workers = Array.from({ length: Math.min(this.#queueSize, partCount) }, () =>
        worker().catch((error: unknown) => {
          failure ??= { error };
          stop.abort();
        }),
      );
      // Wait for every worker: no part may still be in flight when the upload is aborted.
      await Promise.all(workers);
      if (failure !== undefined) throw failure.error;
      options.signal?.throwIfAborted();

      const completed = await this.#client
        .send(
          new CompleteMultipartUploadCommand({
            Bucket: this.#bucket,
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
      await this.#abortUpload(key, uploadId, error);
      throw error;
    }
  }

  async #uploadPart(
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
    return this.#retryTransient(async () => {
      const body = createReadStream(file, { start, end: start + length - 1 });
      try {
        const response = await this.#client.send(
          new UploadPartCommand({
            Bucket: this.#bucket,
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
        if (response.ETag === undefined)
          throw new Error(`UploadPart ${partNumber} of ${key} returned no ETag`);
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
  async #abortUpload(key: string, uploadId: string, reason: unknown): Promise<void> {
    try {
      await this.abortIncompleteUpload({ key, uploadId, initiated: new Date() });
    } catch (abortError) {
      // The original failure is what the caller must see; this one is reported, not lost.
      process.emitWarning(
        `could not abort multipart upload ${uploadId} of ${key} after ${describe(reason)}: ${describe(abortError)}`,
        { code: 'S3_ABORT_MULTIPART_FAILED' },
      );
    }
  }

  async copy(source: string, target: string, options: CopyOptions = {}): Promise<{ readonly etag: string }> {
    try {
      const response = await this.#client.send(
        new CopyObjectCommand({
          Bucket: this.#bucket,
          Key: target,
          CopySource: `${encodeURIComponent(this.#bucket)}/${encodeKeyForCopySource(source)}`,
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
    const response = await this.#client
      .send(
        new DeleteObjectsCommand({
          Bucket: this.#bucket,
          Delete: {
            Objects: requests.map((request) => ({
              Key: request.key,
              // The body element takes the bare ETag, as API_DeleteObjects' conditional-delete
              // sample request sends it (<ETag>a0e05e...</ETag>, no quotes), unlike If-Match headers:
              // https://docs.aws.amazon.com/AmazonS3/latest/API/API_DeleteObjects.html (quoted by the
              // S3 team in https://github.com/aws/aws-sdk-js-v3/issues/6857).
              ...(request.etag !== undefined && { ETag: unquoteEtag(request.etag) }),
            })),
            Quiet: false,
          },
        }),
        { abortSignal: options?.signal },
      )
      .catch((error: unknown) => {
        throw mapS3Error(error, requests[0]?.key ?? '');
      });
    const deleted = new Set((response.Deleted ?? []).map((entry) => entry.Key));
    const errors = new Map((response.Errors ?? []).map((entry) => [entry.Key, entry]));
    return requests.map((request): DeleteOutcome => {
      const { key } = request;
      const error = errors.get(key);
      if (error !== undefined) {
        if (error.Code === 'NoSuchKey') return { key, status: 'not-found' };
        if (error.Code === 'PreconditionFailed') return { key, status: 'precondition-failed' };
        return { key, status: 'error', code: error.Code ?? 'Unknown', message: error.Message ?? '' };
      }
      if (deleted.has(key)) return { key, status: 'deleted' };
      // Quiet is false, so S3 reports every key; one missing from both lists is not "done".
      return {
        key,
        status: 'error',
        code: 'MissingResult',
        message: 'DeleteObjects did not report this key',
      };
    });
  }

  async listIncompleteUploads(prefix: string): Promise<IncompleteUpload[]> {
    const uploads: IncompleteUpload[] = [];
    let keyMarker: string | undefined;
    let uploadIdMarker: string | undefined;
    for (;;) {
      const page = await this.#client
        .send(
          new ListMultipartUploadsCommand({
            Bucket: this.#bucket,
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

  async abortIncompleteUpload(upload: IncompleteUpload): Promise<void> {
    try {
      await this.#client.send(
        new AbortMultipartUploadCommand({ Bucket: this.#bucket, Key: upload.key, UploadId: upload.uploadId }),
      );
    } catch (error) {
      // Already completed or aborted: the goal (no such upload) holds.
      if (errorName(error) === 'NoSuchUpload') return;
      throw mapS3Error(error, upload.key);
    }
  }

  /** Runs `attempt` again (it must build a fresh request body) after a transient failure. */
  async #retryTransient<T>(attempt: () => Promise<T>, signal: AbortSignal | undefined): Promise<T> {
    for (let attemptNumber = 1; ; attemptNumber++) {
      try {
        return await attempt();
      } catch (error) {
        if (!(error instanceof TransientStoreError) || attemptNumber >= STREAM_BODY_ATTEMPTS) throw error;
        // Full jitter, as the SDK's standard mode does.
        const delay = Math.random() * STREAM_RETRY_BASE_MS * 2 ** attemptNumber;
        await sleep(delay, undefined, signal === undefined ? undefined : { signal });
      }
    }
  }
}

interface MapOptions {
  /** A missing key means the If-Match condition failed (conditional writes). */
  readonly missingIsPrecondition?: boolean;
  /** The key a NotFoundError names when it differs from the written key (a copy's source). */
  readonly notFoundKey?: string;
  readonly noSuchUploadIsTransient?: boolean;
}

const TRANSIENT_NAMES = new Set([
  'SlowDown',
  'Throttling',
  'ThrottlingException',
  'TooManyRequestsException',
  'RequestLimitExceeded',
  'RequestThrottled',
  'InternalError',
  'ServiceUnavailable',
  // 409 "a conflicting conditional operation is in progress, try again".
  'OperationAborted',
  // 400 "your socket connection was not read from or written to within the timeout period".
  'RequestTimeout',
  'RequestTimeoutException',
  'TimeoutError',
]);
/**
 * The statuses the SDK's own standard retry treats as transient (429 throttling; 500, 502, 503,
 * 504), so a step fails fast exactly where the SDK gives up at once. 501 NotImplemented ("a header
 * you provided implies functionality that is not implemented",
 * https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html#ErrorCodeList) never
 * succeeds on a retry, and neither do the other 5xx codes outside this list.
 */
const TRANSIENT_STATUS_CODES = new Set([429, 500, 502, 503, 504]);
const TRANSIENT_NETWORK_CODES = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EAI_AGAIN',
]);

/**
 * Translates an SDK or network error into the protocol's named errors; anything it does not
 * recognise comes back unchanged, so it still fails the step.
 */
export function mapS3Error(error: unknown, key: string, options: MapOptions = {}): unknown {
  if (!(error instanceof Error)) return error;
  if (
    error instanceof PreconditionFailedError ||
    error instanceof NotFoundError ||
    error instanceof TransientStoreError
  ) {
    return error;
  }
  const name = errorName(error);
  const status = httpStatus(error);
  if (status === 412 || name === 'PreconditionFailed') {
    return new PreconditionFailedError(key, { cause: error });
  }
  // A concurrent conditional write raced ours; the caller re-reads and decides.
  if (name === 'ConditionalRequestConflict') return new PreconditionFailedError(key, { cause: error });
  if (name === 'NoSuchKey' || name === 'NotFound') {
    return options.missingIsPrecondition === true
      ? new PreconditionFailedError(key, { cause: error })
      : new NotFoundError(options.notFoundKey ?? key, { cause: error });
  }
  if (name === 'NoSuchUpload' && options.noSuchUploadIsTransient === true) {
    return new TransientStoreError(`multipart upload of ${key} disappeared before completion; upload again`, {
      cause: error,
    });
  }
  const code = (error as { code?: unknown }).code;
  const retryable = (error as { $retryable?: unknown }).$retryable;
  if (
    TRANSIENT_NAMES.has(name) ||
    (typeof code === 'string' && TRANSIENT_NETWORK_CODES.has(code)) ||
    (status !== undefined && TRANSIENT_STATUS_CODES.has(status)) ||
    (typeof retryable === 'object' && retryable !== null)
  ) {
    return new TransientStoreError(`S3 request for ${key} failed transiently: ${name}: ${error.message}`, {
      cause: error,
    });
  }
  return error;
}

function errorName(error: unknown): string {
  if (!(error instanceof Error)) return '';
  const code = (error as { Code?: unknown }).Code;
  return typeof code === 'string' ? code : error.name;
}

function httpStatus(error: Error): number | undefined {
  const status = (error as { $metadata?: { httpStatusCode?: unknown } }).$metadata?.httpStatusCode;
  return typeof status === 'number' ? status : undefined;
}

function describe(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

export function unquoteEtag(etag: string): string {
  return etag.length >= 2 && etag.startsWith('"') && etag.endsWith('"') ? etag.slice(1, -1) : etag;
}

/** RFC 7232 form; S3 also accepts bare ETags, emulators often only the quoted one. */
function quoteEtag(etag: string): string {
  return `"${unquoteEtag(etag)}"`;
}

/**
 * x-amz-copy-source is `bucket/key`, URL-encoded; each key segment is encoded on its own so
 * '/' stays a separator, and RFC 3986 reserved characters that encodeURIComponent leaves
 * alone are encoded too.
 */
export function encodeKeyForCopySource(key: string): string {
  return key
    .split('/')
    .map((segment) =>
      encodeURIComponent(segment).replace(
        /[!'()*]/g,
        (character) => `%${character.charCodeAt(0).toString(16).toUpperCase()}`,
      ),
    )
    .join('/');
}

/**
 * Only a full-object checksum is comparable with a locally computed CRC32; a multipart
 * COMPOSITE one ("checksum of checksums", "value-N") is not.
 */
function fullObjectCrc32(value: string | undefined, type: string | undefined): string | undefined {
  if (value === undefined || value.includes('-')) return undefined;
  return type === undefined || type === 'FULL_OBJECT' ? value : undefined;
}

function lowerCaseKeys(metadata: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(metadata).map(([name, value]) => [name.toLowerCase(), value]));
}

function conditionHeaders(options: WriteOptions): { IfNoneMatch?: string; IfMatch?: string } {
  return {
    ...(options.ifNoneMatch !== undefined && { IfNoneMatch: options.ifNoneMatch }),
    ...(options.ifMatch !== undefined && { IfMatch: quoteEtag(options.ifMatch) }),
  };
}

function contentHeaders(options: WriteOptions): { Metadata?: Record<string, string>; ContentType?: string } {
  return {
    ...(options.metadata !== undefined && { Metadata: { ...options.metadata } }),
    ...(options.contentType !== undefined && { ContentType: options.contentType }),
  };
}

/**
 * User metadata travels as HTTP headers: S3 RFC 2047-encodes non-ASCII values on the way
 * back, so a later comparison (the job id) would fail. Refuse such metadata up front.
 */
function assertHeaderSafeMetadata(metadata: Readonly<Record<string, string>>): void {
  for (const [name, value] of Object.entries(metadata)) {
    if (!/^[A-Za-z0-9_-]+$/.test(name) || !/^[\x20-\x7e]*$/.test(value)) {
      throw new TypeError(
        `metadata ${JSON.stringify(name)} needs a [A-Za-z0-9_-] name and a printable ASCII value`,
      );
    }
  }
}
