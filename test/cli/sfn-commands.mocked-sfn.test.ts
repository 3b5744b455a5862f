/**
 * `compactor start | watch | redrive` against a mocked SFN client (aws-sdk-client-mock).
 * There is no local Step Functions API, so these tests check the requests made, the output
 * and exit codes for the documented answers and errors; polling uses an instant sleep.
 */

import {
  DescribeExecutionCommand,
  type DescribeExecutionOutput,
  ExecutionDoesNotExist,
  ExecutionLimitExceeded,
  ExecutionNotRedrivable,
  GetExecutionHistoryCommand,
  type HistoryEvent,
  ListExecutionsCommand,
  RedriveExecutionCommand,
  SFNClient,
  SFNServiceException,
  StartExecutionCommand,
  StateMachineDoesNotExist,
} from '@aws-sdk/client-sfn';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import {
  consoleUrl,
  redriveCommand,
  SFN_COMMANDS,
  type SfnCliOptions,
  startCommand,
  watchCommand,
} from '../../functions/cli/commands/sfn/sfn.ts';
import type { SfnCommandDeps } from '../../functions/cli/commands/sfn/sfn-context.ts';
import { COMMAND_OPTIONS, parseArgsConfig } from '../../functions/cli/options.ts';

const REGION = 'eu-west-1';
const MACHINE = `arn:aws:states:${REGION}:123456789012:stateMachine:Compactor`;
const EXECUTION = `arn:aws:states:${REGION}:123456789012:execution:Compactor:hourly-20250115T120000-1a2b3c4d`;
const MAP_RUN = `arn:aws:states:${REGION}:123456789012:mapRun:Compactor/CompactPartitions:77aa`;
const CHILD = `arn:aws:states:${REGION}:123456789012:execution:Compactor/CompactPartitions:c1`;
const TIMED_OUT_CHILD = `arn:aws:states:${REGION}:123456789012:execution:Compactor/CompactPartitions:c2`;
const T0 = new Date('2025-01-15T12:00:00Z');
const at = (s: number) => new Date(T0.getTime() + s * 1000);

const client = new SFNClient({ region: REGION });
const sfn = mockClient(client);

interface Run {
  code: number;
  out: string[];
  err: string[];
  sleeps: number[];
}

async function run(
  command: (typeof SFN_COMMANDS)[keyof typeof SFN_COMMANDS],
  options: SfnCliOptions,
  deps: Partial<SfnCommandDeps> = {},
): Promise<Run> {
  const out: string[] = [];
  const err: string[] = [];
  const sleeps: number[] = [];
  const code = await command(
    options,
    { out: (l) => out.push(l), err: (l) => err.push(l) },
    {
      client,
      sleep: async (ms) => {
        sleeps.push(ms);
      },
      env: {},
      now: () => T0,
      ...deps,
    },
  );
  return { code, out, err, sleeps };
}

function described(
  status: DescribeExecutionOutput['status'],
  extra: Partial<DescribeExecutionOutput> = {},
): DescribeExecutionOutput {
  return {
    executionArn: EXECUTION,
    stateMachineArn: MACHINE,
    status,
    startDate: T0,
    ...(status === 'RUNNING' || status === 'PENDING_REDRIVE' ? {} : { stopDate: at(95) }),
    ...extra,
  };
}

const SUMMARY = {
  tier: 'hourly',
  partitions: 3,
  compacted: 2,
  skipped: 1,
  failed: 0,
  failures: [],
};

/** A failed compaction as the history shows it, newest first is what the command reads. */
const FAILED_HISTORY: HistoryEvent[] = [
  { id: 1, type: 'ExecutionStarted', timestamp: at(0) },
  { id: 2, type: 'TaskStateEntered', timestamp: at(1), stateEnteredEventDetails: { name: 'Recover' } },
  { id: 3, type: 'TaskStateExited', timestamp: at(2), stateExitedEventDetails: { name: 'Recover' } },
  { id: 4, type: 'TaskStateEntered', timestamp: at(3), stateEnteredEventDetails: { name: 'Compact' } },
  { id: 5, type: 'LambdaFunctionScheduled', timestamp: at(3) },
  {
    id: 6,
    type: 'LambdaFunctionFailed',
    timestamp: at(9),
    lambdaFunctionFailedEventDetails: {
      error: 'SchemaConflictError',
      cause: JSON.stringify({
        errorType: 'SchemaConflictError',
        errorMessage: 'column "usage" is DOUBLE in a.parquet and VARCHAR in b.parquet',
        trace: ['at compact (compact.ts:10)', 'at handler'],
      }),
    },
  },
  {
    id: 7,
    type: 'ExecutionFailed',
    timestamp: at(10),
    executionFailedEventDetails: { error: 'SchemaConflictError', cause: 'see Compact' },
  },
];

describe('compactor start (mocked Step Functions API: no local Step Functions service)', () => {
  beforeEach(() => sfn.reset());

  it('starts with the tier as input, a readable name, and prints the ARN and the console URL', async () => {
    sfn.on(StartExecutionCommand).resolves({ executionArn: EXECUTION, startDate: T0 });
    const r = await run(startCommand, { tier: 'hourly', 'state-machine': MACHINE });
    expect(r.code).toBe(0);
    const input = sfn.commandCalls(StartExecutionCommand)[0]?.args[0].input;
    expect(input?.stateMachineArn).toBe(MACHINE);
    expect(JSON.parse(input?.input ?? '')).toEqual({ tier: 'hourly' });
    expect(input?.name).toMatch(/^hourly-20250115T120000-[0-9a-f]{8}$/);
    expect(r.out).toContain(`execution: ${EXECUTION}`);
    const url = `https://${REGION}.console.aws.amazon.com/states/home?region=${REGION}#/v2/executions/details/${EXECUTION}`;
    expect(consoleUrl(REGION, EXECUTION)).toBe(url);
    expect(r.out).toContain(`console:   ${url}`);
    // Without --wait there is no polling.
    expect(sfn.commandCalls(DescribeExecutionCommand)).toHaveLength(0);
  });

  it('passes --now as an ISO time and takes the state machine from COMPACTOR_STATE_MACHINE_ARN', async () => {
    sfn.on(StartExecutionCommand).resolves({ executionArn: EXECUTION, startDate: T0 });
    const r = await run(
      startCommand,
      { tier: 'daily', now: '2025-01-14T03:00:00+01:00' },
      { env: { COMPACTOR_STATE_MACHINE_ARN: MACHINE } },
    );
    expect(r.code).toBe(0);
    const input = sfn.commandCalls(StartExecutionCommand)[0]?.args[0].input;
    expect(input?.stateMachineArn).toBe(MACHINE);
    expect(JSON.parse(input?.input ?? '')).toEqual({ tier: 'daily', now: '2025-01-14T02:00:00.000Z' });
    expect(input?.name).toMatch(/^daily-20250115T120000-[0-9a-f]{8}$/);
  });

  it('--wait follows the execution with backoff and prints the output summary: exit 0', async () => {
    sfn.on(StartExecutionCommand).resolves({ executionArn: EXECUTION, startDate: T0 });
    sfn
      .on(DescribeExecutionCommand)
      // Just started: not visible yet (reads are eventually consistent).
      .rejectsOnce(new ExecutionDoesNotExist({ $metadata: {}, message: 'Execution Does Not Exist' }))
      .resolvesOnce(described('RUNNING'))
      .resolvesOnce(described('RUNNING'))
      .resolvesOnce(described('RUNNING'))
      .resolves(described('SUCCEEDED', { output: JSON.stringify(SUMMARY) }));
    const r = await run(startCommand, { tier: 'hourly', 'state-machine': MACHINE, wait: true });
    expect(r.code).toBe(0);
    expect(r.sleeps).toEqual([2000, 3000, 4500, 6750]);
    // State changes only, not every poll.
    expect(r.err.filter((l) => l.startsWith('status RUNNING'))).toHaveLength(1);
    expect(r.err.filter((l) => l.startsWith('status SUCCEEDED'))).toHaveLength(1);
    expect(r.out).toContain('SUCCEEDED in 95.0 s');
    expect(r.out).toEqual(expect.arrayContaining(['  tier: hourly', '  compacted: 2', '  failures: 0']));
  });

  it('--wait on a failure prints the error, the failed state and its cause from the history: exit 1', async () => {
    sfn.on(StartExecutionCommand).resolves({ executionArn: EXECUTION, startDate: T0 });
    sfn
      .on(DescribeExecutionCommand)
      .resolvesOnce(described('RUNNING'))
      .resolves(described('FAILED', { error: 'SchemaConflictError', cause: 'see Compact' }));
    sfn.on(GetExecutionHistoryCommand).resolves({ events: [...FAILED_HISTORY].reverse() });
    const r = await run(startCommand, { tier: 'hourly', 'state-machine': MACHINE, wait: true });
    expect(r.code).toBe(1);
    expect(r.out).toContain('FAILED in 95.0 s: SchemaConflictError: see Compact');
    expect(r.out).toContain(
      'failed in state Compact: SchemaConflictError: column "usage" is DOUBLE in a.parquet and VARCHAR in b.parquet',
    );
    expect(r.out.at(-1)).toBe(
      `redrive from the failed state: compactor redrive --execution ${EXECUTION} --wait`,
    );
    expect(sfn.commandCalls(GetExecutionHistoryCommand)[0]?.args[0].input).toMatchObject({
      executionArn: EXECUTION,
      reverseOrder: true,
    });
  });

  it('--wait: TIMED_OUT and ABORTED exit 1 too', async () => {
    for (const status of ['TIMED_OUT', 'ABORTED'] as const) {
      sfn.reset();
      sfn.on(StartExecutionCommand).resolves({ executionArn: EXECUTION, startDate: T0 });
      sfn
        .on(DescribeExecutionCommand)
        .resolves(described(status, { error: `States.${status}`, cause: 'stopped' }));
      sfn.on(GetExecutionHistoryCommand).resolves({ events: [] });
      const r = await run(startCommand, { tier: 'daily', 'state-machine': MACHINE, wait: true });
      expect(r.code, status).toBe(1);
      expect(r.out).toContain(`${status} in 95.0 s: States.${status}: stopped`);
    }
  });

  it('--wait gives up after the bound, saying how to follow on: exit 2', async () => {
    sfn.on(StartExecutionCommand).resolves({ executionArn: EXECUTION, startDate: T0 });
    sfn.on(DescribeExecutionCommand).resolves(described('RUNNING'));
    const r = await run(
      startCommand,
      { tier: 'hourly', 'state-machine': MACHINE, wait: true },
      { maxWaitMs: 60_000 },
    );
    expect(r.code).toBe(2);
    expect(Math.max(...r.sleeps)).toBeLessThanOrEqual(30_000);
    expect(r.err.at(-1)).toContain(`compactor watch --execution ${EXECUTION}`);
  });

  it('missing --state-machine (and no env): exit 2 with the fix', async () => {
    const r = await run(startCommand, { tier: 'hourly' });
    expect(r.code).toBe(2);
    expect(r.err).toEqual([
      'compactor start: --state-machine is required (the StateMachineArn output of the stack)',
    ]);
    expect(sfn.calls()).toHaveLength(0);
  });

  it('usage errors exit 2 on one line before any request', async () => {
    const cases: [SfnCliOptions, string][] = [
      [{ 'state-machine': MACHINE }, '--tier is required'],
      [{ tier: 'weekly', 'state-machine': MACHINE }, '--tier weekly'],
      [{ tier: 'hourly', 'state-machine': MACHINE, now: 'yesterday' }, '--now yesterday'],
      [{ tier: 'hourly', 'state-machine': 'Compactor' }, 'not a state machine ARN'],
      [{ tier: 'hourly', 'state-machine': MACHINE, region: 'us-east-1' }, "differs from the ARN's region"],
    ];
    for (const [options, message] of cases) {
      const r = await run(startCommand, options);
      expect(r.code).toBe(2);
      expect(r.err).toHaveLength(1);
      expect(r.err[0]).toContain(message);
    }
    expect(sfn.calls()).toHaveLength(0);
  });

  it('a state machine that does not exist: exit 2 naming the fix', async () => {
    sfn.on(StartExecutionCommand).rejects(
      new StateMachineDoesNotExist({
        $metadata: {},
        message: `State Machine Does Not Exist: '${MACHINE}'`,
      }),
    );
    const r = await run(startCommand, { tier: 'hourly', 'state-machine': MACHINE });
    expect(r.code).toBe(2);
    expect(r.err).toHaveLength(1);
    expect(r.err[0]).toMatch(/^compactor start: StateMachineDoesNotExist: .*check --state-machine/);
  });

  it('an error it has no fix for propagates to the CLI handler', async () => {
    sfn.on(StartExecutionCommand).rejects(
      new SFNServiceException({
        name: 'ThrottlingException',
        $fault: 'client',
        $metadata: {},
        message: 'Rate exceeded',
      }),
    );
    await expect(run(startCommand, { tier: 'hourly', 'state-machine': MACHINE })).rejects.toMatchObject({
      name: 'ThrottlingException',
    });
  });
});

describe('compactor watch (mocked Step Functions API: no local Step Functions service)', () => {
  beforeEach(() => sfn.reset());

  it('without --execution lists the 10 most recent executions with status, times and redrives', async () => {
    sfn.on(ListExecutionsCommand).resolves({
      executions: [
        {
          executionArn: EXECUTION,
          stateMachineArn: MACHINE,
          name: 'hourly-20250115T120000-1a2b3c4d',
          status: 'RUNNING',
          startDate: T0,
          redriveCount: 0,
        },
        {
          executionArn: `${MACHINE.replace('stateMachine', 'execution')}:hourly-20250115T110000-99`,
          stateMachineArn: MACHINE,
          name: 'hourly-20250115T110000-99',
          status: 'FAILED',
          startDate: at(-3600),
          stopDate: at(-3500),
          redriveCount: 2,
        },
      ],
    });
    const r = await run(watchCommand, { 'state-machine': MACHINE });
    expect(r.code).toBe(0);
    expect(sfn.commandCalls(ListExecutionsCommand)[0]?.args[0].input).toEqual({
      stateMachineArn: MACHINE,
      maxResults: 10,
    });
    const lines = (r.out[0] ?? '').split('\n');
    expect(lines[0]).toMatch(/^name\s+status\s+started\s+stopped\s+redrives\s+execution$/);
    expect(lines[2]).toMatch(/^hourly-20250115T120000-1a2b3c4d\s+RUNNING\s+2025-01-15T12:00:00Z\s+0\s+arn:/);
    expect(lines[3]).toMatch(
      /^hourly-20250115T110000-99\s+FAILED\s+2025-01-15T11:00:00Z\s+2025-01-15T11:01:40Z\s+2\s+arn:/,
    );
  });

  it('without --execution needs the state machine: exit 2', async () => {
    const r = await run(watchCommand, {});
    expect(r.code).toBe(2);
    expect(r.err).toEqual([
      'compactor watch: --state-machine is required (the StateMachineArn output of the stack)',
    ]);
  });

  it('with --execution follows it; a Map Run failure shows the failed partitions and their errors: exit 1', async () => {
    sfn
      .on(DescribeExecutionCommand, { executionArn: EXECUTION })
      .resolvesOnce(described('RUNNING'))
      .resolves(
        described('FAILED', {
          error: 'States.ExceedToleratedFailureThreshold',
          cause: 'The specified tolerated failure threshold was exceeded',
        }),
      );
    sfn.on(GetExecutionHistoryCommand).resolves({
      events: [
        {
          id: 9,
          type: 'ExecutionFailed',
          timestamp: at(60),
          executionFailedEventDetails: { error: 'States.ExceedToleratedFailureThreshold', cause: 'exceeded' },
        },
        {
          id: 8,
          type: 'MapRunFailed',
          timestamp: at(59),
          mapRunFailedEventDetails: { error: 'States.ExceedToleratedFailureThreshold', cause: 'exceeded' },
        },
        { id: 5, type: 'MapRunStarted', timestamp: at(4), mapRunStartedEventDetails: { mapRunArn: MAP_RUN } },
        {
          id: 4,
          type: 'MapStateEntered',
          timestamp: at(4),
          stateEnteredEventDetails: { name: 'CompactPartitions' },
        },
      ],
    });
    sfn.on(ListExecutionsCommand, { mapRunArn: MAP_RUN, statusFilter: 'FAILED' }).resolves({
      executions: [
        { executionArn: CHILD, stateMachineArn: MACHINE, name: 'c1', status: 'FAILED', startDate: at(5) },
      ],
    });
    // A child past its time limit is TIMED_OUT, not FAILED; the ResultWriter counts it failed.
    sfn.on(ListExecutionsCommand, { mapRunArn: MAP_RUN, statusFilter: 'TIMED_OUT' }).resolves({
      executions: [
        {
          executionArn: TIMED_OUT_CHILD,
          stateMachineArn: MACHINE,
          name: 'c2',
          status: 'TIMED_OUT',
          startDate: at(6),
        },
      ],
    });
    sfn
      .on(ListExecutionsCommand, { mapRunArn: MAP_RUN, statusFilter: 'ABORTED' })
      .resolves({ executions: [] });
    sfn.on(DescribeExecutionCommand, { executionArn: TIMED_OUT_CHILD }).resolves(
      described('TIMED_OUT', {
        executionArn: TIMED_OUT_CHILD,
        input: JSON.stringify({ partition: 'telemetry/cpu/2025/01/15/11/' }),
      }),
    );
    sfn.on(DescribeExecutionCommand, { executionArn: CHILD }).resolves(
      described('FAILED', {
        executionArn: CHILD,
        input: JSON.stringify({ partition: 'telemetry/cpu/2025/01/15/10/' }),
        error: 'SchemaConflictError',
        cause: JSON.stringify({ errorType: 'SchemaConflictError', errorMessage: 'column "usage" differs' }),
      }),
    );
    const r = await run(watchCommand, { execution: EXECUTION });
    expect(r.code).toBe(1);
    expect(r.out[0]).toBe(`execution: ${EXECUTION}`);
    expect(r.out).toContain(
      'FAILED in 95.0 s: States.ExceedToleratedFailureThreshold: The specified tolerated failure threshold was exceeded',
    );
    expect(r.out).toContain(
      'failed in state CompactPartitions: States.ExceedToleratedFailureThreshold: exceeded',
    );
    expect(r.out).toContain(
      `  partition telemetry/cpu/2025/01/15/10/: SchemaConflictError: column "usage" differs (${CHILD})`,
    );
    expect(r.out).toContain(`  partition telemetry/cpu/2025/01/15/11/: TIMED_OUT (${TIMED_OUT_CHILD})`);
    expect(sfn.commandCalls(ListExecutionsCommand).map((c) => c.args[0].input)).toEqual([
      { mapRunArn: MAP_RUN, statusFilter: 'FAILED', maxResults: 3 },
      { mapRunArn: MAP_RUN, statusFilter: 'TIMED_OUT', maxResults: 2 },
      { mapRunArn: MAP_RUN, statusFilter: 'ABORTED', maxResults: 1 },
    ]);
  });

  it('only reads the history of the last attempt (stops at the last redrive)', async () => {
    sfn
      .on(DescribeExecutionCommand)
      .resolves(described('ABORTED', { error: 'Stopped', cause: 'by operator' }));
    sfn.on(GetExecutionHistoryCommand).resolves({
      events: [
        { id: 20, type: 'ExecutionAborted', timestamp: at(90), executionAbortedEventDetails: {} },
        { id: 15, type: 'ExecutionRedriven', timestamp: at(80) },
        ...[...FAILED_HISTORY].reverse(),
      ],
    });
    const r = await run(watchCommand, { execution: EXECUTION });
    expect(r.code).toBe(1);
    expect(r.out).toContain('ABORTED in 95.0 s: Stopped: by operator');
    expect(r.out.some((l) => l.startsWith('failed in state'))).toBe(false);
  });

  it('a succeeded execution: exit 0 with the output fields; an execution that does not exist: exit 2', async () => {
    sfn.on(DescribeExecutionCommand).resolvesOnce(described('SUCCEEDED', { output: '{"compacted":4}' }));
    const ok = await run(watchCommand, { execution: EXECUTION });
    expect(ok.code).toBe(0);
    expect(ok.out).toContain('  compacted: 4');
    sfn
      .on(DescribeExecutionCommand)
      .rejects(new ExecutionDoesNotExist({ $metadata: {}, message: 'does not exist' }));
    const gone = await run(watchCommand, { execution: EXECUTION });
    expect(gone.code).toBe(2);
    expect(gone.err[0]).toMatch(/^compactor watch: ExecutionDoesNotExist: does not exist; no such execution/);
  });

  it('a bad --execution: exit 2', async () => {
    const r = await run(watchCommand, { execution: MACHINE });
    expect(r.code).toBe(2);
    expect(r.err[0]).toContain('not an execution ARN');
  });
});

describe('compactor redrive (mocked Step Functions API: no local Step Functions service)', () => {
  beforeEach(() => sfn.reset());

  it('redrives and explains that it re-runs from the failed state with the same input, idempotently', async () => {
    sfn.on(RedriveExecutionCommand).resolves({ redriveDate: at(300) });
    const r = await run(redriveCommand, { execution: EXECUTION });
    expect(r.code).toBe(0);
    expect(sfn.commandCalls(RedriveExecutionCommand)[0]?.args[0].input).toEqual({ executionArn: EXECUTION });
    const text = r.out.join('\n');
    expect(text).toContain('redriven at 2025-01-15T12:05:00Z');
    expect(text).toContain('re-runs from the state that failed, with the same input');
    expect(text).toContain('idempotent');
    expect(text).toContain('not compacted twice');
    expect(text).toContain('re-runs only its unsuccessful partitions');
    expect(sfn.commandCalls(DescribeExecutionCommand)).toHaveLength(0);
  });

  it('--wait ignores the old failure until the redrive shows, then follows it: exit 0', async () => {
    sfn
      .on(DescribeExecutionCommand)
      .resolvesOnce(described('FAILED', { redriveCount: 0 }))
      // Still the old outcome: reads are eventually consistent.
      .resolvesOnce(described('FAILED', { redriveCount: 0 }))
      .resolvesOnce(described('RUNNING', { redriveCount: 1 }))
      .resolves(described('SUCCEEDED', { redriveCount: 1, output: JSON.stringify(SUMMARY) }));
    sfn.on(RedriveExecutionCommand).resolves({ redriveDate: at(300) });
    const r = await run(redriveCommand, { execution: EXECUTION, wait: true });
    expect(r.code).toBe(0);
    expect(r.err.some((l) => l.includes('FAILED'))).toBe(false);
    expect(r.err).toContain('status RUNNING (polled for 2.0 s)');
    expect(r.out).toContain('  compacted: 2');
  });

  it('not redrivable: exit 2 with the reason and the fix', async () => {
    sfn.on(RedriveExecutionCommand).rejects(
      new ExecutionNotRedrivable({
        $metadata: {},
        message: `Execution is SUCCEEDED and cannot be redriven: ${EXECUTION}`,
      }),
    );
    const r = await run(redriveCommand, { execution: EXECUTION });
    expect(r.code).toBe(2);
    expect(r.err).toHaveLength(1);
    expect(r.err[0]).toMatch(
      /^compactor redrive: ExecutionNotRedrivable: Execution is SUCCEEDED and cannot be redriven: .*; only a FAILED, TIMED_OUT or ABORTED execution can be redriven/,
    );
  });

  it('too many executions: exit 2 with the fix', async () => {
    sfn
      .on(RedriveExecutionCommand)
      .rejects(new ExecutionLimitExceeded({ $metadata: {}, message: 'Execution limit exceeded' }));
    const r = await run(redriveCommand, { execution: EXECUTION });
    expect(r.code).toBe(2);
    expect(r.err[0]).toContain('ExecutionLimitExceeded: Execution limit exceeded; too many open executions');
  });

  it('missing --execution: exit 2', async () => {
    const r = await run(redriveCommand, {});
    expect(r.code).toBe(2);
    expect(r.err[0]).toContain('--execution is required');
  });
});

describe('option names for the CLI (no Step Functions API needed)', () => {
  it('each command takes the options it reads, with parseArgs types', () => {
    expect(parseArgsConfig(COMMAND_OPTIONS.start)).toEqual({
      tier: { type: 'string' },
      now: { type: 'string' },
      'state-machine': { type: 'string' },
      region: { type: 'string' },
      wait: { type: 'boolean' },
    });
    expect(COMMAND_OPTIONS.watch).toEqual(['state-machine', 'execution', 'region']);
    expect(COMMAND_OPTIONS.redrive).toEqual(['execution', 'region', 'wait']);
    expect(Object.keys(SFN_COMMANDS)).toEqual(['start', 'watch', 'redrive']);
  });
});
