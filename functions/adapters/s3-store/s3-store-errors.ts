/**
 * How the S3 store reads a failure: an SDK or network error becomes the protocol's named error
 * (PreconditionFailedError, NotFoundError, TransientStoreError) or comes back unchanged, and a
 * request with a stream body, which the SDK does not retry, is retried here.
 */

import { setTimeout as sleep } from 'node:timers/promises';
import { NotFoundError, PreconditionFailedError, TransientStoreError } from '../../core/errors.ts';

export interface MapOptions {
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

export function errorName(error: unknown): string {
  if (!(error instanceof Error)) return '';
  const code = (error as { Code?: unknown }).Code;
  return typeof code === 'string' ? code : error.name;
}

function httpStatus(error: Error): number | undefined {
  const status = (error as { $metadata?: { httpStatusCode?: unknown } }).$metadata?.httpStatusCode;
  return typeof status === 'number' ? status : undefined;
}

/**
 * The SDK never retries a request whose body is a stream (it cannot rewind it), so file
 * uploads retry transient failures here, each attempt with a fresh stream.
 */
const STREAM_BODY_ATTEMPTS = 3;
const STREAM_RETRY_BASE_MS = 200;

/** Runs `attempt` again (it must build a fresh request body) after a transient failure. */
export async function retryTransient<T>(
  attempt: () => Promise<T>,
  signal: AbortSignal | undefined,
): Promise<T> {
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
