/**
 * When a schedule fires, as the EventBridge Scheduler documents rate and cron expressions
 * (https://docs.aws.amazon.com/scheduler/latest/UserGuide/schedule-types.html, fields and
 * wildcards https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-cron-expressions.html):
 * the doctor's "started within its last two periods" rests on these times.
 */

import { GetScheduleCommand, ListSchedulesCommand, SchedulerClient } from '@aws-sdk/client-scheduler';
import { DescribeExecutionCommand, ListExecutionsCommand, SFNClient } from '@aws-sdk/client-sfn';
import { mockClient } from 'aws-sdk-client-mock';
import { describe, expect, it } from 'vitest';
import {
  checkScheduledCanary,
  checkSchedules,
  lastFireTimes,
  parseScheduleExpression,
} from '../../functions/cli/commands/doctor/doctor-schedules.ts';

const at = (iso: string) => Date.parse(iso);
const isoList = (ms: number[]) => ms.map((m) => new Date(m).toISOString());

function fires(expression: string, start: string, until: string, count = 2): string[] {
  const parsed = parseScheduleExpression(expression);
  if (parsed.kind === 'unsupported') throw new Error(parsed.reason);
  return isoList(lastFireTimes(parsed, { start: at(start), until: at(until), count }));
}

describe('schedule expressions', () => {
  it("the stack's defaults: hourly at :10, daily at 03:30, monthly on the 1st at 04:45 (UTC)", () => {
    expect(fires('cron(10 * * * ? *)', '2025-01-01T00:00:00Z', '2025-01-15T12:09:59Z')).toEqual([
      '2025-01-15T11:10:00.000Z',
      '2025-01-15T10:10:00.000Z',
    ]);
    expect(fires('cron(10 * * * ? *)', '2025-01-01T00:00:00Z', '2025-01-15T12:10:00Z')).toEqual([
      '2025-01-15T12:10:00.000Z',
      '2025-01-15T11:10:00.000Z',
    ]);
    expect(fires('cron(30 3 * * ? *)', '2025-01-01T00:00:00Z', '2025-01-15T02:00:00Z')).toEqual([
      '2025-01-14T03:30:00.000Z',
      '2025-01-13T03:30:00.000Z',
    ]);
    expect(fires('cron(45 4 1 * ? *)', '2024-01-01T00:00:00Z', '2025-03-10T00:00:00Z')).toEqual([
      '2025-03-01T04:45:00.000Z',
      '2025-02-01T04:45:00.000Z',
    ]);
  });

  it('counts only times after the schedule was created', () => {
    expect(fires('cron(30 3 * * ? *)', '2025-01-14T12:00:00Z', '2025-01-15T12:00:00Z')).toEqual([
      '2025-01-15T03:30:00.000Z',
    ]);
    expect(fires('cron(30 3 * * ? *)', '2025-01-15T04:00:00Z', '2025-01-15T12:00:00Z')).toEqual([]);
  });

  it('rate: at its start and every period after', () => {
    expect(fires('rate(1 hour)', '2025-01-15T10:17:00Z', '2025-01-15T13:00:00Z')).toEqual([
      '2025-01-15T12:17:00.000Z',
      '2025-01-15T11:17:00.000Z',
    ]);
    expect(fires('rate(15 minutes)', '2025-01-15T10:00:00Z', '2025-01-15T10:10:00Z')).toEqual([
      '2025-01-15T10:00:00.000Z',
    ]);
    expect(fires('rate(2 days)', '2025-01-10T00:00:00Z', '2025-01-15T00:00:00Z')).toEqual([
      '2025-01-14T00:00:00.000Z',
      '2025-01-12T00:00:00.000Z',
    ]);
  });

  it('lists, ranges, increments, month and day names, and ? in either day field', () => {
    expect(fires('cron(0/20 8-9 * * ? *)', '2025-01-01T00:00:00Z', '2025-01-15T09:59:00Z', 4)).toEqual([
      '2025-01-15T09:40:00.000Z',
      '2025-01-15T09:20:00.000Z',
      '2025-01-15T09:00:00.000Z',
      '2025-01-15T08:40:00.000Z',
    ]);
    // 2025-01-15 is a Wednesday; MON-FRI skips the weekend.
    expect(fires('cron(0 6 ? * MON-FRI *)', '2025-01-01T00:00:00Z', '2025-01-20T07:00:00Z', 3)).toEqual([
      '2025-01-20T06:00:00.000Z',
      '2025-01-17T06:00:00.000Z',
      '2025-01-16T06:00:00.000Z',
    ]);
    expect(fires('cron(0 0 1,15 JAN,JUL ? 2025)', '2024-01-01T00:00:00Z', '2025-12-31T00:00:00Z', 3)).toEqual(
      ['2025-07-15T00:00:00.000Z', '2025-07-01T00:00:00.000Z', '2025-01-15T00:00:00.000Z'],
    );
  });

  it('leaves L, W, # and malformed expressions to the console (no guessed times)', () => {
    for (const expression of [
      'cron(0 0 L * ? *)',
      'cron(0 0 15W * ? *)',
      'cron(0 0 ? * 6#3 *)',
      'cron(0 0 * *)',
      'cron(61 * * * ? *)',
      'at(2025-01-15T10:00:00)',
      'rate(0 hours)',
    ]) {
      expect(parseScheduleExpression(expression).kind, expression).toBe('unsupported');
    }
    expect(parseScheduleExpression('cron(0 0 ? JUL MON *)').kind).toBe('cron');
  });
});

describe('the execution scan', () => {
  it('mocked Step Functions: passes over an execution that started before the window but stopped after the one it seeks', async () => {
    const machine = 'arn:aws:states:eu-west-1:123456789012:stateMachine:Compaction';
    const now = at('2026-01-15T12:30:00Z');
    const scheduler = mockClient(SchedulerClient);
    const sfn = mockClient(SFNClient);
    try {
      scheduler
        .on(ListSchedulesCommand)
        .resolves({ Schedules: [{ Name: 'Hourly', Target: { Arn: machine } }] });
      scheduler.on(GetScheduleCommand).resolves({
        Name: 'Hourly',
        State: 'ENABLED',
        ScheduleExpression: 'cron(10 * * * ? *)',
        CreationDate: new Date(at('2026-01-01T00:00:00Z')),
        Target: { Arn: machine, RoleArn: 'arn:aws:iam::123456789012:role/s', Input: '{"tier":"hourly"}' },
      });
      const arn = (name: string) => `arn:aws:states:eu-west-1:123456789012:execution:Compaction:${name}`;
      // Stopped executions sort by stopDate (API_ListExecutions): a long daily run that began
      // before the window and stopped after the hourly start is listed first.
      sfn.on(ListExecutionsCommand).resolves({
        executions: [
          {
            executionArn: arn('daily'),
            stateMachineArn: machine,
            name: 'daily',
            status: 'SUCCEEDED',
            startDate: new Date(at('2026-01-15T09:00:00Z')),
            stopDate: new Date(at('2026-01-15T12:20:00Z')),
          },
          {
            executionArn: arn('hourly'),
            stateMachineArn: machine,
            name: 'hourly',
            status: 'SUCCEEDED',
            startDate: new Date(at('2026-01-15T12:10:05Z')),
            stopDate: new Date(at('2026-01-15T12:11:00Z')),
          },
        ],
      });
      sfn.on(DescribeExecutionCommand, { executionArn: arn('hourly') }).resolves({
        executionArn: arn('hourly'),
        status: 'SUCCEEDED',
        startDate: new Date(at('2026-01-15T12:10:05Z')),
        input: '{"tier":"hourly"}',
      });
      const rows = await checkSchedules({
        scheduler: new SchedulerClient({ region: 'eu-west-1' }),
        sfn: new SFNClient({ region: 'eu-west-1' }),
        stateMachineArn: machine,
        expected: ['hourly'],
        now,
      });
      expect(rows).toEqual([
        expect.objectContaining({
          check: 'schedule hourly',
          result: 'pass',
          detail: expect.stringContaining('started hourly'),
        }),
      ]);
      // The daily run started before every window: never described.
      expect(sfn.commandCalls(DescribeExecutionCommand).map((c) => c.args[0].input.executionArn)).toEqual([
        arn('hourly'),
      ]);
    } finally {
      scheduler.restore();
      sfn.restore();
    }
  });
});

describe('the scheduled canary', () => {
  const canary = 'arn:aws:states:eu-west-1:123456789012:stateMachine:Canary';
  const compaction = 'arn:aws:states:eu-west-1:123456789012:stateMachine:Compaction';
  const execution = (name: string) => `arn:aws:states:eu-west-1:123456789012:execution:Canary:${name}`;
  const now = at('2026-01-15T12:30:00Z');

  /**
   * The stack's group holds the hourly schedule and, unless `withSchedule` is false, the canary's
   * (daily at 05:00, input {}); ListExecutions of the canary answers `executions`, newest first.
   */
  async function check(
    executions: { name: string; status: 'RUNNING' | 'SUCCEEDED' | 'FAILED'; start: string; stop?: string }[],
    options: { withSchedule?: boolean; arn?: string | undefined } = {},
  ) {
    const scheduler = mockClient(SchedulerClient);
    const sfn = mockClient(SFNClient);
    try {
      scheduler.on(ListSchedulesCommand).resolves({
        Schedules: [
          { Name: 'Hourly', Target: { Arn: compaction } },
          ...(options.withSchedule === false ? [] : [{ Name: 'Canary', Target: { Arn: canary } }]),
        ],
      });
      scheduler.on(GetScheduleCommand, { Name: 'Canary' }).resolves({
        Name: 'Canary',
        State: 'ENABLED',
        ScheduleExpression: 'cron(0 5 * * ? *)',
        CreationDate: new Date(at('2026-01-01T00:00:00Z')),
        Target: { Arn: canary, RoleArn: 'arn:aws:iam::123456789012:role/s', Input: '{}' },
      });
      sfn.on(ListExecutionsCommand, { stateMachineArn: canary }).resolves({
        executions: executions.map((e) => ({
          executionArn: execution(e.name),
          stateMachineArn: canary,
          name: e.name,
          status: e.status,
          startDate: new Date(at(e.start)),
          ...(e.stop ? { stopDate: new Date(at(e.stop)) } : {}),
        })),
      });
      for (const e of executions) {
        sfn.on(DescribeExecutionCommand, { executionArn: execution(e.name) }).resolves({
          executionArn: execution(e.name),
          status: e.status,
          startDate: new Date(at(e.start)),
          input: '{}',
        });
      }
      return await checkScheduledCanary({
        scheduler: new SchedulerClient({ region: 'eu-west-1' }),
        sfn: new SFNClient({ region: 'eu-west-1' }),
        canaryStateMachineArn: 'arn' in options ? options.arn : canary,
        now,
      });
    } finally {
      scheduler.restore();
      sfn.restore();
    }
  }

  const daily = [
    {
      name: 'c15',
      status: 'SUCCEEDED' as const,
      start: '2026-01-15T05:00:10Z',
      stop: '2026-01-15T05:06:00Z',
    },
    {
      name: 'c14',
      status: 'SUCCEEDED' as const,
      start: '2026-01-14T05:00:10Z',
      stop: '2026-01-14T05:06:00Z',
    },
  ];

  it('mocked Scheduler and Step Functions: its schedule started it in time and its last execution succeeded', async () => {
    const rows = await check(daily);
    expect(rows).toEqual([
      expect.objectContaining({
        check: 'canary schedule',
        result: 'pass',
        detail: expect.stringContaining('started c15'),
      }),
      {
        check: 'canary last execution',
        result: 'pass',
        detail: 'c15 SUCCEEDED at 2026-01-15T05:06Z',
        fix: '',
      },
    ]);
  });

  it('mocked Scheduler and Step Functions: a failed last execution fails, a running one is passed over', async () => {
    const rows = await check([
      { name: 'manual', status: 'RUNNING', start: '2026-01-15T12:00:00Z' },
      { name: 'c15', status: 'FAILED', start: '2026-01-15T05:00:10Z', stop: '2026-01-15T05:07:00Z' },
      ...daily.slice(1),
    ]);
    expect(rows.find((r) => r.check === 'canary last execution')).toMatchObject({
      result: 'FAIL',
      detail: expect.stringMatching(/^c15 FAILED at 2026-01-15T05:07Z: /),
      fix: expect.stringContaining(execution('c15')),
    });
  });

  it('mocked Scheduler and Step Functions: no schedule, no execution ended yet, or no canary output', async () => {
    const rows = await check([], { withSchedule: false });
    expect(rows).toEqual([
      expect.objectContaining({
        check: 'canary schedule',
        result: 'FAIL',
        detail: `no schedule starts ${canary}`,
      }),
      expect.objectContaining({ check: 'canary last execution', result: 'n/a' }),
    ]);
    expect(await check(daily, { arn: undefined })).toEqual([
      expect.objectContaining({
        check: 'canary',
        result: 'FAIL',
        detail: 'canary.enabled is set, but the stack has no CanaryStateMachineArn output',
      }),
    ]);
  });
});
