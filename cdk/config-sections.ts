/**
 * What config.ts's parser does beside the schema (config-schema.ts): read the context (a JSON
 * string from the CLI), drop its comments, normalise the data prefix, check the bucket's keys
 * against each other and ask the layout which tiers it allows. Each failure is a ConfigError
 * naming the key (`context compactor.bucket.name ...`).
 */

import { ConfigError } from '../functions/core/errors.ts';
import { Layout } from '../functions/core/layout.ts';
import { type BucketSettings, CONTEXT_KEY, STACK_DEFAULTS } from './config-defaults.ts';
import type { StackContext } from './config-schema.ts';

export function fail(key: string, message: string): never {
  throw new ConfigError(`context ${key} ${message}`);
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

/** The bucket's keys checked against each other (the schema checks each one). */
export function bucketSettings(json: StackContext['bucket'] & object): BucketSettings {
  const key = `${CONTEXT_KEY}.bucket`;
  const create = json.create ?? STACK_DEFAULTS.bucket.create;
  const { name, kmsKeyArn } = json;
  if (!create && name === undefined) {
    fail(`${key}.name`, 'is required when bucket.create is false (the bucket to import)');
  }
  const encryption = json.encryption ?? (kmsKeyArn === undefined ? 's3' : 'kms');
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

/** The context without its "//" keys: cdk.json has no other way to document a setting. */
export function withoutComments(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutComments);
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(
    Object.entries(value)
      .filter(([key]) => !key.startsWith('//'))
      .map(([key, entry]) => [key, withoutComments(entry)]),
  );
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
