/**
 * Least privilege, read from the synthesized IAM policies of every role in the stack.
 * P = data prefix, S = P + '_compaction/'. A key pattern "covers data" when it can match a key
 * outside S (e.g. `lake/*`); only recover and delete-inputs may delete such keys.
 */

import { beforeAll, describe, expect, it } from 'vitest';
import { STEPS } from '../../cdk/constructs/compactor-functions.ts';
import {
  objectKeyPattern,
  type Statement,
  type Synthesized,
  statementsByRole,
  stepRoles,
  synth,
} from './synth.ts';

/** Can this key pattern (`*` = anything) match a key outside the state root? */
function coversData(pattern: string, stateRoot: string): boolean {
  const literal = pattern.split('*')[0] as string;
  return !literal.startsWith(stateRoot);
}

function isAllowed(s: Statement): boolean {
  return s.effect === 'Allow';
}

/** `action key` for object statements, `s3:ListBucket prefix` per allowed prefix, `action (bucket)` else. */
function s3Grants(statements: readonly Statement[]): string[] {
  const grants = new Set<string>();
  for (const s of statements.filter(isAllowed)) {
    for (const action of s.actions.filter((a) => a.startsWith('s3:'))) {
      for (const resource of s.resources) {
        const key = objectKeyPattern(resource);
        if (key !== undefined) grants.add(`${action} ${key}`);
        else if (action === 's3:ListBucket') {
          const prefixes = s.conditions?.StringLike?.['s3:prefix'];
          for (const p of prefixes === undefined ? ['(any prefix)'] : [prefixes].flat())
            grants.add(`${action} ${p}`);
        } else grants.add(`${action} (bucket)`);
      }
    }
  }
  return [...grants].sort();
}

/**
 * Roles by name: the step name for step Lambdas (a step's second function, the small compact
 * one, `<step> (<role id>)`), else the role's logical id.
 */
function roles(s: Synthesized): Map<string, Statement[]> {
  const steps = stepRoles(s.json);
  const out = new Map<string, Statement[]>();
  for (const [id, statements] of statementsByRole(s.json)) {
    const step = steps.get(id);
    out.set(step === undefined ? id : out.has(step) ? `${step} (${id})` : step, statements);
  }
  return out;
}

function expectedGrants(P: string): Record<string, string[]> {
  const S = `${P}_compaction/`;
  const M = `${S}manifests/*`;
  const ST = `${S}staging/*`;
  const Q = `${S}quarantine/*`;
  const F = `${S}failures/*`;
  const RC = `${S}receipts/*`;
  // An empty data root is the whole bucket: its ListBucket carries no s3:prefix condition.
  const list = (...prefixes: string[]) =>
    prefixes.map((p) => `s3:ListBucket ${p === '*' ? '(any prefix)' : p}`);
  return {
    recover: [
      ...list(`${P}*`),
      `s3:GetObject ${P}*`,
      `s3:PutObject ${P}*`,
      `s3:DeleteObject ${P}*`,
      's3:ListBucketMultipartUploads (bucket)',
      `s3:AbortMultipartUpload ${P}*`,
    ],
    plan: [
      ...list(`${P}*`),
      `s3:GetObject ${M}`,
      `s3:GetObject ${Q}`,
      `s3:GetObject ${F}`,
      `s3:GetObject ${S}plans/backlog/*`,
      `s3:PutObject ${S}plans/*`,
    ],
    compact: [
      ...list(`${P}*`),
      `s3:GetObject ${P}*`,
      `s3:GetObject ${M}`,
      `s3:PutObject ${M}`,
      `s3:DeleteObject ${M}`,
      `s3:PutObject ${ST}`,
      `s3:DeleteObject ${ST}`,
      `s3:AbortMultipartUpload ${ST}`,
      `s3:PutObject ${Q}`,
      `s3:PutObject ${F}`,
    ],
    publish: [
      ...list(`${P}*`),
      `s3:GetObject ${M}`,
      `s3:PutObject ${M}`,
      `s3:DeleteObject ${M}`,
      `s3:GetObject ${ST}`,
      `s3:GetObject ${P}*`,
      `s3:PutObject ${P}*`,
      `s3:AbortMultipartUpload ${P}*`,
      `s3:PutObject ${Q}`,
    ],
    verify: [
      ...list(`${P}*`),
      `s3:GetObject ${M}`,
      `s3:PutObject ${M}`,
      `s3:DeleteObject ${M}`,
      `s3:GetObject ${P}*`,
      `s3:PutObject ${Q}`,
    ],
    // list on P: a conditional delete of an input already gone must be a 404, not a 403.
    'delete-inputs': [
      ...list(`${P}*`),
      `s3:GetObject ${M}`,
      `s3:PutObject ${M}`,
      `s3:GetObject ${P}*`,
      `s3:DeleteObject ${P}*`,
    ],
    // The receipt: put-if-absent, and a HEAD when refused.
    'clear-manifest': [
      ...list(M, ST, RC),
      `s3:GetObject ${M}`,
      `s3:DeleteObject ${M}`,
      `s3:GetObject ${RC}`,
      `s3:PutObject ${RC}`,
      `s3:DeleteObject ${ST}`,
      `s3:DeleteObject ${F}`,
    ],
    // It records the totals it emitted as metrics beside the results (run-summary.ts), and reads the
    // receipts of a child's jobs when the child failed whole.
    summary: [
      ...list(`${S}results/*`, RC),
      `s3:GetObject ${S}results/*`,
      `s3:PutObject ${S}results/*`,
      `s3:GetObject ${RC}`,
    ],
  };
}

describe.each([
  ['the bucket root', ''],
  ['a data prefix', 'lake/'],
])('grants with data at %s', (_name, prefix) => {
  let s: Synthesized;
  let byRole: Map<string, Statement[]>;
  const stateRoot = `${prefix}_compaction/`;
  beforeAll(() => {
    s = synth({ compactor: { dataPrefix: prefix } });
    byRole = roles(s);
  });

  it('gives each step exactly its own S3 actions on its own prefixes', () => {
    const expected = expectedGrants(prefix);
    const actual = Object.fromEntries(STEPS.map((step) => [step, s3Grants(byRole.get(step) ?? [])]));
    expect(actual).toEqual(Object.fromEntries(Object.entries(expected).map(([k, v]) => [k, [...v].sort()])));
  });

  it('gives the small compact function exactly the compact step’s grants, in a role of its own', () => {
    const compactRoles = [...byRole.keys()].filter((name) => name.startsWith('compact'));
    expect(compactRoles).toHaveLength(2);
    for (const name of compactRoles) {
      expect(s3Grants(byRole.get(name) ?? []), name).toEqual(
        [...(expectedGrants(prefix).compact ?? [])].sort(),
      );
    }
  });

  it('lets only delete-inputs and recover delete data objects (keys outside _compaction/)', () => {
    const deleters: string[] = [];
    for (const [role, statements] of byRole) {
      for (const s of statements.filter(isAllowed)) {
        const deletes = s.actions.some(
          (a) => a === 's3:DeleteObject' || a === 's3:*' || a.startsWith('s3:Delete'),
        );
        if (!deletes) continue;
        for (const resource of s.resources) {
          const key = objectKeyPattern(resource);
          if (key !== undefined && coversData(key, stateRoot)) deleters.push(`${role}: ${resource}`);
        }
      }
    }
    expect(new Set(deleters.map((d) => d.split(':')[0]))).toEqual(new Set(['recover', 'delete-inputs']));
  });

  it('lets only publish and recover (roll forward) write data objects', () => {
    const writers: string[] = [];
    for (const [role, statements] of byRole) {
      for (const s of statements.filter(isAllowed)) {
        if (!s.actions.some((a) => a === 's3:PutObject' || a === 's3:*' || a.startsWith('s3:Put'))) continue;
        for (const resource of s.resources) {
          const key = objectKeyPattern(resource);
          if (key !== undefined && coversData(key, stateRoot)) writers.push(`${role} -> ${resource}`);
        }
      }
    }
    expect(writers.filter((w) => !w.startsWith('publish ') && !w.startsWith('recover '))).toEqual([]);
  });

  it('lets the plan step delete nothing at all', () => {
    const actions = (byRole.get('plan') ?? []).flatMap((s) => s.actions);
    expect(actions.filter((a) => /delete|abort|\*/i.test(a))).toEqual([]);
  });

  it('lets recover describe executions of this state machine only', () => {
    const describe = (byRole.get('recover') ?? []).filter((s) =>
      s.actions.includes('states:DescribeExecution'),
    );
    const resources = describe.flatMap((s) => s.resources);
    expect(resources).toContain(
      'arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:execution:<WorkflowStateMachine8F1B1C15.Name>:*',
    );
    for (const r of resources)
      expect(r).toMatch(/:(execution|express):<WorkflowStateMachine[0-9A-F]+\.Name>[:/]\*$/);
    for (const step of STEPS.filter((x) => x !== 'recover' && x !== 'summary')) {
      expect(
        (byRole.get(step) ?? []).flatMap((s) => s.actions).filter((a) => a.startsWith('states:')),
      ).toEqual([]);
    }
  });

  it('lets summary list the Map Runs of this state machine’s executions, and nothing else of Step Functions', () => {
    const statements = (byRole.get('summary') ?? []).filter((s) =>
      s.actions.some((a) => a.startsWith('states:')),
    );
    expect(statements.flatMap((s) => s.actions)).toEqual(['states:ListMapRuns']);
    expect(statements.flatMap((s) => s.resources)).toEqual([
      'arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:execution:<WorkflowStateMachine8F1B1C15.Name>:*',
    ]);
  });

  it('grants no wildcard actions, and "*" resources only to X-Ray and CloudWatch Logs delivery', () => {
    for (const [role, statements] of byRole) {
      for (const s of statements.filter(isAllowed)) {
        for (const action of s.actions) expect(action, role).not.toMatch(/^(\*|[a-z0-9-]+:\*)$/);
        if (s.resources.includes('*')) {
          for (const action of s.actions)
            expect(action, role).toMatch(
              /^(xray:|logs:(\w*LogDelivery|\w*LogDeliveries|Describe\w+|PutResourcePolicy))/,
            );
        }
      }
    }
  });

  it('keeps every step inside the data prefix, and each writes logs only to its own log group', () => {
    for (const step of STEPS) {
      const statements = byRole.get(step) ?? [];
      for (const s of statements) {
        for (const r of s.resources) {
          const key = objectKeyPattern(r);
          if (key !== undefined) expect(key.startsWith(prefix), `${step}: ${r}`).toBe(true);
        }
      }
      const logs = statements.filter((s) => s.actions.some((a) => a.startsWith('logs:')));
      expect(
        logs.flatMap((s) => s.resources),
        step,
      ).toEqual([expect.stringMatching(/^<Steps.*Logs[0-9A-F]+\.Arn>$/)]);
    }
  });
});

describe('grants on an imported bucket', () => {
  it('name the bucket by ARN, with the same prefixes', () => {
    const s = synth({ compactor: { bucket: { create: false, name: 'my-existing-lake' } } });
    const grants = s3Grants(roles(s).get('delete-inputs') ?? []);
    expect(grants).toEqual([...(expectedGrants('')['delete-inputs'] as string[])].sort());
    const resources = (roles(s).get('delete-inputs') ?? []).flatMap((st) => st.resources);
    expect(resources).toContain('arn:<AWS::Partition>:s3:::my-existing-lake/*');
  });
});
