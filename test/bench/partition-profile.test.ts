import { describe, expect, it } from 'vitest';
import {
  classify,
  PARTITION_BUCKETS,
  type ProfiledSpan,
  partitionBuckets,
  partitionProfileTable,
} from '../../bench/partition-profile.ts';

describe('classify', () => {
  it('puts each call in its bucket by what it is and the step it runs in', () => {
    const at = (span: Omit<ProfiledSpan, 'start' | 'end'>) => classify({ ...span, start: 0, end: 1 }).bucket;
    expect(at({ kind: 'child-execution' })).toBe('interpreter');
    expect(at({ kind: 'store', keyKind: 'results' })).toBe('interpreter');
    expect(at({ kind: 'store', keyKind: 'manifests', step: 'publish' })).toBe('manifest requests');
    expect(at({ kind: 'store', keyKind: 'data', step: 'verify' })).toBe('verification');
    expect(at({ kind: 'store', keyKind: 'manifests', step: 'verify' })).toBe('manifest requests');
    expect(at({ kind: 'store', keyKind: 'data', step: 'delete-inputs' })).toBe('other store calls');
    expect(at({ kind: 'fsync', step: 'compact' })).toBe('fsyncs');
    expect(at({ kind: 'engine', step: 'compact' })).toBe('engine queries');
    expect(at({ kind: 'step', step: 'compact' })).toBe("steps' own code");
    expect(at({ kind: 'step', step: 'verify' })).toBe('verification');
    expect(at({ kind: 'fsync', step: 'plan' })).toBe('run-level steps');
    expect(at({ kind: 'step', step: 'summary' })).toBe('run-level steps');
  });
});

describe('partitionBuckets', () => {
  it('splits the wall time per partition so the buckets add up to it, every bucket listed', () => {
    // Two partitions' chains at concurrency 1 inside one parent execution, 0-200 ms of a 0-210 ms run.
    const chain = (t: number): ProfiledSpan[] => [
      { kind: 'child-execution', start: t, end: t + 90 },
      { kind: 'step', step: 'compact', start: t + 10, end: t + 60 },
      { kind: 'store', step: 'compact', keyKind: 'manifests', start: t + 10, end: t + 20 },
      { kind: 'fsync', step: 'compact', start: t + 15, end: t + 20 },
      { kind: 'engine', step: 'compact', start: t + 30, end: t + 50 },
      { kind: 'engine', step: 'compact', start: t + 40, end: t + 50 },
      { kind: 'step', step: 'verify', start: t + 70, end: t + 80 },
    ];
    const spans = [{ kind: 'parent-execution', start: 0, end: 200 } as const, ...chain(0), ...chain(100)];
    const buckets = partitionBuckets(spans, 0, 210, 2);
    expect(buckets.map((b) => b.bucket)).toEqual([...PARTITION_BUCKETS]);
    const ms = Object.fromEntries(buckets.map((b) => [b.bucket, b.msPerPartition]));
    expect(ms).toMatchObject({
      'manifest requests': 5,
      fsyncs: 5,
      'engine queries': 20,
      verification: 10,
      "steps' own code": 20,
      // 30 ms of each chain's child execution outside handlers, 10 ms of the parent's after it.
      interpreter: 40,
      'outside the executions': 5,
    });
    expect(buckets.reduce((sum, b) => sum + b.msPerPartition, 0)).toBeCloseTo(105, 9);
  });
});

describe('partitionProfileTable', () => {
  it('lists every bucket with what it holds and ends with their sum, the wall per partition', () => {
    const buckets = PARTITION_BUCKETS.map((bucket, i) => ({ bucket, msPerPartition: i + 1 }));
    const text = partitionProfileTable({
      shape: { tables: 1, hours: 2, files: 3, rows: 4 },
      partitions: 2,
      concurrency: 1,
      wallMs: 90,
      wallMsPerPartition: 45,
      cpuMs: 10,
      buckets,
      loadAverage: [1, 1, 1],
    });
    for (const bucket of PARTITION_BUCKETS) expect(text).toContain(`| ${bucket} |`);
    expect(text.trim().split('\n').at(-1)).toMatch(
      /^\| \*\*sum = wall per partition\*\* \| 45\.00 \| 100% \|/,
    );
  });
});
