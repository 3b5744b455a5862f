import { describe, expect, it } from 'vitest';
import type { Bucket } from '../../bench/profile-buckets.ts';
import { wholeProcessBuckets, wholeProcessProfileTable } from '../../bench/whole-process-profile.ts';

const asObject = (buckets: readonly Bucket[]) =>
  Object.fromEntries(buckets.map((b) => [b.bucket, Math.round(b.ms * 1000) / 1000]));
const total = (buckets: readonly Bucket[]) => buckets.reduce((sum, b) => sum + b.ms, 0);

describe('wholeProcessBuckets', () => {
  it("adds up to the parent's wall time, naming start-up, the CLI's gaps, exit and what lies outside the clock", () => {
    const record = {
      loadedAtMs: 40,
      exitAtMs: 1000,
      spans: [
        { name: 'cli: engine', depth: 1, start: 200, end: 300 },
        { name: 'cli: workflow run', depth: 1, start: 320, end: 900 },
        { name: 'run: interpreter', depth: 2, start: 330, end: 890 },
        { name: 'step: compact', depth: 3, start: 400, end: 700 },
      ],
    };
    const buckets = wholeProcessBuckets(record, 1030);
    expect(asObject(buckets)).toEqual({
      'node start-up (before the first module)': 40,
      'CLI modules and arguments (before the first span)': 160,
      'DuckDB engine (an instance; its library loads with the modules)': 100,
      "CLI's own code between its spans (partition rows, warnings)": 20,
      'local run set-up (scratch, owners)': 20,
      'interpreter (aws-local-stepfunctions, Map and result emulation)': 260,
      'step: compact': 300,
      'exit (after the command returned)': 100,
      "spawn and teardown (outside the process's clock)": 30,
    });
    expect(total(buckets)).toBeCloseTo(1030, 9);
  });
});

describe('wholeProcessProfileTable', () => {
  it('puts start-up first, the steps in their order, and ends with the sum of the buckets', () => {
    const text = wholeProcessProfileTable({
      runs: 1,
      wallMs: 60,
      samplesMs: [60],
      buckets: [
        { bucket: 'step: verify', ms: 10 },
        { bucket: 'step: compact', ms: 30 },
        { bucket: 'node start-up (before the first module)', ms: 20 },
      ],
      loadAverage: [0, 0, 0],
    });
    const rows = text.trim().split('\n').slice(2);
    expect(rows.map((row) => row.split(' | ')[0])).toEqual([
      '| node start-up (before the first module)',
      '| step: compact',
      '| step: verify',
      '| **sum = wall, spawn to exit**',
    ]);
    expect(rows.at(-1)).toContain('| 60 | 100% |');
  });
});
