/**
 * Evaluates requests against a synthesized template's IAM with a real policy evaluator
 * (@cloud-copilot/iam-simulate, AGPL-3.0: a devDependency used by tests only, never bundled):
 * the identity policies of the calling role, and the resource policy of what it calls (a role's
 * trust policy, the data bucket's policy with its TLS-only deny, the DLQ's policy, the KMS key
 * policy). The template's CloudFormation values are resolved to concrete ARNs of one account
 * and Region, as CloudFormation would resolve them on deploy.
 */

import { runSimulation } from '@cloud-copilot/iam-simulate';
import { type CfnResource, type CfnTemplate, resourcesOfType, stepRoles } from './synth.ts';

export const ACCOUNT = '111122223333';
export const REGION = 'eu-west-1';
const PARTITION = 'aws';

type Json = unknown;

/** Resolves Ref, Fn::GetAtt, Fn::Join, Fn::Select, Fn::Split and Fn::Sub to concrete values. */
export class ResolvedTemplate {
  readonly json: CfnTemplate;

  constructor(json: CfnTemplate) {
    this.json = json;
  }

  #resource(id: string): CfnResource {
    const r = this.json.Resources[id];
    if (!r) throw new Error(`no resource ${id} in the template`);
    return r;
  }

  /** The physical name CloudFormation would give (its own name property, else the logical id). */
  #name(id: string, property: string, lower = false): string {
    const given = this.#resource(id).Properties[property];
    if (given !== undefined) return String(this.resolve(given));
    return lower ? id.toLowerCase() : id;
  }

  ref(id: string): string {
    if (id === 'AWS::AccountId') return ACCOUNT;
    if (id === 'AWS::Region') return REGION;
    if (id === 'AWS::Partition') return PARTITION;
    if (id === 'AWS::URLSuffix') return 'amazonaws.com';
    if (id === 'AWS::StackName') return 'ParquetCompactor';
    const type = this.#resource(id).Type;
    switch (type) {
      case 'AWS::S3::Bucket':
        return this.#name(id, 'BucketName', true);
      case 'AWS::IAM::Role':
        return this.#name(id, 'RoleName');
      case 'AWS::Lambda::Function':
        return this.#name(id, 'FunctionName');
      case 'AWS::StepFunctions::StateMachine':
        return this.getAtt(id, 'Arn');
      case 'AWS::SQS::Queue':
        return `https://sqs.${REGION}.amazonaws.com/${ACCOUNT}/${this.#name(id, 'QueueName')}`;
      case 'AWS::Scheduler::ScheduleGroup':
        return this.#name(id, 'Name');
      case 'AWS::KMS::Key':
        return `key-${id.toLowerCase()}`;
      case 'AWS::SNS::Topic':
        return `arn:${PARTITION}:sns:${REGION}:${ACCOUNT}:${this.#name(id, 'TopicName')}`;
      case 'AWS::Logs::LogGroup':
        return this.#name(id, 'LogGroupName');
      default:
        throw new Error(`cannot resolve Ref ${id} (${type})`);
    }
  }

  getAtt(id: string, attribute: string): string {
    const type = this.#resource(id).Type;
    const key = `${type}.${attribute}`;
    switch (key) {
      case 'AWS::S3::Bucket.Arn':
        return `arn:${PARTITION}:s3:::${this.ref(id)}`;
      case 'AWS::IAM::Role.Arn':
        return `arn:${PARTITION}:iam::${ACCOUNT}:role/${this.ref(id)}`;
      case 'AWS::Lambda::Function.Arn':
        return `arn:${PARTITION}:lambda:${REGION}:${ACCOUNT}:function:${this.ref(id)}`;
      case 'AWS::StepFunctions::StateMachine.Arn':
        return `arn:${PARTITION}:states:${REGION}:${ACCOUNT}:stateMachine:${this.getAtt(id, 'Name')}`;
      case 'AWS::StepFunctions::StateMachine.Name':
        return this.#name(id, 'StateMachineName');
      case 'AWS::SQS::Queue.Arn':
        return `arn:${PARTITION}:sqs:${REGION}:${ACCOUNT}:${this.#name(id, 'QueueName')}`;
      case 'AWS::Scheduler::ScheduleGroup.Arn':
        return `arn:${PARTITION}:scheduler:${REGION}:${ACCOUNT}:schedule-group/${this.ref(id)}`;
      case 'AWS::KMS::Key.Arn':
        return `arn:${PARTITION}:kms:${REGION}:${ACCOUNT}:key/${this.ref(id)}`;
      case 'AWS::Logs::LogGroup.Arn':
        return `arn:${PARTITION}:logs:${REGION}:${ACCOUNT}:log-group:${this.ref(id)}:*`;
      case 'AWS::Events::Rule.Arn':
        return `arn:${PARTITION}:events:${REGION}:${ACCOUNT}:rule/${this.#name(id, 'Name')}`;
      default:
        throw new Error(`cannot resolve Fn::GetAtt ${id}.${attribute} (${type})`);
    }
  }

  /** A value with every intrinsic resolved; anything unknown throws, so nothing is guessed. */
  resolve(value: Json): Json {
    if (Array.isArray(value)) return value.map((v) => this.resolve(v));
    if (typeof value !== 'object' || value === null) return value;
    const v = value as Record<string, Json>;
    const keys = Object.keys(v);
    const only = keys.length === 1 ? keys[0] : undefined;
    if (only === 'Ref') return this.ref(String(v.Ref));
    if (only === 'Fn::GetAtt') {
      const [id, attribute] = v['Fn::GetAtt'] as [string, string];
      return this.getAtt(id, attribute);
    }
    if (only === 'Fn::Join') {
      const [sep, parts] = v['Fn::Join'] as [string, Json[]];
      return parts.map((p) => String(this.resolve(p))).join(sep);
    }
    if (only === 'Fn::Select') {
      const [index, list] = v['Fn::Select'] as [number, Json];
      const items = this.resolve(list) as Json[];
      if (!Array.isArray(items) || items[Number(index)] === undefined)
        throw new Error(`Fn::Select ${index} out of range`);
      return items[Number(index)];
    }
    if (only === 'Fn::Split') {
      const [sep, text] = v['Fn::Split'] as [string, Json];
      return String(this.resolve(text)).split(sep);
    }
    if (only === 'Fn::Sub') {
      const arg = v['Fn::Sub'];
      const [text, vars] = (Array.isArray(arg) ? arg : [arg, {}]) as [string, Record<string, Json>];
      return text.replace(/\$\{([^}]+)\}/g, (_m, name: string) => {
        if (name in vars) return String(this.resolve(vars[name]));
        const [id, attribute] = name.split('.');
        return attribute ? this.getAtt(id as string, attribute) : this.ref(id as string);
      });
    }
    if (only?.startsWith('Fn::')) throw new Error(`cannot resolve ${only}`);
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, this.resolve(x)]));
  }

  /** Logical ids of the resources of a type. */
  ids(type: string): string[] {
    return resourcesOfType(this.json, type).map(([id]) => id);
  }

  only(type: string, filter: (id: string) => boolean = () => true): string {
    const found = this.ids(type).filter(filter);
    if (found.length !== 1) throw new Error(`expected one ${type}, found ${found.join(', ') || 'none'}`);
    return found[0] as string;
  }
}

export interface PolicyDoc {
  readonly Version?: string;
  readonly Statement: unknown[];
}

function asList<T>(value: T | T[] | undefined): T[] {
  if (value === undefined) return [];
  return Array.isArray(value) ? value : [value];
}

/** The roles and resource policies of a synthesized compactor stack, resolved. */
export class StackIam {
  readonly t: ResolvedTemplate;
  /** Step name -> role logical id. */
  readonly stepRole: ReadonlyMap<string, string>;
  readonly stateMachineRole: string;
  readonly schedulerRole: string;
  readonly stateMachineArn: string;
  readonly stateMachineName: string;
  readonly bucketArn: string;
  readonly queueArn: string;
  readonly scheduleGroupArn: string;
  /** The KMS key the stack creates, if any. */
  readonly createdKeyArn: string | undefined;

  constructor(json: CfnTemplate) {
    this.t = new ResolvedTemplate(json);
    this.stepRole = new Map([...stepRoles(json)].map(([role, step]) => [step, role]));
    // The compaction state machine (the canary's, when deployed, is `Canary...`).
    const sm = this.t.only('AWS::StepFunctions::StateMachine', (id) => id.startsWith('WorkflowStateMachine'));
    this.stateMachineArn = this.t.getAtt(sm, 'Arn');
    this.stateMachineName = this.t.getAtt(sm, 'Name');
    this.stateMachineRole = roleOf(this.t.json.Resources[sm]?.Properties.RoleArn);
    const startsCompaction = (id: string) =>
      JSON.stringify((this.t.json.Resources[id] as CfnResource).Properties.Target).includes(`"${sm}"`);
    const compactionSchedules = this.t.ids('AWS::Scheduler::Schedule').filter(startsCompaction);
    const scheduleTargets = compactionSchedules.map(
      (id) => (this.t.json.Resources[id] as CfnResource).Properties.Target as { RoleArn: unknown },
    );
    const schedulerRoles = new Set(scheduleTargets.map((target) => roleOf(target.RoleArn)));
    if (schedulerRoles.size !== 1)
      throw new Error(`expected one Scheduler role, found ${[...schedulerRoles]}`);
    this.schedulerRole = [...schedulerRoles][0] as string;
    const schedule = compactionSchedules[0] as string;
    const target = this.t.resolve(this.t.json.Resources[schedule]?.Properties.Target) as {
      DeadLetterConfig: { Arn: string };
    };
    this.queueArn = target.DeadLetterConfig.Arn;
    const groupName = String(this.t.resolve(this.t.json.Resources[schedule]?.Properties.GroupName));
    this.scheduleGroupArn = `arn:${PARTITION}:scheduler:${REGION}:${ACCOUNT}:schedule-group/${groupName}`;
    const fn = this.t.ids('AWS::Lambda::Function').find((id) => this.#env(id).COMPACTOR_STEP);
    this.bucketArn = `arn:${PARTITION}:s3:::${String(this.t.resolve(this.#env(fn as string).DATA_BUCKET))}`;
    const keys = this.t.ids('AWS::KMS::Key');
    this.createdKeyArn = keys[0] ? this.t.getAtt(keys[0], 'Arn') : undefined;
  }

  #env(functionId: string): Record<string, unknown> {
    const env = this.t.json.Resources[functionId]?.Properties.Environment as
      | { Variables?: Record<string, unknown> }
      | undefined;
    return env?.Variables ?? {};
  }

  roleArn(roleId: string): string {
    return this.t.getAtt(roleId, 'Arn');
  }

  /** The role logical id of the function with this logical id. */
  functionRole(functionId: string): string {
    const fn = this.t.json.Resources[functionId];
    if (fn?.Type !== 'AWS::Lambda::Function') throw new Error(`no function ${functionId}`);
    return (fn.Properties.Role as { 'Fn::GetAtt': string[] })['Fn::GetAtt'][0] as string;
  }

  /** A role's part in the stack: its step, the state machine or the scheduler. */
  stepName(roleId: string): string | undefined {
    for (const [step, role] of this.stepRole) if (role === roleId) return step;
    if (roleId === this.stateMachineRole) return 'state machine';
    if (roleId === this.schedulerRole) return 'scheduler';
    return undefined;
  }

  /** Every identity policy attached to the role: its inline policies and AWS::IAM::Policy resources. */
  identityPolicies(roleId: string): { name: string; policy: PolicyDoc }[] {
    const out: { name: string; policy: PolicyDoc }[] = [];
    const role = this.t.json.Resources[roleId];
    if (role?.Type !== 'AWS::IAM::Role') throw new Error(`${roleId} is not a role`);
    for (const p of asList(role.Properties.Policies as { PolicyName: string; PolicyDocument: unknown }[])) {
      out.push({ name: p.PolicyName, policy: this.t.resolve(p.PolicyDocument) as PolicyDoc });
    }
    for (const id of this.t.ids('AWS::IAM::Policy')) {
      const p = this.t.json.Resources[id]?.Properties as {
        Roles: { Ref: string }[];
        PolicyDocument: unknown;
      };
      if (asList(p.Roles).some((r) => r.Ref === roleId))
        out.push({ name: id, policy: this.t.resolve(p.PolicyDocument) as PolicyDoc });
    }
    if (asList(role.Properties.ManagedPolicyArns).length > 0)
      throw new Error(`${roleId} has managed policies, which this evaluation does not read`);
    return out;
  }

  trustPolicy(roleId: string): PolicyDoc {
    return this.t.resolve(this.t.json.Resources[roleId]?.Properties.AssumeRolePolicyDocument) as PolicyDoc;
  }

  /** The data bucket's policy; undefined for an imported bucket (its owner's, not in this template). */
  bucketPolicy(): PolicyDoc | undefined {
    const id = this.t
      .ids('AWS::S3::BucketPolicy')
      .find(
        (p) =>
          `arn:${PARTITION}:s3:::${String(this.t.resolve(this.t.json.Resources[p]?.Properties.Bucket))}` ===
          this.bucketArn,
      );
    return id
      ? (this.t.resolve(this.t.json.Resources[id]?.Properties.PolicyDocument) as PolicyDoc)
      : undefined;
  }

  queuePolicy(): PolicyDoc | undefined {
    const id = this.t.ids('AWS::SQS::QueuePolicy').find((p) => {
      const queues = this.t.resolve(this.t.json.Resources[p]?.Properties.Queues) as string[];
      return queues.some((url) => url.endsWith(`/${this.queueArn.split(':').pop()}`));
    });
    return id
      ? (this.t.resolve(this.t.json.Resources[id]?.Properties.PolicyDocument) as PolicyDoc)
      : undefined;
  }

  /**
   * The rules on the state machine's status changes: each rule's ARN and the function it invokes.
   */
  statusRules(): { readonly ruleArn: string; readonly functionArn: string }[] {
    return this.t
      .ids('AWS::Events::Rule')
      .filter((id) =>
        JSON.stringify(this.t.json.Resources[id]?.Properties.EventPattern).includes(
          'Step Functions Execution Status Change',
        ),
      )
      .flatMap((id) =>
        asList(this.t.json.Resources[id]?.Properties.Targets as { Arn: unknown }[]).map((target) => ({
          ruleArn: this.t.getAtt(id, 'Arn'),
          functionArn: String(this.t.resolve(target.Arn as never)),
        })),
      );
  }

  /**
   * A function's resource-based policy as Lambda keeps it: one statement per AWS::Lambda::Permission,
   * its principal, action and source ARN as a condition
   * (https://docs.aws.amazon.com/lambda/latest/dg/access-control-resource-based.html).
   */
  functionPolicy(functionArn: string): PolicyDoc {
    const statements = this.t
      .ids('AWS::Lambda::Permission')
      .map((id) => this.t.resolve(this.t.json.Resources[id]?.Properties as never) as Record<string, string>)
      .filter((p) => p.FunctionName === functionArn)
      .map((p) => ({
        Effect: 'Allow',
        Principal: { Service: p.Principal },
        Action: p.Action,
        Resource: functionArn,
        ...(p.SourceArn ? { Condition: { ArnLike: { 'AWS:SourceArn': p.SourceArn } } } : {}),
      }));
    return { Version: '2012-10-17', Statement: statements };
  }

  keyPolicy(): PolicyDoc | undefined {
    const id = this.t.ids('AWS::KMS::Key')[0];
    return id ? (this.t.resolve(this.t.json.Resources[id]?.Properties.KeyPolicy) as PolicyDoc) : undefined;
  }
}

function roleOf(value: unknown): string {
  const getAtt = (value as { 'Fn::GetAtt'?: [string, string] } | undefined)?.['Fn::GetAtt'];
  const [role, attribute] = getAtt ?? [];
  if (role === undefined || attribute !== 'Arn') throw new Error(`not a role ARN: ${JSON.stringify(value)}`);
  return role;
}

/**
 * AWS's default key policy for a key created without one: the account's root, which lets IAM
 * policies grant the key (https://docs.aws.amazon.com/kms/latest/developerguide/key-policy-default.html).
 * It stands in for an imported key's policy, which lives outside this template.
 */
export function defaultKeyPolicy(): PolicyDoc {
  return {
    Version: '2012-10-17',
    Statement: [
      {
        Sid: 'Enable IAM User Permissions',
        Effect: 'Allow',
        Principal: { AWS: `arn:${PARTITION}:iam::${ACCOUNT}:root` },
        Action: 'kms:*',
        Resource: '*',
      },
    ],
  };
}

export interface IamRequest {
  /** A role logical id (the request is made with its session), or a service principal. */
  readonly caller: { readonly role: string } | { readonly service: string };
  readonly action: string;
  readonly resource: string;
  readonly context: Readonly<Record<string, string>>;
  /** The resource policy the service evaluates with the caller's identity policies, if any. */
  readonly resourcePolicy?: PolicyDoc | undefined;
}

export interface Evaluation {
  readonly request: IamRequest;
  readonly result: string;
}

/**
 * One request through the evaluator. A validation error or a context key the evaluator ignores
 * for the action throws: either would make the verdict mean less than it says.
 */
export async function evaluate(iam: StackIam, request: IamRequest): Promise<Evaluation> {
  const principal =
    'role' in request.caller
      ? `arn:${PARTITION}:sts::${ACCOUNT}:assumed-role/${iam.t.ref(request.caller.role)}/session`
      : request.caller.service;
  const identityPolicies = 'role' in request.caller ? iam.identityPolicies(request.caller.role) : [];
  const response = await runSimulation(
    {
      request: {
        principal,
        action: request.action,
        resource: { resource: request.resource, accountId: ACCOUNT },
        contextVariables: { ...request.context },
      },
      identityPolicies,
      serviceControlPolicies: [],
      resourceControlPolicies: [],
      ...(request.resourcePolicy ? { resourcePolicy: request.resourcePolicy } : {}),
    },
    {},
  );
  if (response.resultType === 'error') {
    throw new Error(
      `cannot evaluate ${request.action} ${request.resource}: ${response.errors.message} ${JSON.stringify(response.errors)}`,
    );
  }
  if (response.resultType !== 'single') throw new Error(`${request.resource} is not one resource`);
  const ignored = response.result.ignoredContextKeys ?? [];
  if (ignored.length > 0)
    throw new Error(
      `${request.action} ignores context keys ${ignored.join(', ')}: the request is misdescribed`,
    );
  return { request, result: response.overallResult };
}

export function describeRequest(iam: StackIam, e: Evaluation): string {
  const who =
    'role' in e.request.caller
      ? (iam.stepName(e.request.caller.role) ?? e.request.caller.role)
      : e.request.caller.service;
  const ctx = Object.entries(e.request.context)
    .filter(([k]) => k !== 'aws:SecureTransport')
    .map(([k, v]) => `${k}=${v}`)
    .join(' ');
  return `${who}: ${e.request.action} ${e.request.resource}${ctx ? ` [${ctx}]` : ''} -> ${e.result}`;
}
