/** Compactor configuration: pure data, parsed and validated once by the caller (CLI, Lambda). */

import { ConfigError } from './errors.ts';
import { Layout } from './layout.ts';

export type TierName = 'hourly' | 'daily';
export const TIERS: readonly TierName[] = ['hourly', 'daily'];

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
  /** Compact a folder once it holds at least this many candidate files. */
  readonly minFiles: number;
  /** A folder is eligible once its period ended at least this long ago. */
  readonly minAgeSeconds: number;
}

export interface CompactorConfig {
  readonly layout: Layout;
  readonly tiers: Readonly<Record<TierName, TierConfig>>;
  /** A folder holding any object modified less than this long ago is still being written: skip it. */
  readonly quietSeconds: number;
  readonly timeColumn: string;
  /** Extra sort keys after the time column. */
  readonly sortKeys: readonly string[];
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
}

export interface ConfigInput {
  readonly layout?: string;
  readonly dataPrefix?: string;
  readonly tiers?: Partial<Record<TierName, Partial<TierConfig>>>;
  readonly quietSeconds?: number;
  readonly timeColumn?: string;
  readonly sortKeys?: readonly string[];
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
}

const MiB = 1024 * 1024;
const FIVE_GB = 5 * 1024 * MiB;

export const DEFAULTS = {
  layout: 'arc',
  hourly: { minFiles: 10, minAgeSeconds: 3600 },
  daily: { minFiles: 2, minAgeSeconds: 3 * 3600 },
  quietSeconds: 300,
  timeColumn: 'time',
  targetFileBytes: 512 * MiB,
  rowGroupSize: 122_880,
  maxJobBytes: 2 * 1024 * MiB,
  maxJobFiles: 5000,
  leaseSeconds: 20 * 60,
  failureBackoff: { after: 3, baseSeconds: 3600, maxSeconds: 7 * 86_400 },
  retentionBufferHours: 24,
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
  const tier = (name: TierName): TierConfig => ({
    minFiles: positive(`tiers.${name}.minFiles`, input.tiers?.[name]?.minFiles ?? DEFAULTS[name].minFiles),
    minAgeSeconds: nonNegative(
      `tiers.${name}.minAgeSeconds`,
      input.tiers?.[name]?.minAgeSeconds ?? DEFAULTS[name].minAgeSeconds,
    ),
  });
  const timeColumn = input.timeColumn ?? DEFAULTS.timeColumn;
  if (timeColumn === '') throw new ConfigError('timeColumn must not be empty');
  const layout = Layout.fromName(input.layout ?? DEFAULTS.layout, input.dataPrefix ?? '');
  return {
    layout,
    tiers: { hourly: tier('hourly'), daily: tier('daily') },
    quietSeconds: nonNegative('quietSeconds', input.quietSeconds ?? DEFAULTS.quietSeconds),
    timeColumn,
    sortKeys: input.sortKeys ?? [],
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
  };
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
