/**
 * Best effort on a manifest that does not validate: what it still seems to say (its job id, the
 * keys it names), for hiding and excluding, never for deleting.
 */

import { JOB_ID } from './manifest-keys.ts';

/** What a manifest that does not validate still seems to say. */
export interface ManifestScan {
  readonly jobId?: string;
  readonly inputKeys: readonly string[];
  readonly outputKeys: readonly string[];
}

const QUOTED_FIELD = (field: string) => new RegExp(`"${field}"\\s*:\\s*("(?:[^"\\\\]|\\\\.)*")`, 'g');

/**
 * Best effort on a manifest's text that failed validation, for hiding and excluding (never for
 * deleting): the fields of a well-formed JSON or, of a text that no longer parses (truncated,
 * hand-edited), every quoted value it still spells out.
 */
export function scanManifestText(text: string): ManifestScan {
  const ours = (id: unknown): string | undefined =>
    typeof id === 'string' && JOB_ID.test(id) ? id : undefined;
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    const values = (field: string): string[] =>
      [...text.matchAll(QUOTED_FIELD(field))].flatMap((m) => {
        try {
          const value: unknown = JSON.parse(m[1] as string);
          return typeof value === 'string' ? [value] : [];
        } catch {
          return [];
        }
      });
    const jobId = ours(values('jobId')[0]);
    return { ...(jobId ? { jobId } : {}), inputKeys: values('key'), outputKeys: values('finalKey') };
  }
  const m = (typeof raw === 'object' && raw !== null ? raw : {}) as Record<string, unknown>;
  const pick = (list: unknown, field: string): string[] =>
    Array.isArray(list)
      ? list.flatMap((e) => {
          const value = (e as Record<string, unknown> | null)?.[field];
          return typeof value === 'string' ? [value] : [];
        })
      : [];
  const jobId = ours(m.jobId);
  return {
    ...(jobId ? { jobId } : {}),
    inputKeys: pick(m.inputs, 'key'),
    outputKeys: pick(m.outputs, 'finalKey'),
  };
}
