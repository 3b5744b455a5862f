/**
 * Synthesizes the app in-process for template tests: cdk.json's context (as the CLI would pass
 * it) plus overrides, with asset bundling skipped unless a test asks for it.
 */

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { createApp } from '../../cdk/app.ts';
import type { CompactorStack } from '../../cdk/compactor-stack.ts';
import type { StackConfig } from '../../cdk/config.ts';

export interface Synthesized {
  readonly app: App;
  readonly stack: CompactorStack;
  readonly config: StackConfig;
  readonly template: Template;
  readonly json: CfnTemplate;
  readonly outdir: string;
}

export interface CfnResource {
  readonly Type: string;
  /** Always present: `synth` fills in `{}` for resources without properties. */
  readonly Properties: Record<string, unknown>;
  readonly DeletionPolicy?: string;
  readonly UpdateReplacePolicy?: string;
  readonly DependsOn?: string[];
}

export interface CfnTemplate {
  readonly Resources: Record<string, CfnResource>;
  readonly Outputs?: Record<string, { Value: unknown }>;
}

export interface SynthOptions {
  /** The `compactor` context value (object or JSON string); cdk.json's when undefined. */
  readonly compactor?: unknown;
  readonly context?: Record<string, unknown>;
  /** Bundle the Lambda assets (slow: esbuild and an npm install). */
  readonly bundle?: boolean;
  /** Keep the cloud assembly (the caller removes `outdir`). */
  readonly keep?: boolean;
  /** Changes the stack before synthesis (e.g. adds a grant a test expects to be caught). */
  readonly mutate?: (stack: CompactorStack) => void;
}

export function synth(options: SynthOptions = {}): Synthesized {
  const outdir = mkdtempSync(join(tmpdir(), 'compactor-cdk-'));
  try {
    const { app, stack, config } = createApp({
      outdir,
      context: {
        ...(options.bundle ? {} : { 'aws:cdk:bundling-stacks': [] }),
        ...(options.compactor !== undefined ? { compactor: options.compactor } : {}),
        ...options.context,
      },
    });
    options.mutate?.(stack);
    const assembly = app.synth();
    const raw = assembly.getStackByName(stack.stackName).template as CfnTemplate;
    const json: CfnTemplate = {
      ...raw,
      Resources: Object.fromEntries(
        Object.entries(raw.Resources).map(([id, r]) => [id, { ...r, Properties: r.Properties ?? {} }]),
      ),
    };
    return { app, stack, config, template: Template.fromJSON(json), json, outdir };
  } finally {
    if (!options.keep) rmSync(outdir, { recursive: true, force: true });
  }
}

export function resourcesOfType(json: CfnTemplate, type: string): [string, CfnResource][] {
  return Object.entries(json.Resources).filter(([, r]) => r.Type === type);
}

/** A metric alarm's properties, as the stack's alarms on one metric set them. */
export interface MetricAlarmProps {
  readonly MetricName: string;
  readonly Namespace: string;
  readonly Dimensions: { Name: string; Value: string }[];
  readonly Period: number;
  readonly EvaluationPeriods: number;
  readonly DatapointsToAlarm?: number;
  readonly Threshold: number;
  readonly ComparisonOperator: string;
  readonly TreatMissingData: string;
  readonly Statistic: string;
  readonly AlarmActions?: unknown[];
}

/** The alarms on the custom metric `metricName`, by the value of their `tier` dimension. */
export function alarmsByTier(json: CfnTemplate, metricName: string): Record<string, MetricAlarmProps> {
  const alarms = resourcesOfType(json, 'AWS::CloudWatch::Alarm')
    .map(([, r]) => r.Properties as unknown as MetricAlarmProps)
    .filter((p) => p.MetricName === metricName);
  return Object.fromEntries(alarms.map((p) => [p.Dimensions.find((d) => d.Name === 'tier')?.Value, p]));
}

/** The dashboard body with every token (a Ref, the region) as a placeholder string. */
export function dashboardBody<W = { properties: { metrics?: unknown[][] } }>(
  json: CfnTemplate,
): { widgets: W[] } {
  const [[, dashboard] = []] = resourcesOfType(json, 'AWS::CloudWatch::Dashboard');
  const body = dashboard?.Properties.DashboardBody as string | { 'Fn::Join': [string, unknown[]] };
  const text =
    typeof body === 'string'
      ? body
      : body['Fn::Join'][1].map((part) => (typeof part === 'string' ? part : 'TOKEN')).join('');
  return JSON.parse(text);
}

/** A CloudFormation value as text: `<Logical.Attr>` for GetAtt, `<Logical>` for Ref (cdk-nag's notation). */
export function flatten(value: unknown): string {
  if (typeof value === 'string') return value;
  if (typeof value !== 'object' || value === null) return JSON.stringify(value);
  const v = value as Record<string, unknown>;
  if ('Ref' in v) return `<${String(v.Ref)}>`;
  if ('Fn::GetAtt' in v) return `<${(v['Fn::GetAtt'] as string[]).join('.')}>`;
  if ('Fn::Join' in v) {
    const [sep, parts] = v['Fn::Join'] as [string, unknown[]];
    return parts.map(flatten).join(sep);
  }
  return JSON.stringify(value);
}

export interface Statement {
  readonly effect: string;
  readonly actions: readonly string[];
  readonly resources: readonly string[];
  readonly conditions: Record<string, Record<string, unknown>> | undefined;
}

function list<T>(value: T | T[] | undefined): T[] {
  if (value === undefined) return [];
  return Array.isArray(value) ? value : [value];
}

/** Every policy statement of every role, by the role's logical id (inline and attached policies). */
export function statementsByRole(json: CfnTemplate): Map<string, Statement[]> {
  const byRole = new Map<string, Statement[]>();
  const add = (role: string, doc: unknown) => {
    const statements = list((doc as { Statement?: unknown }).Statement) as Record<string, unknown>[];
    const target = byRole.get(role) ?? [];
    for (const s of statements) {
      target.push({
        effect: String(s.Effect),
        actions: list(s.Action as string | string[]),
        resources: list(s.Resource).map(flatten),
        conditions: s.Condition as Statement['conditions'],
      });
    }
    byRole.set(role, target);
  };
  for (const [id, r] of resourcesOfType(json, 'AWS::IAM::Role')) {
    byRole.set(id, byRole.get(id) ?? []);
    for (const p of list(r.Properties.Policies as { PolicyDocument: unknown }[])) add(id, p.PolicyDocument);
  }
  for (const [, r] of resourcesOfType(json, 'AWS::IAM::Policy')) {
    for (const role of list(r.Properties.Roles as { Ref: string }[]))
      add(role.Ref, r.Properties.PolicyDocument);
  }
  return byRole;
}

/** Lambda role logical id -> the step its function runs (COMPACTOR_STEP). */
export function stepRoles(json: CfnTemplate): Map<string, string> {
  const roles = new Map<string, string>();
  for (const [, fn] of resourcesOfType(json, 'AWS::Lambda::Function')) {
    const env = (fn.Properties.Environment as { Variables?: Record<string, string> } | undefined)?.Variables;
    const role = (fn.Properties.Role as { 'Fn::GetAtt': string[] })['Fn::GetAtt'][0];
    if (env?.COMPACTOR_STEP && role) roles.set(role, env.COMPACTOR_STEP);
  }
  return roles;
}

/** The key pattern of an S3 object ARN (`<Bucket.Arn>/k*`, `arn:<AWS::Partition>:s3:::b/k*`), else undefined. */
export function objectKeyPattern(resource: string): string | undefined {
  const match = /^(?:<[^>]+\.Arn>|arn:(?:<AWS::Partition>|aws[a-z-]*):s3:::[^/]+)\/(.*)$/.exec(resource);
  return match?.[1];
}
