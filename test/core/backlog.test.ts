/**
 * The verdict "behind" (functions/core/backlog.ts): strictly past the threshold, and the warning
 * that names the tier, the partition, its age, the threshold and what to do.
 */

import { describe, expect, it } from 'vitest';
import { ageStands, type Backlog, behindWarning, formatAge, isBehind } from '../../functions/core/backlog.ts';

const backlog = (over: Partial<Backlog>): Backlog => ({
  eligiblePartitions: 3,
  leftForLater: 0,
  oldestEligibleAgeSeconds: 0,
  behindAfterSeconds: 10_800,
  behind: false,
  ...over,
});

describe('behind', () => {
  it('is strictly older than the threshold', () => {
    expect(isBehind(10_800, 10_800)).toBe(false);
    expect(isBehind(10_801, 10_800)).toBe(true);
    expect(isBehind(0, 1)).toBe(false);
  });

  it('warns with the tier, the partition, its age, the threshold and the way forward', () => {
    const warning = behindWarning(
      'hourly',
      backlog({
        oldestEligiblePartition: 'db/cpu/2025/01/15/10/',
        oldestEligibleAgeSeconds: 4 * 3600 + 120,
        leftForLater: 2,
        behind: true,
      }),
    );
    expect(warning).toMatch(/^the hourly tier is behind: partition db\/cpu\/2025\/01\/15\/10\/ /);
    expect(warning).toContain(
      'eligible for 4h 2m (14520 s), longer than tiers.hourly.behindAfterSeconds (3h)',
    );
    expect(warning).toContain('3 partition(s) eligible; this run leaves files of 2 of them for later');
    expect(warning).toMatch(/compactor status.*maxConcurrency.*maxJobsPerPartition/);
  });

  it('says when this run plans every eligible partition', () => {
    const warning = behindWarning(
      'daily',
      backlog({
        oldestEligiblePartition: 'db/cpu/2025/01/15/',
        oldestEligibleAgeSeconds: 400_000,
        behind: true,
      }),
    );
    expect(warning).toContain('3 partition(s) eligible; this run plans all of them');
  });

  it('says nothing of a tier that keeps up', () => {
    expect(behindWarning('daily', backlog({ oldestEligibleAgeSeconds: 60 }))).toBeUndefined();
  });

  it('an age stands from a plan that listed every folder, or from any plan that finds the tier behind', () => {
    expect(ageStands(backlog({}), true)).toBe(true);
    expect(ageStands(backlog({}), false)).toBe(false);
    expect(ageStands(backlog({ behind: true }), false)).toBe(true);
  });

  it('formats ages as two units at most', () => {
    expect(formatAge(0)).toBe('0s');
    expect(formatAge(45)).toBe('45s');
    expect(formatAge(3600)).toBe('1h');
    expect(formatAge(93 * 86_400 + 7200 + 5)).toBe('93d 2h');
  });
});
