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
 * This file runs the checks in order. Its parts: doctor-target.ts (the form asked for and the
 * stack outputs), core/canary.ts (the canary table, shared with the stack's scheduled canary),
 * doctor-execution.ts (the scoped
 * execution), doctor-schedules.ts (the schedules), doctor-report.ts (the rows and their output);
 * each cites the AWS behaviour it relies on.
 *
 * AWS behaviour this file relies on: DescribeStateMachine returns the deployed definition (ASL
 * JSON) https://docs.aws.amazon.com/step-functions/latest/apireference/API_DescribeStateMachine.html.
 */

import { randomBytes } from 'node:crypto';
import { SchedulerClient } from '@aws-sdk/client-scheduler';
import { DescribeStateMachineCommand, SFNClient } from '@aws-sdk/client-sfn';
import {
  type Canary,
  checkCanaryRows,
  checkCanaryState,
  releaseCanary,
  type Sql,
  seedCanary,
} from '../../../core/canary.ts';
import { TIERS } from '../../../core/config.ts';
import { ConfigError } from '../../../core/errors.ts';
import { type ProbeReport, probeStore } from '../../../core/store-probe/store-probe.ts';
import { type SynthesizedWorkflow, synthesizeWorkflow } from '../../../local-runner/run.ts';
import type { CliIo } from '../../command.ts';
import { buildEngine, parseStackContext, parseWhole } from '../../context.ts';
import { DOCTOR_TIMEOUT_S } from '../../options.ts';
import { definitionScopes, judgeExecution, runDeployed, runLocal } from './doctor-execution.ts';
import type { DoctorDeps, DoctorOptions } from './doctor-options.ts';
import { guard, printReport, Report } from './doctor-report.ts';
import { checkScheduledCanary, checkSchedules } from './doctor-schedules.ts';
import { type Mode, resolveMode, resolveTarget, type Target } from './doctor-target.ts';

export type { DoctorDeps, DoctorOptions } from './doctor-options.ts';
// The usage text lives apart, so the CLI shows it without loading the SDKs.
export { DOCTOR_USAGE } from './doctor-options.ts';

/** Runs the doctor; returns the exit code. */
export async function doctorCommand(
  options: DoctorOptions,
  io: CliIo,
  deps: DoctorDeps = {},
): Promise<number> {
  let mode: Mode;
  let timeoutMs: number;
  let stackContext: Record<string, unknown>;
  try {
    mode = resolveMode(options, deps.env ?? process.env);
    timeoutMs =
      (options.timeout === undefined ? DOCTOR_TIMEOUT_S : parseWhole('timeout', options.timeout)) * 1000;
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
  printReport(report, options.json, io);
  return report.failed() ? 1 : 0;
}

/** The deployed stack's Step Functions and Scheduler clients; absent for a local run. */
interface Aws {
  readonly arn: string;
  readonly region: string;
  readonly sfn: SFNClient;
  readonly scheduler: SchedulerClient;
}

interface DiagnoseSettings {
  readonly timeoutMs: number;
  readonly stackContext: Record<string, unknown>;
}

const CANARY_CHECKS = ['store probe', 'canary execution', 'canary rows', 'no state left', 'canary removed'];

function skipRest(report: Report, checks: readonly string[], why: string): void {
  for (const check of checks) report.add(check, 'skipped', why);
}

/** Runs the checks in order, each adding its rows; one that cannot go on marks the rest skipped. */
async function diagnose(
  mode: Mode,
  options: DoctorOptions,
  io: CliIo,
  deps: DoctorDeps,
  report: Report,
  settings: DiagnoseSettings,
): Promise<void> {
  const now = deps.now ?? (() => Date.now());
  const randomHex = () => randomBytes(4).toString('hex');
  const target = await resolveTarget(mode, options, io, deps, report, settings.stackContext);
  if (!target) {
    skipRest(report, [...CANARY_CHECKS, 'schedules'], 'the stack could not be read');
    return;
  }
  const aws: Aws | undefined =
    target.stateMachineArn !== undefined && target.region !== undefined
      ? {
          arn: target.stateMachineArn,
          region: target.region,
          sfn: deps.sfn ?? new SFNClient({ region: target.region }),
          scheduler: deps.scheduler ?? new SchedulerClient({ region: target.region }),
        }
      : undefined;
  const runner = await checkStateMachine(report, aws, settings.stackContext);
  if (runner === undefined) {
    skipRest(report, CANARY_CHECKS, 'the state machine cannot run a scoped execution');
  } else if (await checkStoreProbe(report, target, randomHex)) {
    await checkCanary({ report, target, runner, options, io, deps, settings, now, randomHex });
  } else {
    skipRest(report, CANARY_CHECKS.slice(1), 'the store lacks a guarantee: nothing was written');
  }
  if (aws) await scheduleRows(report, aws, target, now());
  else report.add('schedules', 'n/a', 'a local run has no schedules');
}

/** What runs the canary's execution: the deployed state machine, or the synthesized definition locally. */
type Runner = { readonly aws: Aws } | { readonly workflow: SynthesizedWorkflow };

/**
 * The definition the canary runs through must pass `only` to Plan, or the canary execution would
 * plan the whole lake: the deployed one (AWS), or the one cdk synthesizes (local). Undefined when
 * the deployed one does not.
 */
async function checkStateMachine(
  report: Report,
  aws: Aws | undefined,
  stackContext: Record<string, unknown>,
): Promise<Runner | undefined> {
  if (!aws) {
    const workflow = await synthesizeWorkflow(stackContext);
    if (!definitionScopes(JSON.stringify(workflow.definition))) {
      throw new Error('the synthesized definition does not pass "only" to Plan');
    }
    report.add(
      'state machine',
      'pass',
      'the definition cdk synthesizes, run locally with each Lambda in-process',
    );
    return { workflow };
  }
  const scoped = await guard(report, 'state machine', async () => {
    const described = await aws.sfn.send(new DescribeStateMachineCommand({ stateMachineArn: aws.arn }));
    if (!definitionScopes(described.definition ?? '{}')) {
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
  return scoped ? { aws } : undefined;
}

/** The store honours every guarantee the protocol rests on; the doctor writes nothing otherwise. */
async function checkStoreProbe(report: Report, target: Target, randomHex: () => string): Promise<boolean> {
  const probe = await probeStore({
    store: target.store,
    stateRoot: target.config.layout.stateRoot,
    randomHex,
  });
  report.add('store probe', probe.ok ? 'pass' : 'FAIL', probeDetail(probe), probe.ok ? '' : probeFix(probe));
  return probe.ok;
}

interface CanaryRun {
  readonly report: Report;
  readonly target: Target;
  readonly runner: Runner;
  readonly options: DoctorOptions;
  readonly io: CliIo;
  readonly deps: DoctorDeps;
  readonly settings: DiagnoseSettings;
  readonly now: () => number;
  readonly randomHex: () => string;
}

/** Writes the canary table, runs one execution scoped to it, checks what it left, and removes it. */
async function checkCanary(run: CanaryRun): Promise<void> {
  const { report, target, io, now } = run;
  const { engine, workDir } = await buildEngine(run.options);
  let canary: Canary | undefined;
  let accounted = false;
  try {
    const id = run.randomHex();
    const sql: Sql = engine;
    const seeded = await seedCanary(target.store, target.config, sql, id, now());
    canary = seeded;
    io.err(
      `doctor: wrote canary table ${canary.table} (${canary.keys.length} raw files, ${canary.rows} rows) in ${canary.partition}`,
    );
    const input = { tier: 'hourly', now: seeded.planAt, only: canary.table };
    const ended =
      'aws' in run.runner
        ? await runDeployed(run.runner.aws, input, id, io, run.deps, run.settings.timeoutMs, now)
        : await runLocal(run.runner.workflow, target, engine, workDir, input, io);
    const execOk = judgeExecution(report, ended, canary);
    if (ended.status === 'RUNNING') {
      skipRest(report, ['canary rows', 'no state left'], 'the execution is still running');
      report.add(
        'canary removed',
        'skipped',
        `kept under ${canary.prefix} while its execution runs`,
        `once it ends, run compactor recover and delete ${canary.prefix}`,
      );
    } else {
      await checkCanaryAfter(report, target, sql, canary, execOk);
    }
    accounted = true;
  } finally {
    await engine.close();
    if (canary && !accounted)
      io.err(`doctor: the canary is left under ${canary.prefix}; delete it once no execution runs`);
  }
}

/** After the execution: the canary's rows exactly, no state left, and the canary removed. */
async function checkCanaryAfter(
  report: Report,
  target: Target,
  sql: Sql,
  canary: Canary,
  execOk: boolean,
): Promise<void> {
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
    state.ok ? '' : 'compactor status shows it; compactor recover resolves a manifest whose execution ended',
  );
  const removal = await releaseCanary(target.store, target.config, canary);
  if (removal.held) {
    report.add(
      'canary removed',
      'skipped',
      removal.detail,
      `run compactor recover (or wait for the next cycle), then delete ${canary.prefix}`,
    );
    return;
  }
  report.add(
    'canary removed',
    removal.ok ? 'pass' : 'FAIL',
    removal.detail,
    removal.ok ? '' : `delete ${canary.prefix} by hand`,
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

async function scheduleRows(report: Report, aws: Aws, target: Target, now: number): Promise<void> {
  const stack = target.stackConfig;
  const expected = stack
    ? [
        ...TIERS.filter((t) => stack.tiers[t].enabled),
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
  if (stack?.canary.enabled !== true) return;
  await guard(report, 'canary schedule', async () => {
    const rows = await checkScheduledCanary({
      scheduler: aws.scheduler,
      sfn: aws.sfn,
      canaryStateMachineArn: target.canaryStateMachineArn,
      ...(target.group !== undefined ? { group: target.group } : {}),
      now,
    });
    for (const row of rows) report.add(row.check, row.result, row.detail, row.fix);
  });
}
