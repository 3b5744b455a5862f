/**
 * Receipts: what each committed job did, kept after its manifest is gone. The clear step writes
 * one, put-if-absent, before it deletes the manifest (recovery clears through the same step, so
 * a job it rolls forward gets one too); a job rolled back never reaches clear and has none. The
 * receipt is built from the manifest alone, so every attempt writes the same facts, and the
 * first one stays: a receipt is never rewritten. The bucket's lifecycle rule (and a local run)
 * expires them after `receiptDays`.
 */

import { createHash } from 'node:crypto';
import type { CompactorConfig, JobKind } from './config.ts';
import { type ColumnStats, type DedupRequest, KEYS_HASH_ALGORITHM } from './engine.ts';
import { InvalidManifestError, PreconditionFailedError, TransientStoreError } from './errors.ts';
import { type JobRef, type StepDeps, withSignal } from './job.ts';
import { forEachLimit } from './limit.ts';
import {
  type Expiry,
  type InputRef,
  jobIdTime,
  type KeptInput,
  type Manifest,
  receiptKey,
  receiptOf,
  receiptsRoot,
} from './manifest/manifest.ts';
import { type Checksum, getBytesIfExists, type ObjectStore } from './object-store.ts';

export interface ReceiptOutput {
  readonly key: string;
  readonly size: number;
  readonly rows: number;
  /** The published object's ETag (absent for a job verified before ETags were recorded). */
  readonly etag?: string;
  readonly checksum: Checksum;
  readonly columns?: readonly ColumnStats[];
}

export interface Receipt {
  readonly version: 1;
  readonly jobId: string;
  readonly tier: JobKind;
  readonly partition: string;
  /** The store (bucket) of every key. */
  readonly location: string;
  /** The execution (ARN on AWS) that cleared the job: its own, or recovery's that rolled it forward. */
  readonly executionId: string;
  /** What the job took, with the versions (ETags) and footer rows it read. Deleted unless kept. */
  readonly inputs: readonly InputRef[];
  readonly inputRows?: number;
  /** Inputs replaced after the job read them: new data, left in place. */
  readonly keptInputs?: readonly KeptInput[];
  /** Inputs found corrupt while staging: left in place and quarantined, not merged. */
  readonly quarantinedInputs?: readonly KeptInput[];
  /** What the job published (none for repair and retention jobs). */
  readonly outputs: readonly ReceiptOutput[];
  /** A repair job: the existing outputs, at these ETags, that already held the inputs' rows. */
  readonly repairOf?: readonly InputRef[];
  /** A retention job: the rule that expired the inputs. */
  readonly expiry?: Expiry;
  readonly dedup?: DedupRequest;
  /** With dedup: the rows (keys) kept, which the outputs hold. */
  readonly distinctRows?: number;
  /** With dedup: a hash of the kept rows (keys), by `algorithm`. */
  readonly keysHash?: { readonly algorithm: string; readonly value: string };
  /** SHA-256 of the effective settings the job ran under (settingsHash). */
  readonly settingsHash: string;
  readonly claimedAt: string;
  /** When the inputs were deleted: the manifest's last write. */
  readonly inputsDeletedAt: string;
  readonly writtenAt: string;
}

/**
 * A fingerprint of the effective settings: SHA-256 of their JSON with object keys sorted (maps
 * and sets as sorted entries), so two runs under the same settings give the same hash.
 */
export function settingsHash(config: CompactorConfig): string {
  return createHash('sha256').update(stableJson(config)).digest('hex');
}

function stableJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (v instanceof Map) return Object.fromEntries([...v.entries()].sort(([a], [b]) => compare(a, b)));
    if (v instanceof Set) return [...v].sort(compare);
    if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
      return Object.fromEntries(Object.entries(v).sort(([a], [b]) => compare(a, b)));
    }
    return v;
  });
}

function compare(a: unknown, b: unknown): number {
  const x = String(a);
  const y = String(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

/** The receipt of a job whose inputs are deleted, from its manifest. */
export function receiptOfManifest(config: CompactorConfig, manifest: Manifest, writtenAt: Date): Receipt {
  const optional = <K extends keyof Manifest>(key: K) =>
    manifest[key] === undefined ? {} : ({ [key]: manifest[key] } as Pick<Manifest, K>);
  return {
    version: 1,
    jobId: manifest.jobId,
    tier: manifest.tier,
    partition: manifest.partition,
    location: manifest.location,
    executionId: manifest.executionId,
    inputs: manifest.inputs,
    ...optional('inputRows'),
    ...(manifest.keptInputs?.length ? { keptInputs: manifest.keptInputs } : {}),
    ...(manifest.quarantinedInputs?.length ? { quarantinedInputs: manifest.quarantinedInputs } : {}),
    outputs: (manifest.outputs ?? []).map((o) => ({
      key: o.finalKey,
      size: o.size,
      rows: o.rows,
      ...(o.etag === undefined ? {} : { etag: o.etag }),
      checksum: o.checksum,
      ...(o.columns === undefined ? {} : { columns: o.columns }),
    })),
    ...optional('repairOf'),
    ...optional('expiry'),
    ...optional('dedup'),
    ...optional('distinctRows'),
    ...(manifest.keysHash === undefined
      ? {}
      : { keysHash: { algorithm: KEYS_HASH_ALGORITHM, value: manifest.keysHash } }),
    settingsHash: settingsHash(config),
    claimedAt: manifest.createdAt,
    inputsDeletedAt: manifest.updatedAt,
    writtenAt: writtenAt.toISOString(),
  };
}

/**
 * Writes the receipt of a job whose inputs are deleted, unless it exists: a retried or redriven
 * clear, or recovery clearing after a crash, finds the first one and leaves it. Only this job's
 * clear writes this key (it carries the job id).
 */
export async function writeReceipt(deps: StepDeps, manifest: Manifest): Promise<string> {
  const { layout } = deps.config;
  const key = receiptKey(layout, manifest.tier, manifest.partition, manifest.jobId);
  const receipt = receiptOfManifest(deps.config, manifest, deps.clock.now());
  try {
    await deps.store.put(key, Buffer.from(`${JSON.stringify(receipt, null, 2)}\n`), {
      ifNoneMatch: '*',
      contentType: 'application/json',
      ...withSignal(deps),
    });
  } catch (error) {
    if (!(error instanceof PreconditionFailedError)) throw error;
    // A refused put-if-absent is a 412 (the receipt exists) or a 409 (a concurrent conditional
    // write to the key: nothing written), which S3 says to retry
    // (https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html).
    if ((await deps.store.head(key, withSignal(deps))) === undefined) {
      throw new TransientStoreError(
        `receipt ${key} was refused and is not there: the clear step is retried`,
        {
          cause: error,
        },
      );
    }
  }
  return key;
}

/**
 * The job's receipt when this very execution committed and cleared it before: a redriven Map
 * item runs all its jobs again, and a job found without a manifest reports what it did, not
 * "superseded". A receipt of another execution (recovery rolled the job forward) or one that does
 * not read as a receipt is not this execution's commit: undefined.
 */
export async function clearedByThisExecution(
  deps: StepDeps,
  ref: JobRef,
): Promise<{ readonly key: string; readonly receipt: Receipt } | undefined> {
  const found = await jobReceipt(deps.store, deps.config, ref, withSignal(deps).signal);
  return found?.receipt.executionId === ref.executionId ? found : undefined;
}

/**
 * The job's receipt, whichever execution cleared it; undefined when it has none, or one that does
 * not read as its receipt (nothing then says the job committed).
 */
export async function jobReceipt(
  store: ObjectStore,
  config: CompactorConfig,
  job: Pick<JobRef, 'tier' | 'partition' | 'jobId'>,
  signal?: AbortSignal,
): Promise<{ readonly key: string; readonly receipt: Receipt } | undefined> {
  const key = receiptKey(config.layout, job.tier, job.partition, job.jobId);
  const found = await getBytesIfExists(store, key, signal ? { signal } : {});
  if (found === undefined) return undefined;
  try {
    return { key, receipt: parseReceipt(config, key, found.body) };
  } catch (error) {
    if (error instanceof InvalidManifestError) return undefined;
    throw error;
  }
}

/** A receipt read back: checked to be the one its key names, else InvalidManifestError (it names the key). */
export function parseReceipt(config: CompactorConfig, key: string, body: Buffer): Receipt {
  const named = receiptOf(config.layout, key);
  if (!named) throw new InvalidManifestError(key, 'not a receipt key');
  let raw: unknown;
  try {
    raw = JSON.parse(body.toString('utf8'));
  } catch (error) {
    throw new InvalidManifestError(key, 'the receipt is not valid JSON', { cause: error });
  }
  const r = raw as Partial<Receipt> | null;
  if (
    r === null ||
    typeof r !== 'object' ||
    r.version !== 1 ||
    r.jobId !== named.jobId ||
    r.tier !== named.tier ||
    r.partition !== named.partition ||
    !Array.isArray(r.inputs) ||
    !Array.isArray(r.outputs) ||
    typeof r.writtenAt !== 'string'
  ) {
    throw new InvalidManifestError(
      key,
      `not the receipt of job ${named.jobId} (${named.tier}, ${named.partition})`,
    );
  }
  return r as Receipt;
}

export interface ReceiptQuery {
  /** A folder under the data root, data prefix included (a table, a day, an hour): its receipts and those below it. */
  readonly under?: string;
  /** Only jobs started at or after this time (a job id starts with its start time). */
  readonly since?: Date;
  readonly signal?: AbortSignal;
}

/** How many receipts are read at once. */
const READ_CONCURRENCY = 16;

/** A receipt as listed: read and checked, or why it is not a receipt (its key names it). */
export type ListedReceipt =
  | { readonly key: string; readonly receipt: Receipt }
  | { readonly key: string; readonly invalid: string };

/**
 * The receipts under a folder, in key order (partition, then job start). One that does not read
 * as a receipt is listed with why, not thrown: it must not hide the others.
 */
export async function listReceipts(
  store: ObjectStore,
  config: CompactorConfig,
  query: ReceiptQuery = {},
): Promise<ListedReceipt[]> {
  const { layout } = config;
  const under = query.under ?? layout.dataPrefix;
  const prefix = `${receiptsRoot(layout)}${under.slice(layout.dataPrefix.length)}`;
  const since = query.since === undefined ? undefined : jobIdTime(query.since);
  const keys: string[] = [];
  for await (const object of store.list(prefix, query.signal ? { signal: query.signal } : {})) {
    const named = receiptOf(layout, object.key);
    if (!named) continue;
    if (since !== undefined && named.jobId.slice(0, since.length) < since) continue;
    keys.push(object.key);
  }
  return readReceipts(store, config, keys, query.signal);
}

/** The receipts at `keys`, read a few at a time, in that order; one expired since its listing is left out. */
export async function readReceipts(
  store: ObjectStore,
  config: CompactorConfig,
  keys: readonly string[],
  signal?: AbortSignal,
): Promise<ListedReceipt[]> {
  const receipts: (ListedReceipt | undefined)[] = new Array(keys.length);
  await forEachLimit(keys, READ_CONCURRENCY, async (key, index) => {
    // Expired by the lifecycle rule since the listing: gone, not an error.
    const body = (await getBytesIfExists(store, key, signal ? { signal } : {}))?.body;
    if (body === undefined) return;
    try {
      receipts[index] = { key, receipt: parseReceipt(config, key, body) };
    } catch (error) {
      if (!(error instanceof InvalidManifestError)) throw error;
      receipts[index] = { key, invalid: error.message };
    }
  });
  return receipts.filter((r) => r !== undefined);
}
