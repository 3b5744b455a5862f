import { describe, expect, it } from 'vitest';
import { attribute, type Bucket, type LevelSpan, orderBuckets } from '../../bench/profile-buckets.ts';

const asObject = (buckets: readonly Bucket[]) =>
  Object.fromEntries(buckets.map((b) => [b.bucket, Math.round(b.ms * 1000) / 1000]));
const total = (buckets: readonly Bucket[]) => buckets.reduce((sum, b) => sum + b.ms, 0);

describe('attribute', () => {
  it('gives a nested span its exclusive time only, and the uncovered time to the gap', () => {
    const spans: LevelSpan[] = [
      { bucket: 'interpreter', level: 0, start: 10, end: 90 },
      { bucket: 'step', level: 1, start: 20, end: 60 },
      { bucket: 'fsync', level: 2, start: 30, end: 40 },
    ];
    const buckets = attribute(spans, 0, 100, 'unaccounted');
    expect(asObject(buckets)).toEqual({ unaccounted: 20, interpreter: 40, step: 30, fsync: 10 });
    expect(total(buckets)).toBeCloseTo(100, 9);
  });

  it('splits the time concurrent spans share evenly, so the buckets still add up to the wall', () => {
    const spans: LevelSpan[] = [
      { bucket: 'download', level: 1, start: 0, end: 10 },
      { bucket: 'download', level: 1, start: 0, end: 10 },
      { bucket: 'inspect', level: 1, start: 5, end: 15 },
    ];
    const buckets = attribute(spans, 0, 20, 'gap');
    // 0-5: two downloads; 5-10: two downloads and an inspect (2/3, 1/3); 10-15: inspect; 15-20: gap.
    expect(asObject(buckets)).toEqual({ download: 8.333, inspect: 6.667, gap: 5 });
    expect(total(buckets)).toBeCloseTo(20, 9);
  });

  it('clips spans to the window and ignores empty ones', () => {
    const spans: LevelSpan[] = [
      { bucket: 'before', level: 0, start: -50, end: 5 },
      { bucket: 'empty', level: 3, start: 7, end: 7 },
      { bucket: 'after', level: 0, start: 8, end: 500 },
    ];
    const buckets = attribute(spans, 0, 10, 'gap');
    expect(asObject(buckets)).toEqual({ before: 5, gap: 3, after: 2 });
  });

  it('sums to the window for many random nested and overlapping spans', () => {
    let seed = 7;
    const random = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const spans: LevelSpan[] = Array.from({ length: 500 }, (_, i) => {
      const start = random() * 1000;
      return { bucket: `b${i % 7}`, level: i % 4, start, end: start + random() * 200 };
    });
    const buckets = attribute(spans, 100, 900, 'gap');
    expect(total(buckets)).toBeCloseTo(800, 6);
    expect(buckets.every((b) => b.ms >= 0)).toBe(true);
  });
});

describe('orderBuckets', () => {
  it('keeps the given order, puts unknown buckets after it largest first, and gives shares of the total', () => {
    const ordered = orderBuckets(
      [
        { bucket: 'x', ms: 1 },
        { bucket: 'b', ms: 2 },
        { bucket: 'y', ms: 5 },
        { bucket: 'a', ms: 2 },
      ],
      ['a', 'b'],
    );
    expect(ordered.map((b) => b.bucket)).toEqual(['a', 'b', 'y', 'x']);
    expect(ordered.map((b) => b.share)).toEqual([0.2, 0.2, 0.5, 0.1]);
  });
});
