/**
 * The compactor: data bucket -> step Lambdas -> state machine -> schedules, plus monitoring.
 * Environment-agnostic (no account or region lookups), so `cdk synth` needs no AWS account.
 */

import { Annotations, CfnOutput, Duration, RemovalPolicy, Stack, type StackProps } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import { canaryKeyPrefix, canaryReceiptsKeyPrefix } from '../functions/core/canary.ts';
import { parseConfig, TIERS } from '../functions/core/config.ts';
import { SMALL_COMPACT, smallCompactMemoryMb } from '../functions/core/lambda-sizing.ts';
import { stateRootOf } from '../functions/core/state-root.ts';
import { lambdaConfigInput, lambdaConfigJson, type StackConfig } from './config.ts';
import { CompactorCanary } from './constructs/canary.ts';
import { CompactionWorkflow } from './constructs/compaction-workflow.ts';
import { CompactorFunctions, grantMapKey } from './constructs/compactor-functions.ts';
import { DataBucket } from './constructs/data-bucket.ts';
import { FailureSummary } from './constructs/failure-summary.ts';
import { Monitoring } from './constructs/monitoring.ts';
import { CompactionSchedules, schedulePeriod, type TierSchedule } from './constructs/schedules.ts';
import { acknowledge, acknowledgeWildcards, s3ObjectPrefixFinding } from './nag.ts';

export interface CompactorStackProps extends StackProps {
  /** Parsed once by the app from the `compactor` context (cdk/config.ts). */
  readonly config: StackConfig;
}

export class CompactorStack extends Stack {
  readonly config: StackConfig;
  readonly data: DataBucket;
  readonly functions: CompactorFunctions;
  readonly workflow: CompactionWorkflow;
  readonly failureSummary: FailureSummary;
  readonly schedules: CompactionSchedules;
  readonly monitoring: Monitoring;
  /** The scheduled canary, when `canary.enabled`. */
  readonly canary: CompactorCanary | undefined;

  constructor(scope: Construct, id: string, props: CompactorStackProps) {
    super(scope, id, {
      description: 'parquet-compactor: crash-safe compaction of small time-partitioned Parquet files',
      ...props,
    });
    const config = props.config;
    this.config = config;
    const removalPolicy = config.removalPolicy === 'destroy' ? RemovalPolicy.DESTROY : RemovalPolicy.RETAIN;

    this.data = new DataBucket(this, 'Data', {
      create: config.bucket.create,
      ...(config.bucket.name ? { bucketName: config.bucket.name } : {}),
      encryption: config.bucket.encryption,
      ...(config.bucket.kmsKeyArn ? { kmsKeyArn: config.bucket.kmsKeyArn } : {}),
      dataPrefix: config.dataPrefix,
      receiptsExpiration: Duration.days(config.receiptDays),
      removalPolicy,
    });
    const bucket = this.data.bucket;

    const smallMemoryMb = smallCompactMemoryMb(config.map.childExecutionType, config.lambda.compact.memoryMb);
    this.functions = new CompactorFunctions(this, 'Steps', {
      bucket,
      dataPrefix: config.dataPrefix,
      ...(this.data.encryptionKey ? { encryptionKey: this.data.encryptionKey } : {}),
      compactorConfigJson: lambdaConfigJson(config),
      metricsNamespace: config.metricsNamespace,
      compactSize: config.lambda.compact,
      // The same timeout as the large one: the Express budget holds for either (cdk/child-budget.ts).
      ...(smallMemoryMb !== undefined
        ? {
            compactSmallSize: {
              memoryMb: smallMemoryMb,
              ephemeralStorageMb: SMALL_COMPACT.ephemeralStorageMb,
              timeoutSeconds: config.lambda.compact.timeoutSeconds,
            },
          }
        : {}),
      partitionStepSize: config.lambda.partitionSteps,
      otherSize: config.lambda.others,
      removalPolicy,
    });
    const f = this.functions;

    this.workflow = new CompactionWorkflow(this, 'Workflow', {
      functions: f.byStep,
      ...(f.compactSmall ? { compactSmall: f.compactSmall } : {}),
      bucket,
      dataPrefix: config.dataPrefix,
      maxConcurrency: config.map.maxConcurrency,
      toleratedFailurePercentage: config.map.toleratedFailurePercentage,
      // Task timeouts follow the Lambdas' own, so the execution never moves on while one still runs.
      compactTimeout: Duration.seconds(config.lambda.compact.timeoutSeconds),
      stepTimeout: Duration.seconds(config.lambda.others.timeoutSeconds),
      partitionStepTimeout: Duration.seconds(config.lambda.partitionSteps.timeoutSeconds),
      childExecutionType: config.map.childExecutionType,
      smallJobsPerItem: config.smallJobsPerItem,
    });
    const stateMachine = this.workflow.stateMachine;
    const describeExecutions = f.grantDescribeExecutions(stateMachine);
    this.failureSummary = new FailureSummary(this, 'FailureSummary', {
      stateMachine,
      summary: f.summary,
      toleratedFailurePercentage: config.map.toleratedFailurePercentage,
    });
    this.failureSummary.node.addDependency(f.grantListMapRuns(stateMachine));
    // ItemReader reads the plan and ResultWriter writes the results under the bucket's key too.
    if (this.data.encryptionKey) grantMapKey(this.data.encryptionKey, stateMachine);

    const tiers: Record<string, TierSchedule> = {
      hourly: { expression: config.tiers.hourly.schedule, enabled: config.tiers.hourly.enabled },
      daily: { expression: config.tiers.daily.schedule, enabled: config.tiers.daily.enabled },
      monthly: { expression: config.tiers.monthly.schedule, enabled: config.tiers.monthly.enabled },
      // No rule, no retention run: an execution that could only plan nothing is not scheduled.
      retention: {
        expression: config.retention.schedule,
        enabled: config.retention.enabled && Object.keys(config.retention.rules).length > 0,
      },
    };
    this.schedules = new CompactionSchedules(this, 'Schedules', { stateMachine, tiers });
    // No scheduled run before recovery may ask Step Functions about manifest owners.
    this.schedules.node.addDependency(describeExecutions);

    const canaryLayout = parseConfig(lambdaConfigInput(config)).layout;
    this.canary = config.canary.enabled
      ? new CompactorCanary(this, 'Canary', {
          compaction: stateMachine,
          bucket,
          ...(this.data.encryptionKey ? { encryptionKey: this.data.encryptionKey } : {}),
          keyPrefix: canaryKeyPrefix(canaryLayout),
          receiptsKeyPrefix: canaryReceiptsKeyPrefix(canaryLayout),
          stateRoot: stateRootOf(config.dataPrefix),
          lambda: f.lambdaProps,
          size: config.lambda.others,
        })
      : undefined;
    if (this.canary) {
      this.schedules.addStart('Canary', {
        stateMachine: this.canary.stateMachine,
        input: {},
        expression: config.canary.schedule,
        description: 'compactor: run the canary',
      });
    }
    const canaryPeriod = this.canary ? schedulePeriod(config.canary.schedule) : undefined;
    if (canaryPeriod?.reason !== undefined)
      Annotations.of(this).addWarningV2(
        'compactor:missedStartPeriod:canary',
        `No missed-start alarm for the canary: ${canaryPeriod.reason}.`,
      );

    this.monitoring = new Monitoring(this, 'Monitoring', {
      ...(this.canary
        ? { canary: { stateMachine: this.canary.stateMachine, period: canaryPeriod?.period } }
        : {}),
      stateMachine,
      functions: f.all,
      metricsNamespace: config.metricsNamespace,
      scheduleDeadLetterQueue: this.schedules.deadLetterQueue,
      tierPeriods: this.#tierPeriods(tiers),
      behindAfterSeconds: Object.fromEntries(
        TIERS.filter((tier) => tiers[tier]?.enabled).map((tier) => [
          tier,
          config.tiers[tier].behindAfterSeconds,
        ]),
      ),
      ...(config.alarmEmail ? { alarmEmail: config.alarmEmail } : {}),
    });

    this.#acknowledgeWorkflowFindings();
    this.#acknowledgeAutoDeleteFindings();

    new CfnOutput(this, 'BucketName', { value: bucket.bucketName, description: 'The data bucket' });
    new CfnOutput(this, 'DataPrefix', {
      value: config.dataPrefix || '(bucket root)',
      description: 'Data root',
    });
    if (this.data.encryptionKey) {
      new CfnOutput(this, 'DataKeyArn', {
        value: this.data.encryptionKey.keyArn,
        description: 'The SSE-KMS key of the data bucket',
      });
    }
    new CfnOutput(this, 'StateMachineArn', {
      value: stateMachine.stateMachineArn,
      description: 'compactor start|watch|redrive --state-machine <this>',
    });
    if (this.canary) {
      // compactor doctor --stack checks the canary's schedule and last execution by it.
      new CfnOutput(this, 'CanaryStateMachineArn', {
        value: this.canary.stateMachine.stateMachineArn,
        description: 'The scheduled canary (compactor doctor checks its schedule and last execution)',
      });
    }
    new CfnOutput(this, 'DashboardUrl', {
      value: this.monitoring.dashboardUrl,
      description: 'CloudWatch dashboard',
    });
    if (this.monitoring.alarmTopic) {
      new CfnOutput(this, 'AlarmTopicArn', { value: this.monitoring.alarmTopic.topicArn });
    }
  }

  /** Each scheduled tier's period, for its missed-start alarm; a tier without one is a synth warning. */
  #tierPeriods(tiers: Record<string, TierSchedule>): Record<string, Duration> {
    const periods: Record<string, Duration> = {};
    for (const [tier, schedule] of Object.entries(tiers)) {
      if (!schedule.enabled) continue;
      const derived = schedulePeriod(schedule.expression);
      if (derived.period) periods[tier] = derived.period;
      else
        Annotations.of(this).addWarningV2(
          `compactor:missedStartPeriod:${tier}`,
          `No missed-start alarm for the ${tier} tier: ${derived.reason}.`,
        );
    }
    return periods;
  }

  /**
   * cdk-nag findings on the state machine's role, which CDK derives from the definition:
   * wildcards it needs by construction, each acknowledged by pattern with its reason.
   */
  #acknowledgeWorkflowFindings(): void {
    acknowledgeWildcards(
      this.workflow,
      /^Resource::<Steps[A-Za-z0-9]+\.Arn>:\*$/,
      'lambda:InvokeFunction on `<step function arn>:*` covers the versions and aliases of the step functions the definition names, no other function.',
    );
    acknowledgeWildcards(
      this.workflow,
      s3ObjectPrefixFinding(stateRootOf(this.config.dataPrefix)),
      'The Distributed Map reads its item files and writes its results under the state root of the data bucket; their keys hold execution and Map Run ids known only at run time.',
    );
    acknowledgeWildcards(
      this.workflow,
      /^Resource::arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:.*$/,
      'The Distributed Map manages its Map Run and child executions, whose ARNs hold ids known only at run time; scoped to this state machine.',
    );
    acknowledge(
      this.workflow,
      'AwsSolutions-IAM5[Resource::*]',
      'X-Ray tracing and CloudWatch Logs delivery actions of the state machine support no resource-level permissions.',
    );
  }

  /** CDK's own bucket auto-delete provider, deployed only with removalPolicy destroy. */
  #acknowledgeAutoDeleteFindings(): void {
    const provider = this.node.tryFindChild('Custom::S3AutoDeleteObjectsCustomResourceProvider');
    if (!provider) return;
    acknowledge(
      provider,
      'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]',
      'CDK’s S3 auto-delete provider (removalPolicy destroy only) logs with AWSLambdaBasicExecutionRole.',
    );
    acknowledge(
      provider,
      'AwsSolutions-L1',
      'CDK’s S3 auto-delete provider (removalPolicy destroy only) chooses its own runtime.',
    );
  }
}
