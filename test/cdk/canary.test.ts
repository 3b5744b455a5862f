/**
 * The scheduled canary in the synthesized template (cdk/constructs/canary.ts): absent by default;
 * when `canary.enabled`, its state machine (the rendered state graph: seed, `.sync` start of the
 * compaction state machine scoped to the canary's table, check, remove, and the failure path
 * that still removes it), its daily schedule, its alarms on the alarm topic, and its Lambdas'
 * grants, scoped to the canary's key prefix.
 */

import { describe, expect, it } from 'vitest';
import { CANARY_STATES } from '../../cdk/constructs/canary.ts';
import {
  type CfnTemplate,
  flatten,
  objectKeyPattern,
  resourcesOfType,
  statementsByRole,
  stepRoles,
  synth,
} from './synth.ts';

const PREFIX = 'lake/';
const CANARY_PREFIX = `${PREFIX}_compactor_doctor/canary-`;

function stateMachineId(json: CfnTemplate, construct: string): string {
  const [entry] = resourcesOfType(json, 'AWS::StepFunctions::StateMachine').filter(([id]) =>
    id.startsWith(`${construct}StateMachine`),
  );
  if (!entry) throw new Error(`no ${construct} state machine`);
  return entry[0];
}

/** The rendered definition, its CloudFormation values flattened (`<Logical.Arn>`). */
function definition(
  json: CfnTemplate,
  id: string,
): { StartAt: string; States: Record<string, Record<string, unknown>> } {
  return JSON.parse(flatten(json.Resources[id]?.Properties.DefinitionString));
}

describe('the scheduled canary', () => {
  it('is absent by default: one state machine, no canary function, schedule or alarm', () => {
    const { json } = synth({ compactor: { dataPrefix: PREFIX } });
    expect(resourcesOfType(json, 'AWS::StepFunctions::StateMachine')).toHaveLength(1);
    expect(Object.keys(json.Resources).filter((id) => id.startsWith('Canary'))).toEqual([]);
    const alarms = resourcesOfType(json, 'AWS::CloudWatch::Alarm').map(([id]) => id);
    expect(alarms.filter((id) => id.includes('Canary'))).toEqual([]);
    expect(Object.keys(json.Outputs ?? {})).not.toContain('CanaryStateMachineArn');
  });

  describe('when enabled', () => {
    const s = synth({
      compactor: { dataPrefix: PREFIX, canary: { enabled: true }, alarmEmail: 'ops@example.com' },
    });
    const canary = stateMachineId(s.json, 'Canary');
    const compaction = stateMachineId(s.json, 'Workflow');

    it('outputs its state machine, for compactor doctor', () => {
      expect(s.json.Outputs?.CanaryStateMachineArn?.Value).toEqual({ Ref: canary });
    });

    it('seeds, compacts the canary table through the compaction state machine (.sync), checks and removes it', () => {
      const d = definition(s.json, canary);
      expect(d.StartAt).toBe(CANARY_STATES.name);
      const next = (name: string) => d.States[name]?.Next;
      expect(next(CANARY_STATES.name)).toBe(CANARY_STATES.seed);
      expect(next(CANARY_STATES.seed)).toBe(CANARY_STATES.compact);
      expect(next(CANARY_STATES.compact)).toBe(CANARY_STATES.check);
      expect(next(CANARY_STATES.check)).toBe(CANARY_STATES.remove);
      expect(next(CANARY_STATES.remove)).toBe(CANARY_STATES.passed);
      expect(d.States[CANARY_STATES.compact]).toMatchObject({
        Type: 'Task',
        Resource: 'arn:<AWS::Partition>:states:::states:startExecution.sync:2',
        Parameters: {
          StateMachineArn: `<${compaction}>`,
          Input: {
            tier: 'hourly',
            'now.$': '$.seed.Payload.planAt',
            'only.$': '$.seed.Payload.table',
            'AWS_STEP_FUNCTIONS_STARTED_BY_EXECUTION_ID.$': '$$.Execution.Id',
          },
        },
      });
      // Every step that can fail after the canary may exist goes through its removal, then fails.
      for (const state of [CANARY_STATES.seed, CANARY_STATES.compact, CANARY_STATES.check]) {
        expect(d.States[state]?.Catch, state).toEqual([
          { ErrorEquals: ['States.ALL'], ResultPath: '$.failure', Next: CANARY_STATES.removeAfterFailure },
        ]);
      }
      expect(d.States[CANARY_STATES.removeAfterFailure]).toMatchObject({
        Next: CANARY_STATES.failed,
        Catch: [{ ErrorEquals: ['States.ALL'], Next: CANARY_STATES.failed }],
      });
      expect(d.States[CANARY_STATES.failed]).toEqual({
        Type: 'Fail',
        ErrorPath: '$.failure.Error',
        CausePath: '$.failure.Cause',
      });
      // Both removals call the one remove function.
      const fn = (state: string) =>
        (d.States[state]?.Parameters as { FunctionName?: string } | undefined)?.FunctionName;
      expect(fn(CANARY_STATES.removeAfterFailure)).toBe(fn(CANARY_STATES.remove));
    });

    it('gives its state machine StartExecution on the compaction state machine and what .sync needs', () => {
      const role = (s.json.Resources[canary]?.Properties.RoleArn as { 'Fn::GetAtt': string[] } | undefined)?.[
        'Fn::GetAtt'
      ][0];
      const statements = statementsByRole(s.json).get(role as string) ?? [];
      const actions = (action: string) => statements.filter((st) => st.actions.includes(action));
      expect(actions('states:StartExecution').flatMap((st) => st.resources)).toEqual([`<${compaction}>`]);
      expect(actions('states:DescribeExecution')).toHaveLength(1);
      expect(actions('events:PutRule').flatMap((st) => st.resources)).toEqual([
        'arn:<AWS::Partition>:events:<AWS::Region>:<AWS::AccountId>:rule/StepFunctionsGetEventsForStepFunctionsExecutionRule',
      ]);
    });

    it('is started daily by default, in UTC, from the schedule group with its DLQ; the schedule is a setting', () => {
      const schedules = resourcesOfType(s.json, 'AWS::Scheduler::Schedule')
        .map(([, r]) => r.Properties)
        .filter((p) => flatten((p.Target as { Arn: unknown }).Arn) === `<${canary}>`);
      expect(schedules).toHaveLength(1);
      expect(schedules[0]).toMatchObject({
        ScheduleExpression: 'cron(40 2 * * ? *)',
        ScheduleExpressionTimezone: 'Etc/UTC',
        Target: { Input: '{}', RetryPolicy: { MaximumRetryAttempts: 10 } },
      });
      const custom = synth({ compactor: { canary: { enabled: true, schedule: 'rate(6 hours)' } } }).json;
      const expressions = resourcesOfType(custom, 'AWS::Scheduler::Schedule').map(
        ([, r]) => r.Properties.ScheduleExpression,
      );
      expect(expressions).toContain('rate(6 hours)');
    });

    it('alarms on failed or timed-out canary executions and on none started in two days, to the alarm topic', () => {
      const alarms = Object.fromEntries(
        resourcesOfType(s.json, 'AWS::CloudWatch::Alarm').map(([id, r]) => [id, r.Properties]),
      );
      const failed = Object.entries(alarms).find(([id]) => id.startsWith('MonitoringCanaryFailed'))?.[1];
      const missed = Object.entries(alarms).find(([id]) => id.startsWith('MonitoringCanaryMissed'))?.[1];
      const metrics = (
        (failed?.Metrics ?? []) as {
          MetricStat?: { Metric: { MetricName: string; Dimensions: unknown[] } };
        }[]
      ).flatMap((m) => (m.MetricStat ? [m.MetricStat.Metric] : []));
      expect(metrics.map((m) => m.MetricName).sort()).toEqual(['ExecutionsFailed', 'ExecutionsTimedOut']);
      for (const m of metrics)
        expect(m.Dimensions).toEqual([{ Name: 'StateMachineArn', Value: { Ref: canary } }]);
      expect(failed).toMatchObject({ Threshold: 1, ComparisonOperator: 'GreaterThanOrEqualToThreshold' });
      expect(missed).toMatchObject({
        MetricName: 'ExecutionsStarted',
        Namespace: 'AWS/States',
        Dimensions: [{ Name: 'StateMachineArn', Value: { Ref: canary } }],
        Period: 86_400,
        EvaluationPeriods: 2,
        ComparisonOperator: 'LessThanThreshold',
        TreatMissingData: 'breaching',
      });
      const [topic] = resourcesOfType(s.json, 'AWS::SNS::Topic').map(([id]) => id);
      for (const alarm of [failed, missed]) expect(alarm?.AlarmActions).toEqual([{ Ref: topic }]);
    });

    it("grants its Lambdas writes and deletes under the canary prefix and its jobs' receipts only, reads of the state root", () => {
      const statements = statementsByRole(s.json);
      const canaryRoles = [...stepRoles(s.json)].filter(([, step]) => step.startsWith('canary-'));
      expect(canaryRoles.map(([, step]) => step).sort()).toEqual([
        'canary-check',
        'canary-remove',
        'canary-seed',
      ]);
      for (const [role, step] of canaryRoles) {
        for (const st of statements.get(role) ?? []) {
          const s3 = st.actions.filter((a) => a.startsWith('s3:'));
          if (s3.length === 0) continue;
          if (s3.some((a) => a !== 's3:GetObject' && a !== 's3:ListBucket')) {
            // A write or delete: the canary prefix, and (remove) its jobs' receipts, nothing else.
            const receipts = `${PREFIX}_compaction/receipts/${CANARY_PREFIX.slice(PREFIX.length)}*`;
            expect(st.resources.map(objectKeyPattern).sort(), step).toEqual(
              step === 'canary-remove' ? [receipts, `${CANARY_PREFIX}*`] : [`${CANARY_PREFIX}*`],
            );
          } else if (s3.includes('s3:GetObject')) {
            for (const r of st.resources)
              expect(objectKeyPattern(r), step).toMatch(
                new RegExp(`^(${CANARY_PREFIX}|${PREFIX}_compaction/)`),
              );
          } else {
            const prefixes = (st.conditions?.StringLike?.['s3:prefix'] ?? []) as string[];
            expect(prefixes.length, step).toBeGreaterThan(0);
            for (const p of prefixes)
              expect(p, step).toMatch(new RegExp(`^(${CANARY_PREFIX}|${PREFIX}_compaction/)`));
          }
        }
      }
    });
  });
});
