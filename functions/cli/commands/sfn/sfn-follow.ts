/**
 * Following an execution of `compactor start --wait | watch | redrive --wait` (sfn.ts) until it
 * stops, and saying how it ended: a success's output field by field; a failure's error, the
 * state it failed in and, for a Distributed Map, its first failed partitions, read from the
 * execution history back to its last redrive.
 */

import {
  DescribeExecutionCommand,
  type DescribeExecutionOutput,
  ExecutionDoesNotExist,
  type ExecutionListItem,
  GetExecutionHistoryCommand,
  type HistoryEvent,
  ListExecutionsCommand,
  type SFNClient,
} from '@aws-sdk/client-sfn';
import type { CliIo } from '../../command.ts';
import { formatDuration, oneLine } from '../../format.ts';
import type { SfnContext } from './sfn-context.ts';

const FIRST_POLL_MS = 2_000;
const MAX_POLL_MS = 30_000;
/** DescribeExecution is eventually consistent: a just-started execution may not be visible yet. */
const NOT_YET_VISIBLE_MS = 30_000;
const HISTORY_PAGE = 200;
const HISTORY_MAX_PAGES = 10;
const FAILED_CHILDREN_SHOWN = 3;
const TERMINAL = new Set(['SUCCEEDED', 'FAILED', 'TIMED_OUT', 'ABORTED']);

export interface FollowOptions {
  /** Tolerate ExecutionDoesNotExist for a short while (the execution was just started). */
  readonly justStarted?: boolean;
  /** Ignore terminal states until the redrive count exceeds this (a redrive was just made). */
  readonly afterRedriveCount?: number;
}

/** Polls until the execution stops (backoff capped at 30 s, giving up after maxWaitMs). */
export async function follow(ctx: SfnContext, executionArn: string, options: FollowOptions): Promise<number> {
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

async function report(ctx: SfnContext, execution: DescribeExecutionOutput): Promise<number> {
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
function printOutput(io: CliIo, execution: DescribeExecutionOutput): void {
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

/**
 * A Map Run's failures, as its ResultWriter files them under FAILED: "all failed, timed out, and
 * aborted" child executions (https://docs.aws.amazon.com/step-functions/latest/dg/input-output-resultwriter.html).
 * ListExecutions filters one status at a time.
 */
const FAILED_CHILD_STATUSES = ['FAILED', 'TIMED_OUT', 'ABORTED'] as const;

/** A Distributed Map's failures live in its child executions: show the first few. */
async function failedChildren(client: SFNClient, mapRunArn: string): Promise<string[]> {
  const children: ExecutionListItem[] = [];
  for (const statusFilter of FAILED_CHILD_STATUSES) {
    if (children.length >= FAILED_CHILDREN_SHOWN) break;
    const listed = await client.send(
      new ListExecutionsCommand({
        mapRunArn,
        statusFilter,
        maxResults: FAILED_CHILDREN_SHOWN - children.length,
      }),
    );
    children.push(...(listed.executions ?? []));
  }
  const lines: string[] = [];
  for (const child of children) {
    if (!child.executionArn) continue;
    const described = await client.send(new DescribeExecutionCommand({ executionArn: child.executionArn }));
    const partition =
      stringField(parseJson(described.input ?? ''), 'partition') ?? child.name ?? child.executionArn;
    const error = described.error ?? (child.status === 'FAILED' || !child.status ? 'failed' : child.status);
    lines.push(
      `  partition ${partition}: ${joinReason(error, described.cause ?? '')} (${child.executionArn})`,
    );
  }
  if (lines.length > 0)
    lines.unshift(`failed partitions (first ${FAILED_CHILDREN_SHOWN}, from Map Run ${mapRunArn}):`);
  return lines;
}

/** A Lambda error's cause is JSON ({errorType, errorMessage, trace}): keep the message. */
function joinReason(error: string, cause: string): string {
  const message = stringField(parseJson(cause), 'errorMessage') ?? cause;
  return message ? `${error}: ${oneLine(message)}` : error;
}

/** The string `name` of a parsed JSON object, if it has one. */
function stringField(json: unknown, name: string): string | undefined {
  if (json === null || typeof json !== 'object') return undefined;
  const value = (json as Record<string, unknown>)[name];
  return typeof value === 'string' ? value : undefined;
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
