import { describe, expect, it } from 'vitest';
import { forEachLimit } from '../../functions/core/limit.ts';

const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('forEachLimit', () => {
  it('keeps at most `limit` calls in flight, runs each item once, and passes its index', async () => {
    let inFlight = 0;
    let most = 0;
    const seen: [string, number][] = [];
    const items = Array.from({ length: 20 }, (_, i) => `item-${i}`);
    await forEachLimit(items, 3, async (item, index) => {
      inFlight++;
      most = Math.max(most, inFlight);
      await tick();
      seen.push([item, index]);
      inFlight--;
    });
    expect(most).toBe(3);
    expect(seen.sort(([, a], [, b]) => a - b)).toEqual(items.map((item, i) => [item, i]));
  });

  it('starts nothing after a failure, and rethrows only once every started call settled', async () => {
    const started: number[] = [];
    let settled = 0;
    const run = forEachLimit([0, 1, 2, 3, 4, 5, 6, 7], 3, async (n) => {
      started.push(n);
      if (n === 1) throw new Error('item 1 failed');
      // The others started beside item 1 outlive its failure by a few ticks.
      for (let i = 0; i < 5; i++) await tick();
      settled++;
    });
    await expect(run).rejects.toThrow('item 1 failed');
    expect(started).toEqual([0, 1, 2]);
    expect(settled).toBe(2);
  });
});
