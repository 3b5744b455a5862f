/**
 * EventBridge Scheduler schedules, one per enabled tier (and one for retention when it has a
 * rule), each starting the state machine with `{"tier": "<tier>"}`. Overlapping runs are safe (the manifest is the lease), so a late or
 * retried start does no harm; starts that still fail land in a dead-letter queue.
 */

import { Duration, RemovalPolicy, Stack, TimeZone } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as scheduler from 'aws-cdk-lib/aws-scheduler';
import { StepFunctionsStartExecution } from 'aws-cdk-lib/aws-scheduler-targets';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import type * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import type { JobKind } from '../../functions/core/config.ts';
import { acknowledge } from '../nag.ts';

export interface TierSchedule {
  /** Scheduler expression, e.g. `cron(10 * * * ? *)` (UTC). */
  readonly expression: string;
  /** A disabled tier gets no schedule. */
  readonly enabled: boolean;
}

export interface CompactionSchedulesProps {
  readonly stateMachine: sfn.IStateMachine;
  /** Per job kind: `retention` runs the same state machine, planning expired files instead. */
  readonly tiers: Readonly<Partial<Record<JobKind, TierSchedule>>>;
  /**
   * Delivery retries of a failed StartExecution (throttling, service errors).
   * @default 10
   */
  readonly retryAttempts?: number;
  /**
   * A start older than this is dropped to the DLQ: the next scheduled run covers its work.
   * @default Duration.hours(1)
   */
  readonly maxEventAge?: Duration;
}

export class CompactionSchedules extends Construct {
  readonly schedules: Readonly<Partial<Record<JobKind, scheduler.Schedule>>>;
  /** Starts that could not be delivered; the monitoring alarms on it. */
  readonly deadLetterQueue: sqs.Queue;
  readonly group: scheduler.ScheduleGroup;
  /** The role Scheduler assumes: states:StartExecution on this state machine only. */
  readonly role: iam.Role;

  constructor(scope: Construct, id: string, props: CompactionSchedulesProps) {
    super(scope, id);
    this.deadLetterQueue = new sqs.Queue(this, 'DeadLetterQueue', {
      enforceSSL: true,
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      retentionPeriod: Duration.days(14),
    });
    acknowledge(
      this.deadLetterQueue,
      'AwsSolutions-SQS3',
      'This queue is itself the dead-letter queue of the schedules.',
    );

    // Holds only these schedules, so it goes with the stack.
    this.group = new scheduler.ScheduleGroup(this, 'Group', { removalPolicy: RemovalPolicy.DESTROY });
    const stack = Stack.of(this);
    this.role = new iam.Role(this, 'Role', {
      assumedBy: new iam.ServicePrincipal('scheduler.amazonaws.com', {
        // Confused-deputy guard: only the schedules of this group in this account may assume it.
        conditions: {
          StringEquals: { 'aws:SourceAccount': stack.account },
          ArnLike: {
            'aws:SourceArn': stack.formatArn({
              service: 'scheduler',
              resource: 'schedule',
              resourceName: `${this.group.scheduleGroupName}/*`,
            }),
          },
        },
      }),
      description: 'EventBridge Scheduler: start compaction executions',
    });

    const schedules: Partial<Record<JobKind, scheduler.Schedule>> = {};
    for (const tier of Object.keys(props.tiers) as JobKind[]) {
      const settings = props.tiers[tier];
      if (!settings?.enabled) continue;
      const target = new StepFunctionsStartExecution(props.stateMachine, {
        role: this.role,
        input: scheduler.ScheduleTargetInput.fromObject({ tier }),
        deadLetterQueue: this.deadLetterQueue,
        retryAttempts: props.retryAttempts ?? 10,
        maxEventAge: props.maxEventAge ?? Duration.hours(1),
      });
      schedules[tier] = new scheduler.Schedule(this, `${tier.charAt(0).toUpperCase()}${tier.slice(1)}`, {
        // Partitions are UTC hours and days, so the schedule is too.
        schedule: scheduler.ScheduleExpression.expression(settings.expression, TimeZone.ETC_UTC),
        target,
        scheduleGroup: this.group,
        description: `compactor: start the ${tier} tier`,
        timeWindow: scheduler.TimeWindow.off(),
      });
    }
    this.schedules = schedules;
  }
}
