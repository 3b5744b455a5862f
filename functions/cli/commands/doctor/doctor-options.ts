/**
 * The usage text of `compactor doctor` (doctor.ts), and the options and dependencies its pieces
 * (doctor-*.ts) are given, apart from the command so the CLI's usage does not load the AWS SDKs
 * (the options' table is in ../options.ts). Only type imports of the SDKs.
 */

import type { CloudFormationClient } from '@aws-sdk/client-cloudformation';
import type { SchedulerClient } from '@aws-sdk/client-scheduler';
import type { SFNClient } from '@aws-sdk/client-sfn';
import type { ObjectStore } from '../../../core/object-store.ts';
import type { CliOptions } from '../../context.ts';
import { DOCTOR_TIMEOUT_S } from '../../options.ts';

export const DOCTOR_USAGE = `  doctor --stack NAME         after cdk deploy: probe the bucket, compact a canary table of its own
                              with an execution scoped to it, check its rows exactly and that no
                              state is left, remove it, and check each schedule started an execution
                              within its last two periods; prints what to fix. Also --state-machine
                              ARN --store s3://bucket/prefix, or --store FOLDER (the synthesized
                              definition run locally); --timeout SECONDS to wait (${DOCTOR_TIMEOUT_S})`;

export interface DoctorOptions extends CliOptions {
  readonly stack?: string;
  readonly 'state-machine'?: string;
  readonly timeout?: string;
  readonly context?: string;
  readonly json?: boolean;
}

export interface DoctorDeps {
  readonly cloudFormation?: CloudFormationClient;
  readonly scheduler?: SchedulerClient;
  readonly sfn?: SFNClient;
  /** The store of a bucket (default: the S3 adapter for the region); tests pass a stand-in. */
  readonly bucketStore?: (bucket: string, region: string) => ObjectStore;
  readonly sleep?: (ms: number) => Promise<void>;
  readonly now?: () => number;
  readonly env?: Readonly<Record<string, string | undefined>>;
}
