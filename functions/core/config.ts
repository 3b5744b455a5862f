/** Compactor configuration: pure data, parsed and validated once by the caller (CLI, Lambda). */

import { type ConfigInput, configInputSchema, parseSettings } from './config-schema.ts';
import {
  type DedupSetting,
  parseDedup,
  parseTables,
  parseTimeColumns,
  parseTimeUnits,
  type TimeUnit,
} from './config-tables.ts';
import { ConfigError } from './errors.ts';
import { Layout } from './layout.ts';

export type { ConfigInput } from './config-schema.ts';

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
  /**
   * The tier is behind once its oldest eligible partition has been eligible longer than this
   * (backlog.ts): the stack's backlog alarm threshold and the local commands' warning.
   */
  readonly behindAfterSeconds: number;
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
  /** The time column of every table not in `timeColumns`. */
  readonly timeColumn: string;
  /** Tables (paths without the data prefix) whose time column has another name. */
  readonly timeColumns: ReadonlyMap<string, string>;
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
  /** Outputs are split at about this size (always under 5 GiB: one CopyObject). */
  readonly targetFileBytes: number;
  readonly rowGroupSize: number;
  /** One job's input bounds, so it fits one Lambda's memory, /tmp and 15 minutes. */
  readonly maxJobBytes: number;
  readonly maxJobFiles: number;
  /**
   * Jobs one plan gives a partition, run in waves one after another: wave k holds each partition's
   * k-th job, so a backlog of many job bounds drains in one execution, one live manifest at a time.
   */
  readonly maxJobsPerPartition: number;
  /**
   * Small jobs of one table one Map item carries (plan-store.ts mapItems): one child workflow runs
   * them at once, each with its own chain and manifest.
   */
  readonly smallJobsPerItem: number;
  /** How long a claim or step may run before recovery may take the job over. */
  readonly leaseSeconds: number;
  /** Days each committed job's receipt is kept (receipts.ts): the lifecycle rule's, and a local run's. */
  readonly receiptDays: number;
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

/** Every top-level key of COMPACTOR_CONFIG; test/repo/docs-names.test.ts checks the docs name only these. */
export const CONFIG_KEYS = Object.keys(configInputSchema.shape) as readonly (keyof ConfigInput)[];

const MiB = 1024 * 1024;

/**
 * Each tier is behind by default once a partition has waited three of the tier's periods since it
 * became eligible (a month counted at its longest, 31 days): one missed or failed cycle is not a
 * backlog, three in a row are.
 */
const BEHIND_AFTER_PERIODS = 3;

export const DEFAULTS = {
  layout: 'arc',
  hourly: { minFiles: 10, minAgeSeconds: 3600, behindAfterSeconds: BEHIND_AFTER_PERIODS * 3600 },
  daily: { minFiles: 2, minAgeSeconds: 3 * 3600, behindAfterSeconds: BEHIND_AFTER_PERIODS * 86_400 },
  // A day after the month ended: the daily tier has long merged its last day by then.
  monthly: { minFiles: 2, minAgeSeconds: 86_400, behindAfterSeconds: BEHIND_AFTER_PERIODS * 31 * 86_400 },
  quietSeconds: 300,
  timeColumn: 'time',
  targetFileBytes: 512 * MiB,
  // Polars' default (512^2 rows) rather than DuckDB's 122,880: a reader over S3 pays a first-byte
  // latency per row group it fetches, and narrow time-series rows make DuckDB's groups a few
  // hundred KB (AWS suggests byte ranges of 8-16 MB: https://docs.aws.amazon.com/whitepapers/latest/
  // s3-optimizing-performance-best-practices/use-byte-range-fetches.html). Larger groups also
  // compress better and hold more rows in the writer's memory
  // (https://duckdb.org/docs/stable/data/parquet/tips.html); docs/performance.md has the measures.
  rowGroupSize: 262_144,
  maxJobBytes: 2 * 1024 * MiB,
  maxJobFiles: 5000,
  maxJobsPerPartition: 10,
  smallJobsPerItem: 10,
  leaseSeconds: 20 * 60,
  // Over a year: a yearly audit still finds the receipts of the year before.
  receiptDays: 400,
  failureBackoff: { after: 3, baseSeconds: 3600, maxSeconds: 7 * 86_400 },
  retentionBufferHours: 24,
  planning: {
    listing: 'windowed',
    lookbackHours: 48,
    sweepEveryHours: { hourly: 24, daily: 168, monthly: 336 },
    listConcurrency: 32,
  },
} as const;

/**
 * COMPACTOR_CONFIG (or the CLI's resolved settings) as the core uses it. The schema
 * (config-schema.ts) checks every key's shape and range; what depends on the layout is checked here.
 */
export function parseConfig(value: ConfigInput = {}): CompactorConfig {
  const input = parseSettings(configInputSchema, value);
  const layout = parseLayout(input);
  // A tier whose outputs would sit above the layout's partitions is off by default (and refused
  // when turned on): its readers would never see them (Layout.tierRefusal).
  const tier = (name: TierName): TierConfig => ({
    enabled: input.tiers?.[name]?.enabled ?? (name !== 'monthly' && layout.tierRefusal(name) === undefined),
    minFiles: input.tiers?.[name]?.minFiles ?? DEFAULTS[name].minFiles,
    minAgeSeconds: input.tiers?.[name]?.minAgeSeconds ?? DEFAULTS[name].minAgeSeconds,
    behindAfterSeconds: input.tiers?.[name]?.behindAfterSeconds ?? DEFAULTS[name].behindAfterSeconds,
  });
  const timeColumn = input.timeColumn ?? DEFAULTS.timeColumn;
  const timeColumns = parseTimeColumns(input.timeColumns, layout);
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
    quietSeconds: input.quietSeconds ?? DEFAULTS.quietSeconds,
    timeColumn,
    timeColumns,
    sortKeys: input.sortKeys ?? [],
    dedup: parseDedup(input.dedup, layout, (table) => timeColumns.get(table) ?? timeColumn),
    naiveTimestampsUtc: parseTables('naiveTimestampsUtc', input.naiveTimestampsUtc, layout),
    timeUnits: parseTimeUnits(input.timeUnits, layout),
    targetFileBytes: input.targetFileBytes ?? DEFAULTS.targetFileBytes,
    rowGroupSize: input.rowGroupSize ?? DEFAULTS.rowGroupSize,
    maxJobBytes: input.maxJobBytes ?? DEFAULTS.maxJobBytes,
    maxJobFiles: input.maxJobFiles ?? DEFAULTS.maxJobFiles,
    maxJobsPerPartition: input.maxJobsPerPartition ?? DEFAULTS.maxJobsPerPartition,
    smallJobsPerItem: input.smallJobsPerItem ?? DEFAULTS.smallJobsPerItem,
    leaseSeconds: input.leaseSeconds ?? DEFAULTS.leaseSeconds,
    receiptDays: input.receiptDays ?? DEFAULTS.receiptDays,
    failureBackoff: { ...DEFAULTS.failureBackoff, ...input.failureBackoff },
    retention: parseRetention(input.retention, layout),
    unsafeSingleWriterStore: input.unsafeSingleWriterStore ?? false,
  };
}

function parsePlanning(input: ConfigInput['planning']): PlanningConfig {
  const d = DEFAULTS.planning;
  const every = input?.sweepEveryHours;
  const sweepHours = (tier: TierName): number =>
    typeof every === 'number' ? every : (every?.[tier] ?? d.sweepEveryHours[tier]);
  return {
    listing: input?.listing ?? d.listing,
    lookbackHours: input?.lookbackHours ?? d.lookbackHours,
    sweepEveryHours: {
      hourly: sweepHours('hourly'),
      daily: sweepHours('daily'),
      monthly: sweepHours('monthly'),
    },
    listConcurrency: input?.listConcurrency ?? d.listConcurrency,
  };
}

function parseLayout(input: ConfigInput): Layout {
  const { partitionSegments, dataSuffix } = input;
  return Layout.create(input.layout ?? DEFAULTS.layout, input.dataPrefix ?? '', {
    ...(partitionSegments !== undefined ? { partitionSegments } : {}),
    ...(dataSuffix !== undefined ? { dataSuffix } : {}),
  });
}

function parseRetention(input: ConfigInput['retention'], layout: Layout): RetentionConfig {
  const bufferHours = input?.bufferHours ?? DEFAULTS.retentionBufferHours;
  const rules: RetentionRule[] = [];
  for (const [table, days] of Object.entries(input?.rules ?? {})) {
    const name = `retention.rules[${JSON.stringify(table)}]`;
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
