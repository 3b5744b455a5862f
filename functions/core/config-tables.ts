/**
 * The per-table settings of the configuration (config.ts): dedup, the epoch unit of an integer
 * time column, which tables take naive timestamps as UTC. Their types, their validation (every
 * message names the entry and how to fix it) and their lookup by a file's table.
 */

import { ConfigError } from './errors.ts';
import type { Layout } from './layout.ts';

/** Units of an integer epoch time column: seconds, milli-, micro- or nanoseconds since 1970 UTC. */
export type TimeUnit = 's' | 'ms' | 'us' | 'ns';
export const TIME_UNITS: readonly TimeUnit[] = ['s', 'ms', 'us', 'ns'];

/**
 * Dedup of one table. 'exact': rows equal in every column (NULLs equal, as DISTINCT) are kept
 * once. 'last': one row per (keys + the time column) is kept, the latest written (see
 * docs/layouts.md, "Dedup").
 */
export type DedupSetting =
  | { readonly mode: 'exact' }
  | { readonly mode: 'last'; readonly keys: readonly string[] };

export interface DedupInput {
  readonly mode: DedupSetting['mode'];
  readonly keys?: readonly string[];
}

/** A per-table setting names a table path of the layout; the message says how to write one. */
function assertTablePath(name: string, table: string, layout: Layout): void {
  if (!layout.isTablePath(table)) {
    throw new ConfigError(
      `${name}: "${table}" is not a table of layout "${layout.template}": use the folders before the date, without the data prefix, ending in "/" (e.g. "mydb/cpu/" for arc, "events/" for hive)`,
    );
  }
}

export function plainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * A map of table path -> setting: each path checked against the layout, each setting by
 * `parseEntry`, which is given the entry's name for its messages (`dedup["mydb/cpu/"]`).
 */
function parseTableMap<T>(
  setting: string,
  value: unknown,
  layout: Layout,
  shape: { readonly what: string; readonly example: string },
  parseEntry: (name: string, entry: unknown) => T,
): Map<string, T> {
  const out = new Map<string, T>();
  if (value === undefined) return out;
  if (!plainObject(value)) {
    throw new ConfigError(
      `${setting} must be an object of table path -> ${shape.what}, e.g. ${shape.example}`,
    );
  }
  for (const [table, entry] of Object.entries(value)) {
    const name = `${setting}[${JSON.stringify(table)}]`;
    assertTablePath(name, table, layout);
    out.set(table, parseEntry(name, entry));
  }
  return out;
}

const DEDUP_EXAMPLE = '{"mydb/cpu/": {"mode": "exact"}, "mydb/mem/": {"mode": "last", "keys": ["host"]}}';

/** Validates `dedup`; every message names the setting and how to fix it. */
export function parseDedup(value: unknown, layout: Layout, timeColumn: string): Map<string, DedupSetting> {
  return parseTableMap('dedup', value, layout, { what: 'setting', example: DEDUP_EXAMPLE }, (name, entry) =>
    dedupSetting(name, entry, timeColumn),
  );
}

function dedupSetting(name: string, entry: unknown, timeColumn: string): DedupSetting {
  if (!plainObject(entry)) throw new ConfigError(`${name} must be an object, e.g. {"mode": "exact"}`);
  for (const field of Object.keys(entry)) {
    if (field !== 'mode' && field !== 'keys') {
      throw new ConfigError(`${name}.${field} is not a setting (known: mode, keys)`);
    }
  }
  const mode = entry.mode;
  if (mode === 'exact') {
    if (entry.keys !== undefined) {
      throw new ConfigError(
        `${name}.keys: mode "exact" compares every column; remove keys, or use mode "last" to keep one row per key`,
      );
    }
    return { mode };
  }
  if (mode !== 'last') {
    throw new ConfigError(`${name}.mode must be "exact" or "last", got ${JSON.stringify(mode)}`);
  }
  const keys = entry.keys;
  if (!Array.isArray(keys) || keys.some((k) => typeof k !== 'string' || k === '')) {
    throw new ConfigError(
      `${name}.keys must list the columns that identify a series for mode "last", e.g. ["host"] ([] for time alone; the time column is always part of the key), got ${JSON.stringify(keys)}`,
    );
  }
  const seen = new Set<string>();
  for (const key of keys as string[]) {
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
  return { mode, keys: [...(keys as string[])] };
}

/** A list of table paths (without the data prefix), each checked against the layout. */
export function parseTables(name: string, value: unknown, layout: Layout): Set<string> {
  if (value === undefined) return new Set();
  if (!Array.isArray(value) || value.some((t) => typeof t !== 'string')) {
    throw new ConfigError(
      `${name} must be a list of table paths, e.g. ["mydb/cpu/"], got ${JSON.stringify(value)}`,
    );
  }
  for (const table of value as string[]) {
    assertTablePath(name, table, layout);
  }
  return new Set(value as string[]);
}

const TIME_UNITS_EXAMPLE = '{"mydb/cpu/": "ms"}';

/** Validates `timeUnits`: table path -> one of TIME_UNITS; every message names the entry. */
export function parseTimeUnits(value: unknown, layout: Layout): Map<string, TimeUnit> {
  return parseTableMap(
    'timeUnits',
    value,
    layout,
    { what: 'unit', example: TIME_UNITS_EXAMPLE },
    (name, unit) => {
      if (!TIME_UNITS.includes(unit as TimeUnit)) {
        throw new ConfigError(
          `${name} must be one of ${TIME_UNITS.map((u) => `"${u}"`).join(', ')} (seconds, milliseconds, microseconds, nanoseconds since 1970-01-01 UTC), got ${JSON.stringify(unit)}`,
        );
      }
      return unit as TimeUnit;
    },
  );
}

/** What the lookups below read of a configuration (config.ts's CompactorConfig holds them). */
export interface TableSettings {
  readonly layout: { readonly dataPrefix: string };
  readonly dedup: ReadonlyMap<string, DedupSetting>;
  readonly naiveTimestampsUtc: ReadonlySet<string>;
  readonly timeUnits: ReadonlyMap<string, TimeUnit>;
}

/** A table as `DataFile.table` names it (with the data prefix), as the settings name it (without). */
function settingsTable(config: TableSettings, table: string): string | undefined {
  const { dataPrefix } = config.layout;
  return table.startsWith(dataPrefix) ? table.slice(dataPrefix.length) : undefined;
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
