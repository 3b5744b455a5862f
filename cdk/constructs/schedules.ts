/**
 * EventBridge Scheduler schedules, one per enabled tier (and one for retention when it has a
 * rule), each starting the state machine with `{"tier": "<tier>"}`. Overlapping runs are safe (the manifest is the lease), so a late or
 * retried start does no harm; starts that still fail land in a dead-letter queue.
 *
 * The role Scheduler assumes is CDK's own (aws-scheduler-targets): its trust policy conditions
 * `aws:SourceArn` on the schedule GROUP's ARN and `aws:SourceAccount`, which is what Scheduler
 * sends ("The value of aws:SourceArn must be your EventBridge Scheduler schedule group ARN ... Do
 * not scope the aws:SourceArn statement to a specific schedule or a schedule name prefix",
 * https://docs.aws.amazon.com/scheduler/latest/UserGuide/cross-service-confused-deputy-prevention.html).
 * CDK also grants it states:StartExecution on the state machine and sqs:SendMessage on the DLQ.
 * test/cdk/iam-evaluated.test.ts evaluates that AssumeRole.
 */

import { Duration, RemovalPolicy, TimeZone } from 'aws-cdk-lib';
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
  readonly #retryAttempts: number;
  readonly #maxEventAge: Duration;

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

    this.#retryAttempts = props.retryAttempts ?? 10;
    this.#maxEventAge = props.maxEventAge ?? Duration.hours(1);
    const schedules: Partial<Record<JobKind, scheduler.Schedule>> = {};
    for (const tier of Object.keys(props.tiers) as JobKind[]) {
      const settings = props.tiers[tier];
      if (!settings?.enabled) continue;
      schedules[tier] = this.addStart(`${tier.charAt(0).toUpperCase()}${tier.slice(1)}`, {
        stateMachine: props.stateMachine,
        input: { tier },
        expression: settings.expression,
        description: `compactor: start the ${tier} tier`,
      });
    }
    this.schedules = schedules;
  }

  /**
   * A schedule in this group starting `stateMachine` with `input`, with the group's retries and
   * dead-letter queue. No role given: CDK creates one per target state machine (shared by every
   * schedule of it).
   */
  addStart(
    id: string,
    start: {
      readonly stateMachine: sfn.IStateMachine;
      readonly input: Record<string, unknown>;
      readonly expression: string;
      readonly description: string;
    },
  ): scheduler.Schedule {
    const target = new StepFunctionsStartExecution(start.stateMachine, {
      input: scheduler.ScheduleTargetInput.fromObject(start.input),
      deadLetterQueue: this.deadLetterQueue,
      retryAttempts: this.#retryAttempts,
      maxEventAge: this.#maxEventAge,
    });
    return new scheduler.Schedule(this, id, {
      // Partitions are UTC hours and days, so the schedule is too.
      schedule: scheduler.ScheduleExpression.expression(start.expression, TimeZone.ETC_UTC),
      target,
      scheduleGroup: this.group,
      description: start.description,
      timeWindow: scheduler.TimeWindow.off(),
    });
  }
}

/** Why a schedule has no period a missed-start alarm can use. */
export type NoPeriod = { readonly period?: undefined; readonly reason: string };

/**
 * The longest time between two consecutive starts of a recurring Scheduler expression (UTC), in
 * whole minutes: `rate(N unit)` is N units; a cron expression is expanded over a little more than
 * four years from 2024-01-01 (every weekday and month length, a leap year included) and its
 * largest gap taken, so `cron(10 * * * ? *)` is an hour, `cron(30 3 * * ? *)` a day and
 * `cron(0 9 ? * MON-FRI *)` three days. Fields follow the Scheduler's cron syntax (minutes, hours,
 * day-of-month, month, day-of-week 1-7 = SUN-SAT, year; `, - * ? /`,
 * https://docs.aws.amazon.com/scheduler/latest/UserGuide/schedule-types.html); `L`, `W` and `#`
 * and one-time `at()` schedules have no period here.
 */
export function schedulePeriod(
  expression: string,
): { readonly period: Duration; readonly reason?: undefined } | NoPeriod {
  const rate = /^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$/.exec(expression);
  if (rate) {
    const n = Number(rate[1]);
    const unit = rate[2] ?? '';
    if (n < 1) return { reason: `${expression} has no positive period` };
    if (unit.startsWith('minute')) return { period: Duration.minutes(n) };
    if (unit.startsWith('hour')) return { period: Duration.hours(n) };
    return { period: Duration.days(n) };
  }
  if (expression.startsWith('at(')) return { reason: `${expression} runs once` };
  const cron = /^cron\((\S+) (\S+) (\S+) (\S+) (\S+) (\S+)\)$/.exec(expression);
  if (!cron) return { reason: `${expression} is not a rate or cron expression` };
  const [, minute, hour, dom, month, dow, year] = cron as unknown as string[];
  if ([dom, dow].some((f) => /[LW#]/.test(f ?? ''))) {
    return { reason: `${expression} uses L, W or #, whose period is not derived here` };
  }
  const fields = {
    minute: cronField(minute ?? '', 0, 59),
    hour: cronField(hour ?? '', 0, 23),
    dom: cronField(dom ?? '', 1, 31),
    month: cronField(month ?? '', 1, 12, MONTHS),
    dow: cronField(dow ?? '', 1, 7, WEEKDAYS),
    year: cronField(year ?? '', 1970, 2199),
  };
  for (const [name, field] of Object.entries(fields)) {
    if (typeof field === 'string') return { reason: `${expression}: ${name} ${field}` };
  }
  const f = fields as { [K in keyof typeof fields]: Set<number> };
  const times: number[] = [];
  const start = Date.UTC(2024, 0, 1);
  for (let day = 0; day < 4 * 366 + 31; day++) {
    const date = new Date(start + day * 86_400_000);
    if (!f.year.has(date.getUTCFullYear()) || !f.month.has(date.getUTCMonth() + 1)) continue;
    // `?` in one of the two day fields: the other one decides (Scheduler accepts no other mix).
    const byDom = dom !== '?';
    const byDow = dow !== '?';
    if (byDom && !f.dom.has(date.getUTCDate())) continue;
    if (byDow && !f.dow.has(date.getUTCDay() + 1)) continue;
    for (const h of f.hour) for (const m of f.minute) times.push(date.getTime() + (h * 60 + m) * 60_000);
  }
  times.sort((a, b) => a - b);
  let gap = 0;
  for (let i = 1; i < times.length; i++) gap = Math.max(gap, (times[i] as number) - (times[i - 1] as number));
  if (times.length < 2) return { reason: `${expression} starts fewer than twice in four years` };
  return { period: Duration.minutes(gap / 60_000) };
}

const MONTHS = ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'];
const WEEKDAYS = ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'];

/** The values one cron field allows, or why it cannot be read. */
function cronField(
  text: string,
  min: number,
  max: number,
  names: readonly string[] = [],
): Set<number> | string {
  const value = (part: string): number | undefined => {
    const named = names.indexOf(part.toUpperCase());
    if (named >= 0) return named + min;
    return /^\d+$/.test(part) ? Number(part) : undefined;
  };
  const out = new Set<number>();
  for (const item of text.split(',')) {
    const [range, stepText] = item.split('/');
    const step = stepText === undefined ? 1 : Number(stepText);
    if (!Number.isInteger(step) || step < 1) return `has a bad increment in "${text}"`;
    let from: number | undefined;
    let to: number | undefined;
    if (range === '*' || range === '?') [from, to] = [min, max];
    else if (range?.includes('-')) {
      const [a, b] = range.split('-');
      [from, to] = [value(a ?? ''), value(b ?? '')];
    } else {
      from = value(range ?? '');
      // `5/15`: from 5 every 15; a bare `5`: just 5.
      to = stepText === undefined ? from : max;
    }
    if (from === undefined || to === undefined || from < min || to > max || from > to) {
      return `cannot be read: "${text}"`;
    }
    for (let v = from; v <= to; v += step) out.add(v);
  }
  return out;
}
