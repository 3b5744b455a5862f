/**
 * The backlog alarms and graphs in the synthesized template: one alarm per scheduled compaction
 * tier on the Plan step's OldestEligibleAgeSeconds (dimensions service and tier), its threshold the
 * tier's behindAfterSeconds setting, compared as the core's verdict compares, missing data keeping
 * the state; and a dashboard graph per tier of both backlog figures.
 */

import { describe, expect, it } from 'vitest';
import { BEHIND_COMPARISON } from '../../functions/core/backlog.ts';
import { alarmsByTier, type CfnTemplate, dashboardBody, resourcesOfType, synth } from './synth.ts';

interface Widget {
  readonly properties: {
    readonly title?: string;
    readonly metrics?: unknown[][];
    readonly annotations?: { horizontal?: { value: number; label?: string }[] };
  };
}

const backlogAlarms = (json: CfnTemplate) => alarmsByTier(json, 'OldestEligibleAgeSeconds');

describe('backlog alarms, one per scheduled compaction tier', () => {
  it('alarm when the oldest eligible partition waited longer than behindAfterSeconds, three periods by default', () => {
    const { json } = synth({ compactor: { alarmEmail: 'ops@example.com' } });
    const alarms = backlogAlarms(json);
    expect(Object.keys(alarms).sort()).toEqual(['daily', 'hourly']);
    const common = {
      Namespace: 'Compactor',
      MetricName: 'OldestEligibleAgeSeconds',
      Statistic: 'Maximum',
      Period: 3600,
      EvaluationPeriods: 1,
      // The core's verdict (isBehind) compares the same way.
      ComparisonOperator: BEHIND_COMPARISON,
      // One datapoint per plan: between plans the alarm keeps its state.
      TreatMissingData: 'ignore',
    };
    expect(alarms.hourly).toMatchObject({
      ...common,
      Dimensions: [
        { Name: 'service', Value: 'compactor' },
        { Name: 'tier', Value: 'hourly' },
      ],
      Threshold: 3 * 3600,
    });
    expect(alarms.daily).toMatchObject({ ...common, Threshold: 3 * 86_400 });
    // Wired to the topic every alarm notifies.
    const [[topic] = []] = resourcesOfType(json, 'AWS::SNS::Topic');
    expect(alarms.hourly?.AlarmActions).toEqual([{ Ref: topic }]);
  });

  it('take each tier’s behindAfterSeconds; monthly when it is on; none for a paused tier or retention', () => {
    const { json } = synth({
      compactor: {
        tiers: {
          hourly: { behindAfterSeconds: 5400 },
          daily: { enabled: false },
          monthly: { enabled: true, behindAfterSeconds: 40 * 86_400 },
        },
        retention: { rules: { 'db/': 30 } },
      },
    });
    const alarms = backlogAlarms(json);
    expect(Object.keys(alarms).sort()).toEqual(['hourly', 'monthly']);
    expect(alarms.hourly?.Threshold).toBe(5400);
    expect(alarms.monthly?.Threshold).toBe(40 * 86_400);
  });

  it('graph both backlog figures per tier, the threshold as a line, and show the alarms’ status', () => {
    const { json } = synth();
    expect(Object.keys(backlogAlarms(json))).toHaveLength(2);
    const all = dashboardBody<Widget>(json).widgets;
    for (const [tier, threshold] of [
      ['hourly', 3 * 3600],
      ['daily', 3 * 86_400],
    ] as const) {
      const graph = all.find((w) => w.properties.title === `Backlog: ${tier}`);
      const rows = (graph?.properties.metrics ?? []).map((row) => row.filter((f) => typeof f === 'string'));
      expect(rows).toEqual([
        ['Compactor', 'OldestEligibleAgeSeconds', 'service', 'compactor', 'tier', tier],
        ['Compactor', 'EligiblePartitions', 'service', 'compactor', 'tier', tier],
      ]);
      expect(graph?.properties.annotations?.horizontal).toEqual([
        expect.objectContaining({ value: threshold, label: 'behindAfterSeconds' }),
      ]);
    }
    // The alarm status widget lists them, by their ARNs.
    const body = JSON.stringify(
      resourcesOfType(json, 'AWS::CloudWatch::Dashboard')[0]?.[1].Properties.DashboardBody,
    );
    for (const [id] of resourcesOfType(json, 'AWS::CloudWatch::Alarm').filter(([, r]) =>
      String(r.Properties.MetricName).startsWith('OldestEligible'),
    )) {
      expect(body).toContain(`"${id}","Arn"`);
    }
  });

  it('warn at synth when a threshold is within one schedule period: the alarm would fire on every run', () => {
    const s = synth({ compactor: { tiers: { hourly: { schedule: 'rate(6 hours)' } } } });
    const warnings = s.stack.node
      .findAll()
      .flatMap((c) => c.node.metadata)
      .filter((m) => m.type === 'aws:cdk:warning')
      .map((m) => String(m.data));
    expect(warnings).toEqual([
      expect.stringMatching(
        /^The hourly backlog alarm fires between runs of a tier that keeps up: tiers\.hourly\.behindAfterSeconds \(10800 s\) is not above .* \(21600 s\)/,
      ),
    ]);
    expect(backlogAlarms(s.json).hourly?.Threshold).toBe(10_800);
  });
});
