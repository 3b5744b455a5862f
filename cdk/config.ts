/**
 * The stack's configuration: one object under the context key `compactor` (cdk.json, or
 * `-c compactor='{"dataPrefix":"lake/"}'`, where the CLI passes a JSON string), parsed once by
 * the app. Every field is optional; errors name the key (`compactor.tiers.hourly.minFiles`).
 *
 * The protocol settings are also validated by the core's own parser at synth time, so a value
 * the Lambdas would reject fails `cdk synth` with the same message instead of every execution.
 */

import { type ConfigInput, parseConfig, TIERS } from '../functions/core/config.ts';
import type { DedupInput, TimeUnit } from '../functions/core/config-tables.ts';
import { ConfigError } from '../functions/core/errors.ts';
import {
  CHILD_DEFAULTS,
  CHILD_EXECUTION_TYPES,
  type ChildExecutionType,
  expressRefusal,
} from './child-budget.ts';
import { CONTEXT_KEY, MiB, STACK_DEFAULTS, type StackConfig } from './config-defaults.ts';
import {
  bucketSettings,
  fail,
  int,
  type Json,
  lambdaSize,
  layoutRefusal,
  normalisePrefix,
  rawContext,
  retentionSettings,
  section,
  str,
  TIER_KEYS,
  tierSettings,
} from './config-sections.ts';
import { lambdaConfigInput } from './lambda-config.ts';

// The types, defaults and the Lambdas' config live beside this file; importers take them from here.
export {
  type BucketSettings,
  CONTEXT_KEY,
  type LambdaSize,
  type RetentionSettings,
  STACK_DEFAULTS,
  type StackConfig,
  type TierSettings,
} from './config-defaults.ts';
export { lambdaConfigInput, lambdaConfigJson } from './lambda-config.ts';

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
