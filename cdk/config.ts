/**
 * The stack's configuration: one object under the context key `compactor` (cdk.json, or
 * `-c compactor='{"dataPrefix":"lake/"}'`, where the CLI passes a JSON string), parsed once by
 * the app. Every field is optional; errors name the key (`compactor.tiers.hourly.minFiles`).
 *
 * The protocol settings are also validated by the core's own parser at synth time, so a value
 * the Lambdas would reject fails `cdk synth` with the same message instead of every execution.
 */

import { parseConfig } from '../functions/core/config.ts';
import { parseSettings } from '../functions/core/config-schema.ts';
import { ConfigError } from '../functions/core/errors.ts';
import { CHILD_DEFAULTS, expressRefusal } from './child-budget.ts';
import { CONTEXT_KEY, MiB, STACK_DEFAULTS, type StackConfig } from './config-defaults.ts';
import { stackContextSchema } from './config-schema.ts';
import {
  bucketSettings,
  fail,
  layoutRefusal,
  normalisePrefix,
  rawContext,
  withoutComments,
} from './config-sections.ts';
import { lambdaConfigInput } from './lambda-config.ts';

// The types, defaults and the Lambdas' config live beside this file; importers take them from here.
export {
  type BucketSettings,
  type CanarySettings,
  CONTEXT_KEY,
  type LambdaSize,
  type RetentionSettings,
  STACK_DEFAULTS,
  type StackConfig,
  type TierSettings,
} from './config-defaults.ts';
export { lambdaConfigInput, lambdaConfigJson } from './lambda-config.ts';

/**
 * Parses the `compactor` context value; `undefined` gives every default. The schema checks each
 * key; what follows fills the defaults that depend on other keys and checks keys against each other.
 */
export function parseStackConfig(value: unknown): StackConfig {
  const k = CONTEXT_KEY;
  const json = parseSettings(stackContextSchema, withoutComments(rawContext(value)) ?? {}, `context ${k}`);
  const d = STACK_DEFAULTS;

  const tiers = {
    hourly: { ...d.tiers.hourly, ...json.tiers?.hourly },
    daily: { ...d.tiers.daily, ...json.tiers?.daily },
    monthly: { ...d.tiers.monthly, ...json.tiers?.monthly },
  };
  // A layout whose readers would never see daily outputs (hive, firehose) gets no daily schedule
  // by default, and turning it on fails synth with the reason (Layout.tierRefusal).
  const layout = json.layout ?? d.layout;
  const dailyRefusal = layoutRefusal(layout, json.partitionSegments, json.dataSuffix);
  if (dailyRefusal !== undefined) {
    if (json.tiers?.daily?.enabled === true)
      fail(`${k}.tiers.daily.enabled`, `cannot be true: ${dailyRefusal}`);
    tiers.daily = { ...tiers.daily, enabled: false };
  }

  // Job bounds and the chain's Lambda timeouts default by child type.
  const childExecutionType = json.map?.childExecutionType ?? d.map.childExecutionType;
  const child = CHILD_DEFAULTS[childExecutionType];
  const config: StackConfig = {
    bucket: bucketSettings(json.bucket ?? {}),
    dataPrefix: normalisePrefix(json.dataPrefix ?? d.dataPrefix),
    layout,
    partitionSegments: json.partitionSegments,
    dataSuffix: json.dataSuffix,
    tiers,
    retention: { ...d.retention, ...json.retention },
    quietSeconds: json.quietSeconds ?? d.quietSeconds,
    targetFileBytes: json.targetFileBytes ?? d.targetFileBytes,
    rowGroupSize: json.rowGroupSize ?? d.rowGroupSize,
    maxJobBytes: json.maxJobBytes ?? child.maxJobBytes,
    maxJobFiles: json.maxJobFiles ?? child.maxJobFiles,
    maxJobsPerPartition: json.maxJobsPerPartition ?? d.maxJobsPerPartition,
    smallJobsPerItem: json.smallJobsPerItem ?? child.smallJobsPerItem,
    receiptDays: json.receiptDays ?? d.receiptDays,
    sortKeys: json.sortKeys ?? d.sortKeys,
    timeColumn: json.timeColumn ?? d.timeColumn,
    timeColumns: json.timeColumns ?? d.timeColumns,
    dedup: json.dedup ?? d.dedup,
    naiveTimestampsUtc: json.naiveTimestampsUtc ?? d.naiveTimestampsUtc,
    timeUnits: json.timeUnits ?? d.timeUnits,
    planning: json.planning ?? d.planning,
    map: { ...d.map, ...json.map, childExecutionType },
    lambda: {
      compact: { ...d.lambda.compact, timeoutSeconds: child.compactTimeoutSeconds, ...json.lambda?.compact },
      partitionSteps: {
        ...d.lambda.partitionSteps,
        timeoutSeconds: child.partitionStepTimeoutSeconds,
        ...json.lambda?.partitionSteps,
      },
      others: { ...d.lambda.others, ...json.lambda?.others },
    },
    canary: { ...d.canary, ...json.canary },
    alarmEmail: json.alarmEmail,
    metricsNamespace: json.metricsNamespace ?? d.metricsNamespace,
    removalPolicy: json.removalPolicy ?? d.removalPolicy,
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
      compactMemoryMb: config.lambda.compact.memoryMb,
      compactTimeoutSeconds: config.lambda.compact.timeoutSeconds,
      partitionStepTimeoutSeconds: config.lambda.partitionSteps.timeoutSeconds,
      maxJobBytes: config.maxJobBytes,
      maxJobFiles: config.maxJobFiles,
    });
    if (refusal) fail(`${k}.${refusal.key}`, refusal.message);
  }
  // What only the layout can tell (table paths, the tiers it allows) is the core's, in its words.
  try {
    parseConfig(lambdaConfigInput(config));
  } catch (error) {
    if (error instanceof ConfigError)
      throw new ConfigError(`context ${k}: ${error.message}`, { cause: error });
    throw error;
  }
  return config;
}
