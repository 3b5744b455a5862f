/**
 * The readers of the `compactor` context's parts, for config.ts's parser: a value of each type,
 * an object that rejects unknown keys, and each section (bucket, a tier, retention, a Lambda
 * size, the data prefix). Each failure is a ConfigError naming the key
 * (`context compactor.tiers.hourly.minFiles ...`).
 */

import type { LambdaSize } from '../functions/contract.ts';
import type { TierName } from '../functions/core/config.ts';
import { ConfigError } from '../functions/core/errors.ts';
import { Layout } from '../functions/core/layout.ts';
import {
  type BucketSettings,
  CONTEXT_KEY,
  type RetentionSettings,
  STACK_DEFAULTS,
  type TierSettings,
} from './config-defaults.ts';

export type Json = Record<string, unknown>;

export function fail(key: string, message: string): never {
  throw new ConfigError(`context ${key} ${message}`);
}

/** Reads an object and rejects unknown keys: a typo must not silently fall back to a default. */
export function section(value: unknown, key: string, allowed: readonly string[]): Json {
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

export function int(
  json: Json,
  key: string,
  name: string,
  fallback: number,
  min: number,
  max: number,
): number {
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

export function str(json: Json, key: string, name: string): string | undefined {
  const value = json[name];
  if (value === undefined) return undefined;
  if (typeof value !== 'string') fail(`${key}.${name}`, `must be a string, got ${JSON.stringify(value)}`);
  return value;
}

/** Scheduler accepts cron with six fields, rate with a unit, or a one-off at(). */
const SCHEDULE = /^(cron\((\S+ ){5}\S+\)|rate\(\d+ (minute|minutes|hour|hours|day|days)\)|at\(\S+\))$/;

export const TIER_KEYS = ['schedule', 'minFiles', 'minAgeSeconds', 'enabled'];

export function tierSettings(value: unknown, tier: TierName): TierSettings {
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

export function retentionSettings(value: unknown): RetentionSettings {
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

export function lambdaSize(
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
export function rawContext(value: unknown): unknown {
  if (typeof value !== 'string') return value;
  try {
    return JSON.parse(value);
  } catch {
    return fail(CONTEXT_KEY, 'must be a JSON object (it did not parse as JSON)');
  }
}

export function normalisePrefix(prefix: string): string {
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

export function bucketSettings(value: unknown): BucketSettings {
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
export function layoutRefusal(
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
