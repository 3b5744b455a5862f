/**
 * Quarantine records: a corrupt input or a manifest set aside with its reason. Nothing a record
 * names is merged or deleted until the record goes: `compactor release` for an input, an operator
 * for a job (quarantine-lifecycle.ts). The writers and the reader
 * that shows a record live here together, so the fields stay in step.
 */

import { DeleteFailedError, ManifestConflictError } from './errors.ts';
import type { StepDeps } from './job.ts';
import {
  type KeptInput,
  type Manifest,
  quarantinedInputKey,
  quarantinedManifestKey,
  serializeManifest,
} from './manifest/manifest.ts';
import { describeOutcome } from './manifest/manifest-cas.ts';

/** What to do about a quarantined input, as the commands that name one say it. */
export const QUARANTINED_INPUT_FIX = 'replace or remove it, then `compactor release --partition P`';

export async function quarantineInput(deps: StepDeps, bad: KeptInput, manifest: Manifest): Promise<void> {
  const input = manifest.inputs.find((i) => i.key === bad.key);
  const record = {
    key: bad.key,
    etag: input?.etag,
    partition: manifest.partition,
    reason: bad.reason,
    // Whether a reader could read it (visible.ts names those it could not).
    readable: bad.unreadable !== true,
    jobId: manifest.jobId,
    quarantinedAt: deps.clock.now().toISOString(),
    fix: 'Replace or remove the object (or fix the setting named in the reason), then run `compactor release --partition <partition>` to let it be compacted again.',
  };
  await deps.store.put(
    quarantinedInputKey(deps.config.layout, bad.key),
    Buffer.from(JSON.stringify(record, null, 2)),
    {
      contentType: 'application/json',
    },
  );
  deps.onEvent?.({
    type: 'input-quarantined',
    key: bad.key,
    partition: manifest.partition,
    reason: bad.reason,
  });
}

/** What an input's quarantine record says (quarantineInput writes it); fields absent when not text. */
export interface InputRecord {
  readonly key?: string;
  readonly partition?: string;
  readonly reason?: string;
  /** The version it judged (the object's ETag then). */
  readonly etag?: string;
  /** Whether the input can be read as Parquet; absent in records written before it was kept. */
  readonly readable?: boolean;
}

/** Reads an input's quarantine record; text that is not such a record (an operator's edit) says nothing. */
export function parseInputRecord(body: Buffer): InputRecord {
  let value: unknown;
  try {
    value = JSON.parse(body.toString('utf8'));
  } catch (error) {
    if (error instanceof SyntaxError) return {};
    throw error;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return {};
  const fields = value as Record<string, unknown>;
  const text = (name: keyof InputRecord) =>
    typeof fields[name] === 'string' ? { [name]: fields[name] as string } : {};
  return {
    ...text('key'),
    ...text('partition'),
    ...text('reason'),
    ...text('etag'),
    ...(typeof fields.readable === 'boolean' ? { readable: fields.readable } : {}),
  };
}

/**
 * Moves a manifest into quarantine: a record that keeps the manifest text and the reason, then
 * the live manifest is removed if it is still the version we read. Quarantined jobs' inputs and
 * outputs are never candidates and nothing of theirs is deleted until an operator acts.
 */
export async function quarantineManifest(
  deps: StepDeps,
  target: {
    readonly key: string;
    readonly etag: string;
    readonly body?: Buffer;
    readonly manifest?: Manifest;
    /** For an invalid manifest, the job id it seems to name: its staging is kept with the record. */
    readonly jobId?: string;
  },
  reason: string,
): Promise<string> {
  const text =
    target.body?.toString('utf8') ??
    (target.manifest ? serializeManifest(target.manifest).toString('utf8') : '');
  // Only the manifest version we judged may be quarantined: a stale step (a zombie whose job
  // another attempt finished) must not raise a false alarm.
  const current = await deps.store.head(target.key);
  if (current?.etag !== target.etag) {
    throw new ManifestConflictError(`manifest ${target.key} changed before it could be quarantined`);
  }
  const recordKey = quarantinedManifestKey(
    deps.config.layout,
    target.key,
    target.etag.replace(/[^A-Za-z0-9]/g, ''),
  );
  const record = {
    manifestKey: target.key,
    etag: target.etag,
    reason,
    quarantinedAt: deps.clock.now().toISOString(),
    jobId: target.manifest?.jobId ?? target.jobId,
    manifest: text,
    fix: 'Inspect the job; when resolved, delete this record. Nothing of this job is deleted while it exists.',
  };
  await deps.store.put(recordKey, Buffer.from(`${JSON.stringify(record, null, 2)}\n`), {
    contentType: 'application/json',
  });
  const [outcome] = await deps.store.deleteMany([{ key: target.key, etag: target.etag }]);
  if (outcome?.status === 'error') {
    throw new DeleteFailedError(
      `could not remove quarantined manifest ${target.key}: ${describeOutcome(outcome)}`,
    );
  }
  deps.onEvent?.({ type: 'quarantined', key: target.key, reason });
  return recordKey;
}

export interface QuarantineRecordRow {
  readonly holds: string;
  readonly reason: string;
  readonly at: string;
}

/**
 * What a quarantine record (as quarantineInput or quarantineManifest above write it) says, for
 * display (`compactor status`): the fields both kinds share; a record that does not parse is shown
 * as unreadable and left in place.
 */
export function describeQuarantineRecord(body: Buffer): QuarantineRecordRow {
  let reason = 'unreadable quarantine record';
  let at = '';
  let holds = '';
  try {
    const record = JSON.parse(body.toString('utf8')) as {
      reason?: string;
      quarantinedAt?: string;
      key?: string;
      manifestKey?: string;
    };
    reason = record.reason ?? reason;
    at = record.quarantinedAt ?? '';
    // The input or manifest it holds (a hash-named record's own key does not say).
    holds = record.key ?? record.manifestKey ?? '';
  } catch {
    // Shown as unreadable; the record stays for the operator.
  }
  return { holds, reason, at };
}
