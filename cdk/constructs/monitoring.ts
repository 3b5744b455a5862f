/**
 * What an operator watches: a dashboard (executions, partitions, bytes and rows, quarantines,
 * recovery actions, each tier's backlog, Lambda health) and the alarms that need a human: a
 * failed execution, a quarantined job (nothing of it is deleted until someone looks), Lambda
 * errors, schedule starts that never arrived, and a tier whose backlog does not drain. Alarm
 * actions go to an SNS topic when an email is configured.
 */

import { Annotations, Duration, Stack } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as actions from 'aws-cdk-lib/aws-cloudwatch-actions';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as subscriptions from 'aws-cdk-lib/aws-sns-subscriptions';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import type * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import { METRICS, METRICS_NAMESPACE, type MetricName, SERVICE_NAME } from '../../functions/contract.ts';
import { BEHIND_COMPARISON } from '../../functions/core/backlog.ts';
import { acknowledge } from '../nag.ts';

export interface MonitoringProps {
  readonly stateMachine: sfn.IStateMachine;
  /** The step functions by name; their errors, throttles and durations are charted and alarmed. */
  readonly functions: Readonly<Record<string, lambda.IFunction>>;
  /**
   * Namespace of the handlers' EMF metrics (POWERTOOLS_METRICS_NAMESPACE).
   * @default METRICS_NAMESPACE ('Compactor')
   */
  readonly metricsNamespace?: string;
  /**
   * The `service` dimension Powertools adds (POWERTOOLS_SERVICE_NAME).
   * @default SERVICE_NAME ('compactor')
   */
  readonly serviceName?: string;
  /**
   * Where alarm notifications go; without it there is no topic and alarms only show in the console.
   * @default - no notifications
   */
  readonly alarmEmail?: string;
  /**
   * The schedules' dead-letter queue: a message there is a start Scheduler could not deliver.
   * @default - no alarm on it
   */
  readonly scheduleDeadLetterQueue?: sqs.IQueue;
  /**
   * Per scheduled tier, the longest time between two of its starts (`schedulePeriod` in
   * schedules.ts): each gets an alarm when none of its executions planned within two of them.
   * @default - no missed-start alarms
   */
  readonly tierPeriods?: Readonly<Record<string, Duration>>;
  /**
   * Per scheduled compaction tier, its `tiers.<tier>.behindAfterSeconds`: each gets a backlog
   * alarm, firing when the oldest eligible partition has waited longer (functions/core/backlog.ts),
   * and a dashboard graph of its backlog.
   * @default - no backlog alarms
   */
  readonly behindAfterSeconds?: Readonly<Record<string, number>>;
  /**
   * The scheduled canary's state machine and its schedule's period: an alarm on its failed or
   * timed-out executions, and one when it started none within two periods.
   * @default - no canary alarms
   */
  readonly canary?: { readonly stateMachine: sfn.IStateMachine; readonly period: Duration | undefined };
  /**
   * Dashboard name.
   * @default - generated
   */
  readonly dashboardName?: string;
}

export class Monitoring extends Construct {
  readonly dashboard: cloudwatch.Dashboard;
  readonly alarmTopic: sns.Topic | undefined;
  readonly executionFailedAlarm: cloudwatch.Alarm;
  readonly executionTimedOutAlarm: cloudwatch.Alarm;
  readonly quarantineAlarm: cloudwatch.Alarm;
  /** A manifest the Recover step could not resolve: its partition waits until someone fixes why. */
  readonly recoveryUnresolvedAlarm: cloudwatch.Alarm;
  readonly lambdaErrorsAlarm: cloudwatch.Alarm;
  /** A start the Scheduler could not deliver (the DLQ has a message). */
  readonly undeliveredStartAlarm: cloudwatch.Alarm | undefined;
  /** Per tier: no execution of it planned within two of its periods. */
  readonly missedStartAlarms: Readonly<Record<string, cloudwatch.Alarm>>;
  /** Per tier: its oldest eligible partition has waited longer than its behindAfterSeconds. */
  readonly backlogAlarms: Readonly<Record<string, cloudwatch.Alarm>>;
  /** A canary execution failed or timed out: the deployed compactor did not compact its table right. */
  readonly canaryFailedAlarm: cloudwatch.Alarm | undefined;
  /** No canary execution started within two of its schedule's periods. */
  readonly canaryMissedAlarm: cloudwatch.Alarm | undefined;
  readonly alarms: readonly cloudwatch.Alarm[];

  readonly #namespace: string;
  readonly #service: string;

  constructor(scope: Construct, id: string, props: MonitoringProps) {
    super(scope, id);
    this.#namespace = props.metricsNamespace ?? METRICS_NAMESPACE;
    this.#service = props.serviceName ?? SERVICE_NAME;
    const sm = props.stateMachine;
    const period = Duration.minutes(5);
    const functions = Object.entries(props.functions);

    this.executionFailedAlarm = sm
      .metricFailed({ period, statistic: 'Sum' })
      .createAlarm(this, 'ExecutionFailed', {
        alarmDescription:
          'A compaction execution failed. Open it in the Step Functions console, fix the cause, then redrive it; recovery resolves any job it left.',
        threshold: 1,
        evaluationPeriods: 1,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      });
    this.executionTimedOutAlarm = sm
      .metricTimedOut({ period, statistic: 'Sum' })
      .createAlarm(this, 'ExecutionTimedOut', {
        alarmDescription: 'A compaction execution timed out; redrive it, recovery resolves any job it left.',
        threshold: 1,
        evaluationPeriods: 1,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      });
    this.quarantineAlarm = this.metric(METRICS.quarantined, period).createAlarm(this, 'Quarantined', {
      alarmDescription:
        'A job or input was quarantined: nothing of it is deleted until an operator looks. `compactor status` lists the records under _compaction/quarantine/ with their reasons.',
      threshold: 1,
      evaluationPeriods: 1,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      // No datapoint means nothing was quarantined.
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    // One alarm over every step (a math sum) rather than eight: a retried transient error counts too.
    const errorMetrics = Object.fromEntries(
      functions.map(([, fn], i) => [`e${i}`, fn.metricErrors({ period, statistic: 'Sum' })]),
    );
    this.lambdaErrorsAlarm = new cloudwatch.MathExpression({
      expression: Object.keys(errorMetrics).join(' + ') || '0',
      usingMetrics: errorMetrics,
      period,
      label: 'Lambda errors (all steps)',
    }).createAlarm(this, 'LambdaErrors', {
      alarmDescription:
        'A compactor step Lambda raised an error (Step Functions may have retried it); see the function logs.',
      threshold: 1,
      evaluationPeriods: 1,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    this.undeliveredStartAlarm = props.scheduleDeadLetterQueue
      ?.metricApproximateNumberOfMessagesVisible({ period, statistic: 'Maximum' })
      .createAlarm(this, 'MissedStart', {
        alarmDescription:
          'A scheduled start could not be delivered to the state machine (see the schedules dead-letter queue).',
        threshold: 1,
        evaluationPeriods: 1,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      });
    const missed: Record<string, cloudwatch.Alarm> = {};
    for (const [tier, tierPeriod] of Object.entries(props.tierPeriods ?? {})) {
      const alarm = this.#missedStartAlarm(tier, tierPeriod);
      if (alarm) missed[tier] = alarm;
    }
    this.missedStartAlarms = missed;
    const behindAfter = Object.entries(props.behindAfterSeconds ?? {});
    this.backlogAlarms = Object.fromEntries(
      behindAfter.map(([tier, seconds]) => [
        tier,
        this.#backlogAlarm(tier, seconds, props.tierPeriods?.[tier]),
      ]),
    );
    this.canaryFailedAlarm = props.canary && this.#canaryFailedAlarm(props.canary.stateMachine, period);
    const canaryPeriod = props.canary?.period;
    this.canaryMissedAlarm =
      props.canary && canaryPeriod
        ? this.#silenceAlarm(
            { key: 'canary', what: 'the canary' },
            'CanaryMissed',
            props.canary.stateMachine.metricStarted({ statistic: 'Sum' }),
            canaryPeriod,
            (window) =>
              `No canary execution started within two of its schedule periods (${window / 3600} h). Check the canary schedule (its role) and the schedules dead-letter queue.`,
          )
        : undefined;
    this.recoveryUnresolvedAlarm = this.metric(METRICS.recoveryUnresolved, period).createAlarm(
      this,
      'RecoveryUnresolved',
      {
        alarmDescription:
          "Recovery could not resolve a manifest (e.g. DescribeExecution denied for an older stack, a KMS denial, a copy S3 refuses): its partition is skipped every run until the cause is fixed, the rest is compacted. The Recover step's error log and output (unresolvedManifests) name it and why.",
        threshold: 1,
        evaluationPeriods: 1,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        // The Recover step records 0 when everything resolved; no datapoint means no execution.
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      },
    );
    this.alarms = [
      this.executionFailedAlarm,
      this.executionTimedOutAlarm,
      this.quarantineAlarm,
      this.recoveryUnresolvedAlarm,
      this.lambdaErrorsAlarm,
      ...(this.undeliveredStartAlarm ? [this.undeliveredStartAlarm] : []),
      ...Object.values(this.missedStartAlarms),
      ...Object.values(this.backlogAlarms),
      ...(this.canaryFailedAlarm ? [this.canaryFailedAlarm] : []),
      ...(this.canaryMissedAlarm ? [this.canaryMissedAlarm] : []),
    ];

    if (props.alarmEmail) {
      this.alarmTopic = new sns.Topic(this, 'AlarmTopic', {
        enforceSSL: true,
        displayName: 'Compactor alarms',
      });
      this.alarmTopic.addSubscription(new subscriptions.EmailSubscription(props.alarmEmail));
      acknowledge(
        this.alarmTopic,
        'AwsSolutions-SNS2',
        'Alarm notifications carry no data; CloudWatch cannot publish to a topic under the AWS-managed SNS key, and a customer key for this alone is not worth its cost.',
      );
      const action = new actions.SnsAction(this.alarmTopic);
      for (const alarm of this.alarms) {
        alarm.addAlarmAction(action);
        alarm.addOkAction(action);
      }
    } else {
      this.alarmTopic = undefined;
    }

    this.dashboard = new cloudwatch.Dashboard(this, 'Dashboard', {
      ...(props.dashboardName ? { dashboardName: props.dashboardName } : {}),
      defaultInterval: Duration.days(2),
    });
    const hour = Duration.hours(1);
    const sum = (name: MetricName) => this.metric(name, hour);
    this.dashboard.addWidgets(
      new cloudwatch.AlarmStatusWidget({ title: 'Alarms', alarms: [...this.alarms], width: 24, height: 3 }),
    );
    this.dashboard.addWidgets(
      new cloudwatch.GraphWidget({
        title: 'Executions',
        left: [
          sm.metricStarted({ period: hour, statistic: 'Sum', label: 'started' }),
          sm.metricSucceeded({ period: hour, statistic: 'Sum', label: 'succeeded' }),
          sm.metricFailed({ period: hour, statistic: 'Sum', label: 'failed' }),
          sm.metricTimedOut({ period: hour, statistic: 'Sum', label: 'timed out' }),
          sm.metricAborted({ period: hour, statistic: 'Sum', label: 'aborted' }),
          ...Object.keys(props.tierPeriods ?? {}).map((tier) =>
            this.tierMetric(tier, hour).with({ label: `planned: ${tier}` }),
          ),
        ],
        width: 8,
      }),
      new cloudwatch.GraphWidget({
        title: 'Partitions',
        left: [sum(METRICS.compacted), sum(METRICS.skipped), sum(METRICS.failed)],
        width: 8,
      }),
      new cloudwatch.GraphWidget({
        title: 'Quarantines and recovery actions',
        left: [sum(METRICS.quarantined), sum(METRICS.recoveryActions), sum(METRICS.recoveryUnresolved)],
        width: 8,
      }),
    );
    this.dashboard.addWidgets(
      new cloudwatch.GraphWidget({
        title: 'Bytes in / out',
        left: [sum(METRICS.bytesIn), sum(METRICS.bytesOut)],
        width: 8,
      }),
      new cloudwatch.GraphWidget({
        title: 'Rows in / out',
        left: [sum(METRICS.rowsIn), sum(METRICS.rowsOut)],
        width: 8,
      }),
      new cloudwatch.GraphWidget({
        title: 'Files in / out',
        left: [sum(METRICS.filesIn), sum(METRICS.filesOut)],
        width: 8,
      }),
    );
    if (behindAfter.length > 0) {
      this.dashboard.addWidgets(
        ...behindAfter.map(
          ([tier, seconds]) =>
            new cloudwatch.GraphWidget({
              title: `Backlog: ${tier}`,
              left: [
                this.backlogMetric(METRICS.oldestEligibleAge, tier, hour).with({
                  label: 'oldest eligible age (s)',
                }),
              ],
              leftAnnotations: [{ value: seconds, label: 'behindAfterSeconds' }],
              right: [
                this.backlogMetric(METRICS.eligiblePartitions, tier, hour).with({
                  label: 'eligible partitions',
                }),
              ],
              width: Math.max(8, Math.floor(24 / behindAfter.length)),
            }),
        ),
      );
    }
    this.dashboard.addWidgets(
      new cloudwatch.GraphWidget({
        title: 'Lambda errors',
        left: functions.map(([name, fn]) => fn.metricErrors({ period: hour, statistic: 'Sum', label: name })),
        width: 8,
      }),
      new cloudwatch.GraphWidget({
        title: 'Lambda throttles',
        left: functions.map(([name, fn]) =>
          fn.metricThrottles({ period: hour, statistic: 'Sum', label: name }),
        ),
        width: 8,
      }),
      new cloudwatch.GraphWidget({
        title: 'Lambda duration (max)',
        left: functions.map(([name, fn]) =>
          fn.metricDuration({ period: hour, statistic: 'Maximum', label: name }),
        ),
        width: 8,
      }),
    );
  }

  /**
   * "No execution of this tier planned within two of its periods", missing data breaching: a
   * schedule that never starts anything (a role Scheduler cannot assume, a disabled schedule)
   * emits no datapoint at all, so silence must alarm. The metric is the Plan step's
   * ExecutionsPlanned with dimension tier (executions of every tier share one state machine, so
   * its own ExecutionsStarted cannot tell them apart); an execution that fails before Plan counts
   * as missed too, and ExecutionFailed alarms with it. The window is two periods in whole alarm
   * periods of at most a day, within CloudWatch's limit of Period x EvaluationPeriods: seven days,
   * one day when the period is under an hour
   * (https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_PutMetricAlarm.html).
   * A tier whose window is longer gets no alarm, and a synth warning says so.
   */
  #missedStartAlarm(tier: string, tierPeriod: Duration): cloudwatch.Alarm | undefined {
    const name = `${tier.charAt(0).toUpperCase()}${tier.slice(1)}`;
    return this.#silenceAlarm(
      { key: tier, what: `the ${tier} tier` },
      `MissedStart${name}`,
      this.tierMetric(tier, tierPeriod),
      tierPeriod,
      (window) =>
        `No ${tier} execution reached its Plan step within two of the tier's schedule periods (${window / 3600} h). Check the ${tier} schedule (enabled, its role), the schedules dead-letter queue and failed executions. Right after the first deploy this alarms until the tier's first run (or start one: compactor start --tier ${tier}).`,
    );
  }

  /**
   * An alarm when `metric` (a sum) stayed under 1 for two of `schedulePeriod`, missing data
   * breaching, in whole alarm periods of at most a day (the window rules above).
   */
  #silenceAlarm(
    subject: { readonly key: string; readonly what: string },
    id: string,
    metric: cloudwatch.Metric,
    schedulePeriod: Duration,
    description: (windowSeconds: number) => string,
  ): cloudwatch.Alarm | undefined {
    const window = schedulePeriod.toSeconds() * 2;
    const alarmPeriod = Math.min(schedulePeriod.toSeconds(), 86_400);
    const evaluationPeriods = Math.ceil(window / alarmPeriod);
    const limit = alarmPeriod < 3600 ? 86_400 : 604_800;
    if (evaluationPeriods * alarmPeriod > limit) {
      Annotations.of(this).addWarningV2(
        `compactor:missedStartWindow:${subject.key}`,
        `No missed-start alarm for ${subject.what}: two of its periods (${window / 3600} h) exceed CloudWatch's ${limit / 86_400}-day alarm window.`,
      );
      return undefined;
    }
    return metric.with({ period: Duration.seconds(alarmPeriod) }).createAlarm(this, id, {
      alarmDescription: description(window),
      threshold: 1,
      comparisonOperator: cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
      evaluationPeriods,
      datapointsToAlarm: evaluationPeriods,
      treatMissingData: cloudwatch.TreatMissingData.BREACHING,
    });
  }

  /**
   * "The tier's oldest eligible partition has waited longer than behindAfterSeconds", compared as
   * the core's isBehind compares (BEHIND_COMPARISON). Plan publishes the figure once per
   * execution, so most periods hold no datapoint: missing data keeps the alarm's state ("ignore:
   * the current alarm state is maintained",
   * https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/alarms-and-missing-data.html).
   * A backlog stays in ALARM until a plan whose backlog covers the tier finds it drained: a sweep,
   * or a windowed plan that listed again what the last plan's backlog record carried (a plan
   * without a covering record publishes the age only when behind: backlog.ts's ageStands). A quiet
   * hour never clears or raises it; a schedule that starts nothing is the missed-start alarm's.
   */
  #backlogAlarm(tier: string, behindAfterSeconds: number, schedulePeriod?: Duration): cloudwatch.Alarm {
    const name = `${tier.charAt(0).toUpperCase()}${tier.slice(1)}`;
    // A due partition waits for the next start: a threshold within one schedule period alarms on
    // a tier that keeps up.
    if (schedulePeriod !== undefined && schedulePeriod.toSeconds() >= behindAfterSeconds) {
      Annotations.of(this).addWarningV2(
        `compactor:backlogThreshold:${tier}`,
        `The ${tier} backlog alarm fires between runs of a tier that keeps up: tiers.${tier}.behindAfterSeconds (${behindAfterSeconds} s) is not above the longest time between two of its starts (${schedulePeriod.toSeconds()} s); raise it or schedule the tier more often.`,
      );
    }
    return this.backlogMetric(METRICS.oldestEligibleAge, tier, Duration.hours(1)).createAlarm(
      this,
      `Backlog${name}`,
      {
        alarmDescription: `The ${tier} tier is behind: its oldest eligible partition has waited longer than tiers.${tier}.behindAfterSeconds (${behindAfterSeconds} s) since it became due. The Plan step's log ("behind") and \`compactor plan --tier ${tier}\` name it; check failed and held partitions (compactor status, the skip reasons), then raise map.maxConcurrency, maxJobsPerPartition or the job bounds, or schedule the tier more often.`,
        threshold: behindAfterSeconds,
        comparisonOperator: BEHIND_COMPARISON as cloudwatch.ComparisonOperator,
        evaluationPeriods: 1,
        treatMissingData: cloudwatch.TreatMissingData.IGNORE,
      },
    );
  }

  /** One of Plan's backlog figures for a tier: its maximum over the period (one plan an hour at the default schedule). */
  backlogMetric(name: MetricName, tier: string, period: Duration): cloudwatch.Metric {
    return new cloudwatch.Metric({
      namespace: this.#namespace,
      metricName: name,
      dimensionsMap: { service: this.#service, tier },
      statistic: 'Maximum',
      period,
    });
  }

  /**
   * The canary state machine's ExecutionsFailed + ExecutionsTimedOut (AWS/States, dimension
   * StateMachineArn, https://docs.aws.amazon.com/step-functions/latest/dg/procedure-cw-metrics.html).
   * A canary execution fails on any failed step, its compaction included, after removing the canary.
   */
  #canaryFailedAlarm(stateMachine: sfn.IStateMachine, period: Duration): cloudwatch.Alarm {
    return new cloudwatch.MathExpression({
      expression: 'failed + timedOut',
      usingMetrics: {
        failed: stateMachine.metricFailed({ period, statistic: 'Sum' }),
        timedOut: stateMachine.metricTimedOut({ period, statistic: 'Sum' }),
      },
      period,
      label: 'canary executions failed or timed out',
    }).createAlarm(this, 'CanaryFailed', {
      alarmDescription:
        'The scheduled canary failed: the deployed compactor did not compact its canary table exactly (or a canary step failed). Open the execution in the Step Functions console: the failed state and its cause say what; `compactor doctor --stack <name>` runs the same check by hand.',
      threshold: 1,
      evaluationPeriods: 1,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
  }

  /** Executions of one tier that reached Plan (sum). */
  tierMetric(tier: string, period: Duration): cloudwatch.Metric {
    return new cloudwatch.Metric({
      namespace: this.#namespace,
      metricName: METRICS.executionsPlanned,
      dimensionsMap: { service: this.#service, tier },
      statistic: 'Sum',
      period,
    });
  }

  /** One of the handlers' EMF metrics (sum). */
  metric(name: MetricName, period = Duration.minutes(5)): cloudwatch.Metric {
    return new cloudwatch.Metric({
      namespace: this.#namespace,
      metricName: name,
      dimensionsMap: { service: this.#service },
      statistic: 'Sum',
      period,
    });
  }

  /** The console URL of the dashboard (region resolved at deploy time). */
  get dashboardUrl(): string {
    const region = Stack.of(this).region;
    return `https://${region}.console.aws.amazon.com/cloudwatch/home?region=${region}#dashboards/dashboard/${this.dashboard.dashboardName}`;
  }
}
