/**
 * The stack's status rules as the local runner fires them: taken from the synthesized template,
 * their InputTransformer applied to the event Step Functions sends, as EventBridge applies it.
 */

import { describe, expect, it } from 'vitest';
import { extractWorkflow } from '../../cdk/synth-definition.ts';
import { parseSummaryEvent } from '../../functions/lambda/events.ts';
import { renderTargetInput, statusChangeEvent } from '../../functions/local-runner/status-rules.ts';
import type { WorkflowExecution } from '../../functions/local-runner/workflow.ts';
import { synth } from '../cdk/synth.ts';

const execution = {
  executionId: 'arn:aws:states:local:000000000000:execution:local:hourly-1',
  executionName: 'hourly-1',
  status: 'FAILED',
  executionInput: { tier: 'hourly', only: 'db/"quoted"/' },
} as unknown as WorkflowExecution;

describe('the failure rule, fired locally', () => {
  it('matches failed, timed-out and stopped executions and renders the Summary input the Lambda parses', () => {
    const { statusRules, functionSteps } = extractWorkflow(
      synth().json as Parameters<typeof extractWorkflow>[0],
    );
    expect(statusRules).toHaveLength(1);
    const [rule] = statusRules;
    if (!rule) throw new Error('no rule');
    expect(rule.statuses).toEqual(['FAILED', 'TIMED_OUT', 'ABORTED']);
    expect(functionSteps.get(rule.functionName)).toBe('summary');
    const input = renderTargetInput(rule, statusChangeEvent(execution, 'arn:local'));
    expect(input).toEqual({
      executionId: execution.executionId,
      executionName: 'hourly-1',
      status: 'FAILED',
      // The execution input stays JSON text, quotes escaped, as Step Functions sends it.
      input: '{"tier":"hourly","only":"db/\\"quoted\\"/"}',
      toleratedFailurePercentage: 5,
    });
    expect(parseSummaryEvent(input)).toMatchObject({ kind: 'stopped', tier: 'hourly', status: 'FAILED' });
  });

  it('puts a value inside a JSON string as its text, without quotes of its own, and null for a missing field', () => {
    const rule = {
      inputPathsMap: { name: '$.detail.name', gone: '$.detail.nothing' },
      inputTemplate: '{"label":"run <name>","quoted":"<name>","missing":<gone>}',
    };
    expect(renderTargetInput(rule, statusChangeEvent(execution, 'arn:local'))).toEqual({
      label: 'run hourly-1',
      quoted: 'hourly-1',
      missing: null,
    });
  });
});
