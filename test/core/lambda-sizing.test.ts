/**
 * The compact function sizes (functions/core/lambda-sizing.ts): which jobs the small one takes,
 * where the stack has one, and the measured memory its job limit rests on, read again from the
 * last full bench run (bench/results.json).
 */

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  compactSizeOf,
  duckDbMemoryLimit,
  SMALL_COMPACT,
  smallCompactMemoryMb,
  vcpusFor,
} from '../../functions/core/lambda-sizing.ts';

const MiB = 2 ** 20;

describe('compact function sizes', () => {
  it('gives the small function compaction jobs up to its limit and every retention job', () => {
    expect(compactSizeOf({ tier: 'hourly', inputBytes: 24e6 })).toBe('small');
    expect(compactSizeOf({ tier: 'daily', inputBytes: SMALL_COMPACT.maxJobBytes })).toBe('small');
    expect(compactSizeOf({ tier: 'daily', inputBytes: SMALL_COMPACT.maxJobBytes + 1 })).toBe('large');
    expect(compactSizeOf({ tier: 'retention', inputBytes: 2048 * MiB })).toBe('small');
  });

  it('has a small function only for Express children and a larger lambda.compact', () => {
    expect(smallCompactMemoryMb('EXPRESS', 3008)).toBe(1024);
    expect(smallCompactMemoryMb('STANDARD', 3008)).toBeUndefined();
    expect(smallCompactMemoryMb('EXPRESS', 1024)).toBeUndefined();
  });

  it('gives DuckDB one thread and 700MB on the small function', () => {
    expect(vcpusFor(SMALL_COMPACT.memoryMb)).toBe(1);
    expect(duckDbMemoryLimit(SMALL_COMPACT.memoryMb)).toBe('700MB');
  });

  it('rests on measured memory: a bench job larger than the limit peaked under the small memory', () => {
    const results = JSON.parse(
      readFileSync(new URL('../../bench/results.json', import.meta.url), 'utf8'),
    ) as {
      comparisons: {
        dataset: { id: string; bytes: number; files: number };
        tools: { tool: string; maxRssBytes: number }[];
      }[];
    };
    const measured = results.comparisons.map((c) => ({
      bytes: c.dataset.bytes,
      rss: c.tools.find((t) => t.tool === 'product')?.maxRssBytes ?? Number.POSITIVE_INFINITY,
    }));
    const larger = measured.filter((m) => m.bytes >= SMALL_COMPACT.maxJobBytes);
    expect(larger.length).toBeGreaterThan(0);
    for (const m of larger) expect(m.rss).toBeLessThan(SMALL_COMPACT.memoryMb * 1e6);
    // And the inputs plus an output as large fit the small function's disk.
    expect(2 * SMALL_COMPACT.maxJobBytes).toBeLessThanOrEqual(SMALL_COMPACT.ephemeralStorageMb * MiB);
  });
});
