import { describe, expect, it } from 'vitest';
import {
  describeEpoch,
  epochOutsideReason,
  epochRange,
  isEpochIntegerType,
  unitsThatFit,
} from '../../functions/core/epoch-time.ts';

const hour = { start: Date.UTC(2025, 0, 15, 10), end: Date.UTC(2025, 0, 15, 11) };
const startMs = BigInt(hour.start);
const endMs = BigInt(hour.end);

describe('epoch ranges of a folder period', () => {
  it('hold exactly the values of [start, end) in each unit', () => {
    expect(epochRange(hour, 0, 's')).toEqual({ low: startMs / 1000n, high: endMs / 1000n - 1n });
    expect(epochRange(hour, 0, 'ms')).toEqual({ low: startMs, high: endMs - 1n });
    expect(epochRange(hour, 0, 'us')).toEqual({ low: startMs * 1000n, high: endMs * 1000n - 1n });
    expect(epochRange(hour, 0, 'ns')).toEqual({ low: startMs * 1_000_000n, high: endMs * 1_000_000n - 1n });
  });

  it('widen by the slack on both sides, and round inward for a unit coarser than the slack', () => {
    expect(epochRange(hour, 3_600_000, 'ms')).toEqual({
      low: startMs - 3_600_000n,
      high: endMs + 3_600_000n - 1n,
    });
    // 1,500 ms of slack in seconds: the window's first whole second is start-1 s, its last end.
    expect(epochRange(hour, 1500, 's')).toEqual({ low: startMs / 1000n - 1n, high: endMs / 1000n + 1n });
  });

  it('hold before 1970 too (negative epochs floor, not truncate)', () => {
    const old = { start: Date.UTC(1969, 11, 31, 23), end: Date.UTC(1970, 0, 1, 0) };
    expect(epochRange(old, 0, 's')).toEqual({ low: -3600n, high: -1n });
    expect(epochRange({ start: -1500, end: -500 }, 0, 's')).toEqual({ low: -1n, high: -1n });
  });
});

describe('epoch values as instants', () => {
  it('name the instant, and the unit that would fit a wrongly declared value', () => {
    expect(describeEpoch(startMs / 1000n, 's')).toBe('2025-01-15T10:00:00.000Z');
    expect(describeEpoch(startMs * 1_000_000n + 5n, 'ns')).toBe('2025-01-15T10:00:00.000Z');
    expect(describeEpoch(startMs * 1000n, 'ms')).toBe('+057011-04-15T16:00:00.000Z');
    expect(describeEpoch(startMs * 1_000_000n, 'ms')).toBe('beyond year 275760');
    expect(describeEpoch(-startMs * 1_000_000n, 'ms')).toBe('beyond year -271821');
    expect(unitsThatFit(startMs / 1000n, hour, 0, 'ms')).toEqual(['s']);
    expect(unitsThatFit(startMs * 1000n, hour, 0, 'ms')).toEqual(['us']);
    expect(unitsThatFit(42n, hour, 0, 'ms')).toEqual([]);
  });

  it('give no reason when no row lies outside, and one naming the value, the window and a fitting unit otherwise', () => {
    expect(
      epochOutsideReason('time', 'ms', hour, 0, { rows: 0, min: startMs, max: endMs - 1n }),
    ).toBeUndefined();
    const reason = epochOutsideReason('time', 'ms', hour, 0, {
      rows: 3,
      min: startMs / 1000n,
      max: startMs / 1000n + 2n,
    });
    expect(reason).toBe(
      `time outside its folder's period: 3 row(s) of "time" (an epoch in milliseconds, timeUnits) lie outside 2025-01-15T10:00:00.000Z .. 2025-01-15T11:00:00.000Z, e.g. ${startMs / 1000n} = 1970-01-21T${new Date(Number(startMs / 1000n)).toISOString().slice(11)} in milliseconds; read as seconds it would fit: check the writer's unit, or timeUnits; readable, but not merged`,
    );
  });

  it('accept integer types only', () => {
    for (const t of ['INTEGER', 'BIGINT', 'UBIGINT', 'SMALLINT', 'bigint'])
      expect(isEpochIntegerType(t)).toBe(true);
    for (const t of [
      'TIMESTAMP',
      'TIMESTAMP WITH TIME ZONE',
      'DOUBLE',
      'HUGEINT',
      'VARCHAR',
      'DECIMAL(18,0)',
    ])
      expect(isEpochIntegerType(t)).toBe(false);
  });
});
