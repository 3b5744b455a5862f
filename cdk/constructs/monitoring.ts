/**
 * What an operator watches: a dashboard (executions, partitions, bytes and rows, quarantines,
 * recovery actions, Lambda health) and the alarms that need a human: a failed execution, a
 * quarantined job (nothing of it is deleted until someone looks), Lambda errors and schedule
 * starts that never arrived. Alarm actions go to an SNS topic when an email is configured.
 */

import { Duration, Stack } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as actions from 'aws-cdk-lib/aws-cloudwatch-actions';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as subscriptions from 'aws-cdk-lib/aws-sns-subscriptions';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import type * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import { acknowledge } from '../nag.ts';

/** The EMF metrics the handlers publish (functions/lambda/telemetry.ts), dimension service=<service>. */
export const COMPACTOR_METRICS = [
  'PartitionsCompacted',
  'PartitionsSkipped',
  'PartitionsFailed',
  'BytesIn',
  'BytesOut',
  'RowsIn',
  'RowsOut',
  'FilesIn',
  'FilesOut',
  'Quarantined',
  'RecoveryActions',
] as const;
export type CompactorMetric = (typeof COMPACTOR_METRICS)[number];

export interface MonitoringProps {
  readonly stateMachine: sfn.IStateMachine;
  /** The step functions by name; their errors, throttles and durations are charted and alarmed. */
  readonly functions: Readonly<Record<string, lambda.IFunction>>;
  /**
   * Namespace of the handlers' EMF metrics (POWERTOOLS_METRICS_NAMESPACE).
   * @default 'Compactor'
   */
  readonly metricsNamespace?: string;
  /**
   * The `service` dimension Powertools adds (POWERTOOLS_SERVICE_NAME).
   * @default 'compactor'
   */
  readonly serviceName?: string;
  /**
   * Where alarm notifications go; without it there is no topic and alarms only show in the console.
   * @default - no notifications
   */
  readonly alarmEmail?: string;
  /**
   * The schedules' dead-letter queue: a message there is a run that never started.
   * @default - no alarm on missed starts
   */
  readonly scheduleDeadLetterQueue?: sqs.IQueue;
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
  readonly lambdaErrorsAlarm: cloudwatch.Alarm;
  readonly missedStartAlarm: cloudwatch.Alarm | undefined;
  readonly alarms: readonly cloudwatch.Alarm[];

  readonly #namespace: string;
  readonly #service: string;

  constructor(scope: Construct, id: string, props: MonitoringProps) {
    super(scope, id);
    this.#namespace = props.metricsNamespace ?? 'Compactor';
    this.#service = props.serviceName ?? 'compactor';
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
    this.quarantineAlarm = this.metric('Quarantined', period).createAlarm(this, 'Quarantined', {
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
    this.missedStartAlarm = props.scheduleDeadLetterQueue
      ?.metricApproximateNumberOfMessagesVisible({ period, statistic: 'Maximum' })
      .createAlarm(this, 'MissedStart', {
        alarmDescription:
          'A scheduled start could not be delivered to the state machine (see the schedules dead-letter queue).',
        threshold: 1,
        evaluationPeriods: 1,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      });
    this.alarms = [
      this.executionFailedAlarm,
      this.executionTimedOutAlarm,
      this.quarantineAlarm,
      this.lambdaErrorsAlarm,
      ...(this.missedStartAlarm ? [this.missedStartAlarm] : []),
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
    const sum = (name: CompactorMetric) => this.metric(name, hour);
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
        ],
        width: 8,
      }),
      new cloudwatch.GraphWidget({
        title: 'Partitions',
        left: [sum('PartitionsCompacted'), sum('PartitionsSkipped'), sum('PartitionsFailed')],
        width: 8,
      }),
      new cloudwatch.GraphWidget({
        title: 'Quarantines and recovery actions',
        left: [sum('Quarantined'), sum('RecoveryActions')],
        width: 8,
      }),
    );
    this.dashboard.addWidgets(
      new cloudwatch.GraphWidget({
        title: 'Bytes in / out',
        left: [sum('BytesIn'), sum('BytesOut')],
        width: 8,
      }),
      new cloudwatch.GraphWidget({ title: 'Rows in / out', left: [sum('RowsIn'), sum('RowsOut')], width: 8 }),
      new cloudwatch.GraphWidget({
        title: 'Files in / out',
        left: [sum('FilesIn'), sum('FilesOut')],
        width: 8,
      }),
    );
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

  /** One of the handlers' EMF metrics (sum). */
  metric(name: CompactorMetric, period = Duration.minutes(5)): cloudwatch.Metric {
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
