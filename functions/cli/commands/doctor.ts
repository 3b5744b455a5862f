/**
 * `compactor doctor`: proof that a deployed stack works, end to end, on its own bucket.
 *
 *   compactor doctor --stack ParquetCompactor            after `cdk deploy`
 *   compactor doctor --state-machine ARN --store s3://bucket/prefix
 *   compactor doctor --store ./lake                      the synthesized definition run locally
 *
 * It reads the stack's outputs, probes the store for the guarantees the protocol rests on, writes
 * a tiny canary table under the data root, runs one execution scoped to it (execution input
 * `only`), checks its rows exactly through the visible view and that no state is left, removes
 * it, and checks that every schedule started an execution within its last two periods. It
 * prints one row per check with what to fix. Exit 0 when every check passes, 1 when one fails,
 * 2 on bad usage.
 *
 * AWS behaviour it relies on:
 * - DescribeStacks returns the stack's status and its Outputs (OutputKey, OutputValue), and
 *   answers ValidationError for a stack that does not exist
 *   https://docs.aws.amazon.com/AWSCloudFormation/latest/APIReference/API_DescribeStacks.html;
 *   ListStackResources names the schedule group (ResourceType, PhysicalResourceId)
 *   https://docs.aws.amazon.com/AWSCloudFormation/latest/APIReference/API_ListStackResources.html.
 * - DescribeStateMachine returns the deployed definition (ASL JSON)
 *   https://docs.aws.amazon.com/step-functions/latest/apireference/API_DescribeStateMachine.html.
 * - StartExecution with a name and JSON input
 *   https://docs.aws.amazon.com/step-functions/latest/apireference/API_StartExecution.html;
 *   DescribeExecution for its status, output, error and cause; it is eventually consistent, so a
 *   just-started execution may briefly not exist
 *   https://docs.aws.amazon.com/step-functions/latest/apireference/API_DescribeExecution.html.
 * - Schedules and executions: see doctor-schedules.ts.
 */

import { randomBytes } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import {
  CloudFormationClient,
  CloudFormationServiceException,
  DescribeStacksCommand,
  type DescribeStacksCommandOutput,
  ListStackResourcesCommand,
} from '@aws-sdk/client-cloudformation';
import { SchedulerClient, SchedulerServiceException } from '@aws-sdk/client-scheduler';
import {
  DescribeExecutionCommand,
  type DescribeExecutionOutput,
  DescribeStateMachineCommand,
  ExecutionDoesNotExist,
  SFNClient,
  SFNServiceException,
  StartExecutionCommand,
} from '@aws-sdk/client-sfn';
import { lambdaConfigInput, type StackConfig } from '../../../cdk/config.ts';
import { createS3Client, S3Store } from '../../adapters/s3-store.ts';
import { type CompactorConfig, parseConfig } from '../../core/config.ts';
import { systemClock } from '../../core/engine.ts';
import { ConfigError } from '../../core/errors.ts';
import type { ObjectStore } from '../../core/object-store.ts';
import { type ProbeReport, probeStore } from '../../core/store-probe.ts';
import {
  runWorkflowLocally,
  type SynthesizedWorkflow,
  stackConfigOf,
  stackStepSettings,
  synthesizeWorkflow,
} from '../../local-runner/run.ts';
import type { PlanOutput } from '../../plan.ts';
import {
  buildConfig,
  buildEngine,
  type CliOptions,
  openStore,
  parseStackContext,
  parseWhole,
} from '../context.ts';
import { formatDuration, table } from '../format.ts';
import {
  type Canary,
  checkCanaryRows,
  checkCanaryState,
  listCanary,
  removeCanary,
  type Sql,
  writeCanary,
} from './doctor-canary.ts';
import { checkSchedules } from './doctor-schedules.ts';
import { consoleUrl } from './sfn.ts';

// The options and usage text live apart, so the CLI shows them without loading the SDKs.
export { DOCTOR_CLI_OPTIONS, DOCTOR_USAGE } from './doctor-options.ts';

export interface DoctorOptions extends CliOptions {
  readonly stack?: string;
  readonly 'state-machine'?: string;
  readonly timeout?: string;
  readonly context?: string;
  readonly json?: boolean;
}

export interface DoctorIo {
  readonly out: (line: string) => void;
  readonly err: (line: string) => void;
}

export interface DoctorDeps {
  readonly cloudFormation?: CloudFormationClient;
  readonly scheduler?: SchedulerClient;
  readonly sfn?: SFNClient;
  /** The store of a bucket (default: the S3 adapter for the region); tests pass a stand-in. */
  readonly bucketStore?: (bucket: string, region: string) => ObjectStore;
  readonly sleep?: (ms: number) => Promise<void>;
  readonly now?: () => number;
  readonly env?: Readonly<Record<string, string | undefined>>;
}

export type Result = 'pass' | 'FAIL' | 'n/a' | 'skipped';

export interface DoctorRow {
  readonly check: string;
  readonly result: Result;
  readonly detail: string;
  readonly fix: string;
}

const STATE_MACHINE_ARN = /^arn:aws[a-z-]*:states:([a-z0-9-]+):\d{12}:stateMachine:[^:]+$/;
const DEFAULT_TIMEOUT_S = 900;
const FIRST_POLL_MS = 2_000;
const MAX_POLL_MS = 15_000;
/** DescribeExecution is eventually consistent: a just-started execution may not be visible yet. */
const NOT_YET_VISIBLE_MS = 30_000;
const TERMINAL = new Set(['SUCCEEDED', 'FAILED', 'TIMED_OUT', 'ABORTED']);
/** The states the scoped input passes through (cdk/constructs/compaction-workflow.ts STATES). */
const DEFAULTS_STATE = 'Defaults';
const PLAN_STATE = 'Plan';

type Mode =
  | { readonly kind: 'stack'; readonly stack: string; readonly region: string }
  | {
      readonly kind: 'state-machine';
      readonly stateMachineArn: string;
      readonly region: string;
      readonly bucket: string;
      readonly dataPrefix: string;
    }
  | { readonly kind: 'local' };

/** Which of the three forms was asked for; anything else is a usage error (exit 2). */
function resolveMode(options: DoctorOptions, env: Readonly<Record<string, string | undefined>>): Mode {
  const machine = options['state-machine'];
  if (options.stack !== undefined) {
    if (machine !== undefined || options.store !== undefined) {
      throw new ConfigError(
        '--stack reads the state machine and the bucket from the stack outputs: drop --state-machine and --store',
      );
    }
    if (!/^[A-Za-z][A-Za-z0-9-]{0,127}$/.test(options.stack)) {
      throw new ConfigError(`--stack ${options.stack}: not a stack name (letters, digits and hyphens)`);
    }
    const region = options.region ?? env.AWS_REGION;
    if (!region) throw new ConfigError('--region is required with --stack (or set AWS_REGION)');
    return { kind: 'stack', stack: options.stack, region };
  }
  if (machine !== undefined) {
    const match = STATE_MACHINE_ARN.exec(machine);
    if (!match) {
      throw new ConfigError(
        `--state-machine ${machine}: not a state machine ARN; use the StateMachineArn output of the stack`,
      );
    }
    const store = options.store;
    if (store === undefined || !store.startsWith('s3://')) {
      throw new ConfigError(
        '--state-machine needs --store s3://BUCKET/PREFIX: the bucket and data prefix it compacts (the BucketName and DataPrefix outputs)',
      );
    }
    const [bucket = '', ...rest] = store.slice('s3://'.length).split('/');
    if (bucket === '') throw new ConfigError(`--store ${store}: no bucket name`);
    const prefix = rest.filter(Boolean).join('/');
    const region = match[1] ?? '';
    if (options.region !== undefined && options.region !== region) {
      throw new ConfigError(
        `--region ${options.region} differs from the ARN's region ${region}: drop --region`,
      );
    }
    return {
      kind: 'state-machine',
      stateMachineArn: machine,
      region,
      bucket,
      dataPrefix: prefix === '' ? '' : `${prefix}/`,
    };
  }
  if (options.store !== undefined) return { kind: 'local' };
  throw new ConfigError(
    'say what to check: --stack NAME (after cdk deploy), --state-machine ARN --store s3://BUCKET/PREFIX, or --store FOLDER (a local run)',
  );
}

/** Errors of the AWS APIs themselves (denied, throttled, not found): a failed check, not a crash. */
function isServiceError(error: unknown): error is Error {
  return (
    error instanceof SFNServiceException ||
    error instanceof CloudFormationServiceException ||
    error instanceof SchedulerServiceException
  );
}

const PERMISSIONS =
  'your credentials need cloudformation:DescribeStacks and ListStackResources, states:DescribeStateMachine, ' +
  'StartExecution, DescribeExecution and ListExecutions, scheduler:ListSchedules and GetSchedule, and ' +
  's3:ListBucket, GetObject, PutObject and DeleteObject on the bucket';

function serviceFix(error: Error): string {
  if (/AccessDenied|UnauthorizedOperation|not authorized/i.test(`${error.name} ${error.message}`))
    return PERMISSIONS;
  if (error.name === 'ThrottlingException' || error.name === 'Throttling')
    return 'run compactor doctor again in a minute';
  return 'check the region and the names the stack outputs';
}

class Report {
  readonly rows: DoctorRow[] = [];
  add(check: string, result: Result, detail: string, fix = ''): void {
    this.rows.push({ check, result, detail, fix });
  }
  failed(): boolean {
    return this.rows.some((r) => r.result === 'FAIL');
  }
}

const iso = (ms: number) => new Date(ms).toISOString();

/** Runs the doctor; returns the exit code. */
export async function doctorCommand(
  options: DoctorOptions,
  io: DoctorIo,
  deps: DoctorDeps = {},
): Promise<number> {
  let mode: Mode;
  let timeoutMs: number;
  let stackContext: Record<string, unknown>;
  try {
    mode = resolveMode(options, deps.env ?? process.env);
    timeoutMs =
      (options.timeout === undefined ? DEFAULT_TIMEOUT_S : parseWhole('timeout', options.timeout)) * 1000;
    stackContext = parseStackContext(options.context);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    io.err(`compactor doctor: ${error.message}`);
    return 2;
  }
  const report = new Report();
  try {
    await diagnose(mode, options, io, deps, report, { timeoutMs, stackContext });
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    io.err(`compactor doctor: ${error.message}`);
    return 2;
  }
  if (options.json) {
    io.out(JSON.stringify({ ok: !report.failed(), checks: report.rows }, null, 2));
  } else {
    io.out(
      table(
        ['check', 'result', 'detail', 'fix'],
        report.rows.map((r) => [r.check, r.result, r.detail, r.fix]),
      ),
    );
    const failed = report.rows.filter((r) => r.result === 'FAIL').length;
    io.out(
      failed === 0
        ? `doctor: every check passed (${report.rows.filter((r) => r.result === 'pass').length} pass, ${report.rows.filter((r) => r.result !== 'pass').length} n/a)`
        : `doctor: ${failed} check(s) FAILED: see the fix column`,
    );
  }
  return report.failed() ? 1 : 0;
}

interface Target {
  readonly store: ObjectStore;
  readonly localRoot?: string;
  readonly config: CompactorConfig;
  /** The deployed stack's settings (AWS), for the schedules each enabled tier should have. */
  readonly stackConfig?: StackConfig;
  readonly stateMachineArn?: string;
  readonly region?: string;
  readonly group?: string;
}

async function diagnose(
  mode: Mode,
  options: DoctorOptions,
  io: DoctorIo,
  deps: DoctorDeps,
  report: Report,
  settings: { readonly timeoutMs: number; readonly stackContext: Record<string, unknown> },
): Promise<void> {
  const now = deps.now ?? (() => Date.now());
  const randomHex = () => randomBytes(4).toString('hex');
  const target = await resolveTarget(mode, options, io, deps, report, settings.stackContext);
  const skipRest = (from: string[], why: string) => {
    for (const check of from) report.add(check, 'skipped', why);
  };
  const canaryChecks = ['store probe', 'canary execution', 'canary rows', 'no state left', 'canary removed'];
  if (!target) {
    skipRest([...canaryChecks, 'schedules'], 'the stack could not be read');
    return;
  }
  const aws =
    target.stateMachineArn !== undefined && target.region !== undefined
      ? {
          arn: target.stateMachineArn,
          region: target.region,
          sfn: deps.sfn ?? new SFNClient({ region: target.region }),
          scheduler: deps.scheduler ?? new SchedulerClient({ region: target.region }),
        }
      : undefined;

  // The deployed definition must pass `only` to Plan, or the canary execution would plan the whole lake.
  let workflow: SynthesizedWorkflow | undefined;
  if (aws) {
    const scoped = await guard(report, 'state machine', async () => {
      const described = await aws.sfn.send(new DescribeStateMachineCommand({ stateMachineArn: aws.arn }));
      const supports = definitionScopes(described.definition ?? '{}');
      if (!supports) {
        report.add(
          'state machine',
          'FAIL',
          `${described.name ?? aws.arn} does not pass the execution input "only" to Plan: it predates scoped executions`,
          'cdk deploy this version of the stack, then run compactor doctor again',
        );
        return false;
      }
      report.add(
        'state machine',
        'pass',
        `${described.name ?? aws.arn} (${described.status ?? '?'}) runs scoped executions`,
      );
      return true;
    });
    if (!scoped) {
      skipRest(canaryChecks, 'the state machine cannot run a scoped execution');
      await scheduleRows(report, aws, target, now());
      return;
    }
  } else {
    workflow = await synthesizeWorkflow(settings.stackContext);
    if (!definitionScopes(JSON.stringify(workflow.definition))) {
      throw new Error('the synthesized definition does not pass "only" to Plan');
    }
    report.add(
      'state machine',
      'pass',
      'the definition cdk synthesizes, run locally with each Lambda in-process',
    );
  }

  const probe = await probeStore({
    store: target.store,
    stateRoot: target.config.layout.stateRoot,
    randomHex,
  });
  report.add('store probe', probe.ok ? 'pass' : 'FAIL', probeDetail(probe), probe.ok ? '' : probeFix(probe));
  if (!probe.ok) {
    skipRest(canaryChecks.slice(1), 'the store lacks a guarantee: nothing was written');
    if (aws) await scheduleRows(report, aws, target, now());
    else report.add('schedules', 'n/a', 'a local run has no schedules');
    return;
  }

  const { engine, workDir } = await buildEngine(options);
  let canary: Canary | undefined;
  let removed = false;
  try {
    const id = randomHex();
    const sql: Sql = engine;
    canary = await writeCanary(target.store, target.config, sql, id, now());
    io.err(
      `doctor: wrote canary table ${canary.table} (${canary.keys.length} raw files, ${canary.rows} rows) in ${canary.partition}`,
    );
    // Plan as if the canary's files were already quiet (the doctor wrote them and is done), by
    // the store's own clock (LastModified), so the canary need not sit out the quiet period.
    const newest = Math.max(...(await listCanary(target.store, canary)).map((o) => o.lastModified.getTime()));
    const planAt = Math.max(now(), newest + target.config.quietSeconds * 1000 + 1000);
    const input = { tier: 'hourly', now: iso(planAt), only: canary.table };

    const ended = aws
      ? await runDeployed(aws, input, id, io, deps, settings.timeoutMs, now)
      : await runLocal(workflow as SynthesizedWorkflow, target, engine, workDir, input, io);
    const execOk = judgeExecution(report, ended, canary);
    if (ended.status === 'RUNNING') {
      skipRest(['canary rows', 'no state left'], 'the execution is still running');
      report.add(
        'canary removed',
        'skipped',
        `kept under ${canary.prefix} while its execution runs`,
        `once it ends, run compactor recover and delete ${canary.prefix}`,
      );
      removed = true;
    } else {
      const rows = await checkCanaryRows(target.store, target.config, sql, canary, target.localRoot);
      report.add(
        'canary rows',
        rows.ok ? 'pass' : 'FAIL',
        rows.detail,
        rows.ok
          ? ''
          : execOk
            ? 'a protocol defect: keep the canary and report it with compactor status output'
            : 'fix the execution first',
      );
      const state = await checkCanaryState(target.store, target.config, canary, rows.files);
      report.add(
        'no state left',
        state.ok ? 'pass' : 'FAIL',
        state.detail,
        state.ok
          ? ''
          : 'compactor status shows it; compactor recover resolves a manifest whose execution ended',
      );
      if (state.held) {
        report.add(
          'canary removed',
          'skipped',
          `kept under ${canary.prefix}: a live manifest names it (removing it would make recovery quarantine it)`,
          `run compactor recover (or wait for the next cycle), then delete ${canary.prefix}`,
        );
        removed = true;
      } else {
        const removal = await removeCanary(target.store, canary);
        report.add(
          'canary removed',
          removal.ok ? 'pass' : 'FAIL',
          removal.detail,
          removal.ok ? '' : `delete ${canary.prefix} by hand`,
        );
        removed = true;
      }
    }
  } finally {
    await engine.close();
    if (canary && !removed)
      io.err(`doctor: the canary is left under ${canary.prefix}; delete it once no execution runs`);
  }
  if (aws) await scheduleRows(report, aws, target, now());
  else report.add('schedules', 'n/a', 'a local run has no schedules');
}

/** Runs `body`; an AWS API error becomes a FAIL row for `check` (and undefined), anything else propagates. */
async function guard<T>(report: Report, check: string, body: () => Promise<T>): Promise<T | undefined> {
  try {
    return await body();
  } catch (error) {
    if (!isServiceError(error)) throw error;
    report.add(check, 'FAIL', `${error.name}: ${oneLine(error.message)}`, serviceFix(error));
    return undefined;
  }
}

function oneLine(text: string, max = 300): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max)}...` : flat;
}

/** The store, configuration and (for AWS) state machine to check; undefined when the stack cannot be read. */
async function resolveTarget(
  mode: Mode,
  options: DoctorOptions,
  io: DoctorIo,
  deps: DoctorDeps,
  report: Report,
  stackContext: Record<string, unknown>,
): Promise<Target | undefined> {
  if (mode.kind === 'local') {
    const opened = await openStore(options);
    const config = buildConfig(options, opened.dataPrefix, await stackStepSettings(stackContext));
    report.add('stack outputs', 'n/a', `a local run over ${opened.store.location}`);
    return { store: opened.store, ...(opened.localRoot ? { localRoot: opened.localRoot } : {}), config };
  }
  // The deployed Lambdas' settings: cdk.json's `compactor` context (and --context), as cdk deploy read them.
  const stackConfig = await stackConfigOf(stackContext);
  const bucketStore =
    deps.bucketStore ??
    ((bucket: string, region: string) => new S3Store({ client: createS3Client({ region }), bucket }));
  const configFor = (dataPrefix: string): CompactorConfig => {
    if (dataPrefix !== stackConfig.dataPrefix) {
      io.err(
        `doctor: the stack's data prefix "${dataPrefix}" is not cdk.json's "${stackConfig.dataPrefix}"; using the stack's (pass the settings you deployed with --context)`,
      );
    }
    return parseConfig({ ...lambdaConfigInput(stackConfig), dataPrefix });
  };
  if (mode.kind === 'state-machine') {
    report.add(
      'stack outputs',
      'n/a',
      `given: ${mode.stateMachineArn} over s3://${mode.bucket}/${mode.dataPrefix}`,
    );
    return {
      store: bucketStore(mode.bucket, mode.region),
      config: configFor(mode.dataPrefix),
      stackConfig,
      stateMachineArn: mode.stateMachineArn,
      region: mode.region,
    };
  }
  const cfn = deps.cloudFormation ?? new CloudFormationClient({ region: mode.region });
  return guard(report, 'stack outputs', async () => {
    let described: DescribeStacksCommandOutput;
    try {
      described = await cfn.send(new DescribeStacksCommand({ StackName: mode.stack }));
    } catch (error) {
      // DescribeStacks answers ValidationError for a stack that does not exist.
      if (!(error instanceof CloudFormationServiceException && error.name === 'ValidationError')) throw error;
      report.add(
        'stack outputs',
        'FAIL',
        `no stack ${mode.stack} in ${mode.region}: ${oneLine(error.message)}`,
        'deploy it with npx cdk deploy, or pass the deployed --stack NAME and --region',
      );
      return undefined;
    }
    const stack = described.Stacks?.[0];
    const status = stack?.StackStatus ?? '?';
    const outputs = new Map((stack?.Outputs ?? []).map((o) => [o.OutputKey ?? '', o.OutputValue ?? '']));
    const bucket = outputs.get('BucketName');
    const prefixOutput = outputs.get('DataPrefix');
    const stateMachineArn = outputs.get('StateMachineArn');
    const missing = [
      bucket ? '' : 'BucketName',
      prefixOutput !== undefined ? '' : 'DataPrefix',
      stateMachineArn ? '' : 'StateMachineArn',
    ].filter(Boolean);
    if (missing.length > 0 || !/_COMPLETE$/.test(status) || /ROLLBACK|DELETE/.test(status)) {
      report.add(
        'stack outputs',
        'FAIL',
        `stack ${mode.stack} is ${status}${missing.length > 0 ? `; outputs missing: ${missing.join(', ')}` : ''}`,
        /IN_PROGRESS$/.test(status)
          ? 'wait for the deployment to finish, then run compactor doctor again'
          : 'fix the deployment (see the stack events in the CloudFormation console) and cdk deploy again',
      );
      return undefined;
    }
    // The stack outputs '(bucket root)' for an empty prefix (cdk/compactor-stack.ts).
    const dataPrefix = prefixOutput === '(bucket root)' ? '' : (prefixOutput ?? '');
    let group: string | undefined;
    let token: string | undefined;
    do {
      const page = await cfn.send(new ListStackResourcesCommand({ StackName: mode.stack, NextToken: token }));
      for (const r of page.StackResourceSummaries ?? []) {
        if (r.ResourceType === 'AWS::Scheduler::ScheduleGroup' && r.PhysicalResourceId)
          group = r.PhysicalResourceId;
      }
      token = page.NextToken;
    } while (token);
    report.add(
      'stack outputs',
      'pass',
      `${mode.stack} (${status}): bucket ${bucket}, data prefix "${dataPrefix}", ${stateMachineArn}${group ? `, schedule group ${group}` : ''}`,
    );
    return {
      store: bucketStore(bucket as string, mode.region),
      config: configFor(dataPrefix),
      stackConfig,
      stateMachineArn: stateMachineArn as string,
      region: mode.region,
      ...(group !== undefined ? { group } : {}),
    };
  });
}

/** Whether a definition defaults `only` and passes it to Plan (what a scoped execution needs). */
function definitionScopes(text: string): boolean {
  let definition: {
    States?: Record<string, { Result?: unknown; Parameters?: { Payload?: Record<string, unknown> } }>;
  };
  try {
    definition = JSON.parse(text);
  } catch (error) {
    if (error instanceof SyntaxError) return false;
    throw error;
  }
  const defaults = definition.States?.[DEFAULTS_STATE]?.Result;
  const payload = definition.States?.[PLAN_STATE]?.Parameters?.Payload;
  return (
    defaults !== null &&
    typeof defaults === 'object' &&
    'only' in defaults &&
    payload?.['only.$'] === '$.args.only'
  );
}

function probeDetail(probe: ProbeReport): string {
  const failed = probe.checks.filter((c) => !c.ok);
  if (failed.length === 0)
    return `${probe.location}: ${probe.checks.map((c) => c.guarantee).join(', ')} honoured`;
  return `${probe.location}: ${failed.map((c) => `${c.guarantee}: ${c.detail}`).join('; ')}`;
}

function probeFix(probe: ProbeReport): string {
  return `the protocol is unsafe on this store: use S3, or a store that honours ${probe.checks
    .filter((c) => !c.ok)
    .map((c) => c.guarantee)
    .join(', ')}`;
}

interface Ended {
  readonly status: string;
  readonly name: string;
  readonly took: number;
  readonly output?: { readonly plan?: PlanOutput; readonly summary?: Record<string, unknown> };
  readonly error?: string;
  readonly cause?: string;
  /** The command that shows more (watch for AWS). */
  readonly more: string;
}

async function runDeployed(
  aws: { readonly arn: string; readonly region: string; readonly sfn: SFNClient },
  input: Record<string, string>,
  id: string,
  io: DoctorIo,
  deps: DoctorDeps,
  timeoutMs: number,
  now: () => number,
): Promise<Ended> {
  const sleep = deps.sleep ?? ((ms: number) => delay(ms));
  const name = `doctor-${iso(now()).replace(/[-:]/g, '').slice(0, 15)}-${id}`;
  const started = await aws.sfn.send(
    new StartExecutionCommand({ stateMachineArn: aws.arn, name, input: JSON.stringify(input) }),
  );
  const executionArn = started.executionArn ?? '';
  io.err(`doctor: started ${executionArn} with input ${JSON.stringify(input)}`);
  io.err(`doctor: console ${consoleUrl(aws.region, executionArn)}`);
  const more = `compactor watch --execution ${executionArn}`;
  let waited = 0;
  let pause = FIRST_POLL_MS;
  let shown = '';
  for (;;) {
    let execution: DescribeExecutionOutput | undefined;
    try {
      execution = await aws.sfn.send(new DescribeExecutionCommand({ executionArn }));
    } catch (error) {
      if (!(error instanceof ExecutionDoesNotExist && waited < NOT_YET_VISIBLE_MS)) throw error;
    }
    const status = execution?.status ?? 'PENDING';
    if (status !== shown) {
      io.err(`doctor: execution ${status} (after ${formatDuration(waited)})`);
      shown = status;
    }
    if (execution && TERMINAL.has(status)) {
      const took =
        execution.startDate && execution.stopDate
          ? execution.stopDate.getTime() - execution.startDate.getTime()
          : waited;
      return {
        status,
        name,
        took,
        ...(execution.output ? { output: parseOutput(execution.output) } : {}),
        ...(execution.error ? { error: execution.error } : {}),
        ...(execution.cause ? { cause: execution.cause } : {}),
        more,
      };
    }
    if (waited >= timeoutMs) return { status: 'RUNNING', name, took: waited, more };
    await sleep(pause);
    waited += pause;
    pause = Math.min(MAX_POLL_MS, Math.round(pause * 1.5));
  }
}

function parseOutput(text: string): Ended['output'] {
  try {
    return JSON.parse(text) as Ended['output'];
  } catch (error) {
    if (error instanceof SyntaxError) return undefined;
    throw error;
  }
}

async function runLocal(
  workflow: SynthesizedWorkflow,
  target: Target,
  engine: Awaited<ReturnType<typeof buildEngine>>['engine'],
  workDir: string,
  input: { readonly now: string; readonly only: string },
  io: DoctorIo,
): Promise<Ended> {
  const startedAt = Date.now();
  const { execution, output } = await runWorkflowLocally(
    workflow,
    { store: target.store, config: target.config, clock: systemClock, engine: async () => engine, workDir },
    {
      tier: 'hourly',
      now: input.now,
      only: input.only,
      onStateEntered: (state) => io.err(`doctor: ${state} (${formatDuration(Date.now() - startedAt)})`),
    },
  );
  return {
    status: execution.status,
    name: execution.executionName,
    took: Date.now() - startedAt,
    ...(output ? { output: output as unknown as Ended['output'] } : {}),
    ...(execution.error ? { error: execution.error } : {}),
    ...(execution.cause ? { cause: execution.cause } : {}),
    more: 'compactor status',
  };
}

/** The execution row: succeeded, scoped to the canary, one job planned and compacted. */
function judgeExecution(report: Report, ended: Ended, canary: Canary): boolean {
  const check = 'canary execution';
  if (ended.status === 'RUNNING') {
    report.add(
      check,
      'FAIL',
      `${ended.name} still running after ${formatDuration(ended.took)}`,
      `${ended.more}; or a longer --timeout`,
    );
    return false;
  }
  if (ended.status !== 'SUCCEEDED') {
    report.add(
      check,
      'FAIL',
      `${ended.name} ${ended.status}${ended.error ? `: ${ended.error}` : ''}${ended.cause ? `: ${oneLine(ended.cause, 200)}` : ''}`,
      `${ended.more} names the failed state and error`,
    );
    return false;
  }
  const plan = ended.output?.plan;
  const summary = ended.output?.summary ?? {};
  const problems = [
    plan?.only === canary.table
      ? ''
      : `planned ${plan?.only === null ? 'the whole lake' : JSON.stringify(plan?.only)}, not ${canary.table}`,
    plan?.jobs === 1
      ? ''
      : `${plan?.jobs ?? '?'} job(s) planned, not the canary's one (a skipped canary means the deployed quietSeconds or minAge differ from cdk.json: pass them with --context)`,
    summary.compacted === 1 && summary.failed === 0
      ? ''
      : `summary: ${summary.compacted ?? '?'} compacted, ${summary.failed ?? '?'} failed`,
  ].filter(Boolean);
  if (problems.length > 0) {
    report.add(check, 'FAIL', `${ended.name} SUCCEEDED but ${problems.join('; ')}`, ended.more);
    return false;
  }
  report.add(
    check,
    'pass',
    `${ended.name} SUCCEEDED in ${formatDuration(ended.took)}: 1 partition planned (only ${canary.table}), compacted`,
  );
  return true;
}

async function scheduleRows(
  report: Report,
  aws: { readonly arn: string; readonly sfn: SFNClient; readonly scheduler: SchedulerClient },
  target: Target,
  now: number,
): Promise<void> {
  const stack = target.stackConfig;
  const expected = stack
    ? [
        ...(['hourly', 'daily', 'monthly'] as const).filter((t) => stack.tiers[t].enabled),
        ...(stack.retention.enabled && Object.keys(stack.retention.rules).length > 0 ? ['retention'] : []),
      ]
    : [];
  await guard(report, 'schedules', async () => {
    const rows = await checkSchedules({
      scheduler: aws.scheduler,
      sfn: aws.sfn,
      stateMachineArn: aws.arn,
      ...(target.group !== undefined ? { group: target.group } : {}),
      expected,
      now,
    });
    for (const row of rows) report.add(row.check, row.result, row.detail, row.fix);
    if (rows.length === 0)
      report.add('schedules', 'n/a', 'no schedule starts this state machine, and none is enabled');
  });
}
