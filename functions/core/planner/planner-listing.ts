/**
 * Listing for a plan: which listing a cycle makes (windows, a sweep, or the data root whole), and
 * the listing itself, which gathers each folder of the tier with its candidates, in key order.
 * Only data is listed here; manifests are read after every listing completes (planner.ts).
 */

import { type CompactorConfig, DEFAULTS, type TierName } from '../config.ts';
import { ConfigError } from '../errors.ts';
import { type DataFile, type Layout, levelOf } from '../layout.ts';
import { forEachLimit } from '../limit.ts';
import { discoverTables, tierFolderAt, windowRefusal, windowStart } from '../list-windows.ts';
import { compareKeys, type ObjectStore, type ObjectSummary } from '../object-store.ts';
import { partitionOf, TIER_SPECS, tierFolder, tierPeriod } from '../tiers.ts';
import { readBacklogRecord } from './planner-backlog-record.ts';
import { lastSweep } from './planner-sweeps.ts';

/** How a plan listed the lake (see list-windows.ts). */
export interface PlanListing {
  /**
   * 'windows': each table from `since` on (a narrow cycle); 'sweep': every table whole, in
   * parallel; 'full': the data root (or the scoped table) in one listing.
   */
  readonly mode: 'windows' | 'sweep' | 'full';
  /** Why this mode: the sweep's trigger, or why windows could not be used. */
  readonly reason: string;
  /** windows: start of the earliest period listed (ISO); folders before it wait for the sweep. */
  readonly since?: string;
  /** Tables found by folder listing (windows, sweep). */
  readonly tables?: number;
  /** Listing calls made: folder listings and object listings (on S3 each is one LIST per 1,000 keys). */
  readonly listings: number;
  /**
   * windows: partitions of the last plan's backlog record (planner-backlog-record.ts) that lie
   * before the window, each listed again whole.
   */
  readonly relisted?: number;
  /**
   * Whether the plan's backlog counts every eligible partition the tier had at its last sweep and
   * since (backlog.ts ageStands): a sweep or full listing, or windows with a covering backlog
   * record. Why not, when not.
   */
  readonly backlogCovered: boolean;
  readonly backlogGap?: string;
}

/** Which part of the lake a plan covers: by default all of it. */
export interface PlanScope {
  /**
   * One table path under the data root, as the layout names tables (`mydb/cpu/` for arc): only
   * that table's partitions are planned (the execution input's `only`, e.g. `compactor doctor`'s
   * canary). Manifests and quarantine are still read whole: they lease and exclude as always.
   */
  readonly only?: string;
  /**
   * true: list every table whole (a sweep) this cycle, whatever the last sweep was (the execution
   * input's `sweep`, `compactor run --sweep`). Otherwise a cycle sweeps when the tier's last
   * recorded sweep is `planning.sweepEveryHours` old, and lists windows in between.
   */
  readonly sweep?: boolean;
}

/** A data file that may be an input of the folder's job. */
export interface Candidate {
  readonly key: string;
  readonly size: number;
  readonly etag: string;
}

/** A folder of the tier, as its listing found it. */
export interface Folder {
  /** Period (ms) of the hour, day or month. */
  readonly periodStart: number;
  readonly periodEnd: number;
  readonly candidates: Candidate[];
  newestModified: number;
  /** Monthly tier: daily outputs that pass to it once the month is older than its minAge. */
  waiting: number;
}

/** Where one listing is: its last key, and the folder of the tier its last data file was in. */
interface ListingStream {
  lastKey?: string;
  folder?: string;
  /** The last data file parsed whole, and the folder it lies directly in. */
  parsed?: { readonly dir: string; readonly file: DataFile };
}

/**
 * `layout.parse(key)`, reusing the parse of the previous data file when `key` lies directly in
 * the same folder: the folder's coordinates are the same, so only what parse decides by the file
 * name is decided here, as parse does (the name's data-ness, and which levels the folder holds).
 * A listing of millions of keys spends most of its time parsing otherwise.
 */
export function parseInFolder(
  layout: Layout,
  key: string,
  stream: { parsed?: { readonly dir: string; readonly file: DataFile } },
): DataFile | undefined {
  const slash = key.lastIndexOf('/');
  const dir = key.slice(0, slash + 1);
  const cached = stream.parsed;
  if (cached !== undefined && cached.dir === dir) {
    const fileName = key.slice(slash + 1);
    if (
      !layout.isDataKey(key) ||
      fileName === '' ||
      fileName === '.parquet' ||
      fileName === layout.dataSuffix ||
      fileName.startsWith('.')
    )
      return undefined;
    const level = levelOf(fileName);
    const { file } = cached;
    // Directly in a day folder only daily outputs, in a month folder only monthly ones (parse).
    if (file.hourFolder === undefined && level !== (file.dayFolder === undefined ? 3 : 2)) return undefined;
    return { ...file, key, fileName, level };
  }
  const file = layout.parse(key);
  if (file) stream.parsed = { dir, file };
  return file;
}

interface ListingChoice {
  readonly mode: PlanListing['mode'];
  readonly reason: string;
  readonly tables?: readonly string[];
  readonly since?: number;
  readonly listings: number;
}

/** Which listing a plan makes: see PlanListing and list-windows.ts. */
async function chooseListing(
  store: ObjectStore,
  config: CompactorConfig,
  tier: TierName,
  now: number,
  scope: PlanScope,
): Promise<ListingChoice> {
  if (scope.only !== undefined) {
    return { mode: 'full', reason: `scoped to the table ${scope.only}, listed whole`, listings: 0 };
  }
  if (config.planning.listing === 'full') {
    return {
      mode: 'full',
      reason: `planning.listing is "full": the data root is listed whole (commands run by hand default to it, the stack to "${DEFAULTS.planning.listing}")`,
      listings: 0,
    };
  }
  const { listFolders } = store;
  if (listFolders === undefined) {
    return { mode: 'full', reason: 'the store cannot list folders (no listFolders)', listings: 0 };
  }
  const found = await discoverTables(
    (prefix) => listFolders.call(store, prefix),
    config.layout,
    config.planning.listConcurrency,
  );
  const refusal = windowRefusal(config.layout);
  const sweep = (reason: string, listings = found.listings): ListingChoice => ({
    mode: 'sweep',
    reason,
    tables: found.tables,
    listings,
  });
  if (refusal) return sweep(`${refusal}: every table is listed whole`);
  if (scope.sweep === true) return sweep('asked for (execution input "sweep")');
  const every = config.planning.sweepEveryHours[tier];
  let since = '';
  if (every > 0) {
    const last = await lastSweep(store, config, tier, now);
    if (last === undefined) return sweep(`no sweep of the ${tier} tier recorded`, found.listings + 1);
    if (now - last >= every * 3_600_000) {
      return sweep(
        `the last sweep (${new Date(last).toISOString()}) is at least planning.sweepEveryHours (${every}) old`,
        found.listings + 1,
      );
    }
    since = `; last sweep ${new Date(last).toISOString()}, the next once ${every} h have passed`;
  }
  const start = windowStart(config, tier, now);
  return {
    mode: 'windows',
    reason: `folders whose period ended within planning.lookbackHours (${config.planning.lookbackHours}) of their minAge${since}`,
    tables: found.tables,
    since: start,
    listings: found.listings + (every > 0 ? 1 : 0),
  };
}

/** The key prefix a scope lists, or a ConfigError naming what a table path of this layout is. */
export function scopePrefix(config: CompactorConfig, scope: PlanScope): string {
  const { layout } = config;
  if (scope.only === undefined) return layout.dataPrefix;
  if (!layout.isTablePath(scope.only)) {
    const tableSegments = layout.template.split('/').slice(0, layout.tableDepth).join('/');
    throw new ConfigError(
      `"only" must be a table path under the data root: ${layout.tableDepth} segment(s) matching ` +
        `${tableSegments}/ of the layout ${layout.template}, ending in "/", without the data prefix ` +
        `and never under the state root; got ${JSON.stringify(scope.only)}`,
    );
  }
  const prefix = `${layout.dataPrefix}${scope.only}`;
  // A table segment named like the state root would list state as data (`_compaction/`).
  if (prefix.startsWith(layout.stateRoot)) {
    throw new ConfigError(`"only" ${JSON.stringify(scope.only)} is the state root, not a table`);
  }
  return prefix;
}

/** What a plan's listing found: the tier's folders by partition, and how the lake was listed. */
export interface TierFolders {
  readonly folders: ReadonlyMap<string, Folder>;
  readonly objectsListed: number;
  readonly listing: PlanListing;
}

/**
 * Gathers, object by object in key order, every folder of `tier` that holds a candidate or a
 * daily file waiting for the monthly tier, as of `now` (ms); a folder left behind with neither is
 * dropped. `objectsListed`: the objects seen so far outside the state root.
 */
function folderGatherer(
  config: CompactorConfig,
  tier: TierName,
  now: number,
): {
  readonly folders: Map<string, Folder>;
  readonly consider: (object: ObjectSummary, stream: ListingStream, from?: string) => void;
  readonly objectsListed: () => number;
} {
  const { layout } = config;
  const folders = new Map<string, Folder>();
  const small = config.targetFileBytes / 2;
  const monthly = config.tiers.monthly;
  // An L2 file belongs to the monthly tier once its month is old enough for it, else to the daily
  // tier: the two never share an input (and a live manifest of either excludes it from the other).
  const monthlyTakes = (file: DataFile): boolean => {
    const month = tierPeriod('monthly', file);
    return (
      monthly.enabled &&
      file.monthFolder !== undefined &&
      month !== undefined &&
      now >= month.end + monthly.minAgeSeconds * 1000
    );
  };
  let listedCount = 0;

  // Only keys this deep can lie in a folder of the tier: in an hour folder (hourly), or also in a
  // day folder (daily), or also in a month folder (monthly). Counting '/' is cheaper than parsing.
  const depth = layout.template.slice(0, -1).split('/').length;
  const minSlashes = depth - (tier === 'hourly' ? 0 : tier === 'daily' ? 1 : 2);
  const prefixLength = layout.dataPrefix.length;

  // `from`: the folder of the tier a windowed listing starts at. Keys at or before it are dropped
  // even when a store lists them (it may ignore StartAfter): a folder of the tier before `from` is
  // then never seen, and each one at or after it is whole (list-windows.ts).
  const consider = (object: ObjectSummary, stream: ListingStream, from?: string): void => {
    const { key } = object;
    // The count is of the lake's objects: the state root's (manifests, Athena views) are not data.
    if (!key.startsWith(layout.stateRoot)) listedCount++;
    if (from !== undefined && compareKeys(key, from) <= 0) return;
    // A store lists in key order (object-store.ts): each folder's keys come together, so a
    // folder left behind is whole and may be dropped when it holds nothing to plan. A store
    // that breaks the order fails the plan rather than have a folder planned from part of it.
    const previous = stream.lastKey;
    if (
      previous !== undefined &&
      key < previous &&
      Buffer.compare(Buffer.from(key), Buffer.from(previous)) < 0
    ) {
      throw new Error(`the listing returned ${key} after ${previous}: not in key order`);
    }
    stream.lastKey = key;
    let slashes = 0;
    for (let i = key.indexOf('/', prefixLength); i >= 0 && slashes <= depth; i = key.indexOf('/', i + 1))
      slashes++;
    if (slashes < minSlashes || slashes > depth) return;
    const file = parseInFolder(layout, key, stream);
    if (!file) return;
    // Quiet check covers every data file of the period, whichever tier it belongs to.
    const folderKey = tierFolder(tier, file);
    const period = tierPeriod(tier, file);
    if (folderKey === undefined || period === undefined) return;
    if (stream.folder !== folderKey) {
      const done = stream.folder === undefined ? undefined : folders.get(stream.folder);
      if (done && done.candidates.length === 0 && done.waiting === 0) folders.delete(stream.folder as string);
      stream.folder = folderKey;
    }
    let folder = folders.get(folderKey);
    if (!folder) {
      folder = {
        periodStart: period.start,
        periodEnd: period.end,
        candidates: [],
        newestModified: 0,
        waiting: 0,
      };
      folders.set(folderKey, folder);
    }
    folder.newestModified = Math.max(folder.newestModified, object.lastModified.getTime());
    if (partitionOf(tier, file) !== folderKey) return;
    // A tier's own outputs are merged again only while small; big ones are final.
    if (file.level === TIER_SPECS[tier].output && object.size >= small) return;
    if (file.level === 2 && (tier === 'daily') === monthlyTakes(file)) {
      if (tier === 'monthly') folder.waiting++;
      return;
    }
    folder.candidates.push({ key: object.key, size: object.size, etag: object.etag });
  };

  return { folders, consider, objectsListed: () => listedCount };
}

/**
 * Lists the data under `listed` (the scope's prefix: scopePrefix) as the plan's listing choice
 * says, and gathers every folder of `tier` that holds a candidate or a daily file waiting for
 * the monthly tier, as of `now` (ms).
 */
export async function listTierFolders(
  store: ObjectStore,
  config: CompactorConfig,
  tier: TierName,
  now: number,
  scope: PlanScope,
  listed: string,
): Promise<TierFolders> {
  const { layout } = config;
  const { folders, consider, objectsListed } = folderGatherer(config, tier, now);
  const choice = await chooseListing(store, config, tier, now, scope);
  let listings = choice.listings;
  const { tables, since } = choice;
  if (tables === undefined) {
    // A table's keys all start with its path, so its folders are whole.
    listings++;
    const stream: ListingStream = {};
    for await (const object of store.list(listed)) consider(object, stream);
  } else {
    await forEachLimit(tables, config.planning.listConcurrency, async (table) => {
      listings++;
      const stream: ListingStream = {};
      if (since === undefined) {
        for await (const object of store.list(table)) consider(object, stream);
        return;
      }
      const from = tierFolderAt(layout, tier, table, since);
      for await (const object of store.list(table, { startAfter: from })) consider(object, stream, from);
    });
  }
  let carried: { readonly relisted: number; readonly gap?: string } | undefined;
  if (since !== undefined) {
    carried = await relistRecorded(store, config, tier, now, since, folders, consider);
    listings += carried.relisted;
  }
  const carriedReason =
    carried === undefined
      ? ''
      : `; ${carried.relisted} partition(s) of the last plan's backlog record before the window listed again${carried.gap === undefined ? '' : ` (its backlog may miss some until the next sweep: ${carried.gap})`}`;
  const listing: PlanListing = {
    mode: choice.mode,
    reason: `${choice.reason}${carriedReason}`,
    ...(since !== undefined ? { since: new Date(since).toISOString() } : {}),
    ...(tables !== undefined ? { tables: tables.length } : {}),
    listings,
    ...(carried !== undefined ? { relisted: carried.relisted } : {}),
    // A plan scoped to one table counts one table's backlog only.
    backlogCovered: scope.only === undefined && carried?.gap === undefined,
    ...(carried?.gap !== undefined ? { backlogGap: carried.gap } : {}),
  };
  return { folders, objectsListed: objectsListed(), listing };
}

/**
 * A windowed plan's second listing: each partition of the tier's backlog record whose period
 * starts before the window (`since`, ms), listed whole into `folders` as any folder is. `gap`: why
 * the plan's backlog may miss an eligible partition, if it may (planner-backlog-record.ts).
 */
async function relistRecorded(
  store: ObjectStore,
  config: CompactorConfig,
  tier: TierName,
  now: number,
  since: number,
  folders: ReadonlyMap<string, Folder>,
  consider: (object: ObjectSummary, stream: ListingStream) => void,
): Promise<{ readonly relisted: number; readonly gap?: string }> {
  const { layout } = config;
  const read = await readBacklogRecord(store, config, tier, now);
  if ('unusable' in read) return { relisted: 0, gap: read.unusable };
  const { record } = read;
  // A recorded key is listed only where a folder of the tier can be: under the data root, not state.
  const before = record.partitions.filter(
    (p) =>
      Date.parse(p.periodStart) < since &&
      !folders.has(p.partition) &&
      p.partition.startsWith(layout.dataPrefix) &&
      !p.partition.startsWith(layout.stateRoot) &&
      p.partition.endsWith('/'),
  );
  await forEachLimit(before, config.planning.listConcurrency, async ({ partition }) => {
    const stream: ListingStream = {};
    for await (const object of store.list(partition)) consider(object, stream);
  });
  const lookback = config.planning.lookbackHours;
  const gap = !record.covers
    ? `the last plan's backlog record (${record.plannedAt}) does not cover the tier: it was cut at the record's limit, or its plan had none that did`
    : now - Date.parse(record.plannedAt) > lookback * 3_600_000
      ? `the last plan (${record.plannedAt}) is more than planning.lookbackHours (${lookback}) old: a partition may have become due and left the window since`
      : undefined;
  return { relisted: before.length, ...(gap !== undefined ? { gap } : {}) };
}
