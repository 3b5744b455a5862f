/**
 * The names, usage text and options type of `compactor start | watch | redrive` (sfn.ts), apart
 * from the commands so the CLI's usage and option parsing do not load the Step Functions SDK
 * (the options themselves are in ../options.ts).
 */

/** The commands sfn.ts runs. */
export const SFN_COMMAND_NAMES = ['start', 'watch', 'redrive'] as const;
export type SfnCommandName = (typeof SFN_COMMAND_NAMES)[number];

/** Lines for the CLI's usage text. */
export const SFN_USAGE = `Deployed state machine (region: --region, else the ARN's, else $AWS_REGION):
  start --tier hourly|daily|monthly|retention [--wait] [--now ISO]
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
