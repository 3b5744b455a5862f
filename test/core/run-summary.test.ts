/**
 * The Summary's reading of a Map Run's results, written as the Distributed Map's ResultWriter
 * lays them out (manifest.json naming SUCCEEDED_n.json / FAILED_n.json, each entry with its
 * Input and Output or Error and Cause as JSON strings):
 * - a job that recovery rolled back between compact and upload (upload superseded, clear finding
 *   no manifest) is not counted as compacted;
 * - each failure cause is cut to 1 KiB, so the execution output stays far below 256 KiB.
 */

import { describe, expect, it } from 'vitest';
import type { LocalFolderStore } from '../../functions/adapters/local-store/local-store.ts';
import { parseConfig } from '../../functions/core/config.ts';
import {
  MAX_CAUSE_CHARS,
  MAX_FAILURES_LISTED,
  summarizeMapRun,
  withinTolerance,
} from '../../functions/core/run-summary.ts';
import { useTempDir } from '../support/engine-fixture.ts';
import { testStore } from '../support/test-store.ts';

const config = parseConfig({});
let root: string;
let store: LocalFolderStore;

useTempDir('run-summary-', (dir) => {
  root = dir;
  store = testStore(root);
});

async function writeResults(
  run: string,
  succeeded: readonly object[],
  failed: readonly { partition: string; error: string; cause: string }[],
): Promise<string> {
  const base = `_compaction/results/${run}`;
  const files: Record<string, { Key: string }[]> = { SUCCEEDED: [], FAILED: [], PENDING: [] };
  const put = async (kind: 'SUCCEEDED' | 'FAILED', entries: object[]) => {
    const key = `${base}/${kind}_0.json`;
    await store.put(key, Buffer.from(JSON.stringify(entries)));
    files[kind]?.push({ Key: key });
  };
  await put(
    'SUCCEEDED',
    succeeded.map((output) => ({ Status: 'SUCCEEDED', Input: '{}', Output: JSON.stringify(output) })),
  );
  await put(
    'FAILED',
    failed.map((f) => ({
      Status: 'FAILED',
      Input: JSON.stringify({ partition: f.partition }),
      Error: f.error,
      Cause: f.cause,
    })),
  );
  const key = `${base}/manifest.json`;
  await store.put(key, Buffer.from(JSON.stringify({ ResultFiles: files })));
  return key;
}

const numbers = { inputs: 4, outputs: 1, inputBytes: 400, outputBytes: 100, outputRows: 40 };

describe('summarizeMapRun', () => {
  // `upload` and `clear`: the Map results of a definition deployed before the steps took their
  // present names (a redrive runs it).
  it.each([
    ['publish', 'clearManifest'],
    ['upload', 'clear'],
  ] as const)(
    'counts a job as compacted only when this execution committed it, not one recovery rolled back (%s, %s)',
    async (publishKey, clearKey) => {
      const key = await writeResults(
        `run-superseded-${publishKey}`,
        [
          {
            partition: 'a/',
            status: 'cleared',
            compact: { status: 'done', state: 'staged', ...numbers },
            [publishKey]: { status: 'done', state: 'published' },
            [clearKey]: { status: 'done', state: 'cleared' },
          },
          {
            // Recovery rolled the job back after Compact: every later step found no manifest, and
            // Clear reports that as done (it cannot tell a finished job from a removed one).
            partition: 'b/',
            status: 'already-done',
            compact: { status: 'done', state: 'staged', ...numbers },
            [publishKey]: { status: 'superseded', state: 'none' },
            [clearKey]: { status: 'already-done', state: 'cleared' },
          },
          {
            // A redrive of a job whose publish had already happened: still ours.
            partition: 'c/',
            status: 'done',
            compact: { status: 'already-done', state: 'published', ...numbers },
            [publishKey]: { status: 'already-done', state: 'published' },
            [clearKey]: { status: 'done', state: 'cleared' },
          },
        ],
        [],
      );
      const summary = await summarizeMapRun(store, config.layout, 'hourly', key);
      expect(summary).toMatchObject({
        partitions: 3,
        compacted: 2,
        skipped: 0,
        superseded: 1,
        failed: 0,
        filesIn: 8,
        rows: 80,
      });
    },
  );

  it(`cuts each failure cause to ${MAX_CAUSE_CHARS} characters and lists at most ${MAX_FAILURES_LISTED}`, async () => {
    const long = `SchemaConflictError: column count is VARCHAR in x.parquet; ${'x'.repeat(300_000)}`;
    const failures = Array.from({ length: 30 }, (_, i) => ({
      partition: `p${i}/`,
      error: 'SchemaConflictError',
      cause: long,
    }));
    const key = await writeResults('run-long-causes', [], failures);
    const summary = await summarizeMapRun(store, config.layout, 'hourly', key);
    expect(summary.failed).toBe(30);
    expect(summary.failures).toHaveLength(MAX_FAILURES_LISTED);
    for (const failure of summary.failures) {
      expect(failure.cause.length).toBeLessThanOrEqual(MAX_CAUSE_CHARS);
      expect(failure.cause).toMatch(/^SchemaConflictError: column count is VARCHAR in x\.parquet; x+/);
      expect(failure.cause).toContain('more characters cut]');
    }
    // The whole summary, as the execution output carries it, is far below 256 KiB.
    expect(Buffer.byteLength(JSON.stringify(summary))).toBeLessThan(64 * 1024);
  });

  it('applies the tolerance as the Map Run would: failures may reach, not exceed, the percentage', () => {
    expect(withinTolerance({ failed: 0, partitions: 0 }, 0)).toBe(true);
    expect(withinTolerance({ failed: 1, partitions: 3 }, 5)).toBe(false);
    expect(withinTolerance({ failed: 1, partitions: 20 }, 5)).toBe(true);
    expect(withinTolerance({ failed: 2, partitions: 20 }, 5)).toBe(false);
    expect(withinTolerance({ failed: 3, partitions: 3 }, 100)).toBe(true);
  });
});
