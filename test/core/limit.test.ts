import { describe, expect, it } from 'vitest';
import { CallsInFlight, forEachLimit } from '../../functions/core/limit.ts';

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

describe('CallsInFlight', () => {
  it('is idle at once with no call, and otherwise once the last call has settled, failed ones too', async () => {
    const calls = new CallsInFlight();
    await calls.idle();
    const release: (() => void)[] = [];
    const held = (fail: boolean) =>
      calls.run(
        () =>
          new Promise<void>((resolve, reject) => {
            release.push(() => (fail ? reject(new Error('failed')) : resolve()));
          }),
      );
    const ok = held(false);
    const failing = held(true);
    let idle = 0;
    const waiters = [calls.idle(), calls.idle()].map((p) => p.then(() => idle++));
    release[0]?.();
    await ok;
    await tick();
    expect(idle).toBe(0);
    release[1]?.();
    await expect(failing).rejects.toThrow('failed');
    await Promise.all(waiters);
    expect(idle).toBe(2);
  });
});
