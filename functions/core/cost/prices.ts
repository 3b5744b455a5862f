/**
 * AWS's list prices the cost model bills with, each from the page named beside it, and how S3
 * bills each request. One region: PRICE_REGION, arm64 Lambda (the stack's architecture).
 */

/** The region whose list prices PRICES are. */
export const PRICE_REGION = 'us-east-1';

/** The caveat every price carries. */
export const PRICE_BASIS = `at ${PRICE_REGION} list prices (arm64 Lambda, before any free tier)`;

/**
 * Prices (us-east-1, arm64 Lambda), each from the page named beside it.
 * - Lambda: https://aws.amazon.com/lambda/pricing/ (Arm: $0.0000133334 per GB-second, the first
 *   tier; $0.20 per million requests).
 * - S3 requests (S3 Standard; DELETE is free): https://aws.amazon.com/s3/pricing/ ($0.005 per
 *   1,000 PUT, COPY, POST, LIST; $0.0004 per 1,000 GET, SELECT and all other requests).
 * - Step Functions: https://aws.amazon.com/step-functions/pricing/ . Standard bills each state
 *   transition ($0.025 per 1,000); Express bills each request ($1.00 per million) and its duration,
 *   rounded up to 100 ms, in 64-MB chunks of memory ($0.06 per GB-hour for the first 1,000
 *   GB-hours a month, the highest tier, used here), with memory = 50 MB + the definition + the
 *   execution data: under 64 MB for a definition below Step Functions' 1 MB limit and the 256 KiB
 *   payload limit, so one chunk.
 * - S3 Tables compaction, the S3 Tables tab of https://aws.amazon.com/s3/pricing/ : $0.002 per
 *   1,000 objects processed, plus $0.005 per GB processed for binpack and $0.01 for sort.
 * - Glue: https://aws.amazon.com/glue/pricing/ ($0.44 per DPU-hour).
 */
export const PRICES = {
  lambdaArmGbSecond: 0.0000133334,
  lambdaPerRequest: 0.2 / 1e6,
  s3PutCopyListPer1000: 0.005,
  s3GetHeadPer1000: 0.0004,
  s3DeletePer1000: 0,
  sfnTransitionPer1000: 0.025,
  sfnExpressPerRequest: 1 / 1e6,
  sfnExpressGbSecond: 0.06 / 3600,
  sfnExpressBilledMb: 64,
  sfnExpressRoundingSeconds: 0.1,
  s3TablesBinpackPerGb: 0.005,
  s3TablesSortPerGb: 0.01,
  s3TablesPer1000Objects: 0.002,
  glueDpuHour: 0.44,
} as const;

/**
 * "When you use a Map state in Distributed mode, you are charged one state transition for each
 * child workflow execution the Distributed Map state starts", whatever the child type
 * (https://docs.aws.amazon.com/step-functions/latest/dg/concepts-transitions.html).
 */
export const CHILD_START_TRANSITIONS = 1;

/** S3's request classes: GET/HEAD, PUT/COPY/POST, LIST (billed as PUT), DELETE (free). */
export type RequestClass = 'get' | 'put' | 'list' | 'delete';
export type RequestCounts = Readonly<Record<RequestClass, number>>;

/** How each SDK command is billed on S3 (https://aws.amazon.com/s3/pricing/). */
export const COMMAND_CLASS: Readonly<Record<string, RequestClass>> = {
  GetObject: 'get',
  HeadObject: 'get',
  PutObject: 'put',
  CopyObject: 'put',
  CreateMultipartUpload: 'put',
  UploadPart: 'put',
  UploadPartCopy: 'put',
  CompleteMultipartUpload: 'put',
  ListObjectsV2: 'list',
  ListMultipartUploads: 'list',
  DeleteObjects: 'delete',
  DeleteObject: 'delete',
  AbortMultipartUpload: 'delete',
};

/**
 * How each object-store call is billed on S3: the S3 adapter sends one request per call, except
 * that a listing takes one request per 1,000 keys (requestsOfListing) and a file larger than a
 * part goes up, or is copied, in parts.
 */
export const STORE_CALL_CLASS = {
  getBytes: 'get',
  getToFile: 'get',
  head: 'get',
  put: 'put',
  copy: 'put',
  list: 'list',
  listIncompleteUploads: 'list',
  deleteMany: 'delete',
  abortIncompleteUpload: 'delete',
} as const satisfies Readonly<Record<string, RequestClass>>;
export type StoreCall = keyof typeof STORE_CALL_CLASS;

/** "Returns some or all (up to 1,000) of the objects in a bucket with each request" (ListObjectsV2). */
export const LIST_PAGE_KEYS = 1000;

/** S3 requests of a listing that returned `keys` keys: one page per 1,000, at least one. */
export function requestsOfListing(keys: number): number {
  return Math.max(1, Math.ceil(keys / LIST_PAGE_KEYS));
}

/** Dollars of S3 requests, by class. */
export function requestsUsd(requests: RequestCounts): number {
  const p = PRICES;
  return (
    (requests.get * p.s3GetHeadPer1000 +
      (requests.put + requests.list) * p.s3PutCopyListPer1000 +
      requests.delete * p.s3DeletePer1000) /
    1000
  );
}

/** Dollars of Lambda compute: `seconds` billed at `memoryMb` (arm64). */
export function lambdaDurationUsd(memoryMb: number, seconds: number): number {
  return (memoryMb / 1024) * seconds * PRICES.lambdaArmGbSecond;
}

/** Dollars of Lambda invocations. */
export function lambdaRequestsUsd(invocations: number): number {
  return invocations * PRICES.lambdaPerRequest;
}

/** Dollars of Standard state transitions. */
export function transitionsUsd(transitions: number): number {
  return (transitions * PRICES.sfnTransitionPer1000) / 1000;
}

/** An Express execution's billed duration: its wall time rounded up to 100 ms. */
export function expressBilledSeconds(seconds: number): number {
  const step = PRICES.sfnExpressRoundingSeconds;
  return Math.ceil(seconds / step - 1e-9) * step;
}

/** Dollars of one Express execution's duration (one 64-MB chunk) for `seconds` of wall time. */
export function expressDurationUsd(seconds: number): number {
  return (PRICES.sfnExpressBilledMb / 1024) * expressBilledSeconds(seconds) * PRICES.sfnExpressGbSecond;
}
