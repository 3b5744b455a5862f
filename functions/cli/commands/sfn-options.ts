/**
 * The options and usage text of `compactor start | watch | redrive` (sfn.ts), apart from
 * the commands so the CLI's usage and option parsing do not load the Step Functions SDK.
 */

import type { ParseArgsOptionsConfig } from 'node:util';

/** The commands sfn.ts runs. */
export const SFN_COMMAND_NAMES = ['start', 'watch', 'redrive'] as const;
export type SfnCommandName = (typeof SFN_COMMAND_NAMES)[number];

/** The parseArgs options these commands read; merge into the CLI's options (same types as its own). */
export const SFN_CLI_OPTIONS = {
  region: { type: 'string' },
  tier: { type: 'string' },
  now: { type: 'string' },
  'state-machine': { type: 'string' },
  execution: { type: 'string' },
  wait: { type: 'boolean' },
} as const satisfies ParseArgsOptionsConfig;

/** Lines for the CLI's usage text. */
export const SFN_USAGE = `Deployed state machine (region: --region, else the ARN's, else $AWS_REGION):
  start --tier hourly|daily|retention [--wait] [--now ISO]
                              start an execution of --state-machine ARN (or $COMPACTOR_STATE_MACHINE_ARN);
                              --wait follows it and exits 0 on success, 1 on failure
  watch [--execution ARN]     follow one execution, or list the state machine's 10 most recent
  redrive --execution ARN [--wait]
                              re-run a failed execution from its failed state, with the same input`;

export interface SfnCliOptions {
  readonly region?: string;
  readonly tier?: string;
  readonly now?: string;
  readonly 'state-machine'?: string;
  readonly execution?: string;
  readonly wait?: boolean;
}
