import { describe, expect, it } from 'vitest';
import { expiresAtMs } from '../../functions/core/state-root.ts';

describe('expiresAtMs', () => {
  it("is S3's reckoning: the rule's days after creation, rounded up to the next midnight UTC", () => {
    // The lifecycle guide's own example: created 1/15/2014 10:30 UTC, a rule of 3 days.
    expect(new Date(expiresAtMs(Date.UTC(2014, 0, 15, 10, 30), 3)).toISOString()).toBe(
      '2014-01-19T00:00:00.000Z',
    );
    // Just before midnight, and just after: a day apart.
    expect(new Date(expiresAtMs(Date.UTC(2025, 0, 1, 23, 59), 15)).toISOString()).toBe(
      '2025-01-17T00:00:00.000Z',
    );
    expect(new Date(expiresAtMs(Date.UTC(2025, 0, 2, 0, 1), 15)).toISOString()).toBe(
      '2025-01-18T00:00:00.000Z',
    );
  });
});
