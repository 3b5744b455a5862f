/**
 * What the stack gives its Lambdas as COMPACTOR_CONFIG: the core's ConfigInput, derived from the
 * stack's configuration (and the lease every job gets, from the Lambdas' timeouts).
 */

import type { ConfigInput } from '../functions/core/config.ts';
import type { StackConfig, TierSettings } from './config-defaults.ts';

/** A job's lease must outlive any step's Lambda, or recovery could take over a job still running. */
const LEASE_MARGIN_SECONDS = 300;

/** What the Lambdas receive as COMPACTOR_CONFIG: the core's ConfigInput. */
export function lambdaConfigInput(config: StackConfig): ConfigInput {
  return {
    layout: config.layout,
    dataPrefix: config.dataPrefix,
    ...(config.partitionSegments !== undefined ? { partitionSegments: config.partitionSegments } : {}),
    ...(config.dataSuffix !== undefined ? { dataSuffix: config.dataSuffix } : {}),
    tiers: {
      hourly: tierInput(config.tiers.hourly),
      daily: tierInput(config.tiers.daily),
      // Hourly's and daily's `enabled` only pause their schedules; monthly's also turns the tier on
      // (the daily tier then hands a month's L2 files to it).
      monthly: { enabled: config.tiers.monthly.enabled, ...tierInput(config.tiers.monthly) },
    },
    retention: { rules: config.retention.rules, bufferHours: config.retention.bufferHours },
    quietSeconds: config.quietSeconds,
    timeColumn: config.timeColumn,
    ...(Object.keys(config.timeColumns).length > 0 ? { timeColumns: config.timeColumns } : {}),
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
    maxJobsPerPartition: config.maxJobsPerPartition,
    smallJobsPerItem: config.smallJobsPerItem,
    receiptDays: config.receiptDays,
    leaseSeconds:
      Math.max(
        config.lambda.compact.timeoutSeconds,
        config.lambda.partitionSteps.timeoutSeconds,
        config.lambda.others.timeoutSeconds,
      ) + LEASE_MARGIN_SECONDS,
  };
}

/** A tier's settings the core reads (the schedule is the stack's alone). */
function tierInput(tier: TierSettings) {
  return {
    minFiles: tier.minFiles,
    minAgeSeconds: tier.minAgeSeconds,
    behindAfterSeconds: tier.behindAfterSeconds,
  };
}

export function lambdaConfigJson(config: StackConfig): string {
  return JSON.stringify(lambdaConfigInput(config));
}
