/**
 * The schedule period each tier's missed-start alarm is built from, and the alarms themselves in
 * the synthesized template: "no execution of the tier planned within two of its periods", with
 * missing data breaching (a schedule that starts nothing emits nothing).
 */

import { describe, expect, it } from 'vitest';
import { schedulePeriod } from '../../cdk/constructs/schedules.ts';
import { alarmsByTier, type MetricAlarmProps, resourcesOfType, synth } from './synth.ts';

describe('schedulePeriod: the longest time between two starts', () => {
  it.each([
    ['cron(10 * * * ? *)', 60],
    ['cron(30 3 * * ? *)', 1440],
    ['cron(0 */6 * * ? *)', 360],
    ['cron(0/15 * * * ? *)', 15],
    ['cron(0 8,20 * * ? *)', 720],
    ['cron(0 9 ? * MON-FRI *)', 3 * 1440],
    ['cron(0 9 ? * 2-6 *)', 3 * 1440],
    ['cron(0 4 1 * ? *)', 31 * 1440],
    ['cron(0 0 1 JAN,JUL ? *)', 184 * 1440],
    ['rate(5 minutes)', 5],
    ['rate(1 hour)', 60],
    ['rate(12 hours)', 720],
    ['rate(2 days)', 2880],
  ])('%s: %i minutes', (expression, minutes) => {
    const derived = schedulePeriod(expression);
    expect(derived.period?.toMinutes(), derived.reason).toBe(minutes);
  });

  it.each([
    ['at(2026-01-01T00:00:00)', /runs once/],
    ['cron(0 0 L * ? *)', /L, W or #/],
    ['cron(0 0 ? * 6#3 *)', /L, W or #/],
    ['cron(0 0 1 1 ? 2030)', /fewer than twice/],
    ['cron(0 25 * * ? *)', /hour cannot be read/],
  ])('%s has none (%s)', (expression, reason) => {
    const derived = schedulePeriod(expression);
    expect(derived.period).toBeUndefined();
    expect(derived.reason).toMatch(reason);
  });
});

function missedStartAlarms(compactor: unknown): Record<string, MetricAlarmProps> {
  return alarmsByTier(synth({ compactor }).json, 'ExecutionsPlanned');
}

describe('missed-start alarms, one per scheduled tier', () => {
  it('alarm when a tier planned no execution in two of its periods, missing data breaching', () => {
    const alarms = missedStartAlarms(undefined);
    expect(Object.keys(alarms).sort()).toEqual(['daily', 'hourly']);
    const common = {
      Namespace: 'Compactor',
      MetricName: 'ExecutionsPlanned',
      Statistic: 'Sum',
      Threshold: 1,
      ComparisonOperator: 'LessThanThreshold',
      TreatMissingData: 'breaching',
    };
    expect(alarms.hourly).toMatchObject({
      ...common,
      Dimensions: [
        { Name: 'service', Value: 'compactor' },
        { Name: 'tier', Value: 'hourly' },
      ],
      Period: 3600,
      EvaluationPeriods: 2,
      DatapointsToAlarm: 2,
    });
    expect(alarms.daily).toMatchObject({
      ...common,
      Period: 86_400,
      EvaluationPeriods: 2,
      DatapointsToAlarm: 2,
    });
  });

  it('follow each tier’s own schedule, retention and monthly included; periods over a day count in days', () => {
    const alarms = missedStartAlarms({
      tiers: {
        hourly: { schedule: 'rate(30 minutes)' },
        daily: { schedule: 'cron(0 9 ? * MON-FRI *)' },
        monthly: { enabled: true },
      },
      retention: { rules: { 'db/': 30 }, schedule: 'rate(12 hours)' },
    });
    expect(Object.keys(alarms).sort()).toEqual(['daily', 'hourly', 'monthly', 'retention']);
    expect(alarms.hourly).toMatchObject({ Period: 1800, EvaluationPeriods: 2 });
    // Friday to Monday is three days: six one-day periods, all of them empty, before it alarms.
    expect(alarms.daily).toMatchObject({ Period: 86_400, EvaluationPeriods: 6, DatapointsToAlarm: 6 });
    expect(alarms.monthly).toMatchObject({ Period: 86_400, EvaluationPeriods: 2 });
    expect(alarms.retention).toMatchObject({ Period: 43_200, EvaluationPeriods: 2 });
  });

  it('skip, with a synth warning, a tier off, one-time, or with a window past CloudWatch’s seven days', () => {
    const s = synth({
      compactor: {
        tiers: { hourly: { schedule: 'cron(0 9 ? * MON *)' }, daily: { enabled: false } },
      },
    });
    const names = resourcesOfType(s.json, 'AWS::CloudWatch::Alarm')
      .map(([, r]) => r.Properties as unknown as MetricAlarmProps)
      .filter((p) => p.MetricName === 'ExecutionsPlanned');
    expect(names).toEqual([]);
    const warnings = s.stack.node
      .findAll()
      .flatMap((c) => c.node.metadata)
      .filter((m) => m.type === 'aws:cdk:warning')
      .map((m) => String(m.data));
    // (A weekly hourly tier also gets the backlog alarm's warning: test/cdk/monitoring.test.ts.)
    expect(warnings.filter((w) => !w.includes('backlog alarm'))).toEqual([
      expect.stringMatching(/No missed-start alarm for the hourly tier: .*7-day/),
    ]);
  });
});
