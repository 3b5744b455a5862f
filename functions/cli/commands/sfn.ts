/**
 * `compactor start | watch | redrive`: the deployed state machine from the command line.
 *
 * Same contract as the other commands: `(options, io) => exit code`, 0 ok, 1 the execution
 * failed (timed out, was aborted), 2 bad usage or the request could not be made, with a
 * one-line reason naming the fix. Progress goes to `err`, results to `out`. Errors this file
 * does not know propagate to the CLI's single handler (it prints them on one line, exit 2).
 */

import { randomBytes } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import {
  DescribeExecutionCommand,
  type DescribeExecutionOutput,
  ExecutionDoesNotExist,
  GetExecutionHistoryCommand,
  type HistoryEvent,
  ListExecutionsCommand,
  RedriveExecutionCommand,
  SFNClient,
  SFNServiceException,
  StartExecutionCommand,
} from '@aws-sdk/client-sfn';
import { isExecutionArn } from '../../adapters/sfn-owners.ts';
import { JOB_KINDS, type JobKind } from '../../core/config.ts';
import { ConfigError } from '../../core/errors.ts';
import { formatDuration, table } from '../format.ts';
import type { SfnCliOptions, SfnCommandName } from './sfn-options.ts';

// The options and usage text live apart, so the CLI shows them without loading the SDK.
export { SFN_CLI_OPTIONS, SFN_COMMAND_NAMES, SFN_USAGE, type SfnCliOptions } from './sfn-options.ts';

export interface SfnIo {
  readonly out: (line: string) => void;
  readonly err: (line: string) => void;
}

export interface SfnCommandDeps {
  /** Defaults to a client for the resolved region. */
  readonly client?: SFNClient;
  /** Waits between polls; tests pass an instant one. */
  readonly sleep?: (ms: number) => Promise<void>;
  /** Defaults to process.env (AWS_REGION, COMPACTOR_STATE_MACHINE_ARN). */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** The time used in execution names. */
  readonly now?: () => Date;
  /** How long --wait and watch follow an execution before giving up (default 2 h of polling). */
  readonly maxWaitMs?: number;
}

export type SfnCommand = (options: SfnCliOptions, io: SfnIo, deps?: SfnCommandDeps) => Promise<number>;

const STATE_MACHINE_ENV = 'COMPACTOR_STATE_MACHINE_ARN';
/** A state machine, or one of its versions or aliases (StartExecution accepts all three). */
const STATE_MACHINE_ARN = /^arn:aws[a-z-]*:states:[a-z0-9-]+:\d{12}:stateMachine:[^:]+(?::[^:]+)?$/;

const FIRST_POLL_MS = 2_000;
const MAX_POLL_MS = 30_000;
const DEFAULT_MAX_WAIT_MS = 2 * 3_600_000;
/** DescribeExecution is eventually consistent: a just-started execution may not be visible yet. */
const NOT_YET_VISIBLE_MS = 30_000;
const HISTORY_PAGE = 200;
const HISTORY_MAX_PAGES = 10;
const FAILED_CHILDREN_SHOWN = 3;
const TERMINAL = new Set(['SUCCEEDED', 'FAILED', 'TIMED_OUT', 'ABORTED']);

interface Context {
  readonly client: SFNClient;
  readonly region: string;
  readonly sleep: (ms: number) => Promise<void>;
  readonly maxWaitMs: number;
  readonly io: SfnIo;
}

// ---- start ----

export const startCommand: SfnCommand = (options, io, deps = {}) =>
  guarded('start', io, async () => {
    const tier = parseTier(options.tier);
    const stateMachineArn = requireStateMachine(options, deps);
    const now = options.now === undefined ? undefined : parseNow(options.now);
    const ctx = context(options, io, deps, stateMachineArn);
    const name = executionName(tier, (deps.now ?? (() => new Date()))());
    const input = JSON.stringify(now === undefined ? { tier } : { tier, now });
    const started = await ctx.client.send(new StartExecutionCommand({ stateMachineArn, name, input }));
    const executionArn = started.executionArn ?? '';
    io.out(`started ${tier} execution ${name} with input ${input}`);
    io.out(`execution: ${executionArn}`);
    io.out(`console:   ${consoleUrl(ctx.region, executionArn)}`);
    if (!options.wait) return 0;
    return follow(ctx, executionArn, { justStarted: true });
  });

export function executionName(tier: JobKind, at: Date): string {
  // Names allow letters, digits, '-' and '_' (80 at most): hourly-20250115T120000-1a2b3c4d.
  const stamp = at.toISOString().replace(/[-:]/g, '').slice(0, 15);
  return `${tier}-${stamp}-${randomBytes(4).toString('hex')}`;
}

export function consoleUrl(region: string, executionArn: string): string {
  return `https://${region}.console.aws.amazon.com/states/home?region=${region}#/v2/executions/details/${executionArn}`;
}

// ---- watch ----

export const watchCommand: SfnCommand = (options, io, deps = {}) =>
  guarded('watch', io, async () => {
    if (options.execution !== undefined) {
      const executionArn = requireExecution(options);
      const ctx = context(options, io, deps, executionArn);
      io.out(`execution: ${executionArn}`);
      io.out(`console:   ${consoleUrl(ctx.region, executionArn)}`);
      return follow(ctx, executionArn, {});
    }
    const stateMachineArn = requireStateMachine(options, deps);
    const ctx = context(options, io, deps, stateMachineArn);
    const listed = await ctx.client.send(new ListExecutionsCommand({ stateMachineArn, maxResults: 10 }));
    const executions = listed.executions ?? [];
    if (executions.length === 0) {
      io.out(`no executions of ${stateMachineArn} yet: start one with compactor start --tier hourly`);
      return 0;
    }
    io.out(
      table(
        ['name', 'status', 'started', 'stopped', 'redrives', 'execution'],
        executions.map((e) => [
          e.name ?? '?',
          e.status ?? '?',
          isoSeconds(e.startDate),
          isoSeconds(e.stopDate),
          e.redriveCount ?? 0,
          e.executionArn ?? '?',
        ]),
      ),
    );
    io.out(
      'follow one: compactor watch --execution ARN; redrive a failed one: compactor redrive --execution ARN',
    );
    return 0;
  });

// ---- redrive ----

export const redriveCommand: SfnCommand = (options, io, deps = {}) =>
  guarded('redrive', io, async () => {
    const executionArn = requireExecution(options);
    const ctx = context(options, io, deps, executionArn);
    // With --wait, the count before, so the old failure (still visible for a moment: reads are
    // eventually consistent) is not taken for the outcome of the redrive.
    const before = options.wait
      ? await ctx.client.send(new DescribeExecutionCommand({ executionArn }))
      : undefined;
    const redriven = await ctx.client.send(new RedriveExecutionCommand({ executionArn }));
    io.out(`redriven at ${isoSeconds(redriven.redriveDate)}: ${executionArn}`);
    io.out(
      'It re-runs from the state that failed, with the same input: states that succeeded are not run again, ' +
        'and a Distributed Map re-runs only its unsuccessful partitions. Every step is idempotent, ' +
        'so a partition that already succeeded is not compacted twice.',
    );
    io.out(`console:   ${consoleUrl(ctx.region, executionArn)}`);
    if (!options.wait) return 0;
    return follow(ctx, executionArn, { afterRedriveCount: before?.redriveCount ?? 0 });
  });

/** The three handlers, keyed by command name, for the CLI's command table. */
export const SFN_COMMANDS: Readonly<Record<SfnCommandName, SfnCommand>> = {
  start: startCommand,
  watch: watchCommand,
  redrive: redriveCommand,
};

// ---- following an execution ----

interface FollowOptions {
  /** Tolerate ExecutionDoesNotExist for a short while (the execution was just started). */
  readonly justStarted?: boolean;
  /** Ignore terminal states until the redrive count exceeds this (a redrive was just made). */
  readonly afterRedriveCount?: number;
}

/** Polls until the execution stops (backoff capped at 30 s, giving up after maxWaitMs). */
async function follow(ctx: Context, executionArn: string, options: FollowOptions): Promise<number> {
  const { client, io } = ctx;
  let waited = 0;
  let pause = FIRST_POLL_MS;
  let shown = '';
  for (;;) {
    const execution = await describeOrUndefined(client, executionArn, options.justStarted === true, waited);
    if (execution) {
      const stale =
        options.afterRedriveCount !== undefined &&
        (execution.redriveCount ?? 0) <= options.afterRedriveCount &&
        TERMINAL.has(execution.status ?? '');
      if (!stale) {
        const status = execution.status ?? 'UNKNOWN';
        if (status !== shown) {
          io.err(`status ${status} (polled for ${formatDuration(waited)})`);
          shown = status;
        }
        if (TERMINAL.has(status)) return report(ctx, execution);
      }
    }
    if (waited >= ctx.maxWaitMs) {
      io.err(
        `compactor: stopped waiting after ${formatDuration(waited)}; the execution goes on: ` +
          `compactor watch --execution ${executionArn}`,
      );
      return 2;
    }
    await ctx.sleep(pause);
    waited += pause;
    pause = Math.min(MAX_POLL_MS, Math.round(pause * 1.5));
  }
}

async function describeOrUndefined(
  client: SFNClient,
  executionArn: string,
  justStarted: boolean,
  waited: number,
): Promise<DescribeExecutionOutput | undefined> {
  try {
    return await client.send(new DescribeExecutionCommand({ executionArn }));
  } catch (error) {
    if (error instanceof ExecutionDoesNotExist && justStarted && waited < NOT_YET_VISIBLE_MS)
      return undefined;
    throw error;
  }
}

async function report(ctx: Context, execution: DescribeExecutionOutput): Promise<number> {
  const { io } = ctx;
  const took =
    execution.startDate && execution.stopDate
      ? ` in ${formatDuration(execution.stopDate.getTime() - execution.startDate.getTime())}`
      : '';
  if (execution.status === 'SUCCEEDED') {
    io.out(`SUCCEEDED${took}`);
    printOutput(io, execution);
    return 0;
  }
  const executionArn = execution.executionArn ?? '';
  const failure = await lastFailure(ctx.client, executionArn);
  const error = execution.error ?? failure.executionError ?? '';
  const cause = execution.cause ?? failure.executionCause ?? '';
  io.out(`${execution.status}${took}${error || cause ? `: ${joinReason(error, cause)}` : ''}`);
  if (failure.step) {
    const where = failure.step.state ? `state ${failure.step.state}` : 'a state';
    io.out(`failed in ${where}: ${joinReason(failure.step.error, failure.step.cause)}`);
  }
  if (failure.mapRunArn) {
    for (const line of await failedChildren(ctx.client, failure.mapRunArn)) io.out(line);
  }
  io.out(`redrive from the failed state: compactor redrive --execution ${executionArn} --wait`);
  return 1;
}

/** Prints the execution's JSON output field by field (the workflow's summary). */
function printOutput(io: SfnIo, execution: DescribeExecutionOutput): void {
  if (execution.output === undefined) {
    io.out(
      execution.outputDetails?.included === false
        ? 'output: not included (the state machine withholds execution data)'
        : 'output: none',
    );
    return;
  }
  const output = parseJson(execution.output);
  if (output === undefined || typeof output !== 'object' || output === null || Array.isArray(output)) {
    io.out(`output: ${oneLine(execution.output)}`);
    return;
  }
  for (const [key, value] of Object.entries(output)) {
    if (Array.isArray(value)) {
      io.out(`  ${key}: ${value.length}`);
      for (const item of value) io.out(`    - ${inline(item)}`);
    } else {
      io.out(`  ${key}: ${inline(value)}`);
    }
  }
  const failed = (output as { failed?: unknown }).failed;
  if (typeof failed === 'number' && failed > 0) {
    io.out(
      `note: ${failed} partition(s) failed within the tolerated failure percentage; the next cycle retries them`,
    );
  }
}

function inline(value: unknown): string {
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    return Object.entries(value)
      .map(([k, v]) => `${k}=${typeof v === 'string' ? oneLine(v) : JSON.stringify(v)}`)
      .join(', ');
  }
  return typeof value === 'string' ? oneLine(value) : JSON.stringify(value);
}

interface FailureFromHistory {
  readonly executionError?: string;
  readonly executionCause?: string;
  /** The newest failed task, Lambda or Map Run of the last attempt, and the state it ran in. */
  readonly step?: { readonly state?: string; readonly error: string; readonly cause: string };
  /** The Map Run whose failure failed the execution: its failed children hold our error names. */
  readonly mapRunArn?: string;
}

function stepFailure(event: HistoryEvent): { error?: string; cause?: string } | undefined {
  return (
    event.taskFailedEventDetails ??
    event.lambdaFunctionFailedEventDetails ??
    event.taskTimedOutEventDetails ??
    event.lambdaFunctionTimedOutEventDetails ??
    event.taskStartFailedEventDetails ??
    event.lambdaFunctionStartFailedEventDetails ??
    event.lambdaFunctionScheduleFailedEventDetails ??
    event.mapRunFailedEventDetails ??
    event.evaluationFailedEventDetails
  );
}

/** Reads the history newest first, up to the last redrive (older failures were redriven away). */
async function lastFailure(client: SFNClient, executionArn: string): Promise<FailureFromHistory> {
  let executionError: string | undefined;
  let executionCause: string | undefined;
  let step: { error: string; cause: string; state?: string; mapRun: boolean } | undefined;
  let mapRunArn: string | undefined;
  let nextToken: string | undefined;
  scan: for (let page = 0; page < HISTORY_MAX_PAGES; page++) {
    const history = await client.send(
      new GetExecutionHistoryCommand({
        executionArn,
        reverseOrder: true,
        maxResults: HISTORY_PAGE,
        includeExecutionData: false,
        ...(nextToken ? { nextToken } : {}),
      }),
    );
    for (const event of history.events ?? []) {
      if (event.type === 'ExecutionRedriven') break scan;
      const ended =
        event.executionFailedEventDetails ??
        event.executionTimedOutEventDetails ??
        event.executionAbortedEventDetails;
      if (ended && executionError === undefined) {
        executionError = ended.error;
        executionCause = ended.cause;
        continue;
      }
      if (!step) {
        const failed = stepFailure(event);
        if (failed) {
          step = {
            error: failed.error ?? event.type ?? '',
            cause: failed.cause ?? '',
            mapRun: event.type === 'MapRunFailed',
          };
          if ('state' in failed && typeof failed.state === 'string') step.state = failed.state;
        }
        continue;
      }
      // Older than the failure: the nearest state entered is the one that failed.
      if (step.state === undefined && event.stateEnteredEventDetails?.name) {
        step.state = event.stateEnteredEventDetails.name;
      }
      if (step.mapRun && event.mapRunStartedEventDetails?.mapRunArn) {
        mapRunArn = event.mapRunStartedEventDetails.mapRunArn;
      }
      if (step.state !== undefined && (!step.mapRun || mapRunArn !== undefined)) break scan;
    }
    nextToken = history.nextToken;
    if (!nextToken) break;
  }
  return {
    ...(executionError !== undefined ? { executionError } : {}),
    ...(executionCause !== undefined ? { executionCause } : {}),
    ...(step
      ? {
          step: {
            error: step.error,
            cause: step.cause,
            ...(step.state !== undefined ? { state: step.state } : {}),
          },
        }
      : {}),
    ...(mapRunArn !== undefined ? { mapRunArn } : {}),
  };
}

/** A Distributed Map's failures live in its child executions: show the first few. */
async function failedChildren(client: SFNClient, mapRunArn: string): Promise<string[]> {
  const listed = await client.send(
    new ListExecutionsCommand({ mapRunArn, statusFilter: 'FAILED', maxResults: FAILED_CHILDREN_SHOWN }),
  );
  const lines: string[] = [];
  for (const child of listed.executions ?? []) {
    if (!child.executionArn) continue;
    const described = await client.send(new DescribeExecutionCommand({ executionArn: child.executionArn }));
    const input = parseJson(described.input ?? '');
    const partition =
      input !== null &&
      typeof input === 'object' &&
      'partition' in input &&
      typeof input.partition === 'string'
        ? input.partition
        : (child.name ?? child.executionArn);
    lines.push(
      `  partition ${partition}: ${joinReason(described.error ?? 'failed', described.cause ?? '')} (${child.executionArn})`,
    );
  }
  if (lines.length > 0)
    lines.unshift(`failed partitions (first ${FAILED_CHILDREN_SHOWN}, from Map Run ${mapRunArn}):`);
  return lines;
}

/** A Lambda error's cause is JSON ({errorType, errorMessage, trace}): keep the message. */
function joinReason(error: string, cause: string): string {
  const parsed = parseJson(cause);
  const message =
    parsed !== null &&
    typeof parsed === 'object' &&
    'errorMessage' in parsed &&
    typeof parsed.errorMessage === 'string'
      ? parsed.errorMessage
      : cause;
  return message ? `${error}: ${oneLine(message)}` : error;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    // Not JSON (a plain-text cause or output): the caller shows it as text.
    if (error instanceof SyntaxError) return undefined;
    throw error;
  }
}

function oneLine(text: string, max = 500): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max)}...` : flat;
}

function isoSeconds(date: Date | undefined): string {
  return date ? `${date.toISOString().slice(0, 19)}Z` : '';
}

// ---- options, region, errors ----

function parseTier(value: string | undefined): JobKind {
  if (value === undefined) throw new ConfigError(`--tier is required: ${JOB_KINDS.join(', ')}`);
  if (!JOB_KINDS.includes(value as JobKind))
    throw new ConfigError(`--tier ${value}: use ${JOB_KINDS.join(', ')}`);
  return value as JobKind;
}

function parseNow(value: string): string {
  const at = Date.parse(value);
  if (Number.isNaN(at)) throw new ConfigError(`--now ${value}: use an ISO time like 2025-01-15T12:00:00Z`);
  return new Date(at).toISOString();
}

function requireStateMachine(options: SfnCliOptions, deps: SfnCommandDeps): string {
  const arn = options['state-machine'] ?? (deps.env ?? process.env)[STATE_MACHINE_ENV];
  if (arn === undefined || arn === '') {
    throw new ConfigError('--state-machine is required (the StateMachineArn output of the stack)');
  }
  if (!STATE_MACHINE_ARN.test(arn)) {
    throw new ConfigError(
      `--state-machine ${arn}: not a state machine ARN (arn:aws:states:REGION:ACCOUNT:stateMachine:NAME); use the StateMachineArn output of the stack`,
    );
  }
  return arn;
}

function requireExecution(options: SfnCliOptions): string {
  const arn = options.execution;
  if (arn === undefined || arn === '') {
    throw new ConfigError('--execution is required: an execution ARN (compactor watch lists recent ones)');
  }
  if (!isExecutionArn(arn)) {
    throw new ConfigError(
      `--execution ${arn}: not an execution ARN (arn:aws:states:REGION:ACCOUNT:execution:MACHINE:NAME)`,
    );
  }
  return arn;
}

/** --region, else the ARN's own region (the only one it exists in), else $AWS_REGION. */
function resolveRegion(options: SfnCliOptions, deps: SfnCommandDeps, arn: string): string {
  const fromArn = arn.split(':')[3];
  if (options.region !== undefined) {
    if (fromArn && fromArn !== options.region) {
      throw new ConfigError(
        `--region ${options.region} differs from the ARN's region ${fromArn}: drop --region`,
      );
    }
    return options.region;
  }
  const region = fromArn || (deps.env ?? process.env).AWS_REGION;
  if (!region) throw new ConfigError('--region is required (or set AWS_REGION)');
  return region;
}

function context(options: SfnCliOptions, io: SfnIo, deps: SfnCommandDeps, arn: string): Context {
  const region = resolveRegion(options, deps, arn);
  return {
    client: deps.client ?? new SFNClient({ region }),
    region,
    sleep: deps.sleep ?? ((ms) => delay(ms)),
    maxWaitMs: deps.maxWaitMs ?? DEFAULT_MAX_WAIT_MS,
    io,
  };
}

/** The fix for each Step Functions error an operator can act on. */
const FIXES: Readonly<Record<string, string>> = {
  ExecutionNotRedrivable:
    'only a FAILED, TIMED_OUT or ABORTED execution can be redriven, within 14 days of stopping; ' +
    'check its status with compactor watch --execution ARN, or start a new one with compactor start --tier',
  ExecutionLimitExceeded:
    'too many open executions: wait for running ones to finish (compactor watch) or raise the quota, then try again',
  ExecutionDoesNotExist:
    'no such execution in this account and region: check the ARN and --region (histories are kept 90 days)',
  StateMachineDoesNotExist:
    'no such state machine in this account and region: check --state-machine (the StateMachineArn output of the stack) and --region',
  StateMachineDeleting: 'the state machine is being deleted: deploy the stack again',
  ExecutionAlreadyExists: 'an execution with this name exists: run the command again (a new name is drawn)',
  InvalidArn: 'pass the full ARN, e.g. the StateMachineArn output of the stack',
  InvalidExecutionInput: 'the state machine rejected the input: check --tier and --now',
  ValidationException: 'the request was rejected: check the ARN and options',
  AccessDeniedException:
    'your credentials may not do this: use a role allowed states:StartExecution, DescribeExecution, ' +
    'GetExecutionHistory, ListExecutions and RedriveExecution on the state machine',
};

/**
 * Runs a command, turning usage errors and the Step Functions errors above into one line and
 * exit 2. Anything else propagates to the CLI's handler (also one line, exit 2).
 */
async function guarded(command: string, io: SfnIo, body: () => Promise<number>): Promise<number> {
  try {
    return await body();
  } catch (error) {
    if (error instanceof ConfigError) {
      io.err(`compactor ${command}: ${error.message}`);
      return 2;
    }
    const fix = error instanceof SFNServiceException ? FIXES[error.name] : undefined;
    if (error instanceof SFNServiceException && fix !== undefined) {
      io.err(`compactor ${command}: ${error.name}: ${oneLine(error.message, 300)}; ${fix}`);
      return 2;
    }
    throw error;
  }
}
