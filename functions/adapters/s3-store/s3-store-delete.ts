/**
 * The S3 store's deletes: one DeleteObjects request for a batch of keys, each conditional on its
 * ETag when the request names one, and each key's outcome read from the response.
 */

import { DeleteObjectsCommand, type S3Client } from '@aws-sdk/client-s3';
import type { DeleteOutcome, DeleteRequest } from '../../core/object-store.ts';
import { mapS3Error } from './s3-store-errors.ts';
import { unquoteEtag } from './s3-store-headers.ts';

/** Deletes a non-empty batch of at most MAX_DELETE_BATCH keys. */
export async function deleteObjects(
  client: S3Client,
  bucket: string,
  requests: readonly DeleteRequest[],
  signal: AbortSignal | undefined,
): Promise<DeleteOutcome[]> {
  const response = await client
    .send(
      new DeleteObjectsCommand({
        Bucket: bucket,
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
      { abortSignal: signal },
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
