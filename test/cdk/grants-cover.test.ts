/**
 * Least privilege that still works: every object-store call each step's handler makes over whole
 * cycles (every tier, retention, a quarantined input, a failing partition and its failure record,
 * a crashed job recovery rolls back) is checked against the IAM policy CDK synthesizes for that
 * step's role. A grant too narrow is an AccessDenied in AWS that no local run would show.
 */

import { join } from 'node:path';
import type { Context } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine.ts';
import { LocalFolderStore } from '../../functions/adapters/local-store.ts';
import { createHandler as clearHandler } from '../../functions/clear-manifest.ts';
import type { StepName } from '../../functions/cli/local-lambdas.ts';
import { localObservability } from '../../functions/cli/local-lambdas.ts';
import { createHandler as compactHandler } from '../../functions/compact.ts';
import { type ConfigInput, type JobKind, parseConfig } from '../../functions/core/config.ts';
import {
  type CopyOptions,
  type DeleteRequest,
  ForwardingStore,
  type IncompleteUpload,
  type ObjectStore,
  type WriteOptions,
} from '../../functions/core/object-store.ts';
import { createHandler as deleteInputsHandler } from '../../functions/delete-inputs.ts';
import type { DepsFactory, Observability } from '../../functions/lambda/handler-kit.ts';
import { createHandler as planHandler } from '../../functions/plan.ts';
import { createHandler as recoverHandler } from '../../functions/recover.ts';
import { createHandler as uploadHandler } from '../../functions/upload.ts';
import { createHandler as verifyHandler } from '../../functions/verify.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { localHandlerDeps } from '../support/handler-deps.ts';
import { writeLake } from '../support/lake-harness.ts';
import { objectKeyPattern, type Statement, statementsByRole, stepRoles, synth } from './synth.ts';

const PREFIX = 'lake/';
const STACK_CONTEXT = {
  dataPrefix: PREFIX,
  tiers: { hourly: { minFiles: 2 }, monthly: { enabled: true } },
  retention: { rules: { 'db/old/': 30 } },
  quietSeconds: 0,
};
const CONFIG: ConfigInput = {
  dataPrefix: PREFIX,
  tiers: { hourly: { minFiles: 2 }, monthly: { enabled: true } },
  retention: { rules: { 'db/old/': 30 } },
  quietSeconds: 0,
};

interface Access {
  readonly step: StepName;
  readonly action: string;
  /** Object key, or the prefix for list actions. */
  readonly target: string;
}

/** Records the S3 actions each call needs, tagged with the step that made it. */
class RecordingStore extends ForwardingStore {
  readonly #step: StepName;
  readonly #log: Access[];
  constructor(inner: ObjectStore, step: StepName, log: Access[]) {
    super(inner);
    this.#step = step;
    this.#log = log;
  }
  #need(action: string, target: string) {
    this.#log.push({ step: this.#step, action, target });
  }
  override list(prefix: string, options?: { readonly signal?: AbortSignal }) {
    this.#need('s3:ListBucket', prefix);
    return super.list(prefix, options);
  }
  override head(key: string, options?: { readonly signal?: AbortSignal }) {
    this.#need('s3:GetObject', key);
    return super.head(key, options);
  }
  override getBytes(key: string, options?: Parameters<ObjectStore['getBytes']>[1]) {
    this.#need('s3:GetObject', key);
    return super.getBytes(key, options);
  }
  override getToFile(key: string, path: string, options?: Parameters<ObjectStore['getToFile']>[2]) {
    this.#need('s3:GetObject', key);
    return super.getToFile(key, path, options);
  }
  override put(key: string, body: Buffer | { readonly file: string }, options?: WriteOptions) {
    this.#need('s3:PutObject', key);
    return super.put(key, body, options);
  }
  override copy(source: string, target: string, options?: CopyOptions) {
    this.#need('s3:GetObject', source);
    this.#need('s3:PutObject', target);
    return super.copy(source, target, options);
  }
  override deleteMany(
    requests: readonly DeleteRequest[],
    options?: Parameters<ObjectStore['deleteMany']>[1],
  ) {
    for (const r of requests) {
      this.#need('s3:DeleteObject', r.key);
      // A conditional delete is authorized as a read too.
      if (r.etag !== undefined) this.#need('s3:GetObject', r.key);
    }
    return super.deleteMany(requests, options);
  }
  override listIncompleteUploads(prefix: string) {
    this.#need('s3:ListBucketMultipartUploads', prefix);
    return super.listIncompleteUploads(prefix);
  }
  override abortIncompleteUpload(upload: IncompleteUpload) {
    this.#need('s3:AbortMultipartUpload', upload.key);
    return super.abortIncompleteUpload(upload);
  }
}

function glob(pattern: string, value: string): boolean {
  const regex = new RegExp(
    `^${pattern
      .split('*')
      .map((p) => p.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
      .join('.*')}$`,
  );
  return regex.test(value);
}

/** Whether the role's Allow statements grant this access (no Deny statements are synthesized). */
function allows(statements: readonly Statement[], access: Access): boolean {
  return statements.some((s) => {
    if (s.effect !== 'Allow' || !s.actions.some((a) => glob(a, access.action))) return false;
    if (access.action === 's3:ListBucket' || access.action === 's3:ListBucketMultipartUploads') {
      if (!s.resources.some((r) => objectKeyPattern(r) === undefined)) return false;
      const prefixes = s.conditions?.StringLike?.['s3:prefix'];
      return prefixes === undefined || [prefixes].flat().some((p) => glob(String(p), access.target));
    }
    return s.resources.some((r) => {
      const key = objectKeyPattern(r);
      return key !== undefined && glob(key, access.target);
    });
  });
}

function context(): Context {
  return {
    functionName: 'grants',
    awsRequestId: 'req',
    getRemainingTimeInMillis: () => 900_000,
  } as unknown as Context;
}

let engine: DuckDbEngine;
let root: string;

useEngineAndDir('grants-cover-', (e, dir) => {
  engine = e;
  root = dir;
});

describe('every call a step makes is allowed by its synthesized role', () => {
  it('over hourly, daily, monthly and retention cycles with a quarantine, a failing partition and a crash', async () => {
    const dir = join(root, 'lake');
    const raw = (table: string, day: string, hour: string, i: number) => ({
      key: `${PREFIX}db/${table}/2025/01/${day}/${hour}/${table}_202501${day}_${hour}0${i}00_${i}.parquet`,
      rows: 5,
    });
    await writeLake(engine, dir, [
      raw('cpu', '14', '10', 1),
      raw('cpu', '14', '10', 2),
      raw('cpu', '14', '11', 1),
      raw('cpu', '14', '11', 2),
      raw('cpu', '20', '05', 1),
      raw('cpu', '20', '05', 2),
      raw('old', '02', '03', 1),
      raw('old', '02', '03', 2),
    ]);
    const inner = new LocalFolderStore(dir);
    // A corrupt input (quarantined) and a schema conflict (a failing partition with a failure record).
    await inner.put(
      `${PREFIX}db/cpu/2025/01/14/10/cpu_20250114_105900_9.parquet`,
      Buffer.from('not parquet'),
    );
    const conflict = join(root, 'conflict.parquet');
    await engine.query(
      `COPY (SELECT 'x' AS id, TIMESTAMP '2025-01-21 04:10:00' AS time) TO '${conflict}' (FORMAT parquet)`,
    );
    await writeLake(engine, dir, [raw('cpu', '21', '04', 1)], 1000);
    await inner.put(`${PREFIX}db/cpu/2025/01/21/04/cpu_20250121_045900_7.parquet`, { file: conflict });

    const log: Access[] = [];
    const config = parseConfig(CONFIG);
    const observability: Observability = localObservability();
    const depsFor =
      (step: StepName): DepsFactory =>
      async () =>
        localHandlerDeps(new RecordingStore(inner, step, log), config, engine, root);
    const handlers = {
      recover: recoverHandler(depsFor('recover'), observability),
      plan: planHandler(depsFor('plan'), observability),
      compact: compactHandler(depsFor('compact'), observability),
      upload: uploadHandler(depsFor('upload'), observability),
      verify: verifyHandler(depsFor('verify'), observability),
      'delete-inputs': deleteInputsHandler(depsFor('delete-inputs'), observability),
      'clear-manifest': clearHandler(depsFor('clear-manifest'), observability),
    };
    let run = 0;
    const cycle = async (tier: JobKind, crashAfterCompact = false) => {
      const executionId = `exec-${tier}-${++run}`;
      await handlers.recover({ tier, executionId, executionName: `n${run}` }, context());
      const planned = (await handlers.plan({ tier, executionId, executionName: `n${run}` }, context())) as {
        itemsKey: string;
      };
      const items = JSON.parse((await inner.getBytes(planned.itemsKey)).body.toString()) as Record<
        string,
        unknown
      >[];
      for (const item of items) {
        const job = {
          tier: item.tier,
          partition: item.partition,
          jobId: item.jobId,
          executionId: item.executionId,
        };
        const compacted = (await handlers.compact(item, context()).catch((error: Error) => ({
          status: `failed: ${error.name}`,
        }))) as { status: string };
        if (compacted.status !== 'done' || crashAfterCompact) continue;
        for (const step of ['upload', 'verify', 'delete-inputs', 'clear-manifest'] as const)
          await handlers[step](job, context());
      }
      return items.length;
    };
    // A job that dies after staging: the next cycle's recovery rolls it forward.
    expect(await cycle('hourly', true)).toBeGreaterThan(0);
    await cycle('hourly');
    await cycle('hourly');
    await cycle('daily');
    await cycle('monthly');
    await cycle('retention');
    await cycle('hourly');

    const stack = synth({ compactor: STACK_CONTEXT });
    const roles = stepRoles(stack.json);
    const statements = statementsByRole(stack.json);
    const byStep = new Map([...roles].map(([role, step]) => [step, statements.get(role) ?? []]));
    const denied = [
      ...new Set(
        log
          .filter((a) => !allows(byStep.get(a.step) ?? [], a))
          .map((a) => `${a.step}: ${a.action} ${a.target}`),
      ),
    ];
    expect(denied).toEqual([]);
    // The scenario reached what it is about: failure records, quarantine records, every step.
    const touched = (part: string) => log.some((a) => a.target.includes(part));
    expect(touched('_compaction/failures/')).toBe(true);
    expect(touched('_compaction/quarantine/inputs/')).toBe(true);
    expect(new Set(log.map((a) => a.step))).toEqual(
      new Set(['recover', 'plan', 'compact', 'upload', 'verify', 'delete-inputs', 'clear-manifest']),
    );
  }, 180_000);
});
