/**
 * The per-step IAM table: which prefixes of the data bucket each step may list, read, write and
 * delete. compactor-functions.ts puts each step's statements on that step's role.
 */

import * as iam from 'aws-cdk-lib/aws-iam';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import type { StepName } from '../../functions/contract.ts';
import { backlogRecordsFolder } from '../../functions/core/planner/planner-backlog-record.ts';
import { stateFolder } from '../../functions/core/state-root.ts';

/** Statements on objects under key prefixes (`<prefix>*`) and on listing them. */
export function prefixStatements(bucket: s3.IBucket) {
  return {
    objects: (actions: string[], ...prefixes: string[]) =>
      new iam.PolicyStatement({ actions, resources: prefixes.map((p) => bucket.arnForObjects(`${p}*`)) }),
    list: (...prefixes: string[]) =>
      new iam.PolicyStatement({
        actions: ['s3:ListBucket'],
        resources: [bucket.bucketArn],
        // An empty data root is the whole bucket: no condition (a list without Prefix has no s3:prefix).
        ...(prefixes.includes('')
          ? {}
          : { conditions: { StringLike: { 's3:prefix': prefixes.map((p) => `${p}*`) } } }),
      }),
  };
}

/**
 * Least privilege per step. P = data root, S = state root (P + '_compaction/'). ListBucket is
 * granted on exactly the prefixes a step reads or conditionally deletes, because S3 answers a
 * GET or HEAD of a missing key with 403 instead of 404 to a caller that may not list it
 * (https://docs.aws.amazon.com/AmazonS3/latest/API/API_HeadObject.html), and the protocol must
 * tell "absent" from "denied". Only recover and delete-inputs may delete outside S.
 * test/cdk/iam-evaluated.test.ts evaluates every call the steps make against these.
 */
export function stepGrants(
  bucket: s3.IBucket,
  dataPrefix: string,
  stateRoot: string,
): Record<StepName, iam.PolicyStatement[]> {
  const P = dataPrefix;
  const S = stateRoot;
  const M = stateFolder(S, 'manifests');
  const ST = stateFolder(S, 'staging');
  const Q = stateFolder(S, 'quarantine');
  const PL = stateFolder(S, 'plans');
  const R = stateFolder(S, 'results');
  // Consecutive failures per partition (backoff): compact writes, plan reads, clear removes.
  const F = stateFolder(S, 'failures');
  // Each committed job's receipt: clear writes it put-if-absent and, refused, heads it; a HEAD of a
  // missing key answers 403, not 404, without ListBucket on it
  // (https://docs.aws.amazon.com/AmazonS3/latest/API/API_HeadObject.html, "Permissions").
  const RC = stateFolder(S, 'receipts');
  // Each tier's backlog record: plan reads the last plan's and writes its own (under PL).
  const BL = backlogRecordsFolder(S);
  const { objects, list } = prefixStatements(bucket);
  const get = 's3:GetObject';
  const put = 's3:PutObject';
  const del = 's3:DeleteObject';
  const abort = 's3:AbortMultipartUpload';
  return {
    // Rolls jobs forward or back: copies staging -> final (as publish does), deletes inputs,
    // staging and manifests, aborts staging uploads left behind.
    recover: [
      list(P),
      objects([get, put, del], P),
      new iam.PolicyStatement({ actions: ['s3:ListBucketMultipartUploads'], resources: [bucket.bucketArn] }),
      objects([abort], P),
    ],
    plan: [list(P), objects([get], M, Q, F, BL), objects([put], PL)],
    compact: [
      list(P),
      objects([get], P),
      objects([get, put, del], M),
      objects([put, del, abort], ST),
      objects([put], Q, F),
    ],
    // Server-side copy staging -> final key, then the commit CAS. A large output is copied in
    // parts (UploadPartCopy: GetObject on the source, PutObject on the target), and a copy that
    // fails is aborted (https://docs.aws.amazon.com/AmazonS3/latest/API/API_UploadPartCopy.html, "Authentication
    // and authorization").
    publish: [
      list(P),
      objects([get, put, del], M),
      objects([get], ST),
      objects([get, put, abort], P),
      objects([put], Q),
    ],
    verify: [list(P), objects([get, put, del], M), objects([get], P), objects([put], Q)],
    // Conditional (If-Match) deletes need GetObject as well as DeleteObject, and list on the
    // inputs' prefix: a second delete of an input already gone must be answered 404, not 403.
    'delete-inputs': [list(P), objects([get, put], M), objects([get, del], P)],
    'clear-manifest': [
      list(M, ST, RC),
      objects([get, del], M),
      objects([get, put], RC),
      objects([del], ST, F),
    ],
    // Reads the Map results; keeps what it recorded as metrics beside them (run-summary.ts); reads
    // the receipts of a child's jobs when the child failed whole (settleByReceipts). A missing
    // receipt must read as absent, and GetObject of a missing key answers 403 without ListBucket
    // (https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html, "Permissions").
    summary: [list(R, RC), objects([get, put], R), objects([get], RC)],
  };
}
