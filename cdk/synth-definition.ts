/**
 * Extracts a deployable state machine's definition from a synthesized template, with every
 * CloudFormation token resolved to a local stand-in, and the step each Lambda runs (its
 * COMPACTOR_STEP environment variable), and the EventBridge rules that run a step when an execution
 * stops. The local runner executes exactly this definition and fires exactly these rules.
 */

import type { StateMachineDefinition } from 'aws-local-stepfunctions';
import { ENV } from '../functions/contract.ts';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Resource = { Type: string; Properties?: Record<string, Json> };

export const LOCAL_BUCKET = 'local-data-bucket';
/** The state machine's ARN in a local run's events. */
export const LOCAL_STATE_MACHINE_ARN = 'arn:aws:states:local:000000000000:stateMachine:local';

export interface ExtractedWorkflow {
  readonly definition: StateMachineDefinition;
  /** Function name as the definition calls it -> the step it runs. */
  readonly functionSteps: ReadonlyMap<string, string>;
  /** The name the definition uses for the data bucket. */
  readonly bucket: string;
  /** Rules on the state machine's "Execution Status Change" events, with their targets' input. */
  readonly statusRules: readonly StatusRule[];
}

export interface StatusRule {
  /** The execution statuses the rule matches. */
  readonly statuses: readonly string[];
  /** The function it invokes, as functionSteps names it. */
  readonly functionName: string;
  /** The target's InputTransformer: which event fields, and the template they fill. */
  readonly inputPathsMap: Readonly<Record<string, string>>;
  readonly inputTemplate: string;
}

const STATUS_CHANGE = 'Step Functions Execution Status Change';

export function localFunctionArn(logicalId: string): string {
  return `arn:aws:lambda:local:000000000000:function:${logicalId}`;
}

/** A state machine's ARN in a definition that starts it (the canary's starts the compaction's). */
export function localStateMachineArn(logicalId: string): string {
  return `arn:aws:states:local:000000000000:stateMachine:${logicalId}`;
}

/** The construct id of the compaction workflow's state machine (compactor-stack.ts), and of the canary's. */
export const STATE_MACHINES = { compaction: 'Workflow', canary: 'Canary' } as const;

/** Resolves the intrinsics CDK puts in a definition string: Fn::Join, Ref and Fn::GetAtt. */
function resolve(value: Json, resources: Record<string, Resource>): string {
  if (typeof value === 'string') return value;
  if (value && typeof value === 'object' && !Array.isArray(value)) {
    if ('Fn::Join' in value) {
      const [separator, parts] = value['Fn::Join'] as [string, Json[]];
      return parts.map((p) => resolve(p, resources)).join(separator);
    }
    if ('Ref' in value) {
      const ref = value.Ref as string;
      if (ref === 'AWS::Partition') return 'aws';
      if (ref === 'AWS::Region') return 'local';
      if (ref === 'AWS::AccountId') return '000000000000';
      if (ref === 'AWS::URLSuffix') return 'amazonaws.com';
      if (resources[ref]?.Type === 'AWS::S3::Bucket') return LOCAL_BUCKET;
      if (resources[ref]?.Type === 'AWS::StepFunctions::StateMachine') return localStateMachineArn(ref);
      throw new Error(`cannot resolve Ref ${ref} in the state machine definition`);
    }
    if ('Fn::GetAtt' in value) {
      const [logicalId, attribute] = value['Fn::GetAtt'] as [string, string];
      const resource = resources[logicalId];
      if (resource?.Type === 'AWS::Lambda::Function' && attribute === 'Arn')
        return localFunctionArn(logicalId);
      if (resource?.Type === 'AWS::S3::Bucket' && attribute === 'Arn') return `arn:aws:s3:::${LOCAL_BUCKET}`;
      throw new Error(`cannot resolve Fn::GetAtt ${logicalId}.${attribute} in the state machine definition`);
    }
  }
  throw new Error(`unexpected value in the state machine definition: ${JSON.stringify(value)}`);
}

/**
 * The state machine of the construct `machine` (the compaction workflow unless told), and the
 * steps of the functions it or its status rules invoke.
 */
export function extractWorkflow(
  template: { Resources: Record<string, Resource> },
  machine: (typeof STATE_MACHINES)[keyof typeof STATE_MACHINES] = STATE_MACHINES.compaction,
): ExtractedWorkflow {
  const resources = template.Resources;
  // CDK's logical id: the construct path's ids joined (`WorkflowStateMachine` + a hash).
  const machines = Object.entries(resources).filter(
    ([id, r]) =>
      r.Type === 'AWS::StepFunctions::StateMachine' &&
      new RegExp(`^${machine}StateMachine[0-9A-F]{8}$`).test(id),
  );
  if (machines.length !== 1)
    throw new Error(`expected one ${machine} state machine in the template, found ${machines.length}`);
  const body = machines[0]?.[1].Properties?.DefinitionString;
  if (body === undefined) throw new Error('the state machine has no DefinitionString');
  const text = resolve(body, resources);
  const definition = JSON.parse(text) as StateMachineDefinition;
  const rules = machine === STATE_MACHINES.compaction ? statusRules(resources) : [];
  const invoked = (arn: string) => text.includes(`"${arn}"`) || rules.some((r) => r.functionName === arn);
  const functionSteps = new Map<string, string>();
  for (const [logicalId, resource] of Object.entries(resources)) {
    if (resource.Type !== 'AWS::Lambda::Function') continue;
    const env = (resource.Properties?.Environment as { Variables?: Record<string, string> } | undefined)
      ?.Variables;
    const step = env?.[ENV.step];
    const arn = localFunctionArn(logicalId);
    if (step && invoked(arn)) functionSteps.set(arn, step);
  }
  return { definition, functionSteps, bucket: LOCAL_BUCKET, statusRules: rules };
}

function statusRules(resources: Record<string, Resource>): StatusRule[] {
  const rules: StatusRule[] = [];
  for (const resource of Object.values(resources)) {
    if (resource.Type !== 'AWS::Events::Rule') continue;
    const pattern = resource.Properties?.EventPattern as
      | { source?: string[]; 'detail-type'?: string[]; detail?: { status?: string[] } }
      | undefined;
    if (!pattern?.source?.includes('aws.states') || !pattern['detail-type']?.includes(STATUS_CHANGE))
      continue;
    const targets = (resource.Properties?.Targets ?? []) as {
      Arn: Json;
      InputTransformer?: { InputPathsMap?: Record<string, string>; InputTemplate: string };
    }[];
    for (const target of targets) {
      if (!target.InputTransformer) throw new Error('a status rule target without an InputTransformer');
      rules.push({
        statuses: pattern.detail?.status ?? [],
        functionName: resolve(target.Arn, resources),
        inputPathsMap: target.InputTransformer.InputPathsMap ?? {},
        inputTemplate: target.InputTransformer.InputTemplate,
      });
    }
  }
  return rules;
}
