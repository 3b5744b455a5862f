/** Compactor configuration: pure data, parsed and validated once by the caller (CLI, Lambda). */

import {
  type DedupInput,
  type DedupSetting,
  parseDedup,
  parseTables,
  parseTimeUnits,
  plainObject,
  type TimeUnit,
} from './config-tables.ts';
import { ConfigError } from './errors.ts';
import { Layout } from './layout.ts';

export type TierName = 'hourly' | 'daily' | 'monthly';
export const TIERS: readonly TierName[] = ['hourly', 'daily', 'monthly'];

/**
 * What a job does: compact in a tier, or expire files past their retention (`retention`). It is
 * a manifest's `tier` field and names its lease `manifests/{kind}/{partition}.json`, so a
 * retention job never shares a lease with the compaction tiers of the same folder.
 */
export type JobKind = TierName | 'retention';
export const JOB_KINDS: readonly JobKind[] = [...TIERS, 'retention'];

export interface RetentionRule {
  /** Table path relative to the data prefix (`mydb/cpu/`), a prefix of it (`mydb/`), or `*` (default). */
  readonly table: string;
  readonly days: number;
}

export interface RetentionConfig {
  /** Most specific first (longest table path; `*` last). Empty: retention is off. */
  readonly rules: readonly RetentionRule[];
  /** A file goes only once its period ended this long after the rule's days: clearly past. */
  readonly bufferHours: number;
}

export interface TierConfig {
  /** Whether the tier runs. Hourly and daily always do; monthly is opt-in (see tiers.ts). */
  readonly enabled: boolean;
  /** Compact a folder once it holds at least this many candidate files. */
  readonly minFiles: number;
  /** A folder is eligible once its period ended at least this long ago. */
  readonly minAgeSeconds: number;
}

/**
 * How planning lists the lake (planner.ts). 'windowed': a cycle lists each table only from the
 * first period that can still hold a candidate (its folder ended within `lookbackHours` of its
 * minAge), tables in parallel; a sweep lists every table whole once the tier's last sweep is
 * `sweepEveryHours` old, catching late data and backfills in older folders. 'full': every cycle
 * lists the whole data root in one listing (as before).
 */
export interface PlanningConfig {
  readonly listing: 'windowed' | 'full';
  readonly lookbackHours: number;
  /**
   * Per tier: a cycle sweeps once the tier's last sweep is at least this old (a daily cycle that
   * swept every day would never list windows). 0: only when the execution input asks.
   */
  readonly sweepEveryHours: Readonly<Record<TierName, number>>;
  /** Prefixes listed at once. */
  readonly listConcurrency: number;
}

export interface CompactorConfig {
  readonly layout: Layout;
  readonly planning: PlanningConfig;
  readonly tiers: Readonly<Record<TierName, TierConfig>>;
  /** A folder holding any object modified less than this long ago is still being written: skip it. */
  readonly quietSeconds: number;
  readonly timeColumn: string;
  /** Extra sort keys after the time column. */
  readonly sortKeys: readonly string[];
  /**
   * Dedup per table, by table path without the data prefix (`mydb/cpu/`); a table not listed is
   * not deduplicated (the default).
   */
  readonly dedup: ReadonlyMap<string, DedupSetting>;
  /**
   * Tables (paths without the data prefix) whose naive TIMESTAMP values are UTC: beside TIMESTAMPTZ
   * inputs they merge as TIMESTAMPTZ. Any other table fails such a mix (schema.ts).
   */
  readonly naiveTimestampsUtc: ReadonlySet<string>;
  /**
   * Tables (paths without the data prefix) whose time column is an integer epoch, with its unit.
   * The stored integer type is kept; the unit lets the compact step read each input's times and
   * check that they lie in its folder's period (epoch-time.ts). Unlisted tables: unchanged.
   */
  readonly timeUnits: ReadonlyMap<string, TimeUnit>;
  /** Outputs are split at about this size (always below 5 GB: one CopyObject). */
  readonly targetFileBytes: number;
  readonly rowGroupSize: number;
  /** One job's input bounds, so it fits one Lambda's memory, /tmp and 15 minutes. */
  readonly maxJobBytes: number;
  readonly maxJobFiles: number;
  /** How long a claim or step may run before recovery may take the job over. */
  readonly leaseSeconds: number;
  /** After `after` consecutive failures a partition is skipped for baseSeconds, doubling up to maxSeconds. */
  readonly failureBackoff: {
    readonly after: number;
    readonly baseSeconds: number;
    readonly maxSeconds: number;
  };
  readonly retention: RetentionConfig;
  /**
   * Skip the store probe (store-probe.ts) for a store that provably has a single writer; a loud
   * warning is printed on every run. Default false: a store lacking the guarantees is refused.
   */
  readonly unsafeSingleWriterStore: boolean;
}

export interface ConfigInput {
  readonly layout?: string;
  readonly planning?: {
    readonly listing?: PlanningConfig['listing'];
    readonly lookbackHours?: number;
    /** One number for every tier, or per tier. */
    readonly sweepEveryHours?: number | Partial<Record<TierName, number>>;
    readonly listConcurrency?: number;
  };
  readonly dataPrefix?: string;
  /** Template segments readers map to partition columns (see LayoutOptions); default per preset. */
  readonly partitionSegments?: readonly string[];
  /** Suffix of raw input names ('' = any name, checked by content); default per preset. */
  readonly dataSuffix?: string;
  readonly tiers?: Partial<Record<TierName, Partial<TierConfig>>>;
  readonly quietSeconds?: number;
  readonly timeColumn?: string;
  readonly sortKeys?: readonly string[];
  /** Table path (without the data prefix, e.g. `mydb/cpu/`) -> its dedup. */
  readonly dedup?: Readonly<Record<string, DedupInput>>;
  /** Table paths (`mydb/cpu/`) whose naive TIMESTAMP values are UTC. */
  readonly naiveTimestampsUtc?: readonly string[];
  /** Table path (`mydb/cpu/`) -> the unit of its integer epoch time column. */
  readonly timeUnits?: Readonly<Record<string, TimeUnit>>;
  readonly targetFileBytes?: number;
  readonly rowGroupSize?: number;
  readonly maxJobBytes?: number;
  readonly maxJobFiles?: number;
  readonly leaseSeconds?: number;
  readonly failureBackoff?: Partial<CompactorConfig['failureBackoff']>;
  readonly retention?: {
    /** Days to keep, by table path (`mydb/cpu/`), database prefix (`mydb/`) or `*` (every other table). */
    readonly rules?: Readonly<Record<string, number>>;
    readonly bufferHours?: number;
  };
  readonly unsafeSingleWriterStore?: boolean;
}

/**
 * Every top-level key of ConfigInput (COMPACTOR_CONFIG). A Record over keyof ConfigInput, so the
 * compiler fails when a key is added to one and not the other; test/repo/docs-names.test.ts
 * checks the docs name only these.
 */
const CONFIG_INPUT_KEYS: Readonly<Record<keyof ConfigInput, true>> = {
  layout: true,
  planning: true,
  dataPrefix: true,
  partitionSegments: true,
  dataSuffix: true,
  tiers: true,
  quietSeconds: true,
  timeColumn: true,
  sortKeys: true,
  dedup: true,
  naiveTimestampsUtc: true,
  timeUnits: true,
  targetFileBytes: true,
  rowGroupSize: true,
  maxJobBytes: true,
  maxJobFiles: true,
  leaseSeconds: true,
  failureBackoff: true,
  retention: true,
  unsafeSingleWriterStore: true,
};
export const CONFIG_KEYS = Object.keys(CONFIG_INPUT_KEYS) as readonly (keyof ConfigInput)[];

const MiB = 1024 * 1024;
const FIVE_GB = 5 * 1024 * MiB;

export const DEFAULTS = {
  layout: 'arc',
  hourly: { minFiles: 10, minAgeSeconds: 3600 },
  daily: { minFiles: 2, minAgeSeconds: 3 * 3600 },
  // A day after the month ended: the daily tier has long merged its last day by then.
  monthly: { minFiles: 2, minAgeSeconds: 86_400 },
  quietSeconds: 300,
  timeColumn: 'time',
  targetFileBytes: 512 * MiB,
  rowGroupSize: 122_880,
  maxJobBytes: 2 * 1024 * MiB,
  maxJobFiles: 5000,
  leaseSeconds: 20 * 60,
  failureBackoff: { after: 3, baseSeconds: 3600, maxSeconds: 7 * 86_400 },
  retentionBufferHours: 24,
  planning: {
    listing: 'windowed',
    lookbackHours: 48,
    sweepEveryHours: { hourly: 24, daily: 168, monthly: 336 },
    listConcurrency: 32,
  },
} as const;

/** A century: a longer retention is a typo, not a policy. */
const MAX_RETENTION_DAYS = 36_500;

function positive(name: string, value: number, max = Number.MAX_SAFE_INTEGER): number {
  if (!Number.isFinite(value) || value <= 0 || value > max || !Number.isInteger(value)) {
    throw new ConfigError(`${name} must be a whole number between 1 and ${max}, got ${value}`);
  }
  return value;
}

function nonNegative(name: string, value: number): number {
  if (!Number.isFinite(value) || value < 0) throw new ConfigError(`${name} must be >= 0, got ${value}`);
  return value;
}

export function parseConfig(input: ConfigInput = {}): CompactorConfig {
  const layout = parseLayout(input);
  // A tier whose outputs would sit above the layout's partitions is off by default (and refused
  // when turned on): its readers would never see them (Layout.tierRefusal).
  const tier = (name: TierName): TierConfig => ({
    enabled: input.tiers?.[name]?.enabled ?? (name !== 'monthly' && layout.tierRefusal(name) === undefined),
    minFiles: positive(`tiers.${name}.minFiles`, input.tiers?.[name]?.minFiles ?? DEFAULTS[name].minFiles),
    minAgeSeconds: nonNegative(
      `tiers.${name}.minAgeSeconds`,
      input.tiers?.[name]?.minAgeSeconds ?? DEFAULTS[name].minAgeSeconds,
    ),
  });
  const timeColumn = input.timeColumn ?? DEFAULTS.timeColumn;
  if (timeColumn === '') throw new ConfigError('timeColumn must not be empty');
  for (const name of ['hourly', 'daily'] as const) {
    const refusal = layout.tierRefusal(name);
    if (refusal !== undefined) {
      if (input.tiers?.[name]?.enabled === true) throw new ConfigError(`tiers.${name}.enabled: ${refusal}`);
      continue;
    }
    if (input.tiers?.[name]?.enabled === false) {
      throw new ConfigError(
        `tiers.${name}.enabled: the ${name} tier always runs (each tier merges the previous one's outputs); raise its minFiles or minAgeSeconds to make it rarer`,
      );
    }
  }
  const monthlyEnabled = input.tiers?.monthly?.enabled;
  if (monthlyEnabled !== undefined && typeof monthlyEnabled !== 'boolean') {
    throw new ConfigError(
      `tiers.monthly.enabled must be true or false, got ${JSON.stringify(monthlyEnabled)}`,
    );
  }
  if (monthlyEnabled && !layout.hasMonthFolder) {
    throw new ConfigError(
      `tiers.monthly.enabled: layout "${layout.template}" has no month folder for monthly outputs (its day segment also names the month); use a layout with {YYYY}/{MM}/ folders before {DD}, or leave the monthly tier off`,
    );
  }
  const monthlyRefusal = layout.tierRefusal('monthly');
  if (monthlyEnabled && monthlyRefusal) throw new ConfigError(`tiers.monthly.enabled: ${monthlyRefusal}`);
  return {
    layout,
    planning: parsePlanning(input.planning),
    tiers: { hourly: tier('hourly'), daily: tier('daily'), monthly: tier('monthly') },
    quietSeconds: nonNegative('quietSeconds', input.quietSeconds ?? DEFAULTS.quietSeconds),
    timeColumn,
    sortKeys: input.sortKeys ?? [],
    dedup: parseDedup(input.dedup, layout, timeColumn),
    naiveTimestampsUtc: parseTables('naiveTimestampsUtc', input.naiveTimestampsUtc, layout),
    timeUnits: parseTimeUnits(input.timeUnits, layout),
    targetFileBytes: positive(
      'targetFileBytes',
      input.targetFileBytes ?? DEFAULTS.targetFileBytes,
      FIVE_GB - MiB,
    ),
    rowGroupSize: positive('rowGroupSize', input.rowGroupSize ?? DEFAULTS.rowGroupSize),
    maxJobBytes: positive('maxJobBytes', input.maxJobBytes ?? DEFAULTS.maxJobBytes),
    maxJobFiles: positive('maxJobFiles', input.maxJobFiles ?? DEFAULTS.maxJobFiles, 10_000),
    leaseSeconds: positive('leaseSeconds', input.leaseSeconds ?? DEFAULTS.leaseSeconds),
    failureBackoff: {
      after: positive('failureBackoff.after', input.failureBackoff?.after ?? DEFAULTS.failureBackoff.after),
      baseSeconds: positive(
        'failureBackoff.baseSeconds',
        input.failureBackoff?.baseSeconds ?? DEFAULTS.failureBackoff.baseSeconds,
      ),
      maxSeconds: positive(
        'failureBackoff.maxSeconds',
        input.failureBackoff?.maxSeconds ?? DEFAULTS.failureBackoff.maxSeconds,
      ),
    },
    retention: parseRetention(input.retention, layout),
    unsafeSingleWriterStore: parseOptOut(input.unsafeSingleWriterStore),
  };
}

function parsePlanning(input: ConfigInput['planning']): PlanningConfig {
  const d = DEFAULTS.planning;
  if (input !== undefined && !plainObject(input)) {
    throw new ConfigError(
      `planning must be an object, e.g. {"lookbackHours": 48}, got ${JSON.stringify(input)}`,
    );
  }
  for (const field of Object.keys(input ?? {})) {
    if (!(field in d))
      throw new ConfigError(`planning.${field} is not a setting (known: ${Object.keys(d).join(', ')})`);
  }
  const listing = input?.listing ?? d.listing;
  if (listing !== 'windowed' && listing !== 'full') {
    throw new ConfigError(`planning.listing must be "windowed" or "full", got ${JSON.stringify(listing)}`);
  }
  const every = input?.sweepEveryHours;
  if (every !== undefined && typeof every !== 'number' && !plainObject(every)) {
    throw new ConfigError(
      `planning.sweepEveryHours must be a number of hours or an object per tier, e.g. {"hourly": 24, "daily": 168}, got ${JSON.stringify(every)}`,
    );
  }
  const sweepHours = (tier: TierName): number => {
    const value = typeof every === 'number' ? every : (every?.[tier] ?? d.sweepEveryHours[tier]);
    // Sweep markers live under plans/, which the bucket's lifecycle rule expires after 15 days: a
    // longer interval would find no marker and sweep every cycle.
    if (typeof value !== 'number' || !(value >= 0 && value <= 336)) {
      throw new ConfigError(
        `planning.sweepEveryHours${typeof every === 'number' ? '' : `.${tier}`} must be a number of hours from 0 (only when asked) to 336 (14 days: sweep records expire with the plans after 15), got ${JSON.stringify(value)}`,
      );
    }
    return value;
  };
  for (const key of plainObject(every) ? Object.keys(every) : []) {
    if (!(TIERS as readonly string[]).includes(key)) {
      throw new ConfigError(`planning.sweepEveryHours.${key} is not a tier (known: ${TIERS.join(', ')})`);
    }
  }
  return {
    listing,
    lookbackHours: positive('planning.lookbackHours', input?.lookbackHours ?? d.lookbackHours),
    sweepEveryHours: {
      hourly: sweepHours('hourly'),
      daily: sweepHours('daily'),
      monthly: sweepHours('monthly'),
    },
    listConcurrency: positive('planning.listConcurrency', input?.listConcurrency ?? d.listConcurrency, 1000),
  };
}

function parseLayout(input: ConfigInput): Layout {
  const { partitionSegments, dataSuffix } = input;
  if (
    partitionSegments !== undefined &&
    (!Array.isArray(partitionSegments) || partitionSegments.some((s) => typeof s !== 'string'))
  ) {
    throw new ConfigError(
      `partitionSegments must be a list of the layout's segments that readers map to partition columns, e.g. ["dt={YYYY}-{MM}-{DD}", "hour={HH}"] or [], got ${JSON.stringify(partitionSegments)}`,
    );
  }
  if (dataSuffix !== undefined && typeof dataSuffix !== 'string') {
    throw new ConfigError(
      `dataSuffix must be a string (e.g. ".parquet", or "" for any name), got ${JSON.stringify(dataSuffix)}`,
    );
  }
  return Layout.create(input.layout ?? DEFAULTS.layout, input.dataPrefix ?? '', {
    ...(partitionSegments !== undefined ? { partitionSegments } : {}),
    ...(dataSuffix !== undefined ? { dataSuffix } : {}),
  });
}

function parseOptOut(value: unknown): boolean {
  if (value === undefined) return false;
  // Only an explicit true opts out: "yes", 1 or "false" must not silently turn the probe off.
  if (typeof value !== 'boolean') {
    throw new ConfigError(
      `unsafeSingleWriterStore must be true or false, got ${JSON.stringify(value)}; true skips the store probe and is safe only for a store with a single writer`,
    );
  }
  return value;
}

function parseRetention(input: ConfigInput['retention'], layout: Layout): RetentionConfig {
  const bufferHours = input?.bufferHours ?? DEFAULTS.retentionBufferHours;
  if (!Number.isInteger(bufferHours) || bufferHours < 0 || bufferHours > 24 * MAX_RETENTION_DAYS) {
    throw new ConfigError(
      `retention.bufferHours must be a whole number of hours >= 0 (default ${DEFAULTS.retentionBufferHours}), got ${bufferHours}`,
    );
  }
  const raw = input?.rules ?? {};
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw new ConfigError('retention.rules must be an object of table path to days, e.g. {"mydb/cpu/": 30}');
  }
  const rules: RetentionRule[] = [];
  for (const [table, days] of Object.entries(raw)) {
    const name = `retention.rules[${JSON.stringify(table)}]`;
    if (typeof days !== 'number' || !Number.isInteger(days) || days < 1 || days > MAX_RETENTION_DAYS) {
      throw new ConfigError(
        `${name} must be a whole number of days from 1 to ${MAX_RETENTION_DAYS}, got ${days}`,
      );
    }
    if (table !== '*') {
      const segments = table.slice(0, -1).split('/');
      if (
        !table.endsWith('/') ||
        table.startsWith('/') ||
        segments.some((s) => s === '' || s === '.' || s === '..')
      ) {
        throw new ConfigError(
          `${name}: a rule names a table path relative to the data prefix, ending in "/" (e.g. "mydb/cpu/" or "mydb/"), or "*" for every other table`,
        );
      }
      // A deeper path than the layout's table can never match a file: a rule that silently does nothing.
      if (segments.length > layout.tableDepth) {
        throw new ConfigError(
          `${name}: layout "${layout.template}" names a table with ${layout.tableDepth} segment(s); use a table path (or a prefix of one) like "${Array.from({ length: layout.tableDepth }, (_, i) => `t${i + 1}`).join('/')}/"`,
        );
      }
    }
    rules.push({ table, days });
  }
  // Most specific first: the longest table path that is a prefix of a file's table wins.
  rules.sort((a, b) => (a.table === '*' ? 1 : b.table === '*' ? -1 : b.table.length - a.table.length));
  return { rules, bufferHours };
}
