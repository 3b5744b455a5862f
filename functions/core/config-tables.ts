/**
 * The per-table settings of the configuration (config.ts): dedup, the epoch unit of an integer
 * time column, which tables take naive timestamps as UTC. Their types, their validation (every
 * message names the entry and how to fix it) and their lookup by a file's table.
 */

import type { DedupInput, TimeUnit } from './config-schema.ts';
import { ConfigError } from './errors.ts';
import type { Layout } from './layout.ts';

export { type DedupInput, TIME_UNITS, type TimeUnit } from './config-schema.ts';

/**
 * Dedup of one table. 'exact': rows equal in every column (NULLs equal, as DISTINCT) are kept
 * once. 'last': one row per (keys + the time column) is kept, the latest written (see
 * docs/layouts.md, "Dedup").
 */
export type DedupSetting =
  | { readonly mode: 'exact' }
  | { readonly mode: 'last'; readonly keys: readonly string[] };

/** A per-table setting names a table path of the layout; the message says how to write one. */
function assertTablePath(name: string, table: string, layout: Layout): void {
  if (!layout.isTablePath(table)) {
    throw new ConfigError(
      `${name}: "${table}" is not a table of layout "${layout.template}": use the folders before the date, without the data prefix, ending in "/" (e.g. "mydb/cpu/" for arc, "events/" for hive)`,
    );
  }
}

/** A map of table path -> setting (shape checked by the schema): each path checked against the layout. */
function byTable<T, U>(
  setting: string,
  value: Readonly<Record<string, T>> | undefined,
  layout: Layout,
  parseEntry: (name: string, entry: T, table: string) => U,
): Map<string, U> {
  const out = new Map<string, U>();
  for (const [table, entry] of Object.entries(value ?? {})) {
    const name = `${setting}[${JSON.stringify(table)}]`;
    assertTablePath(name, table, layout);
    out.set(table, parseEntry(name, entry, table));
  }
  return out;
}

/** Checks `dedup`'s tables and keys; every message names the entry and how to fix it. */
export function parseDedup(
  value: Readonly<Record<string, DedupInput>> | undefined,
  layout: Layout,
  timeColumnOfTable: (table: string) => string,
): Map<string, DedupSetting> {
  return byTable('dedup', value, layout, (name, entry, table) =>
    dedupSetting(name, entry, timeColumnOfTable(table)),
  );
}

function dedupSetting(name: string, entry: DedupInput, timeColumn: string): DedupSetting {
  if (entry.mode === 'exact') {
    if (entry.keys !== undefined) {
      throw new ConfigError(
        `${name}.keys: mode "exact" compares every column; remove keys, or use mode "last" to keep one row per key`,
      );
    }
    return { mode: 'exact' };
  }
  const keys = entry.keys;
  if (keys === undefined) {
    throw new ConfigError(
      `${name}.keys must list the columns that identify a series for mode "last", e.g. ["host"] ([] for time alone; the time column is always part of the key)`,
    );
  }
  const seen = new Set<string>();
  for (const key of keys) {
    // DuckDB resolves identifiers case-insensitively: "Host" and "host" are one column.
    const folded = key.toLowerCase();
    if (folded === timeColumn.toLowerCase()) {
      throw new ConfigError(
        `${name}.keys must not name the time column "${timeColumn}": it is always part of the key; remove it`,
      );
    }
    if (seen.has(folded)) throw new ConfigError(`${name}.keys names "${key}" twice; list each column once`);
    seen.add(folded);
  }
  return { mode: 'last', keys: [...keys] };
}

/** A list of table paths (without the data prefix), each checked against the layout. */
export function parseTables(name: string, value: readonly string[] | undefined, layout: Layout): Set<string> {
  for (const table of value ?? []) assertTablePath(name, table, layout);
  return new Set(value);
}

/** Checks `timeUnits`' tables (the schema checks each unit). */
export function parseTimeUnits(
  value: Readonly<Record<string, TimeUnit>> | undefined,
  layout: Layout,
): Map<string, TimeUnit> {
  return byTable('timeUnits', value, layout, (_name, unit) => unit);
}

/** Checks `timeColumns`' tables (the schema checks each name). */
export function parseTimeColumns(
  value: Readonly<Record<string, string>> | undefined,
  layout: Layout,
): Map<string, string> {
  return byTable('timeColumns', value, layout, (_name, column) => column);
}

/** What the lookups below read of a configuration (config.ts's CompactorConfig holds them). */
export interface TableSettings {
  readonly layout: { readonly dataPrefix: string };
  readonly timeColumn: string;
  readonly timeColumns: ReadonlyMap<string, string>;
  readonly dedup: ReadonlyMap<string, DedupSetting>;
  readonly naiveTimestampsUtc: ReadonlySet<string>;
  readonly timeUnits: ReadonlyMap<string, TimeUnit>;
}

/** A table as `DataFile.table` names it (with the data prefix), as the settings name it (without). */
function settingsTable(config: TableSettings, table: string): string | undefined {
  const { dataPrefix } = config.layout;
  return table.startsWith(dataPrefix) ? table.slice(dataPrefix.length) : undefined;
}

/**
 * The time column of a table (as `DataFile.table` names it, with the data prefix): its entry in
 * `timeColumns`, else `timeColumn`.
 */
export function timeColumnOf(config: TableSettings, table: string): string {
  const path = settingsTable(config, table);
  return (path === undefined ? undefined : config.timeColumns.get(path)) ?? config.timeColumn;
}

/** The epoch unit of a table's integer time column (table as `DataFile.table` names it), if declared. */
export function timeUnitOf(config: TableSettings, table: string): TimeUnit | undefined {
  const path = settingsTable(config, table);
  return path === undefined ? undefined : config.timeUnits.get(path);
}

/** Whether a table (as `DataFile.table` names it, with the data prefix) takes naive timestamps as UTC. */
export function naiveTimestampsAreUtc(config: TableSettings, table: string): boolean {
  const path = settingsTable(config, table);
  return path !== undefined && config.naiveTimestampsUtc.has(path);
}

/** The dedup of a table as `DataFile.table` names it (with the data prefix), if any. */
export function dedupOf(config: TableSettings, table: string): DedupSetting | undefined {
  const path = settingsTable(config, table);
  return path === undefined ? undefined : config.dedup.get(path);
}
