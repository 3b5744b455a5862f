/**
 * cdk-nag AwsSolutions over the whole app. cdk-nag 3 is a CDK policy-validation plugin (it emits
 * no Annotations): `validateScope` runs the same rules and returns the unacknowledged findings,
 * and `-c nag=true` makes `cdk synth` fail on any of them.
 */

import { type App, Validations } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import { AwsSolutionsChecks } from 'cdk-nag';
import type { IConstruct } from 'constructs';
import { describe, expect, it } from 'vitest';
import { synth } from './synth.ts';

function findings(app: App): string[] {
  const report = new AwsSolutionsChecks(undefined, { verbose: false }).validateScope(app);
  return report.violations.flatMap((v) =>
    v.violatingResources.map((r) => `${v.severity} ${v.ruleName} at ${r.constructPath}`),
  );
}

interface Ack {
  readonly path: string;
  readonly id: string;
  readonly reason: string;
}

function acknowledgments(scope: IConstruct): Ack[] {
  const found: Ack[] = [];
  const visit = (c: IConstruct) => {
    for (const entry of c.node.metadata) {
      if (entry.type !== Validations.ACKNOWLEDGED_RULES_METADATA_KEY) continue;
      for (const [id, reason] of Object.entries(entry.data as Record<string, string>)) {
        found.push({ path: c.node.path, id, reason });
      }
    }
    for (const child of c.node.children) visit(child);
  };
  visit(scope);
  return found;
}

describe('cdk-nag AwsSolutions', () => {
  it.each([
    ['the default config', undefined],
    [
      'alarm email, a data prefix and removalPolicy destroy',
      { alarmEmail: 'ops@example.com', dataPrefix: 'lake/', removalPolicy: 'destroy' },
    ],
    ['an imported bucket', { bucket: { create: false, name: 'my-existing-lake' } }],
    [
      'the scheduled canary, a data prefix and a bucket under a KMS key',
      {
        canary: { enabled: true },
        dataPrefix: 'lake/',
        bucket: { encryption: 'kms' },
        alarmEmail: 'ops@example.com',
      },
    ],
    ['the scheduled canary at the bucket root', { canary: { enabled: true } }],
    ['a bucket under a KMS key of its own', { bucket: { encryption: 'kms' }, removalPolicy: 'destroy' }],
    [
      'an imported SSE-KMS bucket',
      {
        bucket: {
          create: false,
          name: 'my-existing-lake',
          kmsKeyArn: 'arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab',
        },
      },
    ],
  ])('finds nothing unacknowledged with %s', (_name, compactor) => {
    const { app } = synth({ compactor });
    expect(findings(app)).toEqual([]);
  });

  it('acknowledges findings one by one, each with a specific reason', () => {
    const { app } = synth({ compactor: { alarmEmail: 'ops@example.com', removalPolicy: 'destroy' } });
    const acks = acknowledgments(app).filter((a) => a.id.includes('AwsSolutions-'));
    expect(acks.length).toBeGreaterThan(0);
    for (const ack of acks) {
      expect(ack.reason.length, `${ack.path} ${ack.id}`).toBeGreaterThan(40);
      // Granular rules are acknowledged per finding, never as a whole rule.
      if (ack.id.includes('IAM5'))
        expect(ack.id, ack.path).toMatch(/AwsSolutions-IAM5\[(Resource|Action)::.+\]$/);
      if (ack.id.includes('IAM4')) expect(ack.id, ack.path).toMatch(/AwsSolutions-IAM4\[Policy::.+\]$/);
    }
    // "*" resources are acknowledged only on roles whose "*" statements are X-Ray / log delivery.
    const stars = acks
      .filter((a) => a.id.endsWith('IAM5[Resource::*]'))
      .map((a) => a.path.split('/').slice(1).join('/'));
    expect(stars.sort()).toEqual(
      [
        'Steps/RecoverRole',
        'Steps/PlanRole',
        'Steps/CompactRole',
        'Steps/CompactSmallRole',
        // The publish step's: it keeps the construct id it had as `upload` (compactor-functions.ts).
        'Steps/UploadRole',
        'Steps/VerifyRole',
        'Steps/DeleteInputsRole',
        'Steps/ClearManifestRole',
        'Steps/SummaryRole',
        'Workflow',
      ].sort(),
    );
  });

  it('still reports a wildcard outside what the acknowledgments name', () => {
    const { app } = synth({
      compactor: { dataPrefix: 'lake/' },
      mutate: (stack) => {
        // Whole-bucket object access and an action wildcard: neither is acknowledged.
        stack.functions.plan.addToRolePolicy(
          new iam.PolicyStatement({
            actions: ['s3:GetObject'],
            resources: [stack.data.bucket.arnForObjects('*')],
          }),
        );
        stack.functions.verify.addToRolePolicy(
          new iam.PolicyStatement({
            actions: ['s3:Get*'],
            resources: [stack.data.bucket.arnForObjects('lake/x')],
          }),
        );
      },
    });
    expect(findings(app)).toEqual([
      expect.stringMatching(
        /^error AwsSolutions-IAM5\[Resource::<DataBucket\w+\.Arn>\/\*\] at .*\/Steps\/PlanRole\//,
      ),
      expect.stringMatching(/^error AwsSolutions-IAM5\[Action::s3:Get\*\] at .*\/Steps\/VerifyRole\//),
    ]);
  });

  it('runs through the app with -c nag=true: the synth passes only without findings', () => {
    expect(() => synth({ context: { nag: true } })).not.toThrow();
    expect(() =>
      synth({
        context: { nag: 'true' },
        mutate: (stack) =>
          stack.functions.plan.addToRolePolicy(
            new iam.PolicyStatement({ actions: ['s3:*'], resources: ['*'] }),
          ),
      }),
    ).toThrow(/AwsSolutions-IAM5/);
  });
});
