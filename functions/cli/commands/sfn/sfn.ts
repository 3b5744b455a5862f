/**
 * `compactor start | watch | redrive`: the deployed state machine from the command line.
 *
 * Same contract as the other commands: `(options, io) => exit code`, 0 ok, 1 the execution
 * failed (timed out, was aborted), 2 bad usage or the request could not be made, with a
 * one-line reason naming the fix. Progress goes to `err`, results to `out`. Errors this file
 * does not know propagate to the CLI's single handler (it prints them on one line, exit 2).
 *
 * The commands are here; what they act on (options, region, client) and their error answers are
 * in sfn-context.ts, following an execution and saying how it ended in sfn-follow.ts.
 */

import { randomBytes } from 'node:crypto';
import {
  DescribeExecutionCommand,
  ListExecutionsCommand,
  RedriveExecutionCommand,
  StartExecutionCommand,
} from '@aws-sdk/client-sfn';
import type { JobKind } from '../../../core/config.ts';
import type { CliIo } from '../../command.ts';
import { table } from '../../format.ts';
import {
  context,
  guarded,
  parseNow,
  parseTier,
  requireExecution,
  requireStateMachine,
  type SfnCommandDeps,
} from './sfn-context.ts';
import { follow } from './sfn-follow.ts';
import type { SfnCliOptions, SfnCommandName } from './sfn-options.ts';

// The names and usage text live apart, so the CLI shows them without loading the SDK.
export { SFN_COMMAND_NAMES, SFN_USAGE, type SfnCliOptions } from './sfn-options.ts';

export type SfnCommand = (options: SfnCliOptions, io: CliIo, deps?: SfnCommandDeps) => Promise<number>;

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

function isoSeconds(date: Date | undefined): string {
  return date ? `${date.toISOString().slice(0, 19)}Z` : '';
}
