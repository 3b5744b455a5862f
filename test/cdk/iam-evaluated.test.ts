/**
 * IAM evaluated, not asserted. Every request each principal of the stack makes is evaluated by a
 * real policy evaluator (@cloud-copilot/iam-simulate, see iam-eval.ts) against the SYNTHESIZED
 * template: identity policies, trust policies, the data bucket's policy (its TLS-only deny; our
 * requests use TLS), the DLQ's policy and the KMS key policy.
 *
 * - The Lambdas: every object-store call each step makes is RECORDED while the synthesized state
 *   machine runs whole cycles locally (hourly with a crash that recovery rolls forward and one it
 *   rolls back, hourly, daily, monthly, retention; a quarantined input and a failing partition),
 *   and each call becomes the S3 (and KMS) requests AWS authorizes it as (`storeCallRequests`).
 * - The state machine role: the Lambda invocations and the ItemReader / ResultWriter object calls
 *   recorded in the same runs, and the Distributed Map's own calls as AWS documents them.
 * - The Scheduler: sts:AssumeRole as the service with the request context Scheduler sends, then
 *   states:StartExecution and sqs:SendMessage with the role.
 * Proofs: a narrowed grant (delete-inputs without list on its inputs), the old Scheduler trust
 * condition, a missing KMS grant, a key policy without the account, and a request without TLS,
 * each applied to the template, make evaluations fail.
 */

import { join } from 'node:path';
import type { Context } from 'aws-lambda';
import { beforeAll, describe, expect, it } from 'vitest';
import { STEPS } from '../../cdk/constructs/compactor-functions.ts';
import { extractWorkflow } from '../../cdk/synth-definition.ts';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { LocalFolderStore } from '../../functions/adapters/local-store/local-store.ts';
import { CANARY_STEPS, type CanaryStepName } from '../../functions/contract.ts';
import { type JobKind, parseConfig } from '../../functions/core/config.ts';
import { systemClock } from '../../functions/core/engine.ts';
import {
  type CopyOptions,
  type DeleteRequest,
  ForwardingStore,
  type IncompleteUpload,
  type ObjectStore,
  type PutFile,
  type WriteOptions,
} from '../../functions/core/object-store.ts';
import type { HandlerDeps } from '../../functions/lambda/handler-kit.ts';
import { runCanaryLocally } from '../../functions/local-runner/canary.ts';
import { localObservability, STEP_HANDLERS, type StepName } from '../../functions/local-runner/lambdas.ts';
import { fireStatusRules } from '../../functions/local-runner/status-rules.ts';
import { executeDefinition } from '../../functions/local-runner/workflow.ts';
import type { RecoverOutput } from '../../functions/recover.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { localHandlerDeps } from '../support/handler-deps.ts';
import { HANG_GUARD_MS } from '../support/hang-guard.ts';
import { writeLake } from '../support/lake-harness.ts';
import {
  ACCOUNT,
  defaultKeyPolicy,
  describeRequest,
  type Evaluation,
  evaluate,
  type IamRequest,
  type PolicyDoc,
  REGION,
  StackIam,
} from './iam-eval.ts';
import type { CfnTemplate } from './synth.ts';
import { synth } from './synth.ts';

const PREFIX = 'lake/';
const STACK_CONTEXT = {
  dataPrefix: PREFIX,
  tiers: { hourly: { minFiles: 2 }, monthly: { enabled: true } },
  retention: { rules: { 'db/old/': 30 } },
  quietSeconds: 0,
};
const IMPORTED_KEY = `arn:aws:kms:${REGION}:${ACCOUNT}:key/0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b`;

/** One object-store call, as the step made it. */
type StoreCall =
  | { readonly op: 'list'; readonly prefix: string }
  | { readonly op: 'read'; readonly key: string }
  | {
      readonly op: 'put';
      readonly key: string;
      readonly ifMatch: boolean;
      readonly file: boolean;
    }
  | { readonly op: 'copy'; readonly source: string; readonly target: string; readonly sized: boolean }
  | { readonly op: 'delete'; readonly key: string; readonly conditional: boolean }
  | { readonly op: 'list-uploads'; readonly prefix: string }
  | { readonly op: 'abort-upload'; readonly key: string };

type Caller = StepName | CanaryStepName | 'state machine';

interface Recorded {
  readonly caller: Caller;
  readonly call: StoreCall;
  /** The role of the function that made the call, where a step has more than one (compact). */
  readonly role?: string | undefined;
}

/** Throws once at the first call `when` picks: a crash of that step (a plain error, not retried). */
class InjectedCrash extends Error {
  override readonly name = 'InjectedCrash';
}

class RecordingStore extends ForwardingStore {
  readonly #caller: Caller;
  readonly #log: Recorded[];
  readonly #crash: ((call: StoreCall) => boolean) | undefined;
  readonly #role: string | undefined;
  #crashed = false;

  constructor(
    inner: ObjectStore,
    caller: Caller,
    log: Recorded[],
    crash?: (call: StoreCall) => boolean,
    role?: string,
  ) {
    super(inner);
    this.#caller = caller;
    this.#log = log;
    this.#crash = crash;
    this.#role = role;
  }

  #record(call: StoreCall): void {
    if (!this.#crashed && this.#crash?.(call)) {
      this.#crashed = true;
      throw new InjectedCrash(`injected crash of ${this.#caller} before ${call.op}`);
    }
    this.#log.push({ caller: this.#caller, call, role: this.#role });
  }

  override list(prefix: string, options?: { readonly signal?: AbortSignal }) {
    this.#record({ op: 'list', prefix });
    return super.list(prefix, options);
  }
  override head(key: string, options?: { readonly signal?: AbortSignal }) {
    this.#record({ op: 'read', key });
    return super.head(key, options);
  }
  override getBytes(key: string, options?: Parameters<ObjectStore['getBytes']>[1]) {
    this.#record({ op: 'read', key });
    return super.getBytes(key, options);
  }
  override getToFile(key: string, path: string, options?: Parameters<ObjectStore['getToFile']>[2]) {
    this.#record({ op: 'read', key });
    return super.getToFile(key, path, options);
  }
  override put(key: string, body: Buffer | PutFile, options?: WriteOptions) {
    this.#record({ op: 'put', key, ifMatch: options?.ifMatch !== undefined, file: !Buffer.isBuffer(body) });
    return super.put(key, body, options);
  }
  override copy(source: string, target: string, options?: CopyOptions) {
    this.#record({ op: 'copy', source, target, sized: options?.size !== undefined });
    return super.copy(source, target, options);
  }
  override deleteMany(
    requests: readonly DeleteRequest[],
    options?: Parameters<ObjectStore['deleteMany']>[1],
  ) {
    for (const r of requests) this.#record({ op: 'delete', key: r.key, conditional: r.etag !== undefined });
    return super.deleteMany(requests, options);
  }
  override listIncompleteUploads(prefix: string) {
    this.#record({ op: 'list-uploads', prefix });
    return super.listIncompleteUploads(prefix);
  }
  override abortIncompleteUpload(upload: IncompleteUpload) {
    this.#record({ op: 'abort-upload', key: upload.key });
    return super.abortIncompleteUpload(upload);
  }
}

const TLS = { 'aws:SecureTransport': 'true' };

/**
 * The requests AWS authorizes one store call as, made by `role` on the data bucket:
 * - ListObjectsV2 is s3:ListBucket on the bucket, its Prefix the s3:prefix context key
 *   (https://docs.aws.amazon.com/AmazonS3/latest/API/API_ListObjectsV2.html).
 * - GetObject and HeadObject are s3:GetObject; a missing key is a 404 only to a caller that may
 *   also s3:ListBucket, else a 403 (https://docs.aws.amazon.com/AmazonS3/latest/API/API_HeadObject.html,
 *   API_GetObject.html), so each read adds the ListBucket a 404 needs, with the key as s3:prefix.
 * - PutObject is s3:PutObject; with If-Match also s3:GetObject
 *   (https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html), and If-Match
 *   on a missing key is a 404 (NoSuchKey), which needs the list too. A file body may go up as a
 *   multipart upload: Create/UploadPart/Complete are s3:PutObject, the abort after a failure
 *   s3:AbortMultipartUpload (https://docs.aws.amazon.com/AmazonS3/latest/userguide/mpuoverview.html#mpuAndPermissions).
 * - CopyObject is s3:GetObject on the source and s3:PutObject on the target
 *   (https://docs.aws.amazon.com/AmazonS3/latest/API/API_CopyObject.html); a missing source must
 *   be a 404 too.
 * - DeleteObjects is s3:DeleteObject per key (https://docs.aws.amazon.com/AmazonS3/latest/API/API_DeleteObjects.html);
 *   an ETag-conditioned one also s3:GetObject
 *   (https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-deletes.html), and a
 *   conditional delete of a key already gone must be a 404 (NoSuchKey), not a 403.
 * - ListMultipartUploads is s3:ListBucketMultipartUploads on the bucket; AbortMultipartUpload
 *   s3:AbortMultipartUpload on the key (mpuoverview.html#mpuAndPermissions).
 * - Under SSE-KMS, writing an object takes kms:GenerateDataKey and reading it kms:Decrypt on the
 *   key; a multipart upload and a copy take both
 *   (https://docs.aws.amazon.com/AmazonS3/latest/userguide/UsingKMSEncryption.html), and a
 *   HeadObject that asks for the checksum (as S3Store's does) decrypts
 *   (https://docs.aws.amazon.com/AmazonS3/latest/API/API_HeadObject.html). S3 calls KMS on the
 *   caller's behalf: kms:ViaService is S3's endpoint
 *   (https://docs.aws.amazon.com/kms/latest/developerguide/conditions-kms.html#conditions-kms-via-service).
 */
function storeCallRequests(
  iam: StackIam,
  role: string,
  caller: Caller,
  call: StoreCall,
  key: { readonly arn: string; readonly policy: PolicyDoc } | undefined,
): IamRequest[] {
  const bucketPolicy = iam.bucketPolicy();
  const s3 = (action: string, resource: string, context: Record<string, string> = {}): IamRequest => ({
    caller: { role },
    action,
    resource,
    context: { ...TLS, ...context },
    resourcePolicy: bucketPolicy,
  });
  const object = (k: string) => `${iam.bucketArn}/${k}`;
  const list = (prefix: string) =>
    s3('s3:ListBucket', iam.bucketArn, prefix === '' ? {} : { 's3:prefix': prefix });
  const kms = (...actions: string[]): IamRequest[] =>
    key
      ? actions.map((action) => ({
          caller: { role },
          action,
          resource: key.arn,
          context: { ...TLS, 'kms:ViaService': `s3.${REGION}.amazonaws.com`, 'kms:CallerAccount': ACCOUNT },
          resourcePolicy: key.policy,
        }))
      : [];
  const sm = caller === 'state machine';
  switch (call.op) {
    case 'list':
      return [list(call.prefix)];
    case 'read':
      // The ItemReader reads a plan Plan just wrote: it never needs a 404.
      return [s3('s3:GetObject', object(call.key)), ...(sm ? [] : [list(call.key)]), ...kms('kms:Decrypt')];
    case 'put':
      if (sm) {
        // ResultWriter: PutObject and the multipart calls the Distributed Map IAM page lists, and
        // under SSE-KMS "kms:Decrypt, kms:Encrypt, and kms:GenerateDataKey" on the key
        // (https://docs.aws.amazon.com/step-functions/latest/dg/iam-policies-eg-dist-map.html).
        return [
          s3('s3:PutObject', object(call.key)),
          s3('s3:ListMultipartUploadParts', object(call.key)),
          s3('s3:AbortMultipartUpload', object(call.key)),
          ...kms('kms:GenerateDataKey', 'kms:Decrypt', 'kms:Encrypt'),
        ];
      }
      return [
        s3('s3:PutObject', object(call.key)),
        ...(call.ifMatch ? [s3('s3:GetObject', object(call.key)), list(call.key)] : []),
        ...(call.file ? [s3('s3:AbortMultipartUpload', object(call.key))] : []),
        ...kms('kms:GenerateDataKey', ...(call.file ? ['kms:Decrypt'] : [])),
      ];
    case 'copy':
      // A copy told its size may run as a multipart copy (S3Store.copy): HEAD and UploadPartCopy
      // read the source, Create/Complete write the target, and a failed one is aborted.
      return [
        s3('s3:GetObject', object(call.source)),
        list(call.source),
        s3('s3:PutObject', object(call.target)),
        ...(call.sized ? [s3('s3:AbortMultipartUpload', object(call.target))] : []),
        ...kms('kms:Decrypt', 'kms:GenerateDataKey'),
      ];
    case 'delete':
      return [
        s3('s3:DeleteObject', object(call.key)),
        ...(call.conditional ? [s3('s3:GetObject', object(call.key)), list(call.key)] : []),
      ];
    case 'list-uploads':
      return [s3('s3:ListBucketMultipartUploads', iam.bucketArn)];
    case 'abort-upload':
      return [s3('s3:AbortMultipartUpload', object(call.key))];
  }
}

interface Run {
  readonly store: Recorded[];
  /** Logical ids of the step functions the state machine invoked. */
  readonly invoked: Set<string>;
  /** Executions recover asked Step Functions about (DescribeExecution). */
  readonly described: Set<string>;
  /** Executions whose Map Runs the failure Summary listed (ListMapRuns). */
  readonly mapRunsListed: Set<string>;
  /** Whether the stack's rule on a failed execution invoked its function. */
  ruleFired: boolean;
  readonly recoveries: RecoverOutput[];
  readonly statuses: string[];
}

let engine: DuckDbEngine;
let root: string;
useEngineAndDir('iam-evaluated-', (e, dir) => {
  engine = e;
  root = dir;
});

/** Whole cycles of the synthesized state machine, every store call recorded per caller. */
async function recordCycles(json: CfnTemplate, iam: StackIam): Promise<Run> {
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
    raw('cpu', '14', '12', 1),
    raw('cpu', '14', '12', 2),
    raw('cpu', '20', '05', 1),
    raw('cpu', '20', '05', 2),
    raw('old', '02', '03', 1),
    raw('old', '02', '03', 2),
  ]);
  const inner = new LocalFolderStore(dir);
  // A corrupt input (quarantined) and a schema conflict (a failing partition with a failure record).
  await inner.put(`${PREFIX}db/cpu/2025/01/14/10/cpu_20250114_105900_9.parquet`, Buffer.from('not parquet'));
  const conflict = join(root, 'conflict.parquet');
  await engine.query(
    `COPY (SELECT 'x' AS id, TIMESTAMP '2025-01-21 04:10:00' AS time) TO '${conflict}' (FORMAT parquet)`,
  );
  await writeLake(engine, dir, [raw('cpu', '21', '04', 1)], 1000);
  await inner.put(`${PREFIX}db/cpu/2025/01/21/04/cpu_20250121_045900_7.parquet`, { file: conflict });

  const workflow = extractWorkflow(json as Parameters<typeof extractWorkflow>[0]);
  // The Lambdas get the COMPACTOR_CONFIG the stack gives them.
  const anyFn = Object.values(json.Resources).find(
    (r) => r.Type === 'AWS::Lambda::Function' && JSON.stringify(r.Properties).includes('COMPACTOR_STEP'),
  );
  const env = anyFn?.Properties.Environment as { Variables: { COMPACTOR_CONFIG: string } };
  const config = parseConfig(JSON.parse(env.Variables.COMPACTOR_CONFIG));

  const run: Run = {
    store: [],
    invoked: new Set(),
    described: new Set(),
    mapRunsListed: new Set(),
    ruleFired: false,
    recoveries: [],
    statuses: [],
  };
  let manifests: readonly string[] = [];
  let crashes: Partial<Record<StepName, (call: StoreCall) => boolean>> = {};
  const observability = localObservability();
  const handlerFor = (step: StepName, role: string) =>
    STEP_HANDLERS[step](async (): Promise<HandlerDeps> => {
      const deps = localHandlerDeps(
        new RecordingStore(inner, step, run.store, crashes[step], role),
        config,
        engine,
        root,
      );
      return {
        ...deps,
        bucket: workflow.bucket,
        isOwnerAlive: async (executionId) => {
          run.described.add(executionId);
          return false;
        },
        mapRunManifests: async ({ id }) => {
          run.mapRunsListed.add(id);
          return manifests;
        },
      };
    }, observability);
  // One handler per function: the compact step has two (by job size), each with its own role.
  const handlers = new Map<string, ReturnType<typeof handlerFor>>();
  let request = 0;
  const invoke = async (functionName: string, payload: unknown) => {
    const step = workflow.functionSteps.get(functionName) as StepName | undefined;
    if (!step) throw new Error(`no step for ${functionName}`);
    const fn = functionName.split(':function:')[1] as string;
    run.invoked.add(fn);
    const handler = handlers.get(fn) ?? handlerFor(step, iam.functionRole(fn));
    handlers.set(fn, handler);
    const result = await handler(payload, {
      functionName: step,
      awsRequestId: `r${++request}`,
      getRemainingTimeInMillis: () => 900_000,
    } as unknown as Context);
    if (step === 'recover') run.recoveries.push(result as RecoverOutput);
    return result as never;
  };
  let n = 0;
  const cycle = async (tier: JobKind) => {
    const name = `${tier}-${++n}`;
    const execution = await executeDefinition(
      workflow.definition,
      { store: new RecordingStore(inner, 'state machine', run.store), bucket: workflow.bucket, invoke },
      {
        input: { tier },
        // As Step Functions names its executions: the owner recorded in each manifest.
        executionId: `arn:aws:states:${REGION}:${ACCOUNT}:execution:${iam.stateMachineName}:${name}`,
        executionName: name,
        retryIntervalMs: 0,
      },
    );
    run.statuses.push(`${name}: ${execution.status}`);
    if (execution.status === 'FAILED') {
      // The stack's rule runs Summary on the failure, as EventBridge would.
      manifests = execution.mapRunManifests;
      const fired = await fireStatusRules(workflow.statusRules, execution, iam.stateMachineArn, invoke);
      run.ruleFired ||= fired.length > 0;
    }
  };
  // Hour 11's job dies before its publish copy (staged: recovery rolls it forward); hour 12's
  // dies before its staged-manifest write (claimed, staging written: recovery rolls it back).
  crashes = {
    publish: (c) => c.op === 'copy' && c.target.includes('/14/11/'),
    compact: (c) => c.op === 'put' && c.ifMatch && c.key.includes('/14/12'),
  };
  await cycle('hourly');
  crashes = {};
  await cycle('hourly');
  await cycle('hourly');
  await cycle('daily');
  await cycle('monthly');
  await cycle('retention');
  await cycle('hourly');
  // A job that this execution committed reads its receipt when its Map item runs again (a
  // redrive): compact when its inputs are gone, every later step when its manifest is
  // (manifest-cas.ts committedBefore). Summary reads the receipts of the jobs of a child that failed
  // whole (run-summary.ts settleByReceipts). The cycles above redrive no item and time out no
  // child, so each of these reads is evaluated on a receipt they wrote.
  const receipt = run.store.find(
    ({ caller, call }) => caller === 'clear-manifest' && call.op === 'put' && call.key.includes('/receipts/'),
  );
  if (receipt?.call.op !== 'put') throw new Error('the recorded cycles wrote no receipt');
  for (const step of [
    'compact',
    'publish',
    'verify',
    'delete-inputs',
    'clear-manifest',
    'summary',
  ] as const) {
    run.store.push({ caller: step, call: { op: 'read', key: receipt.call.key } });
  }
  return run;
}

/** Every distinct request of the recorded run and of the documented services, per caller. */
function requestsOf(
  iam: StackIam,
  run: Run,
  key: { readonly arn: string; readonly policy: PolicyDoc } | undefined,
): IamRequest[] {
  const out: IamRequest[] = [];
  for (const { caller, call, role: own } of run.store) {
    const role = caller === 'state machine' ? iam.stateMachineRole : (own ?? iam.stepRole.get(caller));
    if (!role) throw new Error(`no role for ${caller}`);
    out.push(...storeCallRequests(iam, role, caller, call, key));
  }
  const smRole = { role: iam.stateMachineRole };
  for (const fn of run.invoked) {
    out.push({
      caller: smRole,
      action: 'lambda:InvokeFunction',
      resource: iam.t.getAtt(fn, 'Arn'),
      context: TLS,
    });
  }
  // The Distributed Map starts its child executions of this state machine, describes and stops
  // them, and a redrive redrives its Map Run's children
  // (https://docs.aws.amazon.com/step-functions/latest/dg/iam-policies-eg-dist-map.html,
  // https://docs.aws.amazon.com/step-functions/latest/dg/redrive-map-run.html).
  const execution = (name: string) =>
    `arn:aws:states:${REGION}:${ACCOUNT}:execution:${iam.stateMachineName}${name}`;
  out.push(
    { caller: smRole, action: 'states:StartExecution', resource: iam.stateMachineArn, context: TLS },
    { caller: smRole, action: 'states:DescribeExecution', resource: execution(':hourly-1'), context: TLS },
    { caller: smRole, action: 'states:StopExecution', resource: execution(':hourly-1'), context: TLS },
    {
      caller: smRole,
      action: 'states:RedriveExecution',
      resource: execution('/Compact-partitions-label:0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0'),
      context: TLS,
    },
  );
  // EventBridge invokes Summary for a failed execution, allowed by the function's resource policy
  // (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-use-resource-based.html#eb-lambda-permissions);
  // Summary then lists that execution's Map Runs.
  if (run.ruleFired) for (const rule of iam.statusRules()) out.push(ruleInvocation(iam, rule, rule.ruleArn));
  out.push(...stepAsks(iam, 'summary', 'states:ListMapRuns', run.mapRunsListed));
  // Recover asks whether a manifest's owner still runs (DescribeExecution), for each owner it met.
  out.push(...stepAsks(iam, 'recover', 'states:DescribeExecution', run.described));
  // Each Lambda's role is assumed by Lambda, the state machine's by Step Functions for this
  // state machine (https://docs.aws.amazon.com/step-functions/latest/dg/procedure-create-iam-role.html).
  for (const role of iam.stepRole.values()) {
    out.push({
      caller: { service: 'lambda.amazonaws.com' },
      action: 'sts:AssumeRole',
      resource: iam.roleArn(role),
      context: TLS,
      resourcePolicy: iam.trustPolicy(role),
    });
  }
  out.push({
    caller: { service: 'states.amazonaws.com' },
    action: 'sts:AssumeRole',
    resource: iam.roleArn(iam.stateMachineRole),
    context: { ...TLS, 'aws:SourceArn': iam.stateMachineArn, 'aws:SourceAccount': ACCOUNT },
    resourcePolicy: iam.trustPolicy(iam.stateMachineRole),
  });
  out.push(...schedulerRequests(iam));
  return dedupe(out);
}

/** EventBridge invoking a rule's function, as the rule `sourceArn`. */
function ruleInvocation(
  iam: StackIam,
  rule: ReturnType<StackIam['statusRules']>[number],
  sourceArn: string,
): IamRequest {
  return {
    caller: { service: 'events.amazonaws.com' },
    action: 'lambda:InvokeFunction',
    resource: rule.functionArn,
    context: { ...TLS, 'aws:SourceArn': sourceArn, 'aws:SourceAccount': ACCOUNT },
    resourcePolicy: iam.functionPolicy(rule.functionArn),
  };
}

/** A step's role asking Step Functions `action` about each execution. */
function stepAsks(iam: StackIam, step: StepName, action: string, executions: Iterable<string>): IamRequest[] {
  return [...executions].map((execution) => ({
    caller: { role: iam.stepRole.get(step) as string },
    action,
    resource: execution,
    context: TLS,
  }));
}

/**
 * Scheduler assumes its execution role as scheduler.amazonaws.com with aws:SourceArn = the
 * schedule GROUP's ARN and aws:SourceAccount = the account
 * (https://docs.aws.amazon.com/scheduler/latest/UserGuide/cross-service-confused-deputy-prevention.html),
 * then starts the target and, for a start it cannot deliver, sends it to the DLQ
 * (https://docs.aws.amazon.com/scheduler/latest/UserGuide/configuring-schedule-dlq.html).
 */
function schedulerRequests(iam: StackIam): IamRequest[] {
  return [
    {
      caller: { service: 'scheduler.amazonaws.com' },
      action: 'sts:AssumeRole',
      resource: iam.roleArn(iam.schedulerRole),
      context: { ...TLS, 'aws:SourceArn': iam.scheduleGroupArn, 'aws:SourceAccount': ACCOUNT },
      resourcePolicy: iam.trustPolicy(iam.schedulerRole),
    },
    {
      caller: { role: iam.schedulerRole },
      action: 'states:StartExecution',
      resource: iam.stateMachineArn,
      context: TLS,
    },
    {
      caller: { role: iam.schedulerRole },
      action: 'sqs:SendMessage',
      resource: iam.queueArn,
      context: TLS,
      resourcePolicy: iam.queuePolicy(),
    },
  ];
}

function dedupe(requests: IamRequest[]): IamRequest[] {
  const seen = new Map<string, IamRequest>();
  for (const r of requests) {
    seen.set(JSON.stringify([r.caller, r.action, r.resource, r.context, r.resourcePolicy ?? null]), r);
  }
  return [...seen.values()];
}

async function denied(iam: StackIam, requests: readonly IamRequest[]): Promise<string[]> {
  const results: Evaluation[] = [];
  for (const r of requests) results.push(await evaluate(iam, r));
  return results.filter((e) => e.result !== 'Allowed').map((e) => describeRequest(iam, e));
}

function clone(json: CfnTemplate): CfnTemplate {
  return structuredClone(json) as CfnTemplate;
}

/** The stack variants evaluated, all with the same data prefix and tiers as the recorded run. */
const VARIANTS = {
  'a created SSE-S3 bucket': STACK_CONTEXT,
  'a created bucket under a key the stack creates': { ...STACK_CONTEXT, bucket: { encryption: 'kms' } },
  'an imported SSE-KMS bucket': {
    ...STACK_CONTEXT,
    bucket: { create: false, name: 'my-existing-lake', kmsKeyArn: IMPORTED_KEY },
  },
} as const;

function keyOf(iam: StackIam, variant: keyof typeof VARIANTS) {
  if (variant === 'a created bucket under a key the stack creates') {
    const policy = iam.keyPolicy();
    if (!iam.createdKeyArn || !policy) throw new Error('the stack created no key');
    return { arn: iam.createdKeyArn, policy };
  }
  if (variant === 'an imported SSE-KMS bucket') return { arn: IMPORTED_KEY, policy: defaultKeyPolicy() };
  return undefined;
}

describe('IAM evaluated against the synthesized stack (@cloud-copilot/iam-simulate)', () => {
  const stacks = {} as Record<keyof typeof VARIANTS, { json: CfnTemplate; iam: StackIam }>;
  let run: Run;

  beforeAll(async () => {
    for (const [name, compactor] of Object.entries(VARIANTS)) {
      const { json } = synth({ compactor });
      stacks[name as keyof typeof VARIANTS] = { json, iam: new StackIam(json) };
    }
    const first = stacks['a created SSE-S3 bucket'];
    run = await recordCycles(first.json, first.iam);
  }, HANG_GUARD_MS);

  it('recorded whole cycles: every step, recovery rolling forward and back, failures and quarantines', () => {
    const callers = new Set(run.store.map((r) => r.caller));
    expect([...callers].sort()).toEqual([...STEPS, 'state machine'].sort());
    const rolled = run.recoveries.reduce(
      (sum, r) => ({ forward: sum.forward + r.rolledForward, back: sum.back + r.rolledBack }),
      { forward: 0, back: 0 },
    );
    expect(rolled, run.statuses.join('; ')).toEqual({ forward: 1, back: 1 });
    const touched = (part: string) => run.store.some(({ call }) => JSON.stringify(call).includes(part));
    expect(touched('_compaction/failures/')).toBe(true);
    expect(touched('_compaction/quarantine/inputs/')).toBe(true);
    // Recover's roll forward publishes with its own role: a copy out of staging.
    expect(run.store.some(({ caller, call }) => caller === 'recover' && call.op === 'copy')).toBe(true);
    // A second conditional delete of an input already gone happens in delete-inputs' retries and
    // in recovery; the evaluation covers it by requiring the 404's list for every such delete.
    expect(run.store.some(({ caller, call }) => caller === 'delete-inputs' && call.op === 'delete')).toBe(
      true,
    );
    expect(run.described.size).toBeGreaterThan(0);
    // The failing partition fails its execution: the rule's Summary lists its Map Runs and
    // records its totals beside the results.
    expect(run.ruleFired, run.statuses.join('; ')).toBe(true);
    expect(run.mapRunsListed.size).toBeGreaterThan(0);
    expect(run.store.some(({ caller, call }) => caller === 'summary' && call.op === 'put')).toBe(true);
  });

  it('EventBridge may invoke Summary for the failure rule only: a request from another rule is denied', async () => {
    const { iam } = stacks['a created SSE-S3 bucket'];
    const [rule] = iam.statusRules();
    if (!rule) throw new Error('the stack has no status rule');
    expect(await denied(iam, [ruleInvocation(iam, rule, rule.ruleArn)])).toEqual([]);
    expect(await denied(iam, [ruleInvocation(iam, rule, `${rule.ruleArn}-other`)])).toHaveLength(1);
  });

  describe.each(Object.keys(VARIANTS) as (keyof typeof VARIANTS)[])('with %s', (variant) => {
    it('allows every request of every principal', async () => {
      const { iam } = stacks[variant];
      const requests = requestsOf(iam, run, keyOf(iam, variant));
      // Both kinds of evaluation are present: S3 (and KMS) for each role, and the services'.
      expect(requests.length).toBeGreaterThan(100);
      if (keyOf(iam, variant)) expect(requests.some((r) => r.action === 'kms:Decrypt')).toBe(true);
      expect(await denied(iam, requests)).toEqual([]);
    }, 120_000);
  });

  it('the state machine role invokes each step function, reads plans, writes results and runs its Map', async () => {
    const { iam } = stacks['a created SSE-S3 bucket'];
    const requests = requestsOf(iam, run, undefined).filter(
      (r) => 'role' in r.caller && r.caller.role === iam.stateMachineRole,
    );
    const invoked = requests.filter((r) => r.action === 'lambda:InvokeFunction').map((r) => r.resource);
    // The test lake's jobs are all small: the small compact function runs them, not the large one.
    expect(invoked).toHaveLength(8);
    expect([...run.invoked].some((fn) => fn.startsWith('StepsCompactSmall'))).toBe(true);
    const actions = new Set(
      requests.map(
        (r) =>
          `${r.action} ${r.resource.includes('/_compaction/') ? r.resource.split('/_compaction/')[1]?.split('/')[0] : ''}`,
      ),
    );
    for (const expected of [
      's3:GetObject plans',
      's3:PutObject results',
      's3:ListMultipartUploadParts results',
      's3:AbortMultipartUpload results',
      'states:StartExecution ',
      'states:DescribeExecution ',
      'states:RedriveExecution ',
    ]) {
      expect(actions).toContain(expected);
    }
    expect(await denied(iam, requests)).toEqual([]);
  });

  it('the Scheduler assumes its role with the schedule group as aws:SourceArn, starts the state machine and writes the DLQ', async () => {
    const { iam } = stacks['a created SSE-S3 bucket'];
    const results = await Promise.all(schedulerRequests(iam).map((r) => evaluate(iam, r)));
    expect(results.map((e) => `${e.request.action} ${e.result}`)).toEqual([
      'sts:AssumeRole Allowed',
      'states:StartExecution Allowed',
      'sqs:SendMessage Allowed',
    ]);
  });

  describe('proofs: a template changed the wrong way fails the evaluation', () => {
    it('delete-inputs listing only the manifests (the old grant): its conditional deletes of inputs are denied their 404', async () => {
      const base = stacks['a created SSE-S3 bucket'];
      const json = clone(base.json);
      const roleId = base.iam.stepRole.get('delete-inputs') as string;
      let narrowed = 0;
      for (const r of Object.values(json.Resources)) {
        if (r.Type !== 'AWS::IAM::Policy') continue;
        if (!(r.Properties.Roles as { Ref: string }[]).some((x) => x.Ref === roleId)) continue;
        for (const s of (r.Properties.PolicyDocument as { Statement: Record<string, unknown>[] }).Statement) {
          const like = (s.Condition as { StringLike?: Record<string, unknown> } | undefined)?.StringLike;
          if (like?.['s3:prefix']) {
            like['s3:prefix'] = `${PREFIX}_compaction/manifests/*`;
            narrowed++;
          }
        }
      }
      expect(narrowed).toBe(1);
      const iam = new StackIam(json);
      const all = await denied(iam, requestsOf(iam, run, undefined));
      // The 404 of its receipt's read (a redriven item) is denied too: that grant listed no receipts.
      const receipts = all.filter((d) => d.includes('[s3:prefix=lake/_compaction/receipts/'));
      expect(receipts).toHaveLength(1);
      expect(receipts[0]).toMatch(/^delete-inputs: s3:ListBucket /);
      const deniedNow = all.filter((d) => !receipts.includes(d));
      expect(deniedNow.length).toBeGreaterThan(0);
      // Else only delete-inputs' ListBucket of its inputs (the 404 of a conditional delete) is denied.
      for (const d of deniedNow) expect(d).toMatch(/^delete-inputs: s3:ListBucket .* \[s3:prefix=lake\/db\//);
    }, 120_000);

    it('the old Scheduler trust condition (ArnLike aws:SourceArn .../schedule/<group>/*) denies the AssumeRole', async () => {
      const base = stacks['a created SSE-S3 bucket'];
      const json = clone(base.json);
      const groupName = base.iam.scheduleGroupArn.split('schedule-group/')[1];
      const trust = json.Resources[base.iam.schedulerRole]?.Properties.AssumeRolePolicyDocument as {
        Statement: { Condition: Record<string, Record<string, unknown>> }[];
      };
      expect(trust.Statement).toHaveLength(1);
      const statement = trust.Statement[0] as { Condition: Record<string, Record<string, unknown>> };
      statement.Condition = {
        StringEquals: { 'aws:SourceAccount': { Ref: 'AWS::AccountId' } },
        ArnLike: {
          'aws:SourceArn': `arn:aws:scheduler:${REGION}:${ACCOUNT}:schedule/${groupName}/*`,
        },
      };
      const iam = new StackIam(json);
      const [assume] = schedulerRequests(iam);
      expect((await evaluate(iam, assume as IamRequest)).result).toBe('ImplicitlyDenied');
    });

    it('a role without its KMS grant is denied the key, and so is every role under a key policy that omits the account', async () => {
      const variant = 'a created bucket under a key the stack creates';
      const base = stacks[variant];
      const noGrant = clone(base.json);
      const roleId = base.iam.stepRole.get('verify') as string;
      for (const r of Object.values(noGrant.Resources)) {
        if (r.Type !== 'AWS::IAM::Policy') continue;
        if (!(r.Properties.Roles as { Ref: string }[]).some((x) => x.Ref === roleId)) continue;
        const doc = r.Properties.PolicyDocument as { Statement: { Action: unknown }[] };
        doc.Statement = doc.Statement.filter((s) => !JSON.stringify(s.Action).includes('kms:'));
      }
      const iamNoGrant = new StackIam(noGrant);
      const deniedNoGrant = await denied(iamNoGrant, requestsOf(iamNoGrant, run, keyOf(iamNoGrant, variant)));
      expect(deniedNoGrant.length).toBeGreaterThan(0);
      for (const d of deniedNoGrant) expect(d).toMatch(/^verify: kms:/);

      const noRoot = clone(base.json);
      const keyId = base.iam.t.only('AWS::KMS::Key');
      (noRoot.Resources[keyId]?.Properties as { KeyPolicy: PolicyDoc }).KeyPolicy = {
        Version: '2012-10-17',
        Statement: [],
      };
      const iamNoRoot = new StackIam(noRoot);
      const kmsRequests = requestsOf(iamNoRoot, run, keyOf(iamNoRoot, variant)).filter((r) =>
        r.action.startsWith('kms:'),
      );
      expect(kmsRequests.length).toBeGreaterThan(0);
      expect(await denied(iamNoRoot, kmsRequests)).toHaveLength(kmsRequests.length);
    }, 120_000);

    it('a request without TLS is denied by the bucket policy', async () => {
      const { iam } = stacks['a created SSE-S3 bucket'];
      const read = requestsOf(iam, run, undefined).find(
        (r) =>
          r.action === 's3:GetObject' && 'role' in r.caller && r.caller.role === iam.stepRole.get('plan'),
      ) as IamRequest;
      expect((await evaluate(iam, read)).result).toBe('Allowed');
      const plain = { ...read, context: { 'aws:SecureTransport': 'false' } };
      expect((await evaluate(iam, plain)).result).toBe('ExplicitlyDenied');
    });
  });
});

/**
 * The scheduled canary's Lambdas: every store call each made in a canary execution run locally
 * (the synthesized canary state machine, its compaction run too) is allowed, and none of their
 * roles may write or delete anything outside the canary's key prefix: not the lake's tables, not
 * the state root, not another prefix that merely starts like it.
 */
describe("IAM evaluated: the canary's roles (canary.enabled)", () => {
  let iam: StackIam;
  const log: Recorded[] = [];

  beforeAll(async () => {
    const { json } = synth({ compactor: { ...STACK_CONTEXT, canary: { enabled: true } } });
    iam = new StackIam(json);
    const dir = join(root, 'canary-lake');
    await writeLake(engine, dir, [
      { key: `${PREFIX}db/cpu/2025/01/14/10/cpu_20250114_100100_1.parquet`, rows: 5 },
    ]);
    const inner = new LocalFolderStore(dir);
    const fn = Object.values(json.Resources).find(
      (r) => r.Type === 'AWS::Lambda::Function' && JSON.stringify(r.Properties).includes('canary-seed'),
    );
    const env = fn?.Properties.Environment as { Variables: { COMPACTOR_CONFIG: string } };
    const { execution } = await runCanaryLocally(
      json as Parameters<typeof runCanaryLocally>[0],
      {
        store: inner,
        config: parseConfig(JSON.parse(env.Variables.COMPACTOR_CONFIG)),
        clock: systemClock,
        engine: async () => engine,
        workDir: join(root, 'canary-work'),
      },
      { retryIntervalMs: 0, storeFor: (step) => new RecordingStore(inner, step, log) },
    );
    expect(execution.status, `${execution.error}: ${execution.cause}`).toBe('SUCCEEDED');
  }, HANG_GUARD_MS);

  it('allows every call each canary Lambda made', async () => {
    expect(new Set(log.map((r) => r.caller))).toEqual(new Set(CANARY_STEPS));
    expect(log.some(({ call }) => call.op === 'put')).toBe(true);
    expect(log.some(({ call }) => call.op === 'delete')).toBe(true);
    const requests = dedupe(
      log.flatMap(({ caller, call }) =>
        storeCallRequests(iam, iam.stepRole.get(caller) as string, caller, call, undefined),
      ),
    );
    expect(await denied(iam, requests)).toEqual([]);
  }, 120_000);

  it('allows them under a KMS key the stack creates too (kms:Decrypt and GenerateDataKey)', async () => {
    const { json } = synth({
      compactor: { ...STACK_CONTEXT, canary: { enabled: true }, bucket: { encryption: 'kms' } },
    });
    const kmsIam = new StackIam(json);
    const policy = kmsIam.keyPolicy();
    if (!kmsIam.createdKeyArn || !policy) throw new Error('the stack created no key');
    const key = { arn: kmsIam.createdKeyArn, policy };
    const requests = dedupe(
      log.flatMap(({ caller, call }) =>
        storeCallRequests(kmsIam, kmsIam.stepRole.get(caller) as string, caller, call, key),
      ),
    );
    expect(requests.some((r) => r.action === 'kms:GenerateDataKey')).toBe(true);
    expect(await denied(kmsIam, requests)).toEqual([]);
  }, 120_000);

  it('denies every canary role any write or delete outside the canary prefix', async () => {
    const write = (step: CanaryStepName, action: string, key: string): IamRequest => ({
      caller: { role: iam.stepRole.get(step) as string },
      action,
      resource: `${iam.bucketArn}/${key}`,
      context: TLS,
      resourcePolicy: iam.bucketPolicy(),
    });
    const outside = [
      `${PREFIX}db/cpu/2025/01/14/10/cpu_20250114_100100_1.parquet`,
      `${PREFIX}db/cpu/2025/01/14/10/cpu_20250114_100000_j1_compacted.parquet`,
      `${PREFIX}_compaction/manifests/hourly/db/cpu/2025/01/14/10.json`,
      `${PREFIX}_compaction/staging/j1/x.parquet`,
      `${PREFIX}_compactor_doctor/other/x.parquet`,
      `${PREFIX}_compactor_doctor-canary-1/x.parquet`,
      `_compactor_doctor/canary-1/x.parquet`,
    ];
    const actions = ['s3:PutObject', 's3:DeleteObject', 's3:AbortMultipartUpload'];
    const requests = CANARY_STEPS.flatMap((step) =>
      outside.flatMap((key) => actions.map((action) => write(step, action, key))),
    );
    const results = await Promise.all(requests.map((r) => evaluate(iam, r)));
    expect(results.filter((e) => e.result === 'Allowed').map((e) => describeRequest(iam, e))).toEqual([]);
    // The evaluation can say yes: inside the prefix, seed writes and remove deletes.
    const inside = `${PREFIX}_compactor_doctor/canary-0a1b2c3d/x.parquet`;
    expect((await evaluate(iam, write('canary-seed', 's3:PutObject', inside))).result).toBe('Allowed');
    expect((await evaluate(iam, write('canary-remove', 's3:DeleteObject', inside))).result).toBe('Allowed');
  }, 120_000);
});
