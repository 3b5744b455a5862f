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
import { ITEM_FAILED_ERROR } from '../../functions/contract.ts';
import { parseConfig } from '../../functions/core/config.ts';
import { receiptKey } from '../../functions/core/manifest/manifest.ts';
import {
  MAX_CAUSE_CHARS,
  MAX_FAILURES_LISTED,
  type SummaryScope,
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

const EXECUTION = 'arn:aws:states:eu-west-1:111122223333:execution:compactor:hourly-1';
const scope = (): SummaryScope => ({ store, config, tier: 'hourly', executionId: EXECUTION });

/**
 * Writes a Map run's results as ResultWriter lays them out (a file per status given, and the
 * manifest listing every status's files) under `_compaction/results/<run>`; returns the manifest's key.
 */
async function putMapRun(
  run: string,
  entries: { readonly SUCCEEDED?: readonly object[]; readonly FAILED?: readonly object[] },
): Promise<string> {
  const base = `_compaction/results/${run}`;
  const files: Record<string, { Key: string }[]> = { SUCCEEDED: [], FAILED: [], PENDING: [] };
  for (const kind of ['SUCCEEDED', 'FAILED'] as const) {
    const list = entries[kind];
    if (list === undefined) continue;
    const key = `${base}/${kind}_0.json`;
    await store.put(key, Buffer.from(JSON.stringify(list)));
    files[kind]?.push({ Key: key });
  }
  const key = `${base}/manifest.json`;
  await store.put(key, Buffer.from(JSON.stringify({ ResultFiles: files })));
  return key;
}

async function writeResults(
  run: string,
  succeeded: readonly object[],
  failed: readonly { partition: string; error: string; cause: string }[],
): Promise<string> {
  return putMapRun(run, {
    SUCCEEDED: succeeded.map((output) => ({
      Status: 'SUCCEEDED',
      Input: '{}',
      Output: JSON.stringify(output),
    })),
    FAILED: failed.map((f) => ({
      Status: 'FAILED',
      Input: JSON.stringify({ partition: f.partition }),
      Error: f.error,
      Cause: f.cause,
    })),
  });
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
      const summary = await summarizeMapRun(scope(), key);
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

  it("judges each job of a Map item: a succeeded item's outcomes, a failed item's from its cause, a child that failed whole as every job failed", async () => {
    const committed = (partition: string) => ({
      partition,
      jobId: `j-${partition}`,
      compact: { status: 'done', state: 'staged', ...numbers },
      publish: { status: 'done', state: 'published' },
      clearManifest: { status: 'done', state: 'cleared' },
    });
    const jobs = (...partitions: string[]) =>
      partitions.map((p) => ({ partition: p, jobId: `j-${p}`, inputFiles: 4 }));
    const failedJob = {
      partition: 'e/',
      jobId: 'j-e/',
      compact: { status: 'done', state: 'staged', ...numbers },
      failure: { Error: 'SchemaConflictError', Cause: 'column "value": DOUBLE vs VARCHAR' },
    };
    const succeeded = [
      {
        Status: 'SUCCEEDED',
        Input: JSON.stringify({ table: 't/', jobs: jobs('a/', 'b/') }),
        Output: JSON.stringify([committed('a/'), committed('b/')]),
      },
    ];
    const failed = [
      {
        // A job failed: the item's cause lists every job's outcome (the state machine's Item failed).
        Status: 'FAILED',
        Input: JSON.stringify({ table: 't/', jobs: jobs('c/', 'd/', 'e/') }),
        Error: ITEM_FAILED_ERROR,
        Cause: JSON.stringify([committed('c/'), committed('d/'), failedJob]),
      },
      {
        // The child itself failed (its five minutes): no outcome reached the Map.
        Status: 'FAILED',
        Input: JSON.stringify({ table: 't/', jobs: jobs('f/', 'g/') }),
        Error: 'States.Timeout',
        Cause: 'child ran past its 300 s execution timeout',
      },
    ];
    const summary = await summarizeMapRun(
      scope(),
      await putMapRun('run-items', { SUCCEEDED: succeeded, FAILED: failed }),
    );
    expect(summary).toMatchObject({
      partitions: 7,
      items: 3,
      failedItems: 2,
      compacted: 4,
      failed: 3,
      filesIn: 16,
      rows: 160,
    });
    expect(summary.failures).toEqual([
      { partition: 'e/', error: 'SchemaConflictError', cause: 'column "value": DOUBLE vs VARCHAR' },
      { partition: 'f/', error: 'States.Timeout', cause: 'child ran past its 300 s execution timeout' },
      { partition: 'g/', error: 'States.Timeout', cause: 'child ran past its 300 s execution timeout' },
    ]);
    expect(withinTolerance(summary, 50)).toBe(false);
    expect(withinTolerance(summary, 67)).toBe(true);
  });

  it("settles the jobs of a child that failed whole by their receipts: this execution's committed, another's superseded, the rest failed", async () => {
    const jobIdOf = (n: number) => `20250115T100000Z-${String(n).padStart(16, '0')}`;
    const jobs = ['t/f/', 't/g/', 't/h/', 't/i/'].map((partition, n) => ({
      partition,
      jobId: jobIdOf(n),
      inputFiles: 2,
    }));
    const receipt = (n: number, executionId: string) => ({
      version: 1,
      jobId: jobIdOf(n),
      tier: 'hourly',
      partition: jobs[n]?.partition,
      location: 'lake',
      executionId,
      // Each job's own number of inputs, so the totals tell whose receipt counted.
      inputs: Array.from({ length: n + 2 }, (_, i) => ({
        key: `${jobs[n]?.partition}${i}.parquet`,
        size: 100,
        etag: `"${i}"`,
        rows: 10,
      })),
      inputRows: 20,
      outputs: [
        {
          key: `${jobs[n]?.partition}out.parquet`,
          size: 50,
          rows: 20,
          checksum: { algorithm: 'CRC32', value: 'AAAAAA==' },
        },
      ],
      writtenAt: '2025-01-15T10:04:00.000Z',
    });
    const put = (n: number, body: string) =>
      store.put(receiptKey(config.layout, 'hourly', jobs[n]?.partition ?? '', jobIdOf(n)), Buffer.from(body));
    // f: cleared by this execution before its child ran out of time; g: rolled forward by another
    // execution's recovery; h: no receipt (its manifest is recovery's); i: a receipt that does not read.
    await put(0, JSON.stringify(receipt(0, EXECUTION)));
    await put(1, JSON.stringify(receipt(1, `${EXECUTION}-other`)));
    await put(3, '{not json');
    const failed = [
      {
        Status: 'FAILED',
        Input: JSON.stringify({ table: 't/', jobs }),
        Error: 'States.Timeout',
        Cause: 'child ran past its 300 s execution timeout',
      },
    ];
    const summary = await summarizeMapRun(scope(), await putMapRun('run-whole-child', { FAILED: failed }));
    expect(summary).toMatchObject({
      partitions: 4,
      items: 1,
      failedItems: 1,
      compacted: 1,
      superseded: 1,
      failed: 2,
      filesIn: 2,
      filesOut: 1,
      bytesIn: 200,
      bytesOut: 50,
      rowsIn: 20,
      rows: 20,
    });
    expect(summary.failures.map((f) => f.partition)).toEqual(['t/h/', 't/i/']);
  });

  it(`cuts each failure cause to ${MAX_CAUSE_CHARS} characters and lists at most ${MAX_FAILURES_LISTED}`, async () => {
    const long = `SchemaConflictError: column count is VARCHAR in x.parquet; ${'x'.repeat(300_000)}`;
    const failures = Array.from({ length: 30 }, (_, i) => ({
      partition: `p${i}/`,
      error: 'SchemaConflictError',
      cause: long,
    }));
    const key = await writeResults('run-long-causes', [], failures);
    const summary = await summarizeMapRun(scope(), key);
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

  it('applies the tolerance as the Map Run would, to items: failures may reach, not exceed, the percentage', () => {
    expect(withinTolerance({ failedItems: 0, items: 0 }, 0)).toBe(true);
    expect(withinTolerance({ failedItems: 1, items: 3 }, 5)).toBe(false);
    expect(withinTolerance({ failedItems: 1, items: 20 }, 5)).toBe(true);
    expect(withinTolerance({ failedItems: 2, items: 20 }, 5)).toBe(false);
    expect(withinTolerance({ failedItems: 3, items: 3 }, 100)).toBe(true);
  });
});
