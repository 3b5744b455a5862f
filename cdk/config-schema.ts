/**
 * The `compactor` context's schema: the core's settings (functions/core/config-schema.ts) at the
 * same keys, a schedule for each tier and for retention, and what only the stack has (the bucket,
 * the Map, the Lambdas' sizes, alarms). cdk/compactor-context.schema.json and the tables of
 * docs/configuration.md are generated from it (test/cdk/config-reference.test.ts fails on drift).
 */

import * as z from 'zod';
import {
  flag,
  oneOf,
  retentionShape,
  section,
  sharedShape,
  text,
  tierShape,
  wholeNumber,
} from '../functions/core/config-schema.ts';
import { SMALL_COMPACT } from '../functions/core/lambda-sizing.ts';
import { CHILD_EXECUTION_TYPES } from './child-budget.ts';

/**
 * EventBridge Scheduler's expressions: cron with six fields, rate with a unit, or a one-off at()
 * (https://docs.aws.amazon.com/scheduler/latest/UserGuide/schedule-types.html).
 */
const SCHEDULE = /^(cron\((\S+ ){5}\S+\)|rate\(\d+ (minute|minutes|hour|hours|day|days)\)|at\(\S+\))$/;

function schedule(example: string) {
  const error = `must be a Scheduler expression like "${example}" or "rate(1 hour)"`;
  return z.string({ error }).regex(SCHEDULE, { error });
}

/**
 * IAM names a KMS key only by its key ARN: an alias ARN in a policy's Resource controls the alias
 * operations, not the key (https://docs.aws.amazon.com/kms/latest/developerguide/cmks-in-iam-policies.html).
 */
const KMS_KEY_ARN = /^arn:aws(-[a-z]+)*:kms:[a-z0-9-]+:\d{12}:key\/[A-Za-z0-9-]+$/;

/** https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html */
const BUCKET_NAME = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;

/**
 * A custom namespace must not begin with "AWS/", reserved for AWS's own metrics
 * (https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_PutMetricData.html, Namespace);
 * the characters are the ones CloudWatch's examples use, a subset of what it accepts.
 */
const NAMESPACE = /^[A-Za-z0-9_./#:-]{1,255}$/;

function tier(scheduleExample: string, what: string) {
  return section(
    {
      schedule: schedule(scheduleExample).describe(
        `the ${what} tier's EventBridge Scheduler expression (UTC)`,
      ),
      ...tierShape,
      enabled: tierShape.enabled.describe(
        what === 'monthly'
          ? 'true turns the opt-in monthly tier on (and its schedule)'
          : 'false pauses the schedule (the tier itself always runs when started)',
      ),
    },
    '{"minFiles": 10}',
  ).describe(`the ${what} tier`);
}

/** Lambda's own limits (https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html). */
function lambdaSize(what: string) {
  return section(
    {
      memoryMb: wholeNumber(128, 10_240).describe(`memory (MB) of ${what}`),
      ephemeralStorageMb: wholeNumber(512, 10_240).describe(`ephemeral storage (\`/tmp\`, MB) of ${what}`),
      timeoutSeconds: wholeNumber(1, 900).describe(`timeout (seconds) of ${what}`),
    },
    '{"memoryMb": 512}',
  ).describe(what);
}

export const stackContextSchema = section(
  {
    bucket: section(
      {
        create: flag().describe(
          'true: the stack creates (and owns) the data bucket; false: it imports `name`',
        ),
        name: z
          .string({ error: 'must be an S3 bucket name' })
          .regex(BUCKET_NAME, { error: 'is not a valid S3 bucket name' })
          .describe(
            'the bucket to import (required when `create` is false), or the physical name of a created one',
          ),
        encryption: oneOf(['s3', 'kms'] as const, 'SSE-S3 or SSE-KMS').describe(
          'the default encryption: `kms` uses a customer managed key the stack creates (automatic rotation, S3 Bucket Keys), or `kmsKeyArn`',
        ),
        kmsKeyArn: z
          .string({ error: 'must be a KMS key ARN' })
          .regex(KMS_KEY_ARN, {
            error: (issue) =>
              String(issue.input).includes(':alias/')
                ? "must be the key's ARN (arn:aws:kms:<region>:<account>:key/<key id>), not an alias: IAM grants name a key by its key ARN"
                : 'is not a KMS key ARN (arn:aws:kms:<region>:<account>:key/<key id>)',
          })
          .describe(
            "the SSE-KMS key's ARN (not an alias) of an imported bucket, or the key a created `kms` bucket uses; every role gets kms:Decrypt and kms:GenerateDataKey on it (the state machine's also kms:Encrypt)",
          ),
      },
      '{"create": false, "name": "my-lake"}',
    ).describe('the data bucket: created by the stack, or imported'),
    ...sharedShape,
    tiers: section(
      {
        hourly: tier('cron(10 * * * ? *)', 'hourly'),
        daily: tier('cron(30 3 * * ? *)', 'daily'),
        monthly: tier('cron(45 4 * * ? *)', 'monthly'),
      },
      '{"hourly": {"minFiles": 10}}',
    ).describe('one object per tier'),
    retention: section(
      {
        ...retentionShape,
        schedule: schedule('cron(0 5 * * ? *)').describe(
          'the retention schedule, deployed only when `rules` is not empty',
        ),
        enabled: flag().describe('false pauses the retention schedule'),
      },
      '{"rules": {"*": 365}}',
    ).describe('expiry of old files, off until a rule is set'),
    canary: section(
      {
        enabled: flag().describe(
          'true deploys the scheduled canary: a state machine that writes a tiny table of its own, compacts it through the compaction state machine, checks its rows and removes it, with an alarm (see [the canary](operations.md#the-scheduled-canary))',
        ),
        schedule: schedule('cron(40 2 * * ? *)').describe(
          "the canary's EventBridge Scheduler expression (UTC)",
        ),
      },
      '{"enabled": true}',
    ).describe('the scheduled end-to-end canary, off by default'),
    map: section(
      {
        maxConcurrency: wholeNumber(1, 10_000).describe(
          'Map items run at once (each runs its jobs at once: up to `smallJobsPerItem` small ones)',
        ),
        toleratedFailurePercentage: wholeNumber(0, 100).describe(
          'share of failed Map items (percent; an item carries one job or several small jobs of one table, `smallJobsPerItem`) above which the Map fails the execution; a redrive re-runs the failed ones',
        ),
        childExecutionType: oneOf(
          CHILD_EXECUTION_TYPES,
          'per-partition chains of at most five minutes, or bigger jobs',
        ).describe(
          "the Map's child workflow per item: `EXPRESS` (at most five minutes each, billed by duration) or `STANDARD` (for bigger jobs); the job bounds and the chain's timeouts default by it, see [Express child workflows](#express-child-workflows)",
        ),
      },
      '{"maxConcurrency": 10}',
    ).describe('the Distributed Map over the planned partitions'),
    lambda: section(
      {
        compact: lambdaSize('the compact Lambda').describe(
          `the compact Lambda; with Express children, jobs of at most ${SMALL_COMPACT.maxJobBytes / 2 ** 20} MiB run on a second, ${SMALL_COMPACT.memoryMb} MB compact Lambda with the same timeout (see [compact function sizes](performance.md#compact-function-sizes))`,
        ),
        partitionSteps: lambdaSize('publish, verify, delete-inputs and clear-manifest'),
        others: lambdaSize("recover, plan and summary (the parent's steps)"),
      },
      '{"compact": {"memoryMb": 3008}}',
    ).describe('the sizes of the three groups of Lambdas'),
    alarmEmail: z
      .string({ error: 'must be an email address' })
      .regex(/^[^@\s]+@[^@\s]+\.[^@\s]+$/, { error: 'is not an email address' })
      .describe('SNS email subscription for the alarms'),
    metricsNamespace: text('"Compactor"')
      .regex(NAMESPACE, { error: 'is not a custom CloudWatch namespace' })
      .refine((ns) => !ns.startsWith('AWS/'), {
        error: 'is not a custom CloudWatch namespace (AWS/ is reserved)',
      })
      .describe('CloudWatch namespace of the EMF metrics'),
    removalPolicy: oneOf(['retain', 'destroy'] as const).describe(
      '`destroy` deletes a created bucket with the stack',
    ),
  },
  '{"dataPrefix": "lake/"}',
);

export type StackContext = z.output<typeof stackContextSchema>;
