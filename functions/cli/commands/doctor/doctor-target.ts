/**
 * What `compactor doctor` (doctor.ts) checks: which of its three forms was asked for (a stack,
 * a state machine over a bucket, a local folder), and the target it resolves to (the store, the
 * configuration the Lambdas run with and, on AWS, the state machine and schedule group), with
 * the "stack outputs" row.
 *
 * AWS behaviour it relies on: DescribeStacks returns the stack's status and its Outputs
 * (OutputKey, OutputValue), and answers ValidationError for a stack that does not exist
 * https://docs.aws.amazon.com/AWSCloudFormation/latest/APIReference/API_DescribeStacks.html;
 * ListStackResources names the schedule group (ResourceType, PhysicalResourceId)
 * https://docs.aws.amazon.com/AWSCloudFormation/latest/APIReference/API_ListStackResources.html.
 */

import {
  CloudFormationClient,
  CloudFormationServiceException,
  DescribeStacksCommand,
  type DescribeStacksCommandOutput,
  ListStackResourcesCommand,
} from '@aws-sdk/client-cloudformation';
import { lambdaConfigInput, type StackConfig } from '../../../../cdk/config.ts';
import { createS3Client, S3Store } from '../../../adapters/s3-store/s3-store.ts';
import { type CompactorConfig, parseConfig } from '../../../core/config.ts';
import { ConfigError } from '../../../core/errors.ts';
import type { ObjectStore } from '../../../core/object-store.ts';
import { stackConfigOf } from '../../../local-runner/run.ts';
import type { CliIo } from '../../command.ts';
import { buildConfig, openStore } from '../../context.ts';
import { oneLine } from '../../format.ts';
import type { DoctorDeps, DoctorOptions } from './doctor-options.ts';
import { guard, type Report } from './doctor-report.ts';

const STATE_MACHINE_ARN = /^arn:aws[a-z-]*:states:([a-z0-9-]+):\d{12}:stateMachine:[^:]+$/;

export type Mode =
  | { readonly kind: 'stack'; readonly stack: string; readonly region: string }
  | {
      readonly kind: 'state-machine';
      readonly stateMachineArn: string;
      readonly region: string;
      readonly bucket: string;
      readonly dataPrefix: string;
    }
  | { readonly kind: 'local' };

/**
 * Options a deployed form would ignore: it checks the settings the stack was deployed with
 * (cdk.json's `compactor` context, or --context) against its own bucket on S3.
 */
const DEPLOYED_FORM_IGNORES = ['endpoint', 'layout', 'partition-segments', 'data-suffix'] as const;

function refuseIgnored(options: DoctorOptions, form: string): void {
  for (const name of DEPLOYED_FORM_IGNORES) {
    if (options[name] === undefined) continue;
    throw new ConfigError(
      name === 'endpoint'
        ? `--endpoint: ${form} checks the deployed bucket on S3: drop --endpoint`
        : `--${name}: ${form} checks the settings the stack was deployed with: drop --${name}, or pass them as you deployed them with --context`,
    );
  }
}

/** Which of the three forms was asked for; anything else is a usage error (exit 2). */
export function resolveMode(options: DoctorOptions, env: Readonly<Record<string, string | undefined>>): Mode {
  const machine = options['state-machine'];
  if (options.stack !== undefined) refuseIgnored(options, 'doctor --stack');
  else if (machine !== undefined) refuseIgnored(options, 'doctor --state-machine');
  else if (options.store !== undefined && options.timeout !== undefined) {
    throw new ConfigError(
      '--timeout is how long doctor waits for a deployed execution; doctor --store FOLDER runs in this process: drop --timeout',
    );
  }
  if (options.stack !== undefined) {
    if (machine !== undefined || options.store !== undefined) {
      throw new ConfigError(
        '--stack reads the state machine and the bucket from the stack outputs: drop --state-machine and --store',
      );
    }
    if (!/^[A-Za-z][A-Za-z0-9-]{0,127}$/.test(options.stack)) {
      throw new ConfigError(`--stack ${options.stack}: not a stack name (letters, digits and hyphens)`);
    }
    const region = options.region ?? env.AWS_REGION;
    if (!region) throw new ConfigError('--region is required with --stack (or set AWS_REGION)');
    return { kind: 'stack', stack: options.stack, region };
  }
  if (machine !== undefined) {
    const match = STATE_MACHINE_ARN.exec(machine);
    if (!match) {
      throw new ConfigError(
        `--state-machine ${machine}: not a state machine ARN; use the StateMachineArn output of the stack`,
      );
    }
    const store = options.store;
    if (store === undefined || !store.startsWith('s3://')) {
      throw new ConfigError(
        '--state-machine needs --store s3://BUCKET/PREFIX: the bucket and data prefix it compacts (the BucketName and DataPrefix outputs)',
      );
    }
    const [bucket = '', ...rest] = store.slice('s3://'.length).split('/');
    if (bucket === '') {
      throw new ConfigError(
        `--store ${store}: no bucket name; use s3://BUCKET/PREFIX (the BucketName and DataPrefix outputs)`,
      );
    }
    const prefix = rest.filter(Boolean).join('/');
    const region = match[1] ?? '';
    if (options.region !== undefined && options.region !== region) {
      throw new ConfigError(
        `--region ${options.region} differs from the ARN's region ${region}: drop --region`,
      );
    }
    return {
      kind: 'state-machine',
      stateMachineArn: machine,
      region,
      bucket,
      dataPrefix: prefix === '' ? '' : `${prefix}/`,
    };
  }
  if (options.store !== undefined) return { kind: 'local' };
  throw new ConfigError(
    'say what to check: --stack NAME (after cdk deploy), --state-machine ARN --store s3://BUCKET/PREFIX, or --store FOLDER (a local run)',
  );
}

export interface Target {
  readonly store: ObjectStore;
  readonly localRoot?: string;
  readonly config: CompactorConfig;
  /** The deployed stack's settings (AWS), for the schedules each enabled tier should have. */
  readonly stackConfig?: StackConfig;
  readonly stateMachineArn?: string;
  /** The stack's CanaryStateMachineArn output, when it has one (the stack's canary is enabled). */
  readonly canaryStateMachineArn?: string;
  readonly region?: string;
  readonly group?: string;
}

/** The store, configuration and (for AWS) state machine to check; undefined when the stack cannot be read. */
export async function resolveTarget(
  mode: Mode,
  options: DoctorOptions,
  io: CliIo,
  deps: DoctorDeps,
  report: Report,
  stackContext: Record<string, unknown>,
): Promise<Target | undefined> {
  if (mode.kind === 'local') {
    const opened = await openStore(options);
    const config = buildConfig(options, opened.dataPrefix);
    report.add('stack outputs', 'n/a', `a local run over ${opened.store.location}`);
    return { store: opened.store, ...(opened.localRoot ? { localRoot: opened.localRoot } : {}), config };
  }
  // The deployed Lambdas' settings: cdk.json's `compactor` context (and --context), as cdk deploy read them.
  const stackConfig = await stackConfigOf(stackContext);
  const bucketStore =
    deps.bucketStore ??
    ((bucket: string, region: string) => new S3Store({ client: createS3Client({ region }), bucket }));
  const configFor = (dataPrefix: string): CompactorConfig => {
    if (dataPrefix !== stackConfig.dataPrefix) {
      io.err(
        `doctor: the stack's data prefix "${dataPrefix}" is not cdk.json's "${stackConfig.dataPrefix}"; using the stack's (pass the settings you deployed with --context)`,
      );
    }
    return parseConfig({ ...lambdaConfigInput(stackConfig), dataPrefix });
  };
  if (mode.kind === 'state-machine') {
    report.add(
      'stack outputs',
      'n/a',
      `given: ${mode.stateMachineArn} over s3://${mode.bucket}/${mode.dataPrefix}`,
    );
    return {
      store: bucketStore(mode.bucket, mode.region),
      config: configFor(mode.dataPrefix),
      stackConfig,
      stateMachineArn: mode.stateMachineArn,
      region: mode.region,
    };
  }
  const cfn = deps.cloudFormation ?? new CloudFormationClient({ region: mode.region });
  return guard(report, 'stack outputs', async () => {
    const deployed = await readStack(cfn, mode, report);
    if (deployed === undefined) return undefined;
    const group = await scheduleGroupOf(cfn, mode.stack);
    report.add(
      'stack outputs',
      'pass',
      `${mode.stack} (${deployed.status}): bucket ${deployed.bucket}, data prefix "${deployed.dataPrefix}", ${deployed.stateMachineArn}${group ? `, schedule group ${group}` : ''}`,
    );
    return {
      store: bucketStore(deployed.bucket, mode.region),
      config: configFor(deployed.dataPrefix),
      stackConfig,
      stateMachineArn: deployed.stateMachineArn,
      ...(deployed.canaryStateMachineArn !== undefined
        ? { canaryStateMachineArn: deployed.canaryStateMachineArn }
        : {}),
      region: mode.region,
      ...(group !== undefined ? { group } : {}),
    };
  });
}

/**
 * The stack's outputs (DescribeStacks), or undefined with a FAIL row when the stack does not
 * exist, is not in a complete state, or lacks an output.
 */
async function readStack(
  cfn: CloudFormationClient,
  mode: Extract<Mode, { kind: 'stack' }>,
  report: Report,
): Promise<
  | {
      readonly status: string;
      readonly bucket: string;
      readonly dataPrefix: string;
      readonly stateMachineArn: string;
      readonly canaryStateMachineArn?: string;
    }
  | undefined
> {
  let described: DescribeStacksCommandOutput;
  try {
    described = await cfn.send(new DescribeStacksCommand({ StackName: mode.stack }));
  } catch (error) {
    // DescribeStacks answers ValidationError for a stack that does not exist.
    if (!(error instanceof CloudFormationServiceException && error.name === 'ValidationError')) throw error;
    report.add(
      'stack outputs',
      'FAIL',
      `no stack ${mode.stack} in ${mode.region}: ${oneLine(error.message, 300)}`,
      'deploy it with npx cdk deploy, or pass the deployed --stack NAME and --region',
    );
    return undefined;
  }
  const stack = described.Stacks?.[0];
  const status = stack?.StackStatus ?? '?';
  const outputs = new Map((stack?.Outputs ?? []).map((o) => [o.OutputKey ?? '', o.OutputValue ?? '']));
  const bucket = outputs.get('BucketName');
  const prefixOutput = outputs.get('DataPrefix');
  const stateMachineArn = outputs.get('StateMachineArn');
  const missing = [
    bucket ? '' : 'BucketName',
    prefixOutput !== undefined ? '' : 'DataPrefix',
    stateMachineArn ? '' : 'StateMachineArn',
  ].filter(Boolean);
  if (
    !bucket ||
    prefixOutput === undefined ||
    !stateMachineArn ||
    !/_COMPLETE$/.test(status) ||
    /ROLLBACK|DELETE/.test(status)
  ) {
    report.add(
      'stack outputs',
      'FAIL',
      `stack ${mode.stack} is ${status}${missing.length > 0 ? `; outputs missing: ${missing.join(', ')}` : ''}`,
      /IN_PROGRESS$/.test(status)
        ? 'wait for the deployment to finish, then run compactor doctor again'
        : 'fix the deployment (see the stack events in the CloudFormation console) and cdk deploy again',
    );
    return undefined;
  }
  // The stack outputs '(bucket root)' for an empty prefix (cdk/compactor-stack.ts).
  const dataPrefix = prefixOutput === '(bucket root)' ? '' : prefixOutput;
  const canaryStateMachineArn = outputs.get('CanaryStateMachineArn');
  return {
    status,
    bucket,
    dataPrefix,
    stateMachineArn,
    ...(canaryStateMachineArn ? { canaryStateMachineArn } : {}),
  };
}

/** The stack's schedule group (ListStackResources, every page), if it has one. */
async function scheduleGroupOf(cfn: CloudFormationClient, stackName: string): Promise<string | undefined> {
  let group: string | undefined;
  let token: string | undefined;
  do {
    const page = await cfn.send(new ListStackResourcesCommand({ StackName: stackName, NextToken: token }));
    for (const r of page.StackResourceSummaries ?? []) {
      if (r.ResourceType === 'AWS::Scheduler::ScheduleGroup' && r.PhysicalResourceId)
        group = r.PhysicalResourceId;
    }
    token = page.NextToken;
  } while (token);
  return group;
}
