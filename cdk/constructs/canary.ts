/**
 * The scheduled canary (the stack's `canary`, off by default): a small Standard state machine
 * that proves the deployed compactor end to end on a table of its own, as `compactor doctor`
 * does by hand, with the same code (functions/core/canary.ts):
 *
 *   Name the canary -> Seed canary -> Compact the canary -> Check canary -> Remove canary
 *
 * Seed writes the canary's raw files under the data root (`_compactor_doctor/canary-<id>/` in
 * arc); "Compact the canary" starts the compaction state machine with `only` = the canary's table
 * and waits for it (the Run a Job `.sync` integration, which CDK renders as `startExecution.sync:2`,
 * the child's output as JSON, https://docs.aws.amazon.com/step-functions/latest/dg/connect-stepfunctions.html:
 * the task fails when the child execution fails, times out or is aborted); Check reads its rows through
 * the visible view and finds no state of it left; Remove deletes it. Any failure still runs
 * "Remove canary after failure" (which keeps a canary a live manifest names) and then fails the
 * execution with the first error, so the canary's alarm fires.
 *
 * Its three Lambdas (functions/canary-*.ts) have roles that may write and delete only under the
 * canary's key prefix and read the state root; test/cdk/iam-evaluated.test.ts evaluates that.
 */

import { Duration, RemovalPolicy, Stack } from 'aws-cdk-lib';
import type * as iam from 'aws-cdk-lib/aws-iam';
import type * as kms from 'aws-cdk-lib/aws-kms';
import * as logs from 'aws-cdk-lib/aws-logs';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import * as tasks from 'aws-cdk-lib/aws-stepfunctions-tasks';
import { Construct } from 'constructs';
import {
  CANARY_STEPS,
  type CanaryStepName,
  type LambdaSize,
  TRANSIENT_ERRORS,
} from '../../functions/contract.ts';
import { stateFolder } from '../../functions/core/state-root.ts';
import { installedDuckDbVersions } from '../duckdb-arm64.ts';
import { acknowledge, acknowledgeWildcards, s3ObjectPrefixFinding } from '../nag.ts';
import { grantObjectKey, type StepLambda, type StepLambdaProps, stepLambda } from './compactor-functions.ts';
import { prefixStatements } from './step-grants.ts';

export interface CompactorCanaryProps {
  /** The compaction state machine the canary runs once per execution, scoped to its table. */
  readonly compaction: sfn.IStateMachine;
  readonly bucket: s3.IBucket;
  /** The bucket's SSE-KMS key, if it has one. @default - none (SSE-S3) */
  readonly encryptionKey?: kms.IKey;
  /** Where every canary's keys begin, up to its id (core/canary.ts canaryKeyPrefix). */
  readonly keyPrefix: string;
  /** Where every canary's receipts begin (core/canary.ts canaryReceiptsKeyPrefix). */
  readonly receiptsKeyPrefix: string;
  /** The state root (`<dataPrefix>_compaction/`): the check reads manifests, quarantine and failures there. */
  readonly stateRoot: string;
  /** How the stack's functions are built (compactor-functions.ts). */
  readonly lambda: Omit<StepLambdaProps, 'size' | 'duckDb'>;
  /** Size of the canary's Lambdas (the stack's `lambda.others`). */
  readonly size: LambdaSize;
  /**
   * How long the compaction execution may take before the canary gives up on it (and removes
   * what it can).
   * @default Duration.hours(1)
   */
  readonly compactionTimeout?: Duration;
}

/** State names (the console shows them; the local tests bind and assert them). */
export const CANARY_STATES = {
  name: 'Name the canary',
  seed: 'Seed canary',
  compact: 'Compact the canary',
  check: 'Check canary',
  remove: 'Remove canary',
  removeAfterFailure: 'Remove canary after failure',
  passed: 'Canary passed',
  failed: 'Canary failed',
} as const;

export class CompactorCanary extends Construct {
  readonly stateMachine: sfn.StateMachine;
  readonly functions: Readonly<Record<CanaryStepName, StepLambda>>;

  constructor(scope: Construct, id: string, props: CompactorCanaryProps) {
    super(scope, id);
    const duckDb = installedDuckDbVersions();
    const names: Record<CanaryStepName, string> = {
      'canary-seed': 'Seed',
      'canary-check': 'Check',
      'canary-remove': 'Remove',
    };
    const fns = {} as Record<CanaryStepName, StepLambda>;
    for (const step of CANARY_STEPS) {
      // Seed writes its Parquet files and Check reads them with DuckDB; Remove only deletes.
      fns[step] = stepLambda(this, names[step], step, {
        ...props.lambda,
        size: props.size,
        ...(step === 'canary-remove' ? {} : { duckDb }),
      });
    }
    this.functions = fns;
    this.#grant(props);

    const retry = {
      errors: [...TRANSIENT_ERRORS],
      interval: Duration.seconds(2),
      backoffRate: 2,
      maxAttempts: 3,
      jitterStrategy: sfn.JitterType.FULL,
    };
    const invoke = (
      name: string,
      step: CanaryStepName,
      payload: Record<string, unknown>,
      resultPath: string,
    ) =>
      new tasks.LambdaInvoke(this, name, {
        stateName: name,
        lambdaFunction: fns[step].fn,
        payload: sfn.TaskInput.fromObject(payload),
        payloadResponseOnly: false,
        resultSelector: { 'Payload.$': '$.Payload' },
        resultPath,
        retryOnServiceExceptions: false,
        taskTimeout: sfn.Timeout.duration(Duration.seconds(props.size.timeoutSeconds + 60)),
      }).addRetry(retry);

    const canaryId = { 'id.$': '$.canary.id' };
    // The first group of a UUID: eight hex digits, as the doctor's canary ids.
    const name = new sfn.Pass(this, CANARY_STATES.name, {
      stateName: CANARY_STATES.name,
      parameters: { 'id.$': "States.ArrayGetItem(States.StringSplit(States.UUID(), '-'), 0)" },
      resultPath: '$.canary',
    });
    const seed = invoke(CANARY_STATES.seed, 'canary-seed', canaryId, '$.seed');
    const compact = new tasks.StepFunctionsStartExecution(this, CANARY_STATES.compact, {
      stateName: CANARY_STATES.compact,
      stateMachine: props.compaction,
      // `.sync`: wait for the execution; CDK grants states:StartExecution on the state machine,
      // DescribeExecution and StopExecution on its executions and the events rule Step Functions
      // manages for it (https://docs.aws.amazon.com/step-functions/latest/dg/stepfunctions-iam.html).
      integrationPattern: sfn.IntegrationPattern.RUN_JOB,
      input: sfn.TaskInput.fromObject({
        tier: 'hourly',
        'now.$': '$.seed.Payload.planAt',
        'only.$': '$.seed.Payload.table',
      }),
      name: sfn.JsonPath.format('canary-{}', sfn.JsonPath.stringAt('$.canary.id')),
      // The console links the child to this execution.
      associateWithParent: true,
      resultSelector: { 'ExecutionArn.$': '$.ExecutionArn', 'Status.$': '$.Status' },
      resultPath: '$.compaction',
      taskTimeout: sfn.Timeout.duration(props.compactionTimeout ?? Duration.hours(1)),
    });
    const check = invoke(
      CANARY_STATES.check,
      'canary-check',
      { ...canaryId, 'hourStart.$': '$.seed.Payload.hourStart' },
      '$.check',
    );
    const remove = invoke(CANARY_STATES.remove, 'canary-remove', canaryId, '$.removal');
    const removeAfterFailure = invoke(
      CANARY_STATES.removeAfterFailure,
      'canary-remove',
      canaryId,
      '$.removal',
    );
    const failed = new sfn.Fail(this, CANARY_STATES.failed, {
      stateName: CANARY_STATES.failed,
      errorPath: '$.failure.Error',
      causePath: '$.failure.Cause',
    });
    // A removal that fails too still ends in the first failure.
    removeAfterFailure.addCatch(failed, { resultPath: '$.removalFailure' }).next(failed);
    for (const step of [seed, compact, check]) step.addCatch(removeAfterFailure, { resultPath: '$.failure' });
    const definition = name
      .next(seed)
      .next(compact)
      .next(check)
      .next(remove)
      .next(new sfn.Succeed(this, CANARY_STATES.passed, { stateName: CANARY_STATES.passed }));

    this.stateMachine = new sfn.StateMachine(this, 'StateMachine', {
      definitionBody: sfn.DefinitionBody.fromChainable(definition),
      queryLanguage: sfn.QueryLanguage.JSON_PATH,
      // The compaction may take its whole timeout; the steps around it take minutes.
      timeout: (props.compactionTimeout ?? Duration.hours(1)).plus(Duration.minutes(30)),
      tracingEnabled: true,
      logs: {
        destination: new logs.LogGroup(this, 'Logs', {
          logGroupName: `/aws/vendedlogs/states/${Stack.of(this).stackName}-${this.node.id}`,
          retention: props.lambda.logRetention ?? logs.RetentionDays.THREE_MONTHS,
          removalPolicy: RemovalPolicy.RETAIN,
        }),
        level: sfn.LogLevel.ALL,
        includeExecutionData: true,
      },
    });
    acknowledge(
      this.stateMachine,
      'AwsSolutions-IAM5[Resource::*]',
      'X-Ray tracing and CloudWatch Logs delivery actions of the state machine support no resource-level permissions.',
    );
    acknowledgeWildcards(
      this,
      /^Resource::<Canary(Seed|Check|Remove)[A-Za-z0-9]+\.Arn>:\*$/,
      'lambda:InvokeFunction on `<canary function arn>:*` covers the versions and aliases of the canary functions the definition names, no other function.',
    );
    acknowledgeWildcards(
      this,
      // The name is the compaction state machine ARN's seventh field (CDK's Fn::Select of its Ref).
      /^Resource::arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:execution:\{"Fn::Select":\[6,\{"Fn::Split":\[":",\{"Ref":"WorkflowStateMachine[0-9A-F]{8}"\}\]\}\]\}\*$/,
      'The `.sync` integration describes and stops the compaction executions it starts, whose ARNs end with their names; scoped to the compaction state machine.',
    );
  }

  /**
   * K = the canary key prefix, S = the state root, RK = the canary's receipts. Seed lists and
   * writes under K; Check reads K, the state root (manifests, quarantine, failures, staging) and
   * RK (each job left its receipt); Remove reads the manifests and quarantine (a live manifest
   * keeps the canary) and deletes under K and RK with the ETag it listed
   * (a conditional delete also needs GetObject and the list, as delete-inputs does, step-grants.ts).
   */
  #grant(props: CompactorCanaryProps): void {
    const { bucket } = props;
    const K = props.keyPrefix;
    // The receipts of the canary's jobs: Check heads them, Remove deletes them with the canary.
    const RK = props.receiptsKeyPrefix;
    const S = props.stateRoot;
    const M = stateFolder(S, 'manifests');
    const Q = stateFolder(S, 'quarantine');
    const F = stateFolder(S, 'failures');
    // K is never '' (it ends with `canary-`), so every list is conditioned on its prefixes.
    const { objects, list } = prefixStatements(bucket);
    const grants: Record<CanaryStepName, iam.PolicyStatement[]> = {
      'canary-seed': [list(K), objects(['s3:PutObject', 's3:AbortMultipartUpload'], K)],
      'canary-check': [list(K, S), objects(['s3:GetObject'], K, M, Q, F, RK)],
      'canary-remove': [
        list(K, M, Q, RK),
        objects(['s3:GetObject', 's3:DeleteObject'], K, RK),
        objects(['s3:GetObject'], M, Q),
      ],
    };
    for (const step of CANARY_STEPS) {
      const { role } = this.functions[step];
      for (const statement of grants[step]) role.addToPrincipalPolicy(statement);
      if (props.encryptionKey) grantObjectKey(props.encryptionKey, role);
    }
    for (const prefix of [K, S, RK]) {
      acknowledgeWildcards(
        this,
        s3ObjectPrefixFinding(prefix),
        'Object actions are scoped to the canary key prefix and the state root (`<prefix>*`): the canary id and the keys under it are known only at run time.',
      );
    }
  }
}
