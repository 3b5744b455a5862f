/**
 * The compaction tiers: which files each merges, in which folder, over which period, and what it
 * writes. Each tier merges the previous tier's outputs (and its own small ones) within one folder
 * of the layout, so an output always stays inside the folder whose period holds its rows: readers
 * that prune by path keep working.
 *
 *   hourly:  L0 raw files of an hour folder        -> one L1 `_compacted` in the hour folder
 *   daily:   L1 (and small L2) of a day's hours     -> one L2 `_daily` in the day folder
 *   monthly: L2 (and small L3) of a month's days   -> one L3 `_monthly` in the month folder (opt-in)
 *
 * There is no weekly tier: a week straddles months, so its output would have to sit in a folder
 * whose path names a different period than its rows.
 */

import type { TierName } from './config.ts';
import { DAILY_SUFFIX, type DataFile, HOURLY_SUFFIX, type Level, MONTHLY_SUFFIX } from './layout.ts';

export interface TierSpec {
  /** The previous tier's output level: this tier's main input. */
  readonly input: Level;
  /** This tier's output level; small outputs of this level are merged again. */
  readonly output: Level;
  readonly suffix: string;
}

export const TIER_SPECS: Readonly<Record<TierName, TierSpec>> = {
  hourly: { input: 0, output: 1, suffix: HOURLY_SUFFIX },
  daily: { input: 1, output: 2, suffix: DAILY_SUFFIX },
  monthly: { input: 2, output: 3, suffix: MONTHLY_SUFFIX },
};

/** The folder of `tier` that holds `file` (hour, day or month folder), if the file has one. */
export function tierFolder(tier: TierName, file: DataFile): string | undefined {
  if (tier === 'hourly') return file.hourFolder;
  if (tier === 'daily') return file.dayFolder;
  return file.monthFolder;
}

/** Start and end (ms) of the period of `tier`'s folder holding `file`. */
export function tierPeriod(tier: TierName, file: DataFile): { start: number; end: number } | undefined {
  if (tier === 'hourly') {
    if (!file.hour) return undefined;
    return { start: file.hour.getTime(), end: file.hour.getTime() + 3_600_000 };
  }
  if (tier === 'daily') {
    if (!file.day) return undefined;
    return { start: file.day.getTime(), end: file.day.getTime() + 86_400_000 };
  }
  const start = file.month;
  return {
    start: start.getTime(),
    end: Date.UTC(start.getUTCFullYear(), start.getUTCMonth() + 1, 1),
  };
}

/**
 * The partition folder of a data file for a tier, or undefined when the file is not that tier's
 * input: the previous tier's outputs, and this tier's own outputs in their folder. Daily and
 * monthly both accept L2 files; the planner gives each L2 file to one of them by its month's age.
 */
export function partitionOf(tier: TierName, file: DataFile): string | undefined {
  if (tier === 'hourly') return file.level === 0 ? file.hourFolder : undefined;
  if (tier === 'daily') return file.level === 1 || file.level === 2 ? file.dayFolder : undefined;
  return file.level === 2 || file.level === 3 ? file.monthFolder : undefined;
}

/** Where a tier's outputs must be: directly in the tier's folder (hourly: the hour folder). */
export function outputFolderOf(tier: TierName, file: DataFile): string | undefined {
  if (tier === 'hourly') return file.hourFolder;
  if (tier === 'daily') return file.hourFolder === undefined ? file.dayFolder : undefined;
  return file.dayFolder === undefined ? file.monthFolder : undefined;
}
