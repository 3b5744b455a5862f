/**
 * The store probe's checks (see store-probe.ts for the guarantees and why S3 honours them): the
 * conditional requests under test, each judged from its outcome, on the probe's own objects.
 */

import { crc32OfBytes } from '../checksum.ts';
import { PreconditionFailedError, TransientStoreError } from '../errors.ts';
import type { Checksum, ObjectHead, ObjectStore } from '../object-store.ts';
import { stateFolder } from '../state-root.ts';
import { removeProbeLeftovers } from './store-probe-cleanup.ts';

export type StoreGuarantee =
  | 'put-if-absent'
  | 'compare-and-swap'
  | 'conditional-copy'
  | 'conditional-delete'
  | 'checksums';

export interface ProbeCheck {
  readonly guarantee: StoreGuarantee;
  readonly ok: boolean;
  readonly detail: string;
}

export interface ProbeReport {
  /** The store's location (`s3://bucket`, `file:///...`). */
  readonly location: string;
  readonly ok: boolean;
  /** One check per guarantee, in the order of STORE_GUARANTEES. */
  readonly checks: readonly ProbeCheck[];
}

export const STORE_GUARANTEES: readonly StoreGuarantee[] = [
  'put-if-absent',
  'compare-and-swap',
  'conditional-copy',
  'conditional-delete',
  'checksums',
];

/** Where probes write: under the state root, never matched by a data glob. */
export function probeRoot(stateRoot: string): string {
  return stateFolder(stateRoot, 'probe');
}

export interface ProbeDeps {
  readonly store: ObjectStore;
  /** The layout's state root (`PREFIX/_compaction/`). */
  readonly stateRoot: string;
  readonly randomHex: () => string;
  readonly signal?: AbortSignal;
}

/** A call's result: done, refused with a failed precondition, or failed otherwise. */
type Attempt<T> =
  | { readonly kind: 'done'; readonly value: T }
  | { readonly kind: 'refused' }
  | { readonly kind: 'failed'; readonly error: Error };

/**
 * Runs a conditional request under test. A refusal and a non-transient failure are outcomes the
 * check judges; a transient error or an abort is no verdict, so it propagates (the step is retried).
 */
async function attempt<T>(call: () => Promise<T>, signal: AbortSignal | undefined): Promise<Attempt<T>> {
  try {
    return { kind: 'done', value: await call() };
  } catch (error) {
    if (error instanceof PreconditionFailedError) return { kind: 'refused' };
    if (error instanceof TransientStoreError || signal?.aborted === true || !(error instanceof Error)) {
      throw error;
    }
    return { kind: 'failed', error };
  }
}

function describe(error: Error): string {
  return `${error.name}: ${error.message}`;
}

/**
 * Probes the store once and reports each guarantee. Only the probe's own objects are written, and
 * they are removed again (with their ETags, which is itself part of the conditional-delete check).
 * A probe cut short (a transient error, an abort, a crash) leaves them under probe/<id>/ (a few
 * bytes, never read as data); a later probe removes them once they are ABANDONED_PROBE_MS old.
 */
export async function probeStore(deps: ProbeDeps): Promise<ProbeReport> {
  const { store, signal } = deps;
  const id = deps.randomHex();
  const base = `${probeRoot(deps.stateRoot)}${id}/`;
  let version = 0;
  const checks = new Map<StoreGuarantee, ProbeCheck>();
  const probe: Probe = {
    store,
    signal,
    objectKey: `${base}object`,
    copyKey: `${base}copy`,
    next: () => {
      // Each version differs, so its ETag differs on every store (S3's is the MD5 of the body).
      const body = Buffer.from(`compactor store probe ${id} version ${++version}\n`);
      return { body, checksum: crc32OfBytes(body) };
    },
    fail: (guarantee, detail) => {
      // The first failure found for a guarantee is the one reported.
      if (!checks.has(guarantee)) checks.set(guarantee, { guarantee, ok: false, detail });
    },
  };

  const created = await checkPutIfAbsent(probe);
  const { current, stale } = await checkCompareAndSwap(probe, created);
  const copied = await checkConditionalCopy(probe);
  const head = await checkRefusedDelete(probe, stale);
  const copyHead = await checkChecksums(probe, head, copied, current);
  const deleted = await deleteWithOwnEtags(probe, [
    [probe.objectKey, head],
    [probe.copyKey, copyHead],
  ]);
  // Whatever the verdict, the probe leaves nothing behind: what is left goes without a condition.
  await removeProbeLeftovers(store, {
    root: probeRoot(deps.stateRoot),
    base,
    left: [probe.objectKey, probe.copyKey].filter((key) => !deleted.has(key)),
    ours: (head ?? copyHead)?.lastModified.getTime(),
    signal,
  });

  const ordered = STORE_GUARANTEES.map(
    (guarantee): ProbeCheck => checks.get(guarantee) ?? { guarantee, ok: true, detail: PASSED[guarantee] },
  );
  return { location: store.location, ok: ordered.every((c) => c.ok), checks: ordered };
}

/** One probe's two keys, the versions it writes to the first, and where each check reports. */
interface Probe {
  readonly store: ObjectStore;
  readonly signal: AbortSignal | undefined;
  readonly objectKey: string;
  readonly copyKey: string;
  readonly next: () => { readonly body: Buffer; readonly checksum: Checksum };
  readonly fail: (guarantee: StoreGuarantee, detail: string) => void;
}

/** The object's version as last written. */
interface Written {
  readonly etag: string;
  readonly checksum: Checksum;
}

/** Creating a new key is accepted, a second create of it is refused. */
async function checkPutIfAbsent(probe: Probe): Promise<Written> {
  const { store, signal, objectKey } = probe;
  const v1 = probe.next();
  let current: Written;
  const created = await attempt(
    () => store.put(objectKey, v1.body, { ifNoneMatch: '*', checksum: v1.checksum, signal }),
    signal,
  );
  if (created.kind === 'done') {
    current = { etag: created.value.etag, checksum: v1.checksum };
  } else {
    probe.fail(
      'put-if-absent',
      created.kind === 'refused'
        ? `a create with If-None-Match: * of a new key (${objectKey}) was refused as if it existed`
        : `a create with If-None-Match: * of a new key failed: ${describe(created.error)}`,
    );
    // The other checks still run, on an object written without the condition.
    current = {
      etag: (await store.put(objectKey, v1.body, { checksum: v1.checksum, signal })).etag,
      checksum: v1.checksum,
    };
  }
  const v2 = probe.next();
  const second = await attempt(
    () => store.put(objectKey, v2.body, { ifNoneMatch: '*', checksum: v2.checksum, signal }),
    signal,
  );
  if (second.kind === 'done') {
    probe.fail(
      'put-if-absent',
      'a second create with If-None-Match: * of an existing key was accepted: it overwrote the object',
    );
    return { etag: second.value.etag, checksum: v2.checksum };
  }
  if (second.kind === 'failed') {
    probe.fail(
      'put-if-absent',
      `a second create with If-None-Match: * of an existing key failed instead of being refused: ${describe(second.error)}`,
    );
  }
  return current;
}

/**
 * A replace on the current ETag is accepted, one on the old ETag refused. Returns the object's
 * version now and the ETag it replaced (undefined when the replace failed).
 */
async function checkCompareAndSwap(
  probe: Probe,
  written: Written,
): Promise<{ readonly current: Written; readonly stale: string | undefined }> {
  const { store, signal, objectKey } = probe;
  const v3 = probe.next();
  const swapped = await attempt(
    () => store.put(objectKey, v3.body, { ifMatch: written.etag, checksum: v3.checksum, signal }),
    signal,
  );
  if (swapped.kind !== 'done') {
    probe.fail(
      'compare-and-swap',
      swapped.kind === 'refused'
        ? 'a replace with If-Match on the current ETag was refused'
        : `a replace with If-Match on the current ETag failed: ${describe(swapped.error)}`,
    );
    return { current: written, stale: undefined };
  }
  const stale = written.etag;
  const current = { etag: swapped.value.etag, checksum: v3.checksum };
  if (stale === current.etag) {
    probe.fail(
      'compare-and-swap',
      `a replace with new content kept the ETag ${stale}: ETags do not identify versions`,
    );
    return { current, stale };
  }
  const v4 = probe.next();
  const staleSwap = await attempt(
    () => store.put(objectKey, v4.body, { ifMatch: stale, checksum: v4.checksum, signal }),
    signal,
  );
  if (staleSwap.kind === 'done') {
    probe.fail(
      'compare-and-swap',
      'a replace with If-Match on a stale ETag was accepted: it overwrote the newer object',
    );
    return { current: { etag: staleSwap.value.etag, checksum: v4.checksum }, stale };
  }
  if (staleSwap.kind === 'failed') {
    probe.fail(
      'compare-and-swap',
      `a replace with If-Match on a stale ETag failed instead of being refused: ${describe(staleSwap.error)}`,
    );
  }
  return { current, stale };
}

/** A copy with If-None-Match: * onto a new key is accepted, onto it again refused. True if it copied. */
async function checkConditionalCopy(probe: Probe): Promise<boolean> {
  const { store, signal, objectKey, copyKey } = probe;
  const copy = await attempt(() => store.copy(objectKey, copyKey, { ifNoneMatch: '*', signal }), signal);
  if (copy.kind !== 'done') {
    probe.fail(
      'conditional-copy',
      copy.kind === 'refused'
        ? 'a copy with If-None-Match: * onto a new key was refused as if it existed'
        : `a copy with If-None-Match: * onto a new key failed: ${describe(copy.error)}`,
    );
    return false;
  }
  const again = await attempt(() => store.copy(objectKey, copyKey, { ifNoneMatch: '*', signal }), signal);
  if (again.kind === 'done') {
    probe.fail(
      'conditional-copy',
      'a copy with If-None-Match: * onto an existing key was accepted: it overwrote the target',
    );
  } else if (again.kind === 'failed') {
    probe.fail(
      'conditional-copy',
      `a copy with If-None-Match: * onto an existing key failed instead of being refused: ${describe(again.error)}`,
    );
  }
  return true;
}

/**
 * Conditional delete, first half: an entry with a wrong ETag (the stale one, when there is one)
 * is refused and the object stays. Returns the object's head afterwards.
 */
async function checkRefusedDelete(probe: Probe, stale: string | undefined): Promise<ObjectHead | undefined> {
  const { store, signal, objectKey } = probe;
  const wrongEtag = stale ?? 'ffffffffffffffffffffffffffffffff';
  const refusedDelete = await attempt(
    () => store.deleteMany([{ key: objectKey, etag: wrongEtag }], { signal }),
    signal,
  );
  if (refusedDelete.kind === 'done') {
    const outcome = refusedDelete.value[0];
    if (outcome?.status === 'deleted') {
      probe.fail('conditional-delete', 'a DeleteObjects entry with a wrong ETag deleted the object');
    } else if (outcome?.status === 'error') {
      probe.fail(
        'conditional-delete',
        `a DeleteObjects entry with a wrong ETag failed with ${outcome.code}: ${outcome.message}`,
      );
    } else if (outcome?.status !== 'precondition-failed') {
      probe.fail(
        'conditional-delete',
        `a DeleteObjects entry with a wrong ETag of an existing object reported ${outcome?.status ?? 'nothing'}`,
      );
    }
  } else {
    probe.fail(
      'conditional-delete',
      refusedDelete.kind === 'refused'
        ? 'a DeleteObjects request with a per-key ETag was refused whole'
        : `a DeleteObjects request with a per-key ETag failed: ${describe(refusedDelete.error)}`,
    );
  }
  const head = await store.head(objectKey, { signal });
  if (head === undefined) {
    probe.fail('conditional-delete', 'the object was gone after a DeleteObjects entry with a wrong ETag');
  }
  return head;
}

/**
 * The full-object CRC32 of what was written, and of its copy, comes back on a head. Returns the
 * copy's head (undefined when there is no copy).
 */
async function checkChecksums(
  probe: Probe,
  head: ObjectHead | undefined,
  copied: boolean,
  current: Written,
): Promise<ObjectHead | undefined> {
  const checksumProblem = (what: string, got: Checksum | undefined, want: Checksum) =>
    got === undefined
      ? `a head of ${what} returned no full-object checksum (one was sent with the write)`
      : got.algorithm !== want.algorithm || got.value !== want.value
        ? `a head of ${what} returned ${got.algorithm} ${got.value}, but what was written has CRC32 ${want.value}`
        : undefined;
  if (head !== undefined) {
    const problem = checksumProblem('the written object', head.checksum, current.checksum);
    if (problem !== undefined) probe.fail('checksums', problem);
  }
  if (!copied) return undefined;
  const copyHead = await probe.store.head(probe.copyKey, { signal: probe.signal });
  const problem =
    copyHead === undefined
      ? 'a head of the copy found nothing'
      : checksumProblem('a server-side copy', copyHead.checksum, current.checksum);
  if (problem !== undefined) probe.fail('checksums', problem);
  return copyHead;
}

/**
 * Conditional delete, second half (and the cleanup): entries with the objects' own ETags delete
 * them. Returns the keys that are gone.
 */
async function deleteWithOwnEtags(
  probe: Probe,
  heads: readonly (readonly [key: string, head: ObjectHead | undefined])[],
): Promise<ReadonlySet<string>> {
  const { store, signal } = probe;
  const own = heads.flatMap(([key, head]) => (head === undefined ? [] : [{ key, etag: head.etag }]));
  const deleted = new Set<string>();
  if (own.length === 0) return deleted;
  const cleanup = await attempt(() => store.deleteMany(own, { signal }), signal);
  if (cleanup.kind !== 'done') {
    probe.fail(
      'conditional-delete',
      cleanup.kind === 'refused'
        ? "a DeleteObjects request with the objects' own ETags was refused whole"
        : `a DeleteObjects request with the objects' own ETags failed: ${describe(cleanup.error)}`,
    );
    return deleted;
  }
  for (const outcome of cleanup.value) {
    if (outcome.status === 'deleted') {
      deleted.add(outcome.key);
      continue;
    }
    // What a re-sent request answers when the first one deleted the object and its response
    // was lost: the object is gone, as the conditional delete must leave it.
    if (outcome.status === 'not-found' && (await store.head(outcome.key, { signal })) === undefined) {
      deleted.add(outcome.key);
      continue;
    }
    probe.fail(
      'conditional-delete',
      `a DeleteObjects entry with the object's own ETag did not delete it: ${outcome.status}${outcome.status === 'error' ? ` ${outcome.code}: ${outcome.message}` : ''}`,
    );
  }
  return deleted;
}

const PASSED: Readonly<Record<StoreGuarantee, string>> = {
  'put-if-absent': 'a second create with If-None-Match: * was refused',
  'compare-and-swap': 'a replace with If-Match on a stale ETag was refused',
  'conditional-copy': 'a copy with If-None-Match: * onto an existing key was refused',
  'conditional-delete':
    'a DeleteObjects entry with a wrong ETag was refused and the object stayed; one with its own ETag deleted it',
  checksums: 'heads of the object and of its copy returned the CRC32 of what was written',
};
