/**
 * The object-store calls of a job and of an execution, counted from what each step does, and the
 * S3 requests they are. test/core/cost/requests.test.ts runs real jobs through the local store
 * behind a recording wrapper and holds these counts to what the steps did.
 */

import { MAX_DELETE_BATCH } from '../object-store.ts';
import type { PartitionStepName } from '../pipeline.ts';
import { type RequestClass, type RequestCounts, STORE_CALL_CLASS, type StoreCall } from './prices.ts';

/** What prices a job's requests: its inputs and the outputs it writes. */
export interface JobShape {
  readonly inputs: number;
  readonly outputs: number;
}

export type StoreCalls = Readonly<Partial<Record<StoreCall, number>>>;

/** Which table prices a job: a compaction tier's merge, or retention's expiry (no output). */
export type JobKindPriced = 'compaction' | 'retention';

/**
 * Each step of the chain (pipeline.ts PARTITION_STEPS) reads the manifest and, but the last,
 * writes it back (the CAS to its next state). A compaction job:
 * - compact: creates the manifest, downloads every input, uploads each output to staging;
 * - publish: copies each staged output to its final key;
 * - verify: heads each final output;
 * - delete inputs: DeleteObjects in batches of at most 1,000;
 * - clear manifest: lists and deletes the staging objects, then deletes the manifest.
 * A retention job's first step (expireStep) claims the day, lists the other tiers' manifests
 * (a file one of them holds is not expired), heads every input and commits the manifest as
 * verified; publish and verify then only read it; it deletes and clears as a compaction job does.
 */
export const STEP_CALLS: Readonly<
  Record<JobKindPriced, Readonly<Record<PartitionStepName, (job: JobShape) => StoreCalls>>>
> = {
  compaction: {
    compact: ({ inputs, outputs }) => ({ getBytes: 1, getToFile: inputs, put: 2 + outputs }),
    publish: ({ outputs }) => ({ getBytes: 1, copy: outputs, put: 1 }),
    verify: ({ outputs }) => ({ getBytes: 1, head: outputs, put: 1 }),
    'delete-inputs': deleteInputsCalls,
    'clear-manifest': clearManifestCalls,
  },
  retention: {
    compact: ({ inputs }) => ({ getBytes: 2, list: 2, head: inputs, put: 2 }),
    publish: () => ({ getBytes: 1 }),
    verify: () => ({ getBytes: 1 }),
    'delete-inputs': deleteInputsCalls,
    'clear-manifest': clearManifestCalls,
  },
};

function deleteInputsCalls({ inputs }: JobShape): StoreCalls {
  return { getBytes: 1, deleteMany: Math.ceil(inputs / MAX_DELETE_BATCH), put: 1 };
}

/** The manifest read, the receipt put, the staging listing, then its delete and the manifest's. */
function clearManifestCalls(): StoreCalls {
  return { getBytes: 1, put: 1, list: 1, deleteMany: 2 };
}

/**
 * Around the protocol, in AWS: the plan step writes one record for each Map item, holding its
 * jobs' inputs, and each job's compact handler reads it (plan-store.ts writePlan, readJob).
 */
export const ITEM_RECORD_CALLS: StoreCalls = { put: 1 };
export const JOB_RECORD_CALLS: StoreCalls = { getBytes: 1 };

/**
 * Per wave of an execution (stated, not run here): the plan step writes its items file, the
 * Distributed Map's ItemReader reads it, its ResultWriter writes a manifest and a results file
 * (https://docs.aws.amazon.com/step-functions/latest/dg/input-output-resultwriter.html), which
 * Summary reads.
 */
export const WAVE_CALLS: StoreCalls = { put: 3, getBytes: 3 };
/**
 * Recover, on a state root with nothing to resolve: its listings of staging, the manifests, the
 * quarantined manifests and the quarantine records it prunes, and of the incomplete uploads
 * (test/core/cost/requests.test.ts runs it).
 */
export const RECOVER_CALLS: StoreCalls = { list: 6, listIncompleteUploads: 1 };
/** Summary reads and writes its record (stated). */
export const SUMMARY_CALLS: StoreCalls = { getBytes: 1, put: 1 };

/** Calls added up. */
export function addCalls(...all: readonly StoreCalls[]): StoreCalls {
  const sum: Partial<Record<StoreCall, number>> = {};
  for (const calls of all) {
    for (const [call, n] of Object.entries(calls) as [StoreCall, number][]) sum[call] = (sum[call] ?? 0) + n;
  }
  return sum;
}

/** Calls times `n`. */
export function scaleCalls(calls: StoreCalls, n: number): StoreCalls {
  return Object.fromEntries(Object.entries(calls).map(([call, k]) => [call, k * n])) as StoreCalls;
}

/** The protocol's calls of one job, step by step. */
export function jobCalls(
  job: JobShape,
  kind: JobKindPriced = 'compaction',
): Readonly<Record<PartitionStepName, StoreCalls>> {
  return Object.fromEntries(
    Object.entries(STEP_CALLS[kind]).map(([step, calls]) => [step, calls(job)]),
  ) as Record<PartitionStepName, StoreCalls>;
}

export const NO_REQUESTS: RequestCounts = { get: 0, put: 0, list: 0, delete: 0 };

/**
 * The S3 adapter's part size, which the Lambdas' store uses (DEFAULT_PART_SIZE in
 * functions/adapters/s3-store/s3-store.ts; test/core/cost/requests.test.ts holds them equal). A
 * file larger goes up in parts (CreateMultipartUpload, UploadPart each, CompleteMultipartUpload)
 * and is copied in parts after a HEAD of its source (UploadPartCopy each).
 */
export const PART_BYTES = 64 * 2 ** 20;

/** A job's outputs: split at the target size, together assumed as large as the inputs. */
export function outputSizes(inputBytes: number, targetFileBytes: number): number[] {
  const full = Math.floor(inputBytes / targetFileBytes);
  const rest = inputBytes - full * targetFileBytes;
  const sizes = Array.from({ length: full }, () => targetFileBytes);
  return rest > 0 || sizes.length === 0 ? [...sizes, rest] : sizes;
}

/**
 * S3 requests beyond one per store call: an output larger than a part is uploaded (compact) and
 * copied (publish) in k parts, k + 2 PUT-class requests each instead of one, and the copy heads
 * its source first.
 */
export function multipartRequests(sizes: readonly number[]): RequestCounts {
  const large = sizes.filter((size) => size > PART_BYTES);
  const parts = large.reduce((sum, size) => sum + Math.ceil(size / PART_BYTES), 0);
  return { ...NO_REQUESTS, put: 2 * (parts + large.length), get: large.length };
}

/**
 * A job's floor: what any compactor that does not keep the data itself pays for it, one GET per
 * input and one PUT per output; a retention job, which only deletes (free), has none.
 */
export function floorRequests(kind: JobKindPriced, inputs: number, outputs: number): RequestCounts {
  return kind === 'retention' ? NO_REQUESTS : { ...NO_REQUESTS, get: inputs, put: outputs };
}

/** S3 requests of store calls (a listing here: one page; the planner's are counted by keys). */
export function requestsOf(calls: StoreCalls): RequestCounts {
  const requests: Record<RequestClass, number> = { ...NO_REQUESTS };
  for (const [call, n] of Object.entries(calls) as [StoreCall, number][]) {
    requests[STORE_CALL_CLASS[call]] += n;
  }
  return requests;
}

export function addRequests(...all: readonly RequestCounts[]): RequestCounts {
  const sum: Record<RequestClass, number> = { ...NO_REQUESTS };
  for (const r of all) for (const c of Object.keys(sum) as RequestClass[]) sum[c] += r[c];
  return sum;
}
