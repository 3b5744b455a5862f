/**
 * The stack's configuration: one object under the context key `compactor` (cdk.json, or
 * `-c compactor='{"dataPrefix":"lake/"}'`, where the CLI passes a JSON string), parsed once by
 * the app. Every field is optional; errors name the key (`compactor.tiers.hourly.minFiles`).
 *
 * The protocol settings are also validated by the core's own parser at synth time, so a value
 * the Lambdas would reject fails `cdk synth` with the same message instead of every execution.
 */

import { type LambdaSize, METRICS_NAMESPACE } from '../functions/contract.ts';
import {
  type ConfigInput,
  DEFAULTS,
  type DedupInput,
  parseConfig,
  TIERS,
  type TierName,
  type TimeUnit,
} from '../functions/core/config.ts';
import { ConfigError } from '../functions/core/errors.ts';
import { Layout } from '../functions/core/layout.ts';
import {
  CHILD_DEFAULTS,
  CHILD_EXECUTION_TYPES,
  type ChildExecutionType,
  expressRefusal,
} from './child-budget.ts';

export const CONTEXT_KEY = 'compactor';

export interface BucketSettings {
  /** true: the stack creates (and owns) the data bucket; false: it imports `name`. */
  readonly create: boolean;
  /** Required when `create` is false; optional physical name when the stack creates it. */
  readonly name: string | undefined;
  /**
   * The bucket's default encryption: `s3` (SSE-S3) or `kms` (SSE-KMS with a customer managed key).
   * A created bucket with `kms` gets a key of its own unless `kmsKeyArn` names one.
   */
  readonly encryption: 's3' | 'kms';
  /**
   * The SSE-KMS key (key ARN) of an imported bucket, or the key a created `kms` bucket uses.
   * Every Lambda role and the state machine role get kms:Decrypt and kms:GenerateDataKey on it.
   */
  readonly kmsKeyArn: string | undefined;
}

export interface TierSettings {
  /** EventBridge Scheduler expression (`cron(...)`, `rate(...)`), evaluated in UTC. */
  readonly schedule: string;
  readonly minFiles: number;
  readonly minAgeSeconds: number;
  /** A disabled tier gets no schedule (it can still be started by hand). */
  readonly enabled: boolean;
}

/** Retention: off until a rule is set; its own schedule (deployed only when there is a rule). */
export interface RetentionSettings {
  /** Days to keep per table path (`mydb/cpu/`), database prefix (`mydb/`) or `*`. */
  readonly rules: Readonly<Record<string, number>>;
  readonly bufferHours: number;
  readonly schedule: string;
  readonly enabled: boolean;
}

export type { LambdaSize };

export interface StackConfig {
  readonly bucket: BucketSettings;
  /** Data root in the bucket: '' or ending with '/'. */
  readonly dataPrefix: string;
  /** Layout preset (`arc`, `hive`, `firehose`) or template. */
  readonly layout: string;
  /** Template segments readers map to partition columns; undefined: the layout's default. */
  readonly partitionSegments: readonly string[] | undefined;
  /** Suffix of raw input names ('' = any name, checked by content); undefined: the layout's default. */
  readonly dataSuffix: string | undefined;
  readonly tiers: Readonly<Record<TierName, TierSettings>>;
  readonly retention: RetentionSettings;
  readonly quietSeconds: number;
  readonly targetFileBytes: number;
  readonly rowGroupSize: number;
  readonly maxJobBytes: number;
  readonly maxJobFiles: number;
  readonly sortKeys: readonly string[];
  readonly timeColumn: string;
  /** Table path (without the data prefix) -> dedup; validated by the core's parser. */
  readonly dedup: Readonly<Record<string, DedupInput>>;
  /** Tables whose naive TIMESTAMP values are UTC; validated by the core's parser. */
  readonly naiveTimestampsUtc: readonly string[];
  /** Table path -> unit of its integer epoch time column; validated by the core's parser. */
  readonly timeUnits: Readonly<Record<string, TimeUnit>>;
  /** How the plan step lists the lake (windows and sweeps); validated by the core's parser. */
  readonly planning: NonNullable<ConfigInput['planning']>;
  readonly map: {
    readonly maxConcurrency: number;
    readonly toleratedFailurePercentage: number;
    /**
     * The per-partition chain's child workflows: EXPRESS (at most five minutes each, so jobs and
     * timeouts default smaller, see cdk/child-budget.ts) or STANDARD (bigger jobs).
     */
    readonly childExecutionType: ChildExecutionType;
  };
  /**
   * `compact` sizes the DuckDB Lambda; `partitionSteps` publish, verify, delete-inputs and
   * clear-manifest (the rest of the chain); `others` recover, plan and summary.
   */
  readonly lambda: {
    readonly compact: LambdaSize;
    readonly partitionSteps: LambdaSize;
    readonly others: LambdaSize;
  };
  readonly alarmEmail: string | undefined;
  readonly metricsNamespace: string;
  readonly removalPolicy: 'retain' | 'destroy';
}

const MiB = 1024 * 1024;

export const STACK_DEFAULTS: StackConfig = {
  bucket: { create: true, name: undefined, encryption: 's3', kmsKeyArn: undefined },
  dataPrefix: '',
  layout: DEFAULTS.layout,
  partitionSegments: undefined,
  dataSuffix: undefined,
  tiers: {
    hourly: { schedule: 'cron(10 * * * ? *)', ...DEFAULTS.hourly, enabled: true },
    daily: { schedule: 'cron(30 3 * * ? *)', ...DEFAULTS.daily, enabled: true },
    // Opt-in; runs daily, finds work once a month (a day after the month ended).
    monthly: { schedule: 'cron(45 4 * * ? *)', ...DEFAULTS.monthly, enabled: false },
  },
  retention: {
    rules: {},
    bufferHours: DEFAULTS.retentionBufferHours,
    schedule: 'cron(0 5 * * ? *)',
    enabled: true,
  },
  quietSeconds: DEFAULTS.quietSeconds,
  targetFileBytes: 512 * MiB,
  rowGroupSize: DEFAULTS.rowGroupSize,
  // By map.childExecutionType (CHILD_DEFAULTS): these are Express's.
  maxJobBytes: CHILD_DEFAULTS.EXPRESS.maxJobBytes,
  maxJobFiles: CHILD_DEFAULTS.EXPRESS.maxJobFiles,
  sortKeys: [],
  timeColumn: DEFAULTS.timeColumn,
  dedup: {},
  naiveTimestampsUtc: [],
  timeUnits: {},
  planning: {},
  map: { maxConcurrency: 10, toleratedFailurePercentage: 5, childExecutionType: 'EXPRESS' },
  lambda: {
    compact: {
      memoryMb: 3008,
      ephemeralStorageMb: 10240,
      timeoutSeconds: CHILD_DEFAULTS.EXPRESS.compactTimeoutSeconds,
    },
    partitionSteps: {
      memoryMb: 512,
      ephemeralStorageMb: 512,
      timeoutSeconds: CHILD_DEFAULTS.EXPRESS.partitionStepTimeoutSeconds,
    },
    others: { memoryMb: 512, ephemeralStorageMb: 512, timeoutSeconds: 300 },
  },
  alarmEmail: undefined,
  metricsNamespace: METRICS_NAMESPACE,
  removalPolicy: 'retain',
};

/** A job's lease must outlive any step's Lambda, or recovery could take over a job still running. */
const LEASE_MARGIN_SECONDS = 300;

type Json = Record<string, unknown>;

function fail(key: string, message: string): never {
  throw new ConfigError(`context ${key} ${message}`);
}

/** Reads an object and rejects unknown keys: a typo must not silently fall back to a default. */
function section(value: unknown, key: string, allowed: readonly string[]): Json {
  if (value === undefined) return {};
  if (typeof value !== 'object' || value === null || Array.isArray(value)) fail(key, 'must be an object');
  const json = value as Json;
  for (const name of Object.keys(json)) {
    // "//" keys are comments (cdk.json has no other way to document a setting).
    if (name.startsWith('//')) continue;
    if (!allowed.includes(name)) fail(`${key}.${name}`, `is not a setting (known: ${allowed.join(', ')})`);
  }
  return json;
}

function int(json: Json, key: string, name: string, fallback: number, min: number, max: number): number {
  const value = json[name];
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    fail(`${key}.${name}`, `must be a whole number from ${min} to ${max}, got ${JSON.stringify(value)}`);
  }
  return value;
}

function bool(json: Json, key: string, name: string, fallback: boolean): boolean {
  const value = json[name];
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean')
    fail(`${key}.${name}`, `must be true or false, got ${JSON.stringify(value)}`);
  return value;
}

function str(json: Json, key: string, name: string): string | undefined {
  const value = json[name];
  if (value === undefined) return undefined;
  if (typeof value !== 'string') fail(`${key}.${name}`, `must be a string, got ${JSON.stringify(value)}`);
  return value;
}

/** Scheduler accepts cron with six fields, rate with a unit, or a one-off at(). */
const SCHEDULE = /^(cron\((\S+ ){5}\S+\)|rate\(\d+ (minute|minutes|hour|hours|day|days)\)|at\(\S+\))$/;

const TIER_KEYS = ['schedule', 'minFiles', 'minAgeSeconds', 'enabled'];

function tierSettings(value: unknown, tier: TierName): TierSettings {
  const key = `${CONTEXT_KEY}.tiers.${tier}`;
  const json = section(value, key, TIER_KEYS);
  const defaults = STACK_DEFAULTS.tiers[tier];
  const schedule = str(json, key, 'schedule') ?? defaults.schedule;
  if (!SCHEDULE.test(schedule)) {
    fail(`${key}.schedule`, `must be a Scheduler expression like "cron(10 * * * ? *)" or "rate(1 hour)"`);
  }
  return {
    schedule,
    minFiles: int(json, key, 'minFiles', defaults.minFiles, 1, 100_000),
    minAgeSeconds: int(json, key, 'minAgeSeconds', defaults.minAgeSeconds, 0, 366 * 86_400),
    enabled: bool(json, key, 'enabled', defaults.enabled),
  };
}

function retentionSettings(value: unknown): RetentionSettings {
  const key = `${CONTEXT_KEY}.retention`;
  const json = section(value, key, ['rules', 'bufferHours', 'schedule', 'enabled']);
  const defaults = STACK_DEFAULTS.retention;
  const schedule = str(json, key, 'schedule') ?? defaults.schedule;
  if (!SCHEDULE.test(schedule)) {
    fail(`${key}.schedule`, `must be a Scheduler expression like "cron(0 5 * * ? *)" or "rate(1 day)"`);
  }
  const raw = json.rules ?? defaults.rules;
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    fail(`${key}.rules`, 'must be an object of table path to days, e.g. {"mydb/cpu/": 30, "*": 365}');
  }
  // Days and table paths are checked by the core's parser (parseStackConfig runs it), with the layout.
  const rules = Object.fromEntries(Object.entries(raw as Json).filter(([name]) => !name.startsWith('//')));
  return {
    rules: rules as Record<string, number>,
    bufferHours: int(json, key, 'bufferHours', defaults.bufferHours, 0, 24 * 36_500),
    schedule,
    enabled: bool(json, key, 'enabled', defaults.enabled),
  };
}

function lambdaSize(
  value: unknown,
  which: 'compact' | 'partitionSteps' | 'others',
  defaultTimeoutSeconds: number,
): LambdaSize {
  const key = `${CONTEXT_KEY}.lambda.${which}`;
  const json = section(value, key, ['memoryMb', 'ephemeralStorageMb', 'timeoutSeconds']);
  const defaults = { ...STACK_DEFAULTS.lambda[which], timeoutSeconds: defaultTimeoutSeconds };
  // Lambda's own limits.
  return {
    memoryMb: int(json, key, 'memoryMb', defaults.memoryMb, 128, 10_240),
    ephemeralStorageMb: int(json, key, 'ephemeralStorageMb', defaults.ephemeralStorageMb, 512, 10_240),
    timeoutSeconds: int(json, key, 'timeoutSeconds', defaults.timeoutSeconds, 1, 900),
  };
}

/** `undefined` keeps the default; the CLI's `-c compactor=...` arrives as a JSON string. */
function rawContext(value: unknown): unknown {
  if (typeof value !== 'string') return value;
  try {
    return JSON.parse(value);
  } catch {
    return fail(CONTEXT_KEY, 'must be a JSON object (it did not parse as JSON)');
  }
}

function normalisePrefix(prefix: string): string {
  const key = `${CONTEXT_KEY}.dataPrefix`;
  if (prefix.startsWith('/')) fail(key, `must not start with "/", got "${prefix}"`);
  // The prefix ends up in IAM resource ARNs, where * and ? are wildcards.
  if (/[*?]/.test(prefix)) fail(key, `must not contain "*" or "?", got "${prefix}"`);
  if (prefix.split('/').some((s) => s === '..' || s === '.')) fail(key, `must not hold "." or ".." segments`);
  if (prefix === '' || prefix.endsWith('/')) return prefix;
  return `${prefix}/`;
}

/**
 * IAM names a KMS key only by its key ARN: an alias ARN in a policy's Resource controls the alias
 * operations, not the key (https://docs.aws.amazon.com/kms/latest/developerguide/cmks-in-iam-policies.html).
 */
const KMS_KEY_ARN = /^arn:aws(-[a-z]+)*:kms:[a-z0-9-]+:\d{12}:key\/[A-Za-z0-9-]+$/;

function bucketSettings(value: unknown): BucketSettings {
  const key = `${CONTEXT_KEY}.bucket`;
  const json = section(value, key, ['create', 'name', 'encryption', 'kmsKeyArn']);
  const create = bool(json, key, 'create', true);
  const name = str(json, key, 'name');
  if (name !== undefined && !/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(name)) {
    fail(`${key}.name`, `is not a valid S3 bucket name: "${name}"`);
  }
  if (!create && name === undefined) {
    fail(`${key}.name`, 'is required when bucket.create is false (the bucket to import)');
  }
  const kmsKeyArn = str(json, key, 'kmsKeyArn');
  if (kmsKeyArn !== undefined && !KMS_KEY_ARN.test(kmsKeyArn)) {
    fail(
      `${key}.kmsKeyArn`,
      kmsKeyArn.includes(':alias/')
        ? `must be the key's ARN (arn:aws:kms:<region>:<account>:key/<key id>), not an alias: IAM grants name a key by its key ARN; got "${kmsKeyArn}"`
        : `is not a KMS key ARN (arn:aws:kms:<region>:<account>:key/<key id>): "${kmsKeyArn}"`,
    );
  }
  const encryption = str(json, key, 'encryption') ?? (kmsKeyArn === undefined ? 's3' : 'kms');
  if (encryption !== 's3' && encryption !== 'kms') {
    fail(`${key}.encryption`, `must be "s3" (SSE-S3) or "kms" (SSE-KMS), got "${encryption}"`);
  }
  if (encryption === 's3' && kmsKeyArn !== undefined) {
    fail(
      `${key}.kmsKeyArn`,
      'names a KMS key, but bucket.encryption is "s3": set it to "kms" or drop the key',
    );
  }
  if (!create && encryption === 'kms' && kmsKeyArn === undefined) {
    fail(
      `${key}.kmsKeyArn`,
      'is required for an imported SSE-KMS bucket: the key ARN of its default encryption, which every step needs kms:Decrypt and kms:GenerateDataKey on',
    );
  }
  return { create, name, encryption, kmsKeyArn };
}

/**
 * Why the layout refuses the daily tier, if it does. A layout the core rejects is reported by the
 * core's parser below, with the `context compactor:` prefix.
 */
function layoutRefusal(
  layout: string,
  partitionSegments: readonly string[] | undefined,
  dataSuffix: string | undefined,
): string | undefined {
  try {
    return Layout.create(layout, '', {
      ...(partitionSegments !== undefined ? { partitionSegments } : {}),
      ...(dataSuffix !== undefined ? { dataSuffix } : {}),
    }).tierRefusal('daily');
  } catch (error) {
    if (error instanceof ConfigError) return undefined;
    throw error;
  }
}

/** Parses the `compactor` context value; `undefined` gives every default. */
export function parseStackConfig(value: unknown): StackConfig {
  const json = section(rawContext(value), CONTEXT_KEY, [
    'bucket',
    'dataPrefix',
    'layout',
    'partitionSegments',
    'dataSuffix',
    'tiers',
    'retention',
    'quietSeconds',
    'targetFileBytes',
    'rowGroupSize',
    'maxJobBytes',
    'maxJobFiles',
    'sortKeys',
    'timeColumn',
    'dedup',
    'naiveTimestampsUtc',
    'timeUnits',
    'planning',
    'map',
    'lambda',
    'alarmEmail',
    'metricsNamespace',
    'removalPolicy',
  ]);
  const k = CONTEXT_KEY;
  const d = STACK_DEFAULTS;

  const bucket = bucketSettings(json.bucket);

  const tiersJson = section(json.tiers, `${k}.tiers`, TIERS);
  const tiers = {
    hourly: tierSettings(tiersJson.hourly, 'hourly'),
    daily: tierSettings(tiersJson.daily, 'daily'),
    monthly: tierSettings(tiersJson.monthly, 'monthly'),
  };
  const partitionSegments = json.partitionSegments as readonly string[] | undefined;
  if (
    partitionSegments !== undefined &&
    (!Array.isArray(partitionSegments) || partitionSegments.some((s) => typeof s !== 'string'))
  ) {
    fail(
      `${k}.partitionSegments`,
      `must be a list of the layout's segments, got ${JSON.stringify(partitionSegments)}`,
    );
  }
  const dataSuffix = str(json, k, 'dataSuffix');
  // A layout whose readers would never see daily outputs (hive, firehose) gets no daily schedule
  // by default, and turning it on fails synth with the reason (Layout.tierRefusal).
  const layoutName = str(json, k, 'layout') ?? d.layout;
  const dailyRefusal = layoutRefusal(layoutName, partitionSegments, dataSuffix);
  if (dailyRefusal !== undefined) {
    if (section(tiersJson.daily, `${k}.tiers.daily`, TIER_KEYS).enabled === true) {
      fail(`${k}.tiers.daily.enabled`, `cannot be true: ${dailyRefusal}`);
    }
    tiers.daily = { ...tiers.daily, enabled: false };
  }

  const sortKeys = json.sortKeys ?? d.sortKeys;
  if (!Array.isArray(sortKeys) || sortKeys.some((s) => typeof s !== 'string' || s === '')) {
    fail(`${k}.sortKeys`, `must be a list of column names, got ${JSON.stringify(sortKeys)}`);
  }

  // Table paths are the keys, so only the shape is checked here; the core's parser (below)
  // checks each table and setting, and its errors name them.
  const dedupJson = json.dedup ?? d.dedup;
  if (typeof dedupJson !== 'object' || dedupJson === null || Array.isArray(dedupJson)) {
    fail(`${k}.dedup`, `must be an object of table path -> {"mode": ...}, got ${JSON.stringify(dedupJson)}`);
  }
  const dedup = Object.fromEntries(
    Object.entries(dedupJson as Json).filter(([table]) => !table.startsWith('//')),
  ) as Record<string, DedupInput>;

  const naiveTimestampsUtc = json.naiveTimestampsUtc ?? d.naiveTimestampsUtc;
  if (!Array.isArray(naiveTimestampsUtc) || naiveTimestampsUtc.some((t) => typeof t !== 'string')) {
    fail(
      `${k}.naiveTimestampsUtc`,
      `must be a list of table paths, got ${JSON.stringify(naiveTimestampsUtc)}`,
    );
  }

  const timeUnits = json.timeUnits ?? d.timeUnits;
  if (typeof timeUnits !== 'object' || timeUnits === null || Array.isArray(timeUnits)) {
    fail(
      `${k}.timeUnits`,
      `must be an object of table path -> "s" | "ms" | "us" | "ns", got ${JSON.stringify(timeUnits)}`,
    );
  }

  const mapJson = section(json.map, `${k}.map`, [
    'maxConcurrency',
    'toleratedFailurePercentage',
    'childExecutionType',
  ]);
  const childExecutionType = str(mapJson, `${k}.map`, 'childExecutionType') ?? d.map.childExecutionType;
  if (!(CHILD_EXECUTION_TYPES as readonly string[]).includes(childExecutionType)) {
    fail(
      `${k}.map.childExecutionType`,
      `must be "EXPRESS" (per-partition chains of at most five minutes) or "STANDARD" (bigger jobs), got ${JSON.stringify(childExecutionType)}`,
    );
  }
  // Job bounds and the chain's Lambda timeouts default by child type.
  const child = CHILD_DEFAULTS[childExecutionType as ChildExecutionType];
  const lambdaJson = section(json.lambda, `${k}.lambda`, ['compact', 'partitionSteps', 'others']);

  const alarmEmail = str(json, k, 'alarmEmail');
  if (alarmEmail !== undefined && !/^[^@\s]+@[^@\s]+\.[^@\s]+$/.test(alarmEmail)) {
    fail(`${k}.alarmEmail`, `is not an email address: "${alarmEmail}"`);
  }
  const metricsNamespace = str(json, k, 'metricsNamespace') ?? d.metricsNamespace;
  if (!/^[A-Za-z0-9_./#:-]{1,255}$/.test(metricsNamespace) || metricsNamespace.startsWith('AWS/')) {
    fail(`${k}.metricsNamespace`, `is not a custom CloudWatch namespace: "${metricsNamespace}"`);
  }
  const removalPolicy = str(json, k, 'removalPolicy') ?? d.removalPolicy;
  if (removalPolicy !== 'retain' && removalPolicy !== 'destroy') {
    fail(`${k}.removalPolicy`, `must be "retain" or "destroy", got "${removalPolicy}"`);
  }

  const config: StackConfig = {
    bucket,
    dataPrefix: normalisePrefix(str(json, k, 'dataPrefix') ?? d.dataPrefix),
    layout: layoutName,
    partitionSegments,
    dataSuffix,
    tiers,
    retention: retentionSettings(json.retention),
    quietSeconds: int(json, k, 'quietSeconds', d.quietSeconds, 0, 86_400),
    targetFileBytes: int(json, k, 'targetFileBytes', d.targetFileBytes, 1, Number.MAX_SAFE_INTEGER),
    rowGroupSize: int(json, k, 'rowGroupSize', d.rowGroupSize, 1, Number.MAX_SAFE_INTEGER),
    maxJobBytes: int(json, k, 'maxJobBytes', child.maxJobBytes, 1, Number.MAX_SAFE_INTEGER),
    maxJobFiles: int(json, k, 'maxJobFiles', child.maxJobFiles, 1, Number.MAX_SAFE_INTEGER),
    sortKeys: sortKeys as string[],
    timeColumn: str(json, k, 'timeColumn') ?? d.timeColumn,
    dedup,
    naiveTimestampsUtc: naiveTimestampsUtc as string[],
    timeUnits: timeUnits as Record<string, TimeUnit>,
    planning: (json.planning ?? d.planning) as NonNullable<ConfigInput['planning']>,
    // Distributed Map limits.
    map: {
      maxConcurrency: int(mapJson, `${k}.map`, 'maxConcurrency', d.map.maxConcurrency, 1, 10_000),
      toleratedFailurePercentage: int(
        mapJson,
        `${k}.map`,
        'toleratedFailurePercentage',
        d.map.toleratedFailurePercentage,
        0,
        100,
      ),
      childExecutionType: childExecutionType as ChildExecutionType,
    },
    lambda: {
      compact: lambdaSize(lambdaJson.compact, 'compact', child.compactTimeoutSeconds),
      partitionSteps: lambdaSize(
        lambdaJson.partitionSteps,
        'partitionSteps',
        child.partitionStepTimeoutSeconds,
      ),
      others: lambdaSize(lambdaJson.others, 'others', d.lambda.others.timeoutSeconds),
    },
    alarmEmail,
    metricsNamespace,
    removalPolicy,
  };

  if (config.maxJobBytes > config.lambda.compact.ephemeralStorageMb * MiB) {
    // Inputs are downloaded to /tmp before merging; a job larger than /tmp cannot finish.
    fail(
      `${k}.maxJobBytes`,
      `(${config.maxJobBytes}) must fit the compact Lambda's /tmp (lambda.compact.ephemeralStorageMb ${config.lambda.compact.ephemeralStorageMb} MB)`,
    );
  }
  if (config.map.childExecutionType === 'EXPRESS') {
    const refusal = expressRefusal({
      compactTimeoutSeconds: config.lambda.compact.timeoutSeconds,
      partitionStepTimeoutSeconds: config.lambda.partitionSteps.timeoutSeconds,
      maxJobBytes: config.maxJobBytes,
      maxJobFiles: config.maxJobFiles,
    });
    if (refusal) fail(`${k}.${refusal.key}`, refusal.message);
  }
  try {
    parseConfig(lambdaConfigInput(config));
  } catch (error) {
    if (error instanceof ConfigError)
      throw new ConfigError(`context ${k}: ${error.message}`, { cause: error });
    throw error;
  }
  return config;
}

/** What the Lambdas receive as COMPACTOR_CONFIG: the core's ConfigInput. */
export function lambdaConfigInput(config: StackConfig): ConfigInput {
  return {
    layout: config.layout,
    dataPrefix: config.dataPrefix,
    ...(config.partitionSegments !== undefined ? { partitionSegments: config.partitionSegments } : {}),
    ...(config.dataSuffix !== undefined ? { dataSuffix: config.dataSuffix } : {}),
    tiers: {
      hourly: { minFiles: config.tiers.hourly.minFiles, minAgeSeconds: config.tiers.hourly.minAgeSeconds },
      daily: { minFiles: config.tiers.daily.minFiles, minAgeSeconds: config.tiers.daily.minAgeSeconds },
      // Hourly's and daily's `enabled` only pause their schedules; monthly's also turns the tier on
      // (the daily tier then hands a month's L2 files to it).
      monthly: {
        enabled: config.tiers.monthly.enabled,
        minFiles: config.tiers.monthly.minFiles,
        minAgeSeconds: config.tiers.monthly.minAgeSeconds,
      },
    },
    retention: { rules: config.retention.rules, bufferHours: config.retention.bufferHours },
    quietSeconds: config.quietSeconds,
    timeColumn: config.timeColumn,
    sortKeys: config.sortKeys,
    // Only when set: the Lambdas' environment stays as it was for stacks without dedup.
    ...(Object.keys(config.dedup).length > 0 ? { dedup: config.dedup } : {}),
    ...(config.naiveTimestampsUtc.length > 0 ? { naiveTimestampsUtc: config.naiveTimestampsUtc } : {}),
    ...(Object.keys(config.timeUnits).length > 0 ? { timeUnits: config.timeUnits } : {}),
    ...(Object.keys(config.planning).length > 0 ? { planning: config.planning } : {}),
    targetFileBytes: config.targetFileBytes,
    rowGroupSize: config.rowGroupSize,
    maxJobBytes: config.maxJobBytes,
    maxJobFiles: config.maxJobFiles,
    leaseSeconds:
      Math.max(
        config.lambda.compact.timeoutSeconds,
        config.lambda.partitionSteps.timeoutSeconds,
        config.lambda.others.timeoutSeconds,
      ) + LEASE_MARGIN_SECONDS,
  };
}

export function lambdaConfigJson(config: StackConfig): string {
  return JSON.stringify(lambdaConfigInput(config));
}
