/**
 * The S3 store's listings: ListObjectsV2 pages followed through their continuation tokens, read as
 * objects or, with Delimiter '/', as the folders under a prefix.
 */

import { ListObjectsV2Command, type ListObjectsV2CommandOutput, type S3Client } from '@aws-sdk/client-s3';
import type { ListOptions, ObjectSummary } from '../../core/object-store.ts';
import { mapS3Error } from './s3-store-errors.ts';
import { unquoteEtag } from './s3-store-headers.ts';

/** The objects under `prefix`, as ObjectStore.list yields them. */
export async function* listObjects(
  client: S3Client,
  bucket: string,
  prefix: string,
  options: ListOptions | undefined,
): AsyncIterable<ObjectSummary> {
  // StartAfter: S3 lists only keys after it in UTF-8 binary order; it "can be any key"
  // (https://docs.aws.amazon.com/AmazonS3/latest/API/API_ListObjectsV2.html).
  const request = options?.startAfter !== undefined ? { StartAfter: options.startAfter } : {};
  for await (const page of pages(client, bucket, prefix, request, options?.signal)) {
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
export async function* listFolders(
  client: S3Client,
  bucket: string,
  prefix: string,
  options: { readonly signal?: AbortSignal } | undefined,
): AsyncIterable<string> {
  for await (const page of pages(client, bucket, prefix, { Delimiter: '/' }, options?.signal)) {
    for (const common of page.CommonPrefixes ?? []) {
      if (common.Prefix === undefined || !common.Prefix.startsWith(prefix) || !common.Prefix.endsWith('/')) {
        throw new Error(
          `ListObjectsV2 under ${prefix} returned a common prefix ${common.Prefix} not ending in "/"`,
        );
      }
      yield common.Prefix;
    }
  }
}

/** Every ListObjectsV2 page under `prefix`, following continuation tokens. */
async function* pages(
  client: S3Client,
  bucket: string,
  prefix: string,
  request: { readonly StartAfter?: string; readonly Delimiter?: string },
  signal: AbortSignal | undefined,
): AsyncIterable<ListObjectsV2CommandOutput> {
  let continuationToken: string | undefined;
  do {
    const page = await client
      .send(
        new ListObjectsV2Command({
          Bucket: bucket,
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
