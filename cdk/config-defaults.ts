/**
 * The stack's configuration as the app uses it: the typed settings the `compactor` context
 * parses into (config.ts parses it) and the default of every one.
 */

import { type LambdaSize, METRICS_NAMESPACE } from '../functions/contract.ts';
import { type ConfigInput, DEFAULTS, type TierName } from '../functions/core/config.ts';
import type { DedupInput, TimeUnit } from '../functions/core/config-tables.ts';
import { CHILD_DEFAULTS, type ChildExecutionType } from './child-budget.ts';

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
  /** The tier's backlog alarm threshold (the core's TierConfig.behindAfterSeconds). */
  readonly behindAfterSeconds: number;
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

/** The scheduled canary (cdk/constructs/canary.ts): deployed only when enabled. */
export interface CanarySettings {
  readonly enabled: boolean;
  /** EventBridge Scheduler expression, evaluated in UTC. */
  readonly schedule: string;
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
  readonly maxJobsPerPartition: number;
  readonly smallJobsPerItem: number;
  readonly receiptDays: number;
  readonly sortKeys: readonly string[];
  readonly timeColumn: string;
  /** Table path -> its time column, where not `timeColumn`; validated by the core's parser. */
  readonly timeColumns: Readonly<Record<string, string>>;
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
  readonly canary: CanarySettings;
  readonly alarmEmail: string | undefined;
  readonly metricsNamespace: string;
  readonly removalPolicy: 'retain' | 'destroy';
}

export const MiB = 1024 * 1024;

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
  maxJobsPerPartition: DEFAULTS.maxJobsPerPartition,
  smallJobsPerItem: CHILD_DEFAULTS.EXPRESS.smallJobsPerItem,
  receiptDays: DEFAULTS.receiptDays,
  sortKeys: [],
  timeColumn: DEFAULTS.timeColumn,
  timeColumns: {},
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
  // Daily, away from the hourly tier's minute: an hourly run would take the canary's hour too.
  canary: { enabled: false, schedule: 'cron(40 2 * * ? *)' },
  alarmEmail: undefined,
  metricsNamespace: METRICS_NAMESPACE,
  removalPolicy: 'retain',
};
