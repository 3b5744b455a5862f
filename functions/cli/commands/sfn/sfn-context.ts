/**
 * What `compactor start | watch | redrive` (sfn.ts) act on, read from the options: the tier,
 * the time, the state machine or execution ARN, the region and its client; and the one-line
 * answer, with its fix, to each usage error and Step Functions error an operator can act on.
 */

import { setTimeout as delay } from 'node:timers/promises';
import { SFNClient, SFNServiceException } from '@aws-sdk/client-sfn';
import { isExecutionArn } from '../../../adapters/execution-arn.ts';
import { JOB_KINDS, type JobKind } from '../../../core/config.ts';
import { ConfigError } from '../../../core/errors.ts';
import type { CliIo } from '../../command.ts';
import { oneLine } from '../../format.ts';
import type { SfnCliOptions } from './sfn-options.ts';

/** What the start, watch and redrive commands are given (tests pass stand-ins). */
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

const STATE_MACHINE_ENV = 'COMPACTOR_STATE_MACHINE_ARN';
/** A state machine, or one of its versions or aliases (StartExecution accepts all three). */
const STATE_MACHINE_ARN = /^arn:aws[a-z-]*:states:[a-z0-9-]+:\d{12}:stateMachine:[^:]+(?::[^:]+)?$/;

const DEFAULT_MAX_WAIT_MS = 2 * 3_600_000;

export interface SfnContext {
  readonly client: SFNClient;
  readonly region: string;
  readonly sleep: (ms: number) => Promise<void>;
  readonly maxWaitMs: number;
  readonly io: CliIo;
}

export function parseTier(value: string | undefined): JobKind {
  if (value === undefined) throw new ConfigError(`--tier is required: ${JOB_KINDS.join(', ')}`);
  if (!JOB_KINDS.includes(value as JobKind))
    throw new ConfigError(`--tier ${value}: use ${JOB_KINDS.join(', ')}`);
  return value as JobKind;
}

export function parseNow(value: string): string {
  const at = Date.parse(value);
  if (Number.isNaN(at)) throw new ConfigError(`--now ${value}: use an ISO time like 2025-01-15T12:00:00Z`);
  return new Date(at).toISOString();
}

export function requireStateMachine(options: SfnCliOptions, deps: SfnCommandDeps): string {
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

export function requireExecution(options: SfnCliOptions): string {
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

export function context(options: SfnCliOptions, io: CliIo, deps: SfnCommandDeps, arn: string): SfnContext {
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
export async function guarded(command: string, io: CliIo, body: () => Promise<number>): Promise<number> {
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
