/**
 * One Lambda per step of the workflow, each bundled from `functions/<step>.ts` with local esbuild
 * (no Docker) into an ESM bundle for Node 22 on arm64, and each with its own role holding only
 * its step's S3 actions on its step's prefixes.
 *
 * The compact Lambda carries DuckDB (as do the canary's seed and check, built by the same
 * stepLambda) and nodejs-polars, which writes its merges of wide tables. Their native bindings are
 * per platform, and npm installed the host's (linux-x64 here); the asset instead gets
 * `@duckdb/node-bindings-linux-arm64` and `nodejs-polars-linux-arm64-gnu`, installed for
 * linux/arm64 after bundling (cdk/duckdb-arm64.ts), and the build fails if any x64 binding is in it.
 */

import { join } from 'node:path';
import { ArnFormat, Duration, RemovalPolicy, Size, Stack } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as kms from 'aws-cdk-lib/aws-kms';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { type BundlingOptions, NodejsFunction, OutputFormat } from 'aws-cdk-lib/aws-lambda-nodejs';
import * as logs from 'aws-cdk-lib/aws-logs';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import type * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import {
  DEFAULT_WORK_DIR,
  ENV,
  type LambdaSize,
  METRICS_NAMESPACE,
  SERVICE_NAME,
  STEPS,
  type StepName,
} from '../../functions/contract.ts';
import { duckDbMemoryLimit, vcpusFor } from '../../functions/core/lambda-sizing.ts';
import { stepRow } from '../../functions/core/pipeline.ts';
import { stateRootOf } from '../../functions/core/state-root.ts';
import {
  duckDbInstallCommands,
  installedCompactVersions,
  type NativeVersions,
  PROJECT_ROOT,
} from '../duckdb-arm64.ts';
import { acknowledge, acknowledgeWildcards, s3ObjectPrefixFinding } from '../nag.ts';
import { stepGrants } from './step-grants.ts';

/** The steps, named after their handler files in `functions/` (the contract lists them). */
export { STEPS, type StepName };

/** The small compact function's name among the workflow's functions (monitoring's label). */
export const COMPACT_SMALL = 'compact-small';

export interface CompactorFunctionsProps {
  /** The data bucket every step works in. */
  readonly bucket: s3.IBucket;
  /**
   * Data root ('' or ending with '/'); grants are scoped to it and to `<dataPrefix>_compaction/`.
   * @default ''
   */
  readonly dataPrefix?: string;
  /**
   * The bucket's SSE-KMS key, when it has one: every step reads or writes objects under it.
   * @default - none (SSE-S3)
   */
  readonly encryptionKey?: kms.IKey;
  /**
   * The core's ConfigInput as JSON (COMPACTOR_CONFIG), see `lambdaConfigJson` in cdk/lambda-config.ts.
   * @default '{}' (the core's defaults)
   */
  readonly compactorConfigJson?: string;
  /**
   * CloudWatch namespace of the EMF metrics (Powertools).
   * @default METRICS_NAMESPACE ('Compactor')
   */
  readonly metricsNamespace?: string;
  /** Size of the compact (DuckDB) Lambda (the stack's `lambda.compact`, defaults in STACK_DEFAULTS). */
  readonly compactSize: LambdaSize;
  /**
   * Size of a second compact function for small jobs: the plan sizes each job
   * (functions/core/lambda-sizing.ts) and the state machine invokes the matching function.
   * @default - none: every job runs on the compact function
   */
  readonly compactSmallSize?: LambdaSize;
  /** Size of the chain's other steps: publish, verify, delete-inputs, clear-manifest (`lambda.partitionSteps`). */
  readonly partitionStepSize: LambdaSize;
  /** Size of recover, plan and summary (`lambda.others`). */
  readonly otherSize: LambdaSize;
  /**
   * Retention of each function's log group.
   * @default logs.RetentionDays.THREE_MONTHS
   */
  readonly logRetention?: logs.RetentionDays;
  /**
   * What happens to the log groups when the stack is deleted.
   * @default RemovalPolicy.RETAIN
   */
  readonly removalPolicy?: RemovalPolicy;
  /**
   * The folder holding `<step>.ts` handler files; must be inside the project (the lock file's folder).
   * @default '<project>/functions'
   */
  readonly functionsDir?: string;
}

/** Local esbuild, ESM for Node 22, the AWS SDK bundled (conditional writes need a recent one). */
function bundling(extra: Partial<BundlingOptions> = {}): BundlingOptions {
  return {
    forceDockerBundling: false,
    format: OutputFormat.ESM,
    target: 'node22',
    mainFields: ['module', 'main'],
    minify: true,
    sourceMap: true,
    sourcesContent: false,
    bundleAwsSDK: true,
    externalModules: [],
    // CommonJS dependencies inside an ESM bundle call require(); give them one.
    banner:
      "import { createRequire as __compactorCreateRequire } from 'node:module'; const require = __compactorCreateRequire(import.meta.url);",
    ...extra,
  };
}

/** What stepLambda needs beside the step's name. */
export interface StepLambdaProps {
  /** The folder holding `<step>.ts`. */
  readonly functionsDir: string;
  readonly size: LambdaSize;
  /** Environment shared by the stack's functions; COMPACTOR_STEP is added. */
  readonly environment: Readonly<Record<string, string>>;
  /** The installed DuckDB (and polars) versions, for a function that runs DuckDB; absent: none. */
  readonly duckDb?: NativeVersions;
  readonly logRetention?: logs.RetentionDays;
  readonly removalPolicy: RemovalPolicy;
}

export interface StepLambda {
  readonly fn: NodejsFunction;
  readonly logGroup: logs.LogGroup;
  readonly role: iam.Role;
}

/**
 * One Lambda of the stack, bundled from `functions/<step>.ts`, with a role of its own that may
 * write only its own log group (grants are added by the caller) and, with `duckDb`, DuckDB's
 * linux-arm64 binding installed beside the bundle and sized for the function's memory.
 */
export function stepLambda(scope: Construct, name: string, step: string, props: StepLambdaProps): StepLambda {
  const logGroup = new logs.LogGroup(scope, `${name}Logs`, {
    retention: props.logRetention ?? logs.RetentionDays.THREE_MONTHS,
    removalPolicy: props.removalPolicy,
  });
  const role = new iam.Role(scope, `${name}Role`, {
    assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
    description: `compactor ${step} step`,
  });
  // Instead of AWSLambdaBasicExecutionRole: write to this function's own log group only.
  logGroup.grantWrite(role);
  const { size, duckDb } = props;
  const fn = new NodejsFunction(scope, name, {
    entry: join(props.functionsDir, `${step}.ts`),
    handler: 'handler',
    projectRoot: PROJECT_ROOT,
    depsLockFilePath: join(PROJECT_ROOT, 'package-lock.json'),
    runtime: lambda.Runtime.NODEJS_22_X,
    architecture: lambda.Architecture.ARM_64,
    memorySize: size.memoryMb,
    ephemeralStorageSize: Size.mebibytes(size.ephemeralStorageMb),
    timeout: Duration.seconds(size.timeoutSeconds),
    description: `compactor: ${step} step`,
    role,
    logGroup,
    tracing: lambda.Tracing.ACTIVE,
    awsSdkConnectionReuse: false,
    environment: {
      ...props.environment,
      [ENV.step]: step,
      ...(duckDb
        ? {
            [ENV.workDir]: DEFAULT_WORK_DIR,
            [ENV.duckDbMemoryLimit]: duckDbMemoryLimit(size.memoryMb),
            [ENV.duckDbThreads]: String(vcpusFor(size.memoryMb)),
          }
        : {}),
    },
    bundling: bundling(
      duckDb
        ? {
            // Installed for linux/arm64 below, not bundled: a native binding cannot be bundled.
            externalModules: [
              '@duckdb/node-api',
              '@duckdb/node-bindings',
              '@duckdb/node-bindings-*',
              ...(duckDb.polars ? ['nodejs-polars', 'nodejs-polars-*'] : []),
            ],
            commandHooks: {
              beforeBundling: () => [],
              beforeInstall: () => [],
              afterBundling: (_inputDir: string, outputDir: string) =>
                duckDbInstallCommands(outputDir, duckDb),
            },
          }
        : {},
    ),
  });
  acknowledge(
    fn,
    'AwsSolutions-L1',
    'Node.js 22 is the runtime the handlers and the DuckDB binding are built and tested for; a runtime upgrade is a deliberate change.',
  );
  acknowledge(
    role,
    'AwsSolutions-IAM5[Resource::*]',
    'Only X-Ray PutTraceSegments and PutTelemetryRecords use "*": they support no resource-level permissions.',
  );
  return { fn, logGroup, role };
}

export class CompactorFunctions extends Construct {
  readonly recover: NodejsFunction;
  readonly plan: NodejsFunction;
  readonly compact: NodejsFunction;
  /** The small jobs' compact function (`compactSmallSize`), when the stack has one. */
  readonly compactSmall: NodejsFunction | undefined;
  readonly publish: NodejsFunction;
  readonly verify: NodejsFunction;
  readonly deleteInputs: NodejsFunction;
  readonly clearManifest: NodejsFunction;
  readonly summary: NodejsFunction;
  /** Every step's function by step name. */
  readonly byStep: Readonly<Record<StepName, NodejsFunction>>;
  readonly logGroups: Readonly<Record<StepName, logs.LogGroup>>;
  /** Every function of the workflow by name (the steps' and `compact-small`): what monitoring charts. */
  readonly all: Readonly<Record<string, NodejsFunction>>;
  /** How these functions are built, for other functions of the stack (the canary's) to match. */
  readonly lambdaProps: Omit<StepLambdaProps, 'size' | 'duckDb'>;

  constructor(scope: Construct, id: string, props: CompactorFunctionsProps) {
    super(scope, id);
    const dataPrefix = props.dataPrefix ?? '';
    const stateRoot = stateRootOf(dataPrefix);
    const { compactSize, otherSize, partitionStepSize } = props;
    const functionsDir = props.functionsDir ?? join(PROJECT_ROOT, 'functions');
    const removalPolicy = props.removalPolicy ?? RemovalPolicy.RETAIN;

    const environment = {
      [ENV.dataBucket]: props.bucket.bucketName,
      [ENV.dataPrefix]: dataPrefix,
      [ENV.config]: props.compactorConfigJson ?? '{}',
      [ENV.serviceName]: SERVICE_NAME,
      [ENV.metricsNamespace]: props.metricsNamespace ?? METRICS_NAMESPACE,
      NODE_OPTIONS: '--enable-source-maps',
    };

    const lambdaProps = {
      functionsDir,
      environment,
      removalPolicy,
      ...(props.logRetention !== undefined ? { logRetention: props.logRetention } : {}),
    };
    this.lambdaProps = lambdaProps;
    const duckDb = installedCompactVersions();
    const built = {} as Record<StepName, StepLambda>;
    for (const step of STEPS) {
      // The pipeline row's size class says which of the three sizes a step's Lambda gets.
      const sizeClass = stepRow(step).size;
      const size =
        sizeClass === 'compact'
          ? compactSize
          : sizeClass === 'partitionSteps'
            ? partitionStepSize
            : otherSize;
      built[step] = stepLambda(this, constructName(step), step, {
        ...lambdaProps,
        size,
        ...(sizeClass === 'compact' ? { duckDb } : {}),
      });
    }

    const fns = Object.fromEntries(STEPS.map((s) => [s, built[s].fn])) as Record<StepName, NodejsFunction>;
    this.byStep = fns;
    this.logGroups = Object.fromEntries(STEPS.map((s) => [s, built[s].logGroup])) as Record<
      StepName,
      logs.LogGroup
    >;
    this.recover = fns.recover;
    this.plan = fns.plan;
    this.compact = fns.compact;
    this.publish = fns.publish;
    this.verify = fns.verify;
    this.deleteInputs = fns['delete-inputs'];
    this.clearManifest = fns['clear-manifest'];
    this.summary = fns.summary;

    // The same handler as compact, with its own role, logs and size.
    const small = props.compactSmallSize
      ? stepLambda(this, 'CompactSmall', 'compact', { ...lambdaProps, size: props.compactSmallSize, duckDb })
      : undefined;
    this.compactSmall = small?.fn;
    this.all = { ...fns, ...(small ? { [COMPACT_SMALL]: small.fn } : {}) };

    const grants = stepGrants(props.bucket, dataPrefix, stateRoot);
    const roles: [StepName, iam.Role][] = [
      ...STEPS.map((step): [StepName, iam.Role] => [step, built[step].role]),
      ...(small ? [['compact', small.role] as [StepName, iam.Role]] : []),
    ];
    for (const [step, role] of roles) {
      for (const statement of grants[step]) role.addToPrincipalPolicy(statement);
      if (props.encryptionKey) grantObjectKey(props.encryptionKey, role);
    }
    acknowledgeWildcards(
      this,
      s3ObjectPrefixFinding(dataPrefix),
      'Object actions are scoped to key prefixes of the data bucket (`<prefix>*`): the narrowest an S3 ARN allows for keys a step learns only at run time.',
    );
  }

  /**
   * Lets the recover step ask whether a manifest's owner execution still runs. A separate
   * policy, not the role's default one: the state machine already depends on the functions,
   * and the functions depend on their default policies, so that would be a cycle.
   */
  grantDescribeExecutions(stateMachine: sfn.StateMachine): iam.Policy {
    // Executions of this state machine, its Map Run children (`Machine/label:id`) and Express ones.
    return this.#executionsPolicy(
      'RecoverDescribeExecutions',
      this.recover,
      stateMachine,
      'states:DescribeExecution',
      [
        ['execution', ':*'],
        ['execution', '/*'],
        ['express', ':*'],
        ['express', '/*'],
      ],
    );
  }

  /**
   * Lets the Summary of a stopped execution find its Map Runs: ListMapRuns is authorized on the
   * execution (https://docs.aws.amazon.com/service-authorization/latest/reference/list_awsstepfunctions.html).
   * A separate policy for the reason grantDescribeExecutions gives.
   */
  grantListMapRuns(stateMachine: sfn.StateMachine): iam.Policy {
    return this.#executionsPolicy('SummaryListMapRuns', this.summary, stateMachine, 'states:ListMapRuns', [
      ['execution', ':*'],
    ]);
  }

  #executionsPolicy(
    id: string,
    fn: lambda.IFunction,
    stateMachine: sfn.StateMachine,
    action: string,
    resources: readonly (readonly ['execution' | 'express', ':*' | '/*'])[],
  ): iam.Policy {
    const stack = Stack.of(this);
    const name = stateMachine.stateMachineName;
    const policy = new iam.Policy(this, id, {
      roles: [fn.role as iam.IRole],
      statements: [
        new iam.PolicyStatement({
          actions: [action],
          resources: resources.map(([resource, tail]) =>
            stack.formatArn({
              service: 'states',
              resource,
              resourceName: `${name}${tail}`,
              arnFormat: ArnFormat.COLON_RESOURCE_NAME,
            }),
          ),
        }),
      ],
    });
    acknowledgeWildcards(
      policy,
      /^Resource::arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:(execution|express):<[^>]+\.Name>[:/]\*$/,
      'Execution ARNs end with the execution name, known only at run time; scoped to this state machine.',
    );
    return policy;
  }
}

/**
 * What S3 needs of a caller's permissions on an SSE-KMS object's key: kms:GenerateDataKey to
 * write it, kms:Decrypt to read it, both for a multipart upload (its parts are decrypted to
 * complete it) and for a copy (https://docs.aws.amazon.com/AmazonS3/latest/userguide/UsingKMSEncryption.html);
 * a HeadObject asking for the checksum also decrypts
 * (https://docs.aws.amazon.com/AmazonS3/latest/API/API_HeadObject.html). For a key this stack
 * creates, CDK's default key policy lets IAM policies grant it; an imported key's policy must too.
 */
export function grantObjectKey(key: kms.IKey, grantee: iam.IGrantable): iam.Grant {
  return key.grant(grantee, 'kms:Decrypt', 'kms:GenerateDataKey');
}

/**
 * What a Distributed Map's ItemReader and ResultWriter need of an SSE-KMS bucket's key: "kms:Decrypt,
 * kms:Encrypt, and kms:GenerateDataKey" (https://docs.aws.amazon.com/step-functions/latest/dg/iam-policies-eg-dist-map.html).
 */
export function grantMapKey(key: kms.IKey, stateMachine: iam.IGrantable): iam.Grant {
  return key.grant(stateMachine, 'kms:Decrypt', 'kms:Encrypt', 'kms:GenerateDataKey');
}

/**
 * Construct ids a step keeps from before it was renamed. The publish step was `upload`; its
 * function keeps its logical ID, and so its generated name and ARN: redriving an execution that
 * failed before the upgrade re-runs that execution's own definition ("Redriven executions use the
 * same state machine definition and execution ARN as the original execution attempt",
 * https://docs.aws.amazon.com/step-functions/latest/apireference/API_RedriveExecution.html),
 * which invokes the function by that ARN. Its role and log group keep theirs too, so the upgrade
 * replaces nothing and its logs stay in one group. test/cdk/stack.test.ts pins the IDs.
 */
const KEPT_CONSTRUCT_NAMES: Partial<Record<StepName, string>> = { publish: 'Upload' };

function constructName(step: StepName): string {
  const kept = KEPT_CONSTRUCT_NAMES[step];
  if (kept !== undefined) return kept;
  return step
    .split('-')
    .map((part) => part.charAt(0).toUpperCase() + part.slice(1))
    .join('');
}
