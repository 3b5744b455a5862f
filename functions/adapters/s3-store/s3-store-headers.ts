/**
 * What the S3 store puts in and reads out of S3's headers: ETags (unquoted in the store, quoted
 * in condition headers), the conditions and content headers of a write, a copy's source, user
 * metadata and the full-object checksum.
 */

import type { WriteOptions } from '../../core/object-store.ts';

export function unquoteEtag(etag: string): string {
  return etag.length >= 2 && etag.startsWith('"') && etag.endsWith('"') ? etag.slice(1, -1) : etag;
}

/** RFC 7232 form; S3 also accepts bare ETags, emulators often only the quoted one. */
export function quoteEtag(etag: string): string {
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

/** The x-amz-copy-source of `key` in `bucket` (CopyObject and UploadPartCopy alike). */
export function copySourceOf(bucket: string, key: string): string {
  return `${encodeURIComponent(bucket)}/${encodeKeyForCopySource(key)}`;
}

/**
 * Only a full-object checksum is comparable with a locally computed CRC32; a multipart
 * COMPOSITE one ("checksum of checksums", "value-N") is not.
 */
export function fullObjectCrc32(value: string | undefined, type: string | undefined): string | undefined {
  if (value === undefined || value.includes('-')) return undefined;
  return type === undefined || type === 'FULL_OBJECT' ? value : undefined;
}

export function lowerCaseKeys(metadata: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(metadata).map(([name, value]) => [name.toLowerCase(), value]));
}

export function conditionHeaders(options: WriteOptions): { IfNoneMatch?: string; IfMatch?: string } {
  return {
    ...(options.ifNoneMatch !== undefined && { IfNoneMatch: options.ifNoneMatch }),
    ...(options.ifMatch !== undefined && { IfMatch: quoteEtag(options.ifMatch) }),
  };
}

export function contentHeaders(options: WriteOptions): {
  Metadata?: Record<string, string>;
  ContentType?: string;
} {
  return {
    ...(options.metadata !== undefined && { Metadata: { ...options.metadata } }),
    ...(options.contentType !== undefined && { ContentType: options.contentType }),
  };
}

/**
 * User metadata travels as HTTP headers: S3 RFC 2047-encodes non-ASCII values on the way
 * back, so a later comparison (the job id) would fail. Refuse such metadata up front.
 */
export function assertHeaderSafeMetadata(metadata: Readonly<Record<string, string>>): void {
  for (const [name, value] of Object.entries(metadata)) {
    if (!/^[A-Za-z0-9_-]+$/.test(name) || !/^[\x20-\x7e]*$/.test(value)) {
      throw new TypeError(
        `metadata ${JSON.stringify(name)} needs a [A-Za-z0-9_-] name and a printable ASCII value`,
      );
    }
  }
}
