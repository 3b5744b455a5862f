import { Match } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { LAMBDA_INIT_CAP_SECONDS } from '../../cdk/child-budget.ts';
import { COMPACT_SMALL, STEPS } from '../../cdk/constructs/compactor-functions.ts';
import { parseConfig } from '../../functions/core/config.ts';
import { type CfnResource, flatten, resourcesOfType, type Synthesized, synth } from './synth.ts';

interface AslState {
  readonly Type: string;
  readonly TimeoutSeconds?: number;
  readonly Parameters?: Record<string, unknown>;
  readonly MaxConcurrency?: number;
  readonly ToleratedFailurePercentage?: number;
  readonly ItemProcessor?: AslStates;
  readonly Iterator?: AslStates;
  readonly Branches?: AslStates[];
}
interface AslStates {
  readonly States: Record<string, AslState>;
}

/** Every state of a definition, nested Map and Parallel states included. */
function allStates(asl: AslStates): AslState[] {
  return Object.values(asl.States).flatMap((st) => [
    st,
    ...[st.ItemProcessor, st.Iterator, ...(st.Branches ?? [])]
      .filter((x) => x !== undefined)
      .flatMap(allStates),
  ]);
}

type Env = Record<string, unknown>;

function envOf(fn: CfnResource): Env {
  return (fn.Properties.Environment as { Variables: Env }).Variables;
}

function functionsByStep(s: Synthesized): Map<string, CfnResource> {
  // Only the step functions (CDK's own custom-resource handlers have no COMPACTOR_STEP).
  return new Map(
    resourcesOfType(s.json, 'AWS::Lambda::Function')
      .filter(
        ([, fn]) => (fn.Properties.Environment as { Variables?: Env } | undefined)?.Variables?.COMPACTOR_STEP,
      )
      // The compact step's second function, for small jobs, by its own name.
      .map(([id, fn]) => [
        id.startsWith('StepsCompactSmall') ? COMPACT_SMALL : String(envOf(fn).COMPACTOR_STEP),
        fn,
      ]),
  );
}

function logicalId(s: Synthesized, type: string, pathPart: string): string {
  const found = Object.entries(s.json.Resources).filter(
    ([id, r]) => r.Type === type && id.startsWith(pathPart),
  );
  expect(found, `${type} ${pathPart}*`).toHaveLength(1);
  return (found[0] as [string, CfnResource])[0];
}

describe('stack with the default config', () => {
  let s: Synthesized;
  beforeAll(() => {
    s = synth();
  });

  describe('Lambdas', () => {
    it('has one function per step and the small compact one, each nodejs22.x on arm64 with X-Ray and its own log group', () => {
      const byStep = functionsByStep(s);
      expect([...byStep.keys()].sort()).toEqual([...STEPS, COMPACT_SMALL].sort());
      // Nothing else: no CDK log-retention or auto-delete handler with the default config.
      s.template.resourceCountIs('AWS::Lambda::Function', STEPS.length + 1);
      for (const fn of byStep.values()) {
        expect(fn.Properties).toMatchObject({
          Runtime: 'nodejs22.x',
          Architectures: ['arm64'],
          Handler: 'index.handler',
          TracingConfig: { Mode: 'Active' },
          LoggingConfig: { LogGroup: { Ref: expect.stringMatching(/^Steps.*Logs/) } },
        });
        const logGroup = (fn.Properties.LoggingConfig as { LogGroup: { Ref: string } }).LogGroup.Ref;
        expect(s.json.Resources[logGroup]).toMatchObject({
          Type: 'AWS::Logs::LogGroup',
          Properties: { RetentionInDays: 90 },
          DeletionPolicy: 'Retain',
        });
      }
    });

    it('gives every function the environment the handlers read', () => {
      const bucket = logicalId(s, 'AWS::S3::Bucket', 'DataBucket');
      for (const fn of functionsByStep(s).values()) {
        const env = envOf(fn);
        expect(env).toMatchObject({
          DATA_BUCKET: { Ref: bucket },
          DATA_PREFIX: '',
          POWERTOOLS_SERVICE_NAME: 'compactor',
          POWERTOOLS_METRICS_NAMESPACE: 'Compactor',
          NODE_OPTIONS: '--enable-source-maps',
        });
        const config = parseConfig(JSON.parse(env.COMPACTOR_CONFIG as string));
        // The longest Lambda (recover, plan, summary: 300 s) + 300 s.
        expect(config.leaseSeconds).toBe(600);
        expect(config.tiers.hourly.minFiles).toBe(10);
      }
    });

    it('sizes the compact Lambda for DuckDB and the others small, the Express chain’s steps short', () => {
      const byStep = functionsByStep(s);
      expect(byStep.get('compact')?.Properties).toMatchObject({
        MemorySize: 3008,
        // Express children (cdk/child-budget.ts).
        Timeout: 36,
        EphemeralStorage: { Size: 10240 },
        Environment: {
          Variables: { WORK_DIR: '/tmp/compactor', DUCKDB_MEMORY_LIMIT: '2200MB', DUCKDB_THREADS: '2' },
        },
      });
      // Small jobs' compact function (functions/core/lambda-sizing.ts): the same handler and timeout.
      expect(byStep.get(COMPACT_SMALL)?.Properties).toMatchObject({
        MemorySize: 1024,
        Timeout: 36,
        EphemeralStorage: { Size: 512 },
        Environment: {
          Variables: {
            COMPACTOR_STEP: 'compact',
            WORK_DIR: '/tmp/compactor',
            DUCKDB_MEMORY_LIMIT: '700MB',
            DUCKDB_THREADS: '1',
          },
        },
      });
      for (const [step, fn] of byStep) {
        if (step === 'compact' || step === COMPACT_SMALL) continue;
        expect(fn.Properties, step).toMatchObject({
          MemorySize: 512,
          Timeout: ['publish', 'verify', 'delete-inputs', 'clear-manifest'].includes(step) ? 9 : 300,
          EphemeralStorage: { Size: 512 },
        });
        expect(envOf(fn).DUCKDB_MEMORY_LIMIT).toBeUndefined();
      }
    });

    it('lets the state machine invoke exactly the functions its definition names, both compact ones among them', () => {
      const [, sm] = resourcesOfType(s.json, 'AWS::StepFunctions::StateMachine').find(([id]) =>
        id.startsWith('WorkflowStateMachine'),
      ) as [string, CfnResource];
      const role = (sm.Properties.RoleArn as { 'Fn::GetAtt': string[] })['Fn::GetAtt'][0];
      const invokable = new Set<string>();
      for (const [, policy] of resourcesOfType(s.json, 'AWS::IAM::Policy')) {
        if (!JSON.stringify(policy.Properties.Roles).includes(`"${role}"`)) continue;
        const doc = policy.Properties.PolicyDocument as {
          Statement: { Action: string | string[]; Resource: unknown }[];
        };
        for (const st of doc.Statement) {
          if (![st.Action].flat().includes('lambda:InvokeFunction')) continue;
          for (const r of [st.Resource].flat()) invokable.add(flatten(r).replace(/:\*$/, ''));
        }
      }
      const named = new Set(
        [...flatten(sm.Properties.DefinitionString).matchAll(/"FunctionName":"([^"]+)"/g)].map((m) => m[1]),
      );
      expect(invokable).toEqual(named);
      expect([...named].filter((n) => n?.startsWith('<StepsCompact'))).toHaveLength(2);
    });

    it('has no small compact function for Standard children', () => {
      const standard = functionsByStep(synth({ compactor: { map: { childExecutionType: 'STANDARD' } } }));
      expect([...standard.keys()].sort()).toEqual([...STEPS].sort());
    });

    it('keeps the publish function’s logical IDs from when the step was `upload`: a redrive of an older execution invokes it by ARN', () => {
      // Redriven executions run their own (older) definition, whose Upload state names this
      // function's ARN; a new logical ID would replace the function and leave that ARN dangling.
      const [id, fn] = resourcesOfType(s.json, 'AWS::Lambda::Function').find(
        ([, f]) => envOf(f).COMPACTOR_STEP === 'publish',
      ) as [string, CfnResource];
      expect(id).toBe('StepsUpload70213AB9');
      expect(fn.Properties).toMatchObject({
        Role: { 'Fn::GetAtt': ['StepsUploadRole5BAD7AD7', 'Arn'] },
        LoggingConfig: { LogGroup: { Ref: 'StepsUploadLogsA8A740B0' } },
      });
      expect(fn.Properties.FunctionName).toBeUndefined();
      const [, sm] = resourcesOfType(s.json, 'AWS::StepFunctions::StateMachine')[0] as [string, CfnResource];
      const states = allStates(JSON.parse(flatten(sm.Properties.DefinitionString)) as AslStates);
      const invoking = states.filter((st) => String(st.Parameters?.FunctionName ?? '').startsWith(`<${id}.`));
      expect(invoking).toHaveLength(1);
    });

    it('uses its own roles: no AWS managed policy (logs only to the function log group)', () => {
      for (const [, role] of resourcesOfType(s.json, 'AWS::IAM::Role')) {
        expect(role.Properties.ManagedPolicyArns).toBeUndefined();
      }
    });
  });

  describe('state machine logs', () => {
    it('go to a retained log group under /aws/vendedlogs/, level ALL with execution data', () => {
      const [, sm] = resourcesOfType(s.json, 'AWS::StepFunctions::StateMachine')[0] as [string, CfnResource];
      const config = sm.Properties.LoggingConfiguration as {
        Level: string;
        IncludeExecutionData: boolean;
        Destinations: { CloudWatchLogsLogGroup: { LogGroupArn: { 'Fn::GetAtt': [string, string] } } }[];
      };
      expect(config).toMatchObject({ Level: 'ALL', IncludeExecutionData: true });
      const group = config.Destinations[0]?.CloudWatchLogsLogGroup.LogGroupArn['Fn::GetAtt'][0] ?? '';
      expect(s.json.Resources[group]).toMatchObject({
        Type: 'AWS::Logs::LogGroup',
        Properties: {
          LogGroupName: expect.stringMatching(/^\/aws\/vendedlogs\/states\//),
          RetentionInDays: 90,
        },
        DeletionPolicy: 'Retain',
      });
    });
  });

  describe('data bucket', () => {
    it('is private, encrypted, access-logged and retained', () => {
      const logs = logicalId(s, 'AWS::S3::Bucket', 'DataAccessLogs');
      s.template.hasResource('AWS::S3::Bucket', {
        DeletionPolicy: 'Retain',
        UpdateReplacePolicy: 'Retain',
        Properties: Match.objectLike({
          PublicAccessBlockConfiguration: {
            BlockPublicAcls: true,
            BlockPublicPolicy: true,
            IgnorePublicAcls: true,
            RestrictPublicBuckets: true,
          },
          BucketEncryption: {
            ServerSideEncryptionConfiguration: [
              { ServerSideEncryptionByDefault: { SSEAlgorithm: 'AES256' } },
            ],
          },
          LoggingConfiguration: { DestinationBucketName: { Ref: logs }, LogFilePrefix: 'data-bucket/' },
        }),
      });
      expect(s.json.Resources[logs]?.DeletionPolicy).toBe('Retain');
      s.template.resourceCountIs('Custom::S3AutoDeleteObjects', 0);
    });

    it('denies every request without TLS, on the data and the log bucket', () => {
      const policies = resourcesOfType(s.json, 'AWS::S3::BucketPolicy');
      expect(policies).toHaveLength(2);
      for (const [, policy] of policies) {
        expect(policy.Properties.PolicyDocument).toMatchObject({
          Statement: expect.arrayContaining([
            expect.objectContaining({
              Effect: 'Deny',
              Action: 's3:*',
              Principal: { AWS: '*' },
              Condition: { Bool: { 'aws:SecureTransport': 'false' } },
            }),
          ]),
        });
      }
    });

    it('aborts incomplete uploads and expires only Map plans and results, and receipts after receiptDays, never manifests or staging', () => {
      const rulesOf = (stack: typeof s) => {
        const bucket = stack.json.Resources[logicalId(stack, 'AWS::S3::Bucket', 'DataBucket')] as CfnResource;
        return (bucket.Properties.LifecycleConfiguration as { Rules: Record<string, unknown>[] }).Rules;
      };
      expect(rulesOf(s)).toEqual([
        {
          Id: 'abort-incomplete-multipart-uploads',
          AbortIncompleteMultipartUpload: { DaysAfterInitiation: 2 },
          Status: 'Enabled',
        },
        { Id: 'expire-map-plans', Prefix: '_compaction/plans/', ExpirationInDays: 15, Status: 'Enabled' },
        { Id: 'expire-map-results', Prefix: '_compaction/results/', ExpirationInDays: 15, Status: 'Enabled' },
        { Id: 'expire-receipts', Prefix: '_compaction/receipts/', ExpirationInDays: 400, Status: 'Enabled' },
      ]);
      // The setting is the rule's, under the data prefix.
      const set = synth({ compactor: { receiptDays: 30, dataPrefix: 'lake/' } });
      expect(rulesOf(set).find((r) => r.Id === 'expire-receipts')).toEqual({
        Id: 'expire-receipts',
        Prefix: 'lake/_compaction/receipts/',
        ExpirationInDays: 30,
        Status: 'Enabled',
      });
    });
  });

  describe('schedules', () => {
    it('starts the state machine once per tier with {"tier": ...}, in UTC, with retries and a DLQ', () => {
      const sm = logicalId(s, 'AWS::StepFunctions::StateMachine', 'Workflow');
      const dlq = logicalId(s, 'AWS::SQS::Queue', 'Schedules');
      const schedules = resourcesOfType(s.json, 'AWS::Scheduler::Schedule').map(([, r]) => r.Properties);
      expect(schedules).toHaveLength(2);
      const byInput = new Map(
        schedules.map((p) => [JSON.parse((p.Target as { Input: string }).Input).tier as string, p]),
      );
      expect([...byInput.keys()].sort()).toEqual(['daily', 'hourly']);
      expect(byInput.get('hourly')).toMatchObject({ ScheduleExpression: 'cron(10 * * * ? *)' });
      expect(byInput.get('daily')).toMatchObject({ ScheduleExpression: 'cron(30 3 * * ? *)' });
      for (const p of schedules) {
        expect(p).toMatchObject({
          ScheduleExpressionTimezone: 'Etc/UTC',
          State: 'ENABLED',
          FlexibleTimeWindow: { Mode: 'OFF' },
          Target: {
            Arn: { Ref: sm },
            DeadLetterConfig: { Arn: { 'Fn::GetAtt': [dlq, 'Arn'] } },
            RetryPolicy: { MaximumRetryAttempts: 10, MaximumEventAgeInSeconds: 3600 },
          },
        });
      }
    });

    it("uses CDK's own Scheduler role: start this state machine and write the DLQ only, trusted from the schedule group", () => {
      const sm = logicalId(s, 'AWS::StepFunctions::StateMachine', 'Workflow');
      const dlq = logicalId(s, 'AWS::SQS::Queue', 'Schedules');
      const group = logicalId(s, 'AWS::Scheduler::ScheduleGroup', 'Schedules');
      const roles = new Set(
        resourcesOfType(s.json, 'AWS::Scheduler::Schedule').map(
          ([, r]) =>
            (r.Properties.Target as { RoleArn: { 'Fn::GetAtt': string[] } }).RoleArn['Fn::GetAtt'][0],
        ),
      );
      // One role for every schedule of this state machine, made by aws-scheduler-targets.
      expect([...roles]).toEqual([expect.stringMatching(/^SchedulerRoleForTarget/)]);
      const role = [...roles][0] as string;
      const statements = resourcesOfType(s.json, 'AWS::IAM::Policy')
        .filter(([, p]) => (p.Properties.Roles as { Ref: string }[]).some((r) => r.Ref === role))
        .flatMap(
          ([, p]) => (p.Properties.PolicyDocument as { Statement: Record<string, unknown>[] }).Statement,
        );
      expect(statements).toEqual([
        { Action: 'states:StartExecution', Effect: 'Allow', Resource: { Ref: sm } },
        { Action: 'sqs:SendMessage', Effect: 'Allow', Resource: { 'Fn::GetAtt': [dlq, 'Arn'] } },
      ]);
      // The trust policy's shape; test/cdk/iam-evaluated.test.ts evaluates it.
      expect(s.json.Resources[role]?.Properties.AssumeRolePolicyDocument).toMatchObject({
        Statement: [
          {
            Principal: { Service: 'scheduler.amazonaws.com' },
            Condition: {
              StringEquals: {
                'aws:SourceAccount': { Ref: 'AWS::AccountId' },
                'aws:SourceArn': { 'Fn::GetAtt': [group, 'Arn'] },
              },
            },
          },
        ],
      });
      s.template.hasResourceProperties('AWS::SQS::Queue', { SqsManagedSseEnabled: true });
      s.template.hasResourceProperties('AWS::SQS::QueuePolicy', {
        PolicyDocument: {
          Statement: Match.arrayWith([
            Match.objectLike({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
          ]),
        },
      });
    });
  });

  describe('monitoring', () => {
    it('alarms on a failed execution', () => {
      const sm = logicalId(s, 'AWS::StepFunctions::StateMachine', 'Workflow');
      s.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        Namespace: 'AWS/States',
        MetricName: 'ExecutionsFailed',
        Dimensions: [{ Name: 'StateMachineArn', Value: { Ref: sm } }],
        Statistic: 'Sum',
        Threshold: 1,
        ComparisonOperator: 'GreaterThanOrEqualToThreshold',
        TreatMissingData: 'notBreaching',
      });
    });

    it('alarms on any quarantine, from the handlers’ EMF metric (service=compactor)', () => {
      s.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        Namespace: 'Compactor',
        MetricName: 'Quarantined',
        Dimensions: [{ Name: 'service', Value: 'compactor' }],
        Statistic: 'Sum',
        Threshold: 1,
        ComparisonOperator: 'GreaterThanOrEqualToThreshold',
        TreatMissingData: 'notBreaching',
      });
    });

    it('alarms on a manifest recovery could not resolve (RecoveryUnresolved, emitted by the Recover step)', () => {
      s.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        Namespace: 'Compactor',
        MetricName: 'RecoveryUnresolved',
        Dimensions: [{ Name: 'service', Value: 'compactor' }],
        Statistic: 'Sum',
        Threshold: 1,
        ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      });
    });

    it('alarms on Lambda errors of every step (both compact functions) and on schedule starts that never arrived', () => {
      const errors = s.json.Resources[
        logicalId(s, 'AWS::CloudWatch::Alarm', 'MonitoringLambdaErrors')
      ] as CfnResource;
      const metrics = (errors.Properties.Metrics as { MetricStat?: { Metric: { MetricName: string } } }[])
        .filter((m) => m.MetricStat)
        .map((m) => m.MetricStat?.Metric.MetricName);
      expect(metrics).toEqual([...STEPS, COMPACT_SMALL].map(() => 'Errors'));
      s.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        Namespace: 'AWS/SQS',
        MetricName: 'ApproximateNumberOfMessagesVisible',
      });
    });

    it('has no topic and no alarm actions without alarmEmail', () => {
      s.template.resourceCountIs('AWS::SNS::Topic', 0);
      for (const [, alarm] of resourcesOfType(s.json, 'AWS::CloudWatch::Alarm')) {
        expect(alarm.Properties.AlarmActions).toBeUndefined();
      }
    });

    it('charts executions and every custom metric on the dashboard', () => {
      const [, dashboard] = resourcesOfType(s.json, 'AWS::CloudWatch::Dashboard')[0] as [string, CfnResource];
      const body = JSON.stringify(dashboard.Properties.DashboardBody);
      for (const name of [
        'ExecutionsStarted',
        'ExecutionsSucceeded',
        'ExecutionsFailed',
        'PartitionsCompacted',
        'PartitionsSkipped',
        'PartitionsFailed',
        'BytesIn',
        'BytesOut',
        'RowsIn',
        'RowsOut',
        'Quarantined',
        'RecoveryActions',
        'RecoveryUnresolved',
        'Errors',
        'Duration',
      ]) {
        expect(body, name).toContain(`\\"${name}\\"`);
      }
      expect(body).toContain('\\"service\\",\\"compactor\\"');
    });
  });

  it('runs Summary from an EventBridge rule when an execution fails, times out or is stopped', () => {
    const summary = [...functionsByStep(s).entries()].find(([step]) => step === 'summary');
    if (!summary) throw new Error('no summary function');
    const summaryId = Object.entries(s.json.Resources).find(([, r]) => r === summary[1])?.[0];
    s.template.hasResourceProperties('AWS::Events::Rule', {
      EventPattern: {
        source: ['aws.states'],
        'detail-type': ['Step Functions Execution Status Change'],
        detail: {
          stateMachineArn: [{ Ref: Match.stringLikeRegexp('^WorkflowStateMachine') }],
          status: ['FAILED', 'TIMED_OUT', 'ABORTED'],
        },
      },
      Targets: [
        Match.objectLike({
          Arn: { 'Fn::GetAtt': [summaryId, 'Arn'] },
          InputTransformer: {
            InputPathsMap: {
              'detail-executionArn': '$.detail.executionArn',
              'detail-name': '$.detail.name',
              'detail-status': '$.detail.status',
              'detail-input': '$.detail.input',
            },
            InputTemplate:
              '{"executionId":<detail-executionArn>,"executionName":<detail-name>,"status":<detail-status>,"input":<detail-input>,"toleratedFailurePercentage":5}',
          },
        }),
      ],
    });
    s.template.hasResourceProperties('AWS::Lambda::Permission', {
      Action: 'lambda:InvokeFunction',
      Principal: 'events.amazonaws.com',
      FunctionName: { 'Fn::GetAtt': [summaryId, 'Arn'] },
    });
  });

  it('outputs the bucket, the state machine ARN and the dashboard URL', () => {
    expect(Object.keys(s.json.Outputs ?? {})).toEqual(
      expect.arrayContaining(['BucketName', 'StateMachineArn', 'DashboardUrl']),
    );
  });

  it('is environment-agnostic (no account or region baked in)', () => {
    expect(s.stack.account).toMatch(/^\$\{Token/);
    expect(s.stack.region).toMatch(/^\$\{Token/);
  });
});

describe('stack with overrides', () => {
  it('notifies alarmEmail through a TLS-only topic, on alarm and on OK', () => {
    const s = synth({ compactor: { alarmEmail: 'ops@example.com' } });
    const topic = logicalId(s, 'AWS::SNS::Topic', 'Monitoring');
    s.template.hasResourceProperties('AWS::SNS::Subscription', {
      Protocol: 'email',
      Endpoint: 'ops@example.com',
      TopicArn: { Ref: topic },
    });
    s.template.hasResourceProperties('AWS::SNS::TopicPolicy', {
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
        ]),
      },
    });
    const alarms = resourcesOfType(s.json, 'AWS::CloudWatch::Alarm');
    expect(alarms.length).toBeGreaterThanOrEqual(5);
    for (const [, alarm] of alarms) {
      expect(alarm.Properties).toMatchObject({ AlarmActions: [{ Ref: topic }], OKActions: [{ Ref: topic }] });
    }
  });

  it('scopes the bucket rules and the environment to dataPrefix; destroy empties and deletes the buckets', () => {
    const s = synth({
      compactor: {
        dataPrefix: 'lake',
        removalPolicy: 'destroy',
        tiers: { daily: { enabled: false } },
        lambda: { compact: { memoryMb: 10240 } },
      },
    });
    const bucket = s.json.Resources[logicalId(s, 'AWS::S3::Bucket', 'DataBucket')] as CfnResource;
    expect(bucket.DeletionPolicy).toBe('Delete');
    s.template.resourceCountIs('Custom::S3AutoDeleteObjects', 2);
    expect(JSON.stringify(bucket.Properties.LifecycleConfiguration)).toContain(
      '"Prefix":"lake/_compaction/plans/"',
    );
    for (const fn of functionsByStep(s).values()) expect(envOf(fn).DATA_PREFIX).toBe('lake/');
    expect(envOf(functionsByStep(s).get('compact') as CfnResource)).toMatchObject({
      DUCKDB_MEMORY_LIMIT: '7600MB',
      DUCKDB_THREADS: '6',
    });
    const schedules = resourcesOfType(s.json, 'AWS::Scheduler::Schedule');
    expect(schedules.map(([, r]) => (r.Properties.Target as { Input: string }).Input)).toEqual([
      '{"tier":"hourly"}',
    ]);
  });

  it("schedules the opt-in monthly tier and turns it on in the Lambdas' config", () => {
    const s = synth({ compactor: { tiers: { monthly: { enabled: true } } } });
    const schedules = resourcesOfType(s.json, 'AWS::Scheduler::Schedule').map(([, r]) => r.Properties);
    const monthly = schedules.find((p) => (p.Target as { Input: string }).Input === '{"tier":"monthly"}');
    expect(monthly).toMatchObject({ ScheduleExpression: 'cron(45 4 * * ? *)', State: 'ENABLED' });
    for (const fn of functionsByStep(s).values()) {
      expect(JSON.parse(envOf(fn).COMPACTOR_CONFIG as string).tiers.monthly).toEqual({
        enabled: true,
        minFiles: 2,
        minAgeSeconds: 86_400,
        behindAfterSeconds: 3 * 31 * 86_400,
      });
    }
  });

  it('schedules retention (its own schedule, {"tier":"retention"}) only when it has a rule and is enabled', () => {
    const inputs = (context: Record<string, unknown>) =>
      resourcesOfType(synth({ compactor: context }).json, 'AWS::Scheduler::Schedule')
        .map(([, r]) => [(r.Properties.Target as { Input: string }).Input, r.Properties.ScheduleExpression])
        .sort();
    expect(inputs({ retention: { rules: { 'mydb/': 30 } } })).toEqual([
      ['{"tier":"daily"}', 'cron(30 3 * * ? *)'],
      ['{"tier":"hourly"}', 'cron(10 * * * ? *)'],
      ['{"tier":"retention"}', 'cron(0 5 * * ? *)'],
    ]);
    expect(inputs({ retention: { rules: { 'mydb/': 30 }, enabled: false } })).toHaveLength(2);
    expect(inputs({ retention: { schedule: 'rate(12 hours)' } })).toHaveLength(2);
  });

  it('creates the bucket under a customer managed key of its own, rotated, with S3 Bucket Keys', () => {
    const s = synth({ compactor: { bucket: { encryption: 'kms' } } });
    const key = logicalId(s, 'AWS::KMS::Key', 'DataKey');
    expect(s.json.Resources[key]).toMatchObject({
      Properties: { EnableKeyRotation: true },
      DeletionPolicy: 'Retain',
    });
    const bucket = s.json.Resources[logicalId(s, 'AWS::S3::Bucket', 'DataBucket')] as CfnResource;
    expect(bucket.Properties.BucketEncryption).toEqual({
      ServerSideEncryptionConfiguration: [
        {
          BucketKeyEnabled: true,
          ServerSideEncryptionByDefault: {
            KMSMasterKeyID: { 'Fn::GetAtt': [key, 'Arn'] },
            SSEAlgorithm: 'aws:kms',
          },
        },
      ],
    });
    // The access log bucket is unchanged (SSE-S3).
    const logs = s.json.Resources[logicalId(s, 'AWS::S3::Bucket', 'DataAccessLogs')] as CfnResource;
    expect(JSON.stringify(logs.Properties.BucketEncryption)).toContain('AES256');
  });

  it('creates no key for an imported SSE-KMS bucket and names its key in the grants', () => {
    const arn = 'arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab';
    const s = synth({ compactor: { bucket: { create: false, name: 'my-existing-lake', kmsKeyArn: arn } } });
    s.template.resourceCountIs('AWS::KMS::Key', 0);
    expect(JSON.stringify(s.json)).toContain(arn);
  });

  it('imports an existing bucket by name and creates none', () => {
    const s = synth({ compactor: { bucket: { create: false, name: 'my-existing-lake' } } });
    s.template.resourceCountIs('AWS::S3::Bucket', 0);
    for (const fn of functionsByStep(s).values()) expect(envOf(fn).DATA_BUCKET).toBe('my-existing-lake');
  });

  it('passes the Map settings and the Lambda timeouts to the workflow', () => {
    const s = synth({
      compactor: {
        map: { maxConcurrency: 3, toleratedFailurePercentage: 20, childExecutionType: 'STANDARD' },
        lambda: { compact: { timeoutSeconds: 600 }, others: { timeoutSeconds: 120 } },
      },
    });
    const [, sm] = resourcesOfType(s.json, 'AWS::StepFunctions::StateMachine')[0] as [string, CfnResource];
    const asl = JSON.parse(flatten(sm.Properties.DefinitionString)) as AslStates;
    const states = allStates(asl);
    const map = states.find((st) => st.Type === 'Map');
    expect(map).toMatchObject({ MaxConcurrency: 3 });
    // The tolerance is applied after Summary (cdk/constructs/compaction-workflow.ts), which gets it.
    const summary = states.find((st) =>
      String(st.Parameters?.FunctionName ?? '').startsWith('<StepsSummary'),
    );
    expect(summary?.Parameters?.Payload).toMatchObject({ toleratedFailurePercentage: 20 });
    // Each task waits a minute longer than its Lambda may run.
    const timeoutOf = (fnPrefix: string) =>
      states.find((st) => String(st.Parameters?.FunctionName ?? '').startsWith(`<${fnPrefix}`))
        ?.TimeoutSeconds;
    expect(timeoutOf('StepsCompact')).toBe(660);
    // Standard children's partition steps default to their own 300 s, not `others`. StepsUpload
    // is the publish step's function (its logical ID predates the rename, see above).
    expect(timeoutOf('StepsUpload')).toBe(360);
    expect(timeoutOf('StepsRecover')).toBe(180);
  });

  it('Express children: the chain’s tasks wait their Lambda’s timeout + 12 s (Init cap and a margin), the parent’s + 60 s', () => {
    const s = synth({
      // A 30 s compact Lambda needs smaller jobs than the Express default (child-budget.ts).
      compactor: {
        maxJobBytes: 128 * 2 ** 20,
        lambda: { compact: { timeoutSeconds: 30 }, partitionSteps: { timeoutSeconds: 10 } },
      },
    });
    const [, sm] = resourcesOfType(s.json, 'AWS::StepFunctions::StateMachine')[0] as [string, CfnResource];
    const states = allStates(JSON.parse(flatten(sm.Properties.DefinitionString)) as AslStates);
    const timeoutOf = (fnPrefix: string) =>
      states.find((st) => String(st.Parameters?.FunctionName ?? '').startsWith(`<${fnPrefix}`))
        ?.TimeoutSeconds;
    expect(timeoutOf('StepsCompact')).toBe(42);
    // A cold invocation can last the Init cap plus the function's timeout (lambda-runtime-environment.html):
    // the task must wait longer than that, not exactly that.
    expect((timeoutOf('StepsCompact') ?? 0) - 30).toBeGreaterThan(LAMBDA_INIT_CAP_SECONDS);
    expect(timeoutOf('StepsUpload')).toBe(22);
    expect(timeoutOf('StepsClearManifest')).toBe(22);
    expect(timeoutOf('StepsPlan')).toBe(360);
    const byStep = functionsByStep(s);
    expect(byStep.get('publish')?.Properties).toMatchObject({ Timeout: 10 });
    expect(byStep.get('plan')?.Properties).toMatchObject({ Timeout: 300 });
  });

  it('fails synth on a bad config, naming the key', () => {
    expect(() => synth({ compactor: { tiers: { hourly: { minFiles: -1 } } } })).toThrow(
      /compactor\.tiers\.hourly\.minFiles/,
    );
  });
});
