/**
 * Named errors. Step Functions Retry/Catch branch on `name`, so every class sets it and
 * the names are exported as constants the state machine uses. Also how any code reads the code
 * of a system error (errorCode).
 */

/** The `code` of a Node system error ('ENOENT', 'EEXIST', ...); undefined for any other value. */
export function errorCode(error: unknown): string | undefined {
  return error instanceof Error && 'code' in error && typeof error.code === 'string' ? error.code : undefined;
}

export const ErrorNames = {
  PreconditionFailed: 'PreconditionFailedError',
  NotFound: 'NotFoundError',
  TransientStore: 'TransientStoreError',
  ManifestConflict: 'ManifestConflictError',
  LeaseExpired: 'LeaseExpiredError',
  InvalidManifest: 'InvalidManifestError',
  InputUnreadable: 'InputUnreadableError',
  SchemaConflict: 'SchemaConflictError',
  RowCountMismatch: 'RowCountMismatchError',
  Dedup: 'DedupError',
  FinalKeyConflict: 'FinalKeyConflictError',
  OutputTooLarge: 'OutputTooLargeError',
  VerificationFailed: 'VerificationFailedError',
  DeleteFailed: 'DeleteFailedError',
  Config: 'ConfigError',
  StoreGuarantees: 'StoreGuaranteesError',
  CanaryFailed: 'CanaryFailedError',
} as const;

export type ErrorName = (typeof ErrorNames)[keyof typeof ErrorNames];

abstract class CompactorError extends Error {
  abstract override readonly name: ErrorName;
}

/** A conditional write (If-None-Match / If-Match) lost: someone else changed the key. */
export class PreconditionFailedError extends CompactorError {
  override readonly name = ErrorNames.PreconditionFailed;
  readonly key: string;
  constructor(key: string, options?: ErrorOptions) {
    super(`precondition failed on ${key}: it was created or changed by someone else`, options);
    this.key = key;
  }
}

/** The object does not exist (get, copy source). */
export class NotFoundError extends CompactorError {
  override readonly name = ErrorNames.NotFound;
  readonly key: string;
  constructor(key: string, options?: ErrorOptions) {
    super(`no such object: ${key}`, options);
    this.key = key;
  }
}

/** Throttling, 5xx, lost connection: safe to retry the whole step. */
export class TransientStoreError extends CompactorError {
  override readonly name = ErrorNames.TransientStore;
}

/** The manifest changed under us (another owner or recovery took it over): stop, do nothing more. */
export class ManifestConflictError extends CompactorError {
  override readonly name = ErrorNames.ManifestConflict;
}

/** This step's lease ran out; it stops before its next side effect so recovery can resolve the job. */
export class LeaseExpiredError extends CompactorError {
  override readonly name = ErrorNames.LeaseExpired;
}

export class InvalidManifestError extends CompactorError {
  override readonly name = ErrorNames.InvalidManifest;
  readonly key: string;
  readonly reason: string;
  constructor(key: string, reason: string, options?: ErrorOptions) {
    super(`invalid manifest ${key}: ${reason}`, options);
    this.key = key;
    this.reason = reason;
  }
}

/** The engine could not read a local input file as Parquet. The core turns this into a quarantine. */
export class InputUnreadableError extends CompactorError {
  override readonly name = ErrorNames.InputUnreadable;
  readonly file: string;
  readonly reason: string;
  constructor(file: string, reason: string, options?: ErrorOptions) {
    super(`not readable as Parquet: ${file}: ${reason}`, options);
    this.file = file;
    this.reason = reason;
  }
}

export class SchemaConflictError extends CompactorError {
  override readonly name = ErrorNames.SchemaConflict;
  readonly partition: string;
  readonly column: string;
  constructor(partition: string, column: string, detail: string, options?: ErrorOptions) {
    super(
      `schema conflict in partition ${partition}, column "${column}": ${detail}. ` +
        'Only int->bigint and float->double widenings are merged, and integers into DOUBLE when footer statistics prove every value within ±2^53; rewrite or remove the odd file.',
      options,
    );
    this.partition = partition;
    this.column = column;
  }
}

export class RowCountMismatchError extends CompactorError {
  override readonly name = ErrorNames.RowCountMismatch;
}

/** A table's dedup setting cannot be applied to a partition (a key column it does not have). */
export class DedupError extends CompactorError {
  override readonly name = ErrorNames.Dedup;
}

/** The final key exists and is not ours: fail closed, delete nothing. */
export class FinalKeyConflictError extends CompactorError {
  override readonly name = ErrorNames.FinalKeyConflict;
}

/** An output over the store's one-copy limit even after re-splitting: nothing staged. */
export class OutputTooLargeError extends CompactorError {
  override readonly name = ErrorNames.OutputTooLarge;
}

/** The published output does not match the manifest: quarantined, nothing deleted. */
export class VerificationFailedError extends CompactorError {
  override readonly name = ErrorNames.VerificationFailed;
}

/** A DeleteObjects key failed for a reason other than "gone" or "changed": the step is retried. */
export class DeleteFailedError extends CompactorError {
  override readonly name = ErrorNames.DeleteFailed;
}

export class ConfigError extends CompactorError {
  override readonly name = ErrorNames.Config;
}

/**
 * The store lacks a guarantee the protocol's safety rests on (a condition it ignores, checksums
 * it does not return): found by the store probe before a cycle's first write, so nothing was
 * written. Not retried: the store will not change by itself.
 */
export class StoreGuaranteesError extends CompactorError {
  override readonly name = ErrorNames.StoreGuarantees;
  readonly location: string;
  readonly missing: readonly { readonly guarantee: string; readonly detail: string }[];
  constructor(
    location: string,
    missing: readonly { readonly guarantee: string; readonly detail: string }[],
    options?: ErrorOptions,
  ) {
    super(
      `the store ${location} does not honour what the compaction protocol relies on, so nothing was compacted or deleted. Missing: ${missing.map((m) => `${m.guarantee} (${m.detail})`).join('; ')}. Fix: use Amazon S3, or a store that honours If-None-Match and If-Match on PutObject, If-None-Match on CopyObject and per-key ETags in DeleteObjects, and returns full-object checksums. Only for a store that provably has a single writer: opt out with --unsafe-single-writer-store (COMPACTOR_CONFIG "unsafeSingleWriterStore": true).`,
      options,
    );
    this.location = location;
    this.missing = missing;
  }
}

/**
 * The canary's rows or state were not what its execution should leave (core/canary.ts): the
 * scheduled canary fails with it, and its alarm fires.
 */
export class CanaryFailedError extends CompactorError {
  override readonly name = ErrorNames.CanaryFailed;
}

/** Errors worth retrying the same step for (Step Functions Retry uses these names). */
export const RETRYABLE_ERRORS: readonly ErrorName[] = [ErrorNames.TransientStore, ErrorNames.DeleteFailed];
