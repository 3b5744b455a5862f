/**
 * Windowed listing: which part of each table a cycle lists (planner.ts).
 *
 * A tier's folder can hold a candidate only once its period ended minAge ago; after that it is
 * normally compacted within a few cycles. A narrow cycle therefore lists each table only from the
 * first folder whose period ended within `planning.lookbackHours` of its minAge (or whose
 * enclosing day or month did, when the tier flushes stragglers for the next tier), to the end of
 * the table: one ListObjectsV2 with StartAfter per table, paged per 1,000 keys. Older folders are
 * left to the sweep, which lists every table whole, but for those the last plan found eligible,
 * which the cycle lists again, each whole (planner/planner-backlog-record.ts).
 *
 * Why that is safe: a folder is planned only when every key under it was listed. Listing a table
 * after the key `F` (a folder of the tier) lists every key of every folder of the tier that sorts
 * at or after `F`, whole: such a folder's keys all start with its name, and none of them is at or
 * before `F` (folders of one tier have the same depth, so none is a prefix of another). Folders
 * before `F` are dropped even if a store lists them (it may ignore StartAfter). So the plan of a
 * narrow cycle is the full plan restricted to the folders it lists, and a folder it skips is only
 * compacted later, by the sweep.
 *
 * The key range is the time window only when the date segments sort by time: tokens in the order
 * {YYYY}, {MM}, {DD}, {HH} and nothing else in them but fixed text (every token is zero-padded
 * digits of fixed width). Other templates are listed whole, and the plan says why.
 */

import type { CompactorConfig, TierName } from './config.ts';
import type { Layout } from './layout.ts';
import { forEachLimit } from './limit.ts';
import { compareKeys } from './object-store.ts';

const DATE_ORDER = ['YYYY', 'MM', 'DD', 'HH'] as const;
type DateToken = (typeof DATE_ORDER)[number];

/** Template segments after the table, each split into fixed text and date tokens. */
type Part = { readonly text: string } | { readonly token: DateToken };

function dateSegments(layout: Layout): readonly (readonly Part[])[] | string {
  const segments = layout.template.slice(0, -1).split('/').slice(layout.tableDepth);
  const order: string[] = [];
  const parsed: Part[][] = [];
  for (const segment of segments) {
    const parts: Part[] = [];
    for (const piece of segment.split(/(\{[^}]*\})/)) {
      if (piece === '') continue;
      if (!piece.startsWith('{')) {
        parts.push({ text: piece });
        continue;
      }
      const token = piece.slice(1, -1);
      if (!(DATE_ORDER as readonly string[]).includes(token)) {
        return `the date segment "${segment}" holds {${token}}, which no time names, so the folders of a window have no name to list from`;
      }
      order.push(token);
      parts.push({ token: token as DateToken });
    }
    parsed.push(parts);
  }
  if (order.join('/') !== DATE_ORDER.join('/')) {
    return `its date tokens come in the order ${order.map((t) => `{${t}}`).join(', ')}, not {YYYY}, {MM}, {DD}, {HH}, so keys do not sort by time and a window is no key range`;
  }
  return parsed;
}

/** Why `layout` cannot be listed by windows, or undefined when it can. */
export function windowRefusal(layout: Layout): string | undefined {
  const segments = dateSegments(layout);
  return typeof segments === 'string' ? `layout "${layout.name}": ${segments}` : undefined;
}

/** How many template segments a tier's folder spans below the table: all, all but the hour, ... */
function folderSegments(layout: Layout, tier: TierName): number {
  const dated = layout.template.slice(0, -1).split('/').length - layout.tableDepth;
  return dated - (tier === 'hourly' ? 0 : tier === 'daily' ? 1 : 2);
}

/**
 * The key of `tier`'s folder for the period starting at `start` under `table` (a table path with
 * the data prefix, ending in '/'): e.g. `db/cpu/2025/01/02/` for arc's daily tier.
 */
export function tierFolderAt(layout: Layout, tier: TierName, table: string, start: number): string {
  const segments = dateSegments(layout);
  if (typeof segments === 'string') throw new Error(`tierFolderAt: ${segments}`);
  const date = new Date(start);
  const values: Record<DateToken, string> = {
    YYYY: String(date.getUTCFullYear()).padStart(4, '0'),
    MM: String(date.getUTCMonth() + 1).padStart(2, '0'),
    DD: String(date.getUTCDate()).padStart(2, '0'),
    HH: String(date.getUTCHours()).padStart(2, '0'),
  };
  const rendered = segments
    .slice(0, folderSegments(layout, tier))
    .map((parts) => parts.map((p) => ('text' in p ? p.text : values[p.token])).join(''));
  return `${table}${rendered.map((s) => `${s}/`).join('')}`;
}

function hourStart(t: number): number {
  return Math.floor(t / 3_600_000) * 3_600_000;
}

function dayStart(t: number): number {
  return Math.floor(t / 86_400_000) * 86_400_000;
}

function monthStart(t: number): number {
  const d = new Date(t);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
}

function periodStart(tier: TierName, t: number): number {
  return tier === 'hourly' ? hourStart(t) : tier === 'daily' ? dayStart(t) : monthStart(t);
}

/**
 * Start (ms) of the earliest period a narrow cycle of `tier` lists at `now`: the period that ended
 * `lookbackHours` before it became due (its end + the tier's minAge), or, where the tier flushes
 * stragglers once the next tier may run (backlog.ts's stragglerFlushAt), the first period of the day
 * (hourly) or month (daily, with the monthly tier on) that became old enough for the next tier
 * that long ago.
 */
export function windowStart(config: CompactorConfig, tier: TierName, now: number): number {
  const lookback = config.planning.lookbackHours * 3_600_000;
  let start = periodStart(tier, now - lookback - config.tiers[tier].minAgeSeconds * 1000);
  if (tier === 'hourly') {
    start = Math.min(start, dayStart(now - lookback - config.tiers.daily.minAgeSeconds * 1000));
  }
  if (tier === 'daily' && config.tiers.monthly.enabled && config.layout.hasMonthFolder) {
    start = Math.min(start, monthStart(now - lookback - config.tiers.monthly.minAgeSeconds * 1000));
  }
  return start;
}

export interface DiscoveredTables {
  /** Table paths with the data prefix, in key order. */
  readonly tables: readonly string[];
  /** Folder listings made (each one LIST request per 1,000 folders on S3). */
  readonly listings: number;
}

/**
 * Every table of the layout under the data root, by folder listing one level at a time (a table
 * path spans `tableDepth` folders). Only paths the layout names tables are kept, never the state
 * root: every data file the layout can parse lies under one of them.
 */
export async function discoverTables(
  listFolders: (prefix: string) => AsyncIterable<string>,
  layout: Layout,
  concurrency: number,
): Promise<DiscoveredTables> {
  let level = [layout.dataPrefix];
  let listings = 0;
  for (let depth = 0; depth < layout.tableDepth; depth++) {
    const found: string[] = [];
    await forEachLimit(level, concurrency, async (prefix) => {
      listings++;
      for await (const folder of listFolders(prefix)) {
        if (!folder.startsWith(layout.stateRoot)) found.push(folder);
      }
    });
    level = found;
  }
  const tables = level.filter((t) => layout.isTablePath(t.slice(layout.dataPrefix.length))).sort(compareKeys);
  return { tables, listings };
}
