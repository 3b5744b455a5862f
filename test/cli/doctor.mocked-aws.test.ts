/**
 * `compactor doctor --stack` against mocked CloudFormation, Step Functions and Scheduler APIs
 * (aws-sdk-client-mock: none of the three runs here). What is real: the bucket is a local
 * folder store behind the same interface, the deployed definition DescribeStateMachine returns
 * is the one CDK synthesizes, and the "execution" StartExecution starts is that definition run
 * locally with every Lambda in-process over the bucket, its status and output returned by
 * DescribeExecution as Step Functions returns them.
 *
 * Requests and answers follow the API references: DescribeStacks (Outputs, ValidationError for a
 * missing stack) https://docs.aws.amazon.com/AWSCloudFormation/latest/APIReference/API_DescribeStacks.html,
 * ListStackResources https://docs.aws.amazon.com/AWSCloudFormation/latest/APIReference/API_ListStackResources.html,
 * ListSchedules https://docs.aws.amazon.com/scheduler/latest/APIReference/API_ListSchedules.html,
 * GetSchedule https://docs.aws.amazon.com/scheduler/latest/APIReference/API_GetSchedule.html,
 * ListExecutions (most recent first) https://docs.aws.amazon.com/step-functions/latest/apireference/API_ListExecutions.html,
 * DescribeExecution https://docs.aws.amazon.com/step-functions/latest/apireference/API_DescribeExecution.html.
 */

import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import {
  CloudFormationClient,
  CloudFormationServiceException,
  DescribeStacksCommand,
  ListStackResourcesCommand,
} from '@aws-sdk/client-cloudformation';
import { GetScheduleCommand, ListSchedulesCommand, SchedulerClient } from '@aws-sdk/client-scheduler';
import {
  DescribeExecutionCommand,
  type DescribeExecutionOutput,
  DescribeStateMachineCommand,
  type ExecutionListItem,
  ListExecutionsCommand,
  SFNClient,
  StartExecutionCommand,
} from '@aws-sdk/client-sfn';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import { lambdaConfigInput } from '../../cdk/config.ts';
import { STATES } from '../../cdk/constructs/compaction-workflow.ts';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { LocalFolderStore } from '../../functions/adapters/local-store/local-store.ts';
import {
  type DoctorDeps,
  type DoctorOptions,
  doctorCommand,
} from '../../functions/cli/commands/doctor/doctor.ts';
import { type CompactorConfig, parseConfig } from '../../functions/core/config.ts';
import { systemClock } from '../../functions/core/engine.ts';
import {
  ForwardingStore,
  type ObjectStore,
  type PutFile,
  type WriteOptions,
} from '../../functions/core/object-store.ts';
import {
  type LocalRunResult,
  runWorkflowLocally,
  type SynthesizedWorkflow,
  stackConfigOf,
  synthesizeWorkflow,
} from '../../functions/local-runner/run.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';

const REGION = 'eu-west-1';
const ACCOUNT = '123456789012';
const STACK = 'ParquetCompactor';
const MACHINE = `arn:aws:states:${REGION}:${ACCOUNT}:stateMachine:CompactionStateMachine`;
const GROUP = 'ParquetCompactorSchedulesGroup1A2B3C';
const BUCKET = 'parquetcompactor-databucket-1a2b3c';
const CANARY = `arn:aws:states:${REGION}:${ACCOUNT}:stateMachine:CanaryStateMachine`;
const HOUR = 3_600_000;
const MINUTE = 60_000;

const cfn = mockClient(CloudFormationClient);
const sfn = mockClient(SFNClient);
const scheduler = mockClient(SchedulerClient);

let root: string;
let engine: DuckDbEngine;
let workflow: SynthesizedWorkflow;
let config: CompactorConfig;

useEngineAndDir('doctor-mocked-', async (e, dir) => {
  engine = e;
  root = dir;
  workflow = await synthesizeWorkflow({});
  // What the deployed Lambdas run with: cdk.json's settings, the stack's data prefix (bucket root).
  config = parseConfig({ ...lambdaConfigInput(await stackConfigOf({})), dataPrefix: '' });
});

/** The latest time `minute` past an hour at or before `t`, and the latest `hh:mm` UTC of a day. */
function lastHourly(t: number, minute: number): number {
  const candidate = Math.floor(t / HOUR) * HOUR + minute * MINUTE;
  return candidate <= t ? candidate : candidate - HOUR;
}
function lastDaily(t: number, hour: number, minute: number): number {
  const day = Math.floor(t / (24 * HOUR)) * 24 * HOUR;
  const candidate = day + hour * HOUR + minute * MINUTE;
  return candidate <= t ? candidate : candidate - 24 * HOUR;
}

interface Stand {
  readonly store: ObjectStore;
  readonly dir: string;
  readonly runs: Map<string, Promise<LocalRunResult>>;
  readonly done: Map<string, LocalRunResult>;
}

/** The bucket stand-in and the "service": StartExecution runs the synthesized definition over it. */
async function stand(name: string, store?: (dir: string) => ObjectStore): Promise<Stand> {
  const dir = join(root, name);
  await mkdir(dir, { recursive: true });
  const bucket = store ? store(dir) : new LocalFolderStore(dir);
  const runs = new Map<string, Promise<LocalRunResult>>();
  const done = new Map<string, LocalRunResult>();
  sfn.on(StartExecutionCommand).callsFake((input: { name: string; input: string }) => {
    const executionArn = `arn:aws:states:${REGION}:${ACCOUNT}:execution:CompactionStateMachine:${input.name}`;
    const args = JSON.parse(input.input) as { tier: 'hourly'; now: string; only: string };
    const run = runWorkflowLocally(
      workflow,
      { store: bucket, config, clock: systemClock, engine: async () => engine, workDir: join(root, 'work') },
      { tier: args.tier, now: args.now, only: args.only, retryIntervalMs: 0 },
    );
    runs.set(executionArn, run);
    void run.then((r) => done.set(executionArn, r));
    return { executionArn, startDate: new Date() };
  });
  return { store: bucket, dir, runs, done };
}

function describeCanary(s: Stand, executionArn: string): DescribeExecutionOutput | undefined {
  if (!s.runs.has(executionArn)) return undefined;
  const result = s.done.get(executionArn);
  const base = { executionArn, stateMachineArn: MACHINE, startDate: new Date(Date.now() - 5000) };
  if (!result) return { ...base, status: 'RUNNING' };
  const { execution } = result;
  return execution.status === 'SUCCEEDED'
    ? { ...base, status: 'SUCCEEDED', stopDate: new Date(), output: JSON.stringify(execution.output) }
    : {
        ...base,
        status: 'FAILED',
        stopDate: new Date(),
        ...(execution.error ? { error: execution.error } : {}),
        ...(execution.cause ? { cause: execution.cause } : {}),
      };
}

interface Scheduled {
  readonly arn: string;
  readonly input: string;
  readonly startDate: Date;
}

/**
 * The stack, its definition, its two default schedules and the executions they started; with
 * `canary`, the scheduled canary's state machine as an output and its schedule in the group.
 */
function deployed(
  s: Stand,
  scheduled: readonly Scheduled[],
  options: { created?: Date; canary?: string } = {},
): void {
  cfn.on(DescribeStacksCommand, { StackName: STACK }).resolves({
    Stacks: [
      {
        StackName: STACK,
        StackStatus: 'UPDATE_COMPLETE',
        CreationTime: new Date(Date.now() - 10 * 24 * HOUR),
        Outputs: [
          { OutputKey: 'BucketName', OutputValue: BUCKET },
          { OutputKey: 'DataPrefix', OutputValue: '(bucket root)' },
          { OutputKey: 'StateMachineArn', OutputValue: MACHINE },
          { OutputKey: 'DashboardUrl', OutputValue: 'https://console.aws.amazon.com/cloudwatch/...' },
          ...(options.canary ? [{ OutputKey: 'CanaryStateMachineArn', OutputValue: options.canary }] : []),
        ],
      },
    ],
  });
  cfn.on(ListStackResourcesCommand, { StackName: STACK }).resolves({
    StackResourceSummaries: [
      {
        LogicalResourceId: 'SchedulesGroup1A2B3C',
        PhysicalResourceId: GROUP,
        ResourceType: 'AWS::Scheduler::ScheduleGroup',
        ResourceStatus: 'CREATE_COMPLETE',
        LastUpdatedTimestamp: new Date(),
      },
    ],
  });
  sfn.on(DescribeStateMachineCommand, { stateMachineArn: MACHINE }).resolves({
    stateMachineArn: MACHINE,
    name: 'CompactionStateMachine',
    status: 'ACTIVE',
    definition: JSON.stringify(workflow.definition),
    roleArn: `arn:aws:iam::${ACCOUNT}:role/StateMachineRole`,
    type: 'STANDARD',
    creationDate: new Date(Date.now() - 10 * 24 * HOUR),
  });
  const created = options.created ?? new Date(Date.now() - 3 * 24 * HOUR);
  scheduler.on(ListSchedulesCommand, { GroupName: GROUP }).resolves({
    Schedules: [
      {
        Name: 'Hourly-abc',
        GroupName: GROUP,
        State: 'ENABLED',
        Target: { Arn: MACHINE },
        CreationDate: created,
      },
      {
        Name: 'Daily-def',
        GroupName: GROUP,
        State: 'ENABLED',
        Target: { Arn: MACHINE },
        CreationDate: created,
      },
      ...(options.canary
        ? [
            {
              Name: 'Canary-ghi',
              GroupName: GROUP,
              State: 'ENABLED' as const,
              Target: { Arn: options.canary },
            },
          ]
        : []),
    ],
  });
  const schedule = (name: string, expression: string, tier: string) => ({
    Name: name,
    GroupName: GROUP,
    State: 'ENABLED' as const,
    ScheduleExpression: expression,
    ScheduleExpressionTimezone: 'Etc/UTC',
    CreationDate: created,
    FlexibleTimeWindow: { Mode: 'OFF' as const },
    Target: {
      Arn: MACHINE,
      RoleArn: `arn:aws:iam::${ACCOUNT}:role/SchedulerRole`,
      Input: JSON.stringify({ tier }),
    },
  });
  scheduler
    .on(GetScheduleCommand, { Name: 'Hourly-abc', GroupName: GROUP })
    .resolves(schedule('Hourly-abc', 'cron(10 * * * ? *)', 'hourly'));
  scheduler
    .on(GetScheduleCommand, { Name: 'Daily-def', GroupName: GROUP })
    .resolves(schedule('Daily-def', 'cron(30 3 * * ? *)', 'daily'));
  // Most recent first, as ListExecutions lists them (the canary's own, once started, first).
  sfn.on(ListExecutionsCommand).callsFake(() => {
    const items: ExecutionListItem[] = [
      ...[...s.runs.keys()].map((executionArn) => ({
        executionArn,
        stateMachineArn: MACHINE,
        name: executionArn.split(':').at(-1) ?? '',
        status: 'SUCCEEDED' as const,
        startDate: new Date(),
      })),
      ...[...scheduled]
        .sort((a, b) => b.startDate.getTime() - a.startDate.getTime())
        .map((e) => ({
          executionArn: e.arn,
          stateMachineArn: MACHINE,
          name: e.arn.split(':').at(-1) ?? '',
          status: 'SUCCEEDED' as const,
          startDate: e.startDate,
        })),
    ];
    return { executions: items };
  });
  sfn.on(DescribeExecutionCommand).callsFake((input: { executionArn: string }) => {
    const canary = describeCanary(s, input.executionArn);
    if (canary) return canary;
    const e = scheduled.find((x) => x.arn === input.executionArn);
    if (!e) throw new Error(`unexpected DescribeExecution ${input.executionArn}`);
    return {
      executionArn: e.arn,
      stateMachineArn: MACHINE,
      status: 'SUCCEEDED',
      startDate: e.startDate,
      stopDate: new Date(e.startDate.getTime() + 60_000),
      input: e.input,
    };
  });
}

function scheduledRuns(now: number): Scheduled[] {
  const hourly = lastHourly(now - 6 * MINUTE, 10);
  const daily = lastDaily(now - 6 * MINUTE, 3, 30);
  return [
    {
      arn: `${MACHINE.replace('stateMachine', 'execution')}:h1`,
      input: '{"tier":"hourly"}',
      startDate: new Date(hourly + 20_000),
    },
    {
      arn: `${MACHINE.replace('stateMachine', 'execution')}:h0`,
      input: '{"tier":"hourly"}',
      startDate: new Date(hourly - HOUR + 20_000),
    },
    {
      arn: `${MACHINE.replace('stateMachine', 'execution')}:d1`,
      input: '{"tier":"daily"}',
      startDate: new Date(daily + 15_000),
    },
  ];
}

interface Ran {
  readonly code: number;
  readonly out: string;
  readonly err: string;
  readonly row: (check: string) => string;
}

async function doctor(
  s: Stand,
  options: Partial<DoctorOptions> = {},
  extra: Partial<DoctorDeps> = {},
): Promise<Ran> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await doctorCommand(
    { stack: STACK, region: REGION, ...options },
    { out: (l) => out.push(l), err: (l) => err.push(l) },
    {
      cloudFormation: new CloudFormationClient({ region: REGION }),
      sfn: new SFNClient({ region: REGION }),
      scheduler: new SchedulerClient({ region: REGION }),
      bucketStore: (bucket, region) => {
        expect([bucket, region]).toEqual([BUCKET, REGION]);
        return s.store;
      },
      sleep: async () => {
        // The "execution" runs in-process: let it move between polls.
        await Promise.race([...s.runs.values(), new Promise((r) => setTimeout(r, 50))]);
      },
      env: {},
      ...extra,
    },
  );
  const lines = out.join('\n').split('\n');
  return {
    code,
    out: out.join('\n'),
    err: err.join('\n'),
    row: (check) => lines.find((l) => l.startsWith(`${check} `)) ?? `(no row ${check})`,
  };
}

async function objects(s: Stand): Promise<string[]> {
  const keys: string[] = [];
  for await (const o of s.store.list('')) keys.push(o.key);
  return keys;
}

describe('compactor doctor --stack (mocked CloudFormation, Step Functions and Scheduler APIs)', () => {
  beforeEach(() => {
    cfn.reset();
    sfn.reset();
    scheduler.reset();
  });

  it('mocked: with canary.enabled, the canary state machine from the stack output: its schedule and last execution', async () => {
    const s = await stand('scheduled-canary');
    const now = Date.now();
    deployed(s, scheduledRuns(now), { canary: CANARY });
    // The stack's default canary schedule, daily at 05:00, started with the input {}.
    scheduler.on(GetScheduleCommand, { Name: 'Canary-ghi', GroupName: GROUP }).resolves({
      Name: 'Canary-ghi',
      GroupName: GROUP,
      State: 'ENABLED',
      ScheduleExpression: 'cron(0 5 * * ? *)',
      CreationDate: new Date(now - 3 * 24 * HOUR),
      Target: { Arn: CANARY, RoleArn: `arn:aws:iam::${ACCOUNT}:role/SchedulerRole`, Input: '{}' },
    });
    const fired = lastDaily(now - 6 * MINUTE, 5, 0);
    const canaryRun = `arn:aws:states:${REGION}:${ACCOUNT}:execution:CanaryStateMachine:c1`;
    sfn.on(ListExecutionsCommand, { stateMachineArn: CANARY }).resolves({
      executions: [
        {
          executionArn: canaryRun,
          stateMachineArn: CANARY,
          name: 'c1',
          status: 'FAILED',
          startDate: new Date(fired + 10_000),
          stopDate: new Date(fired + 300_000),
        },
      ],
    });
    sfn.on(DescribeExecutionCommand, { executionArn: canaryRun }).resolves({
      executionArn: canaryRun,
      stateMachineArn: CANARY,
      status: 'FAILED',
      startDate: new Date(fired + 10_000),
      input: '{}',
    });
    const r = await doctor(s, { context: JSON.stringify({ canary: { enabled: true } }) });
    expect(r.row('canary schedule')).toMatch(/pass .*cron\(0 5 \* \* \? \*\): started c1 at /);
    expect(r.row('canary last execution')).toMatch(/FAIL .*c1 FAILED at /);
    expect(r.code).toBe(1);
  }, 180_000);

  it('mocked: a healthy stack passes every check, with the documented requests', async () => {
    const s = await stand('healthy');
    deployed(s, scheduledRuns(Date.now()));
    // Before the canary's files are written: their LastModified (whole seconds) is not earlier.
    const beforeDoctor = Math.floor(Date.now() / 1000) * 1000;
    const r = await doctor(s);
    expect(r.code, `${r.out}\n${r.err}`).toBe(0);
    expect(r.row('stack outputs')).toMatch(
      new RegExp(
        `pass .*${STACK} \\(UPDATE_COMPLETE\\): bucket ${BUCKET}, data prefix "", ${MACHINE}, schedule group ${GROUP}`,
      ),
    );
    expect(r.row('state machine')).toMatch(/pass .*CompactionStateMachine \(ACTIVE\) runs scoped executions/);
    expect(r.row('store probe')).toMatch(/pass /);
    expect(r.row('canary execution')).toMatch(
      /pass .*doctor-\d{8}T\d{6}-[0-9a-f]{8} SUCCEEDED .*only _compactor_doctor\/canary-/,
    );
    expect(r.row('canary rows')).toMatch(/pass .*100 rows, ids 1\.\.100 once each/);
    expect(r.row('no state left')).toMatch(/pass /);
    expect(r.row('canary removed')).toMatch(/pass /);
    expect(r.row('schedule hourly')).toMatch(/pass .*cron\(10 \* \* \* \? \*\): started h1 at /);
    expect(r.row('schedule daily')).toMatch(/pass .*cron\(30 3 \* \* \? \*\): started d1 at /);
    // The scheduled canary is off by default: no row of it.
    expect(r.row('canary schedule')).toBe('(no row canary schedule)');
    expect(r.err).toMatch(/doctor: execution RUNNING/);
    expect(r.err).toContain(
      `doctor: console https://${REGION}.console.aws.amazon.com/states/home?region=${REGION}#/v2/executions/details/`,
    );
    expect(r.err).toMatch(/doctor: execution SUCCEEDED/);

    // The requests: the stack by name, the schedules of its group, each by name in that group.
    expect(cfn.commandCalls(DescribeStacksCommand)[0]?.args[0].input).toEqual({ StackName: STACK });
    expect(scheduler.commandCalls(ListSchedulesCommand)[0]?.args[0].input).toEqual({ GroupName: GROUP });
    expect(scheduler.commandCalls(GetScheduleCommand).map((c) => c.args[0].input)).toEqual([
      { Name: 'Hourly-abc', GroupName: GROUP },
      { Name: 'Daily-def', GroupName: GROUP },
    ]);
    const start = sfn.commandCalls(StartExecutionCommand);
    expect(start).toHaveLength(1);
    const startInput = start[0]?.args[0].input;
    expect(startInput?.stateMachineArn).toBe(MACHINE);
    const input = JSON.parse(startInput?.input ?? '{}') as { tier: string; now: string; only: string };
    expect(input.tier).toBe('hourly');
    expect(input.only).toMatch(/^_compactor_doctor\/canary-[0-9a-f]{8}\/$/);
    // Plans as if its files were past the quiet period (300 s), by their LastModified.
    expect(Date.parse(input.now)).toBeGreaterThanOrEqual(beforeDoctor + 300_000);
    // Nothing is left in the bucket: no canary, no run record, no probe object.
    expect(await objects(s)).toEqual([]);
  });

  it('mocked: a schedule that started nothing in its last two periods fails, naming the fix', async () => {
    const s = await stand('silent');
    // Only an hourly execution from a day ago; the daily one started on time.
    const now = Date.now();
    const runs = scheduledRuns(now).filter((e) => !e.arn.endsWith(':h1') && !e.arn.endsWith(':h0'));
    runs.push({
      arn: `${MACHINE.replace('stateMachine', 'execution')}:old`,
      input: '{"tier":"hourly"}',
      startDate: new Date(now - 26 * HOUR),
    });
    deployed(s, runs);
    const r = await doctor(s);
    expect(r.code).toBe(1);
    expect(r.row('schedule hourly')).toMatch(
      /FAIL .*cron\(10 \* \* \* \? \*\) was due .* and .*, and no execution with input \{"tier":"hourly"\} started since/,
    );
    expect(r.row('schedule hourly')).toMatch(/aws:SourceArn is the schedule group's ARN/);
    expect(r.row('schedule daily')).toMatch(/pass /);
    // The canary checks still ran and passed.
    expect(r.row('canary rows')).toMatch(/pass /);
    expect(r.out).toMatch(/doctor: 1 check\(s\) FAILED/);
  });

  it('mocked: schedules created less than a period ago are n/a, an enabled tier without one fails', async () => {
    const s = await stand('fresh');
    deployed(s, [], { created: new Date(Date.now() - 2 * MINUTE) });
    scheduler.on(ListSchedulesCommand, { GroupName: GROUP }).resolves({
      Schedules: [
        { Name: 'Hourly-abc', GroupName: GROUP, State: 'ENABLED', Target: { Arn: MACHINE } },
        // A schedule of another state machine in the group is not ours.
        { Name: 'Other', GroupName: GROUP, State: 'ENABLED', Target: { Arn: `${MACHINE}Other` } },
      ],
    });
    const r = await doctor(s);
    expect(r.code).toBe(1);
    expect(r.row('schedule hourly')).toMatch(/n\/a .*has not been due yet: created /);
    expect(r.row('schedule daily')).toMatch(
      /FAIL .*no schedule in group .* starts .* with \{"tier":"daily"\}/,
    );
    expect(scheduler.commandCalls(GetScheduleCommand).map((c) => c.args[0].input.Name)).toEqual([
      'Hourly-abc',
    ]);
  });

  it('mocked: a stack that does not exist fails its row (ValidationError), and nothing else runs', async () => {
    const s = await stand('missing');
    cfn.on(DescribeStacksCommand).rejects(
      new CloudFormationServiceException({
        name: 'ValidationError',
        $fault: 'client',
        $metadata: { httpStatusCode: 400 },
        message: `Stack with id ${STACK} does not exist`,
      }),
    );
    const r = await doctor(s);
    expect(r.code).toBe(1);
    expect(r.row('stack outputs')).toMatch(
      /FAIL .*no stack ParquetCompactor in eu-west-1: Stack with id .* does not exist .*npx cdk deploy/,
    );
    for (const check of ['store probe', 'canary execution', 'canary rows', 'canary removed', 'schedules']) {
      expect(r.row(check)).toMatch(/skipped .*the stack could not be read/);
    }
    expect(sfn.commandCalls(StartExecutionCommand)).toHaveLength(0);
    expect(await objects(s)).toEqual([]);
  });

  it('mocked: a stack still deploying fails its row with "wait"', async () => {
    const s = await stand('deploying');
    deployed(s, []);
    cfn.on(DescribeStacksCommand).resolves({
      Stacks: [
        { StackName: STACK, StackStatus: 'UPDATE_IN_PROGRESS', CreationTime: new Date(), Outputs: [] },
      ],
    });
    const r = await doctor(s);
    expect(r.code).toBe(1);
    expect(r.row('stack outputs')).toMatch(
      /FAIL .*is UPDATE_IN_PROGRESS; outputs missing: BucketName, DataPrefix, StateMachineArn .*wait for the deployment/,
    );
  });

  it('mocked: a deployed definition that predates "only" is refused before anything is written', async () => {
    type Definition = {
      States: Record<string, { Result?: unknown; Parameters?: { Payload?: Record<string, unknown> } }>;
    };
    // The definition before scoped executions, and one whose Defaults has `only` but Plan does not get it.
    const before = structuredClone(workflow.definition) as unknown as Definition;
    (before.States[STATES.defaults] as { Result: unknown }).Result = { now: null };
    const unpass = (d: Definition) => {
      const payload = d.States[STATES.plan]?.Parameters?.Payload;
      if (payload) delete payload['only.$'];
    };
    unpass(before);
    const unwired = structuredClone(workflow.definition) as unknown as Definition;
    unpass(unwired);
    for (const [name, definition] of [
      ['before', before],
      ['unwired', unwired],
    ] as const) {
      sfn.reset();
      const s = await stand(`old-definition-${name}`);
      deployed(s, scheduledRuns(Date.now()));
      sfn.on(DescribeStateMachineCommand).resolves({
        stateMachineArn: MACHINE,
        name: 'CompactionStateMachine',
        status: 'ACTIVE',
        definition: JSON.stringify(definition),
        roleArn: 'arn:aws:iam::123456789012:role/R',
        type: 'STANDARD',
        creationDate: new Date(),
      });
      const r = await doctor(s);
      expect(r.code, name).toBe(1);
      expect(r.row('state machine'), name).toMatch(
        /FAIL .*does not pass the execution input "only" to Plan: it predates scoped executions .*cdk deploy this version/,
      );
      expect(r.row('canary execution'), name).toMatch(/skipped /);
      expect(r.row('schedule hourly'), name).toMatch(/pass /);
      expect(sfn.commandCalls(StartExecutionCommand), name).toHaveLength(0);
      expect(await objects(s), name).toEqual([]);
    }
  });

  it('mocked: a store that ignores conditional writes fails the probe, and no canary is written', async () => {
    /** Writes whatever it is asked to, ignoring If-None-Match and If-Match (as some S3-compatible servers do). */
    class IgnoresConditions extends ForwardingStore {
      override put(key: string, body: Buffer | PutFile, options: WriteOptions = {}) {
        const { ifNoneMatch: _n, ifMatch: _m, ...rest } = options;
        return super.put(key, body, rest);
      }
    }
    const s = await stand('ignoring', (dir) => new IgnoresConditions(new LocalFolderStore(dir)));
    deployed(s, scheduledRuns(Date.now()));
    const r = await doctor(s);
    expect(r.code).toBe(1);
    expect(r.row('store probe')).toMatch(
      /FAIL .*put-if-absent: .*compare-and-swap: .*the protocol is unsafe on this store/,
    );
    expect(r.row('canary execution')).toMatch(/skipped .*the store lacks a guarantee: nothing was written/);
    expect(sfn.commandCalls(StartExecutionCommand)).toHaveLength(0);
    expect((await objects(s)).filter((k) => k.includes('_compactor_doctor'))).toEqual([]);
  });

  it('mocked: an execution still running at --timeout fails, and the canary is kept for it', async () => {
    const s = await stand('slow');
    deployed(s, scheduledRuns(Date.now()));
    sfn.on(DescribeExecutionCommand).callsFake((input: { executionArn: string }) => ({
      executionArn: input.executionArn,
      stateMachineArn: MACHINE,
      status: 'RUNNING',
      startDate: new Date(),
    }));
    sfn.on(ListExecutionsCommand).resolves({ executions: [] });
    const r = await doctor(s, { timeout: '0' });
    expect(r.code).toBe(1);
    expect(r.row('canary execution')).toMatch(
      /FAIL .*still running after .*compactor watch --execution arn:aws:states:/,
    );
    expect(r.row('canary removed')).toMatch(
      /skipped .*kept under _compactor_doctor\/canary-[0-9a-f]{8}\/ while its execution runs/,
    );
    await Promise.all(s.runs.values());
  });

  it('mocked: an execution that "succeeds" but duplicates rows (the seed bug) fails the rows check', async () => {
    const s = await stand('duplicating');
    deployed(s, scheduledRuns(Date.now()));
    let only = '';
    const executionArn = `${MACHINE.replace('stateMachine', 'execution')}:dup`;
    // A non-atomic compactor: an output written next to inputs it never deleted, reported as done.
    sfn.on(StartExecutionCommand).callsFake(async (input: { input: string }) => {
      only = (JSON.parse(input.input) as { only: string }).only;
      const raw: string[] = [];
      for await (const o of s.store.list(only)) raw.push(o.key);
      const first = raw[0] as string;
      await s.store.copy(first, first.replace(/_0001\.parquet$/, '_0001_copy.parquet'));
      return { executionArn, startDate: new Date() };
    });
    sfn.on(DescribeExecutionCommand).callsFake((input: { executionArn: string }) => ({
      executionArn: input.executionArn,
      stateMachineArn: MACHINE,
      status: 'SUCCEEDED',
      startDate: new Date(),
      stopDate: new Date(),
      output: JSON.stringify({ plan: { only, jobs: 1 }, summary: { compacted: 1, failed: 0 } }),
    }));
    sfn.on(ListExecutionsCommand).resolves({ executions: [] });
    const r = await doctor(s);
    expect(r.code).toBe(1);
    expect(r.row('canary execution')).toMatch(/pass /);
    expect(r.row('canary rows')).toMatch(
      /FAIL .*visible rows 110 \(100 distinct ids, 1\.\.100\); written 100 \(ids 1\.\.100\): rows duplicated .*a protocol defect/,
    );
    expect(r.row('canary removed')).toMatch(/pass .*11 object\(s\) deleted/);
  });

  it('mocked: a failed execution fails its row with the error, and the rows check says the job did not finish', async () => {
    const s = await stand('failing');
    deployed(s, scheduledRuns(Date.now()));
    const described = sfn.on(DescribeExecutionCommand);
    described.callsFake((input: { executionArn: string }) => ({
      executionArn: input.executionArn,
      stateMachineArn: MACHINE,
      status: 'FAILED',
      startDate: new Date(),
      stopDate: new Date(),
      error: 'States.TaskFailed',
      cause: 'Lambda.AWSLambdaException: Rate Exceeded.',
    }));
    // This execution never ran: StartExecution answered, nothing compacted the canary.
    sfn
      .on(StartExecutionCommand)
      .resolves({ executionArn: `${MACHINE.replace('stateMachine', 'execution')}:x`, startDate: new Date() });
    sfn.on(ListExecutionsCommand).resolves({ executions: [] });
    const r = await doctor(s);
    expect(r.code).toBe(1);
    expect(r.row('canary execution')).toMatch(
      /FAIL .*FAILED: States\.TaskFailed: Lambda\.AWSLambdaException: Rate Exceeded\. .*compactor watch --execution .* names the failed state/,
    );
    expect(r.row('canary rows')).toMatch(
      /FAIL .*rows exact, but 10 raw file\(s\) and 0 hourly output\(s\) are visible: the job did not finish .*fix the execution first/,
    );
    expect(r.row('canary removed')).toMatch(/pass .*10 object\(s\) deleted/);
    expect(await objects(s)).toEqual([]);
  });
});
