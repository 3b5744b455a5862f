/**
 * The stack's EventBridge rules on "Step Functions Execution Status Change", fired as EventBridge
 * would when a local execution stops: the event Step Functions sends
 * (https://docs.aws.amazon.com/step-functions/latest/dg/eventbridge-integration.html), matched on
 * its status, and each target's InputTransformer applied to it
 * (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-transform-target-input.html).
 */

import type { StatusRule } from '../../cdk/synth-definition.ts';
import type { Json, JsonObject } from './asl-graph.ts';
import type { LambdaInvoker, WorkflowExecution } from './workflow.ts';

/** The `detail` of the status-change event for a stopped execution. */
export function statusChangeEvent(execution: WorkflowExecution, stateMachineArn: string): JsonObject {
  return {
    source: 'aws.states',
    'detail-type': 'Step Functions Execution Status Change',
    detail: {
      executionArn: execution.executionId,
      stateMachineArn,
      name: execution.executionName,
      status: execution.status,
      input: JSON.stringify(execution.executionInput),
    },
  };
}

/** `$.detail.name` of an event; a missing field is null, as EventBridge leaves it. */
function pathValue(event: Json, path: string): Json {
  if (!path.startsWith('$.')) throw new Error(`InputPathsMap path ${path} is not a $. path`);
  let value: Json = event;
  for (const part of path.slice(2).split('.')) {
    value =
      value !== null && typeof value === 'object' && !Array.isArray(value)
        ? ((value as JsonObject)[part] ?? null)
        : null;
  }
  return value;
}

/**
 * The target input: each `<name>` of the template replaced by its value as JSON; inside a JSON
 * string its text goes in, escaped, without quotes of its own, as EventBridge does.
 */
export function renderTargetInput(
  rule: Pick<StatusRule, 'inputPathsMap' | 'inputTemplate'>,
  event: Json,
): Json {
  const template = rule.inputTemplate;
  let out = '';
  let inString = false;
  for (let i = 0; i < template.length; i++) {
    const c = template[i] as string;
    if (inString && c === '\\') {
      out += template.slice(i, i + 2);
      i++;
      continue;
    }
    if (c === '"') inString = !inString;
    const placeholder = c === '<' ? /^<([A-Za-z0-9_.-]+)>/.exec(template.slice(i)) : null;
    const path = placeholder ? rule.inputPathsMap[placeholder[1] as string] : undefined;
    if (!placeholder || path === undefined) {
      out += c;
      continue;
    }
    const value = JSON.stringify(pathValue(event, path));
    out += inString && value.startsWith('"') ? value.slice(1, -1) : value;
    i += placeholder[0].length - 1;
  }
  return JSON.parse(out) as Json;
}

/** Invokes each rule's target that matches the stopped execution's status; returns what each returned. */
export async function fireStatusRules(
  rules: readonly StatusRule[],
  execution: WorkflowExecution,
  stateMachineArn: string,
  invoke: LambdaInvoker,
): Promise<Json[]> {
  const event = statusChangeEvent(execution, stateMachineArn);
  const results: Json[] = [];
  for (const rule of rules) {
    if (!rule.statuses.includes(execution.status)) continue;
    results.push(await invoke(rule.functionName, renderTargetInput(rule, event)));
  }
  return results;
}
