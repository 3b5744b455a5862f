/** Compactor configuration: pure data, parsed and validated once by the caller (CLI, Lambda). */

import { ConfigError } from './errors.ts';
import { Layout } from './layout.ts';

export type TierName = 'hourly' | 'daily';
export const TIERS: readonly TierName[] = ['hourly', 'daily'];

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
} as const;

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
  return {
    layout: Layout.fromName(input.layout ?? DEFAULTS.layout, input.dataPrefix ?? ''),
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
  };
}
