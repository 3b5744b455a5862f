/**
 * `compactor doctor`'s canary execution (doctor.ts): whether a definition can run one scoped to
 * the canary, running it (deployed: started and polled; local: the synthesized definition run
 * in-process), and the "canary execution" row that judges how it ended.
 *
 * AWS behaviour it relies on: StartExecution with a name and JSON input
 * https://docs.aws.amazon.com/step-functions/latest/apireference/API_StartExecution.html;
 * DescribeExecution for its status, output, error and cause; it is eventually consistent, so a
 * just-started execution may briefly not exist
 * https://docs.aws.amazon.com/step-functions/latest/apireference/API_DescribeExecution.html.
 */

import { setTimeout as delay } from 'node:timers/promises';
import {
  DescribeExecutionCommand,
  type DescribeExecutionOutput,
  ExecutionDoesNotExist,
  type SFNClient,
  StartExecutionCommand,
} from '@aws-sdk/client-sfn';
import type { Canary } from '../../../core/canary.ts';
import { systemClock } from '../../../core/engine.ts';
import { runWorkflowLocally, type SynthesizedWorkflow } from '../../../local-runner/run.ts';
import type { PlanOutput } from '../../../plan.ts';
import type { CliIo } from '../../command.ts';
import type { buildEngine } from '../../context.ts';
import { formatDuration, oneLine } from '../../format.ts';
import { consoleUrl } from '../sfn/sfn.ts';
import type { DoctorDeps } from './doctor-options.ts';
import type { Report } from './doctor-report.ts';
import type { Target } from './doctor-target.ts';

const FIRST_POLL_MS = 2_000;
const MAX_POLL_MS = 15_000;
/** DescribeExecution is eventually consistent: a just-started execution may not be visible yet. */
const NOT_YET_VISIBLE_MS = 30_000;
const TERMINAL = new Set(['SUCCEEDED', 'FAILED', 'TIMED_OUT', 'ABORTED']);
/** The states the scoped input passes through (cdk/constructs/compaction-workflow.ts STATES). */
const DEFAULTS_STATE = 'Defaults';
const PLAN_STATE = 'Plan';

/** ISO time of epoch milliseconds: execution names and the input's `now`. */
export const iso = (ms: number) => new Date(ms).toISOString();

/** Whether a definition defaults `only` and passes it to Plan (what a scoped execution needs). */
export function definitionScopes(text: string): boolean {
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

/** How an execution ended (or that it was still running at the timeout). */
export interface Ended {
  readonly status: string;
  readonly name: string;
  readonly took: number;
  readonly output?: { readonly plan?: PlanOutput; readonly summary?: Record<string, unknown> };
  readonly error?: string;
  readonly cause?: string;
  /** The command that shows more (watch for AWS). */
  readonly more: string;
}

export async function runDeployed(
  aws: { readonly arn: string; readonly region: string; readonly sfn: SFNClient },
  input: Record<string, string>,
  id: string,
  io: CliIo,
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

export async function runLocal(
  workflow: SynthesizedWorkflow,
  target: Target,
  engine: Awaited<ReturnType<typeof buildEngine>>['engine'],
  workDir: string,
  input: { readonly now: string; readonly only: string },
  io: CliIo,
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
export function judgeExecution(report: Report, ended: Ended, canary: Canary): boolean {
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
