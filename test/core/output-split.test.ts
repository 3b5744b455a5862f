/** How a merge over the target size splits into files (both merge engines split by it). */

import { describe, expect, it } from 'vitest';
import { nextFileRows, rowGroupRows } from '../../functions/core/output-split.ts';

describe('rowGroupRows', () => {
  it('rounds the requested size up to a multiple of 2048 rows, as DuckDB does', () => {
    expect(rowGroupRows(1)).toBe(2048);
    expect(rowGroupRows(2048)).toBe(2048);
    expect(rowGroupRows(122_880)).toBe(122_880);
    expect(rowGroupRows(100_000)).toBe(100_352);
  });
});

describe('nextFileRows', () => {
  const base = { total: 1_000_000, written: 0, writtenBytes: 0, rowGroupSize: 122_880 };

  it('writes everything in one file when it fits the target', () => {
    expect(nextFileRows({ ...base, inputBytes: 100, targetFileBytes: 1000 })).toBe(1_000_000);
  });

  it('sizes the first file by the inputs, on a row-group boundary', () => {
    // 4 files of 250,000 rows; rounded to 2 row groups of 122,880.
    expect(nextFileRows({ ...base, inputBytes: 4000, targetFileBytes: 1000 })).toBe(245_760);
  });

  it('sizes later files by the outputs written so far', () => {
    // 245,760 rows took 500 bytes: the 754,240 left take about 1,535 bytes, 2 files of 377,120 rows.
    const next = nextFileRows({
      ...base,
      written: 245_760,
      writtenBytes: 500,
      inputBytes: 4000,
      targetFileBytes: 1000,
    });
    expect(next).toBe(3 * 122_880);
  });

  it('takes what is left for the last file, whatever its size', () => {
    expect(
      nextFileRows({ ...base, written: 990_000, writtenBytes: 990, inputBytes: 4000, targetFileBytes: 1000 }),
    ).toBe(10_000);
  });
});
