/**
 * The `compactor` command line: demo, run, plan, recover, status, verify, visible, repair, release,
 * retention.
 * Exit codes: 0 ok; 1 the command ran and found a problem (a failed partition, a quarantine,
 * a suspect partition); 2 bad usage or configuration, or the command could not run.
 */

import type { TierName } from '../core/config.ts';
import { ErrorNames } from '../core/errors.ts';
import type { CliIo, Handler } from './command.ts';
import type { DoctorOptions } from './commands/doctor/doctor-options.ts';
import { SFN_COMMAND_NAMES } from './commands/sfn/sfn-options.ts';
import type { CommandName } from './options.ts';
import { readArgs } from './strict-args.ts';

export type { CliIo };

/** Runs one command; returns the exit code. Never calls process.exit (tests call it in-process). */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  const read = readArgs(argv);
  if (!read.ok) {
    io.err(
      'unknownCommand' in read
        ? `compactor: unknown command "${read.unknownCommand}".${read.nearestCommand === undefined ? '' : ` Did you mean ${read.nearestCommand}?`} Commands: ${COMMAND_NAMES.join(', ')}.`
        : `compactor: ${read.usage}`,
    );
    return 2;
  }
  const { command, options } = read;
  if (command === undefined) {
    io.out((await import('./usage.ts')).USAGE);
    return options.help ? 0 : 2;
  }
  if (options.help) {
    io.out((await import('./usage.ts')).commandUsage(command));
    return 0;
  }
  try {
    return await COMMANDS[command](options, io);
  } catch (error) {
    // The one place every failure becomes a one-line reason and an exit code.
    const e = error instanceof Error ? error : new Error(String(error));
    const fix = FIXES[e.name];
    // A usage or settings error's message says what to change; other errors are named.
    const kind = e.name === ErrorNames.Config ? '' : `${e.name}: `;
    io.err(`compactor ${command}: ${kind}${e.message}${fix === undefined ? '' : `; ${fix}`}`);
    return 2;
  }
}

/**
 * What to do about an error the AWS SDK raises, by its name (matched by name so that start-up
 * loads no SDK). The SDK looks for credentials along its default provider chain: environment
 * variables, SSO, web identity, the shared config and credentials files, then instance metadata
 * (https://docs.aws.amazon.com/sdk-for-javascript/v3/developer-guide/setting-credentials-node.html).
 */
const FIXES: Readonly<Record<string, string>> = {
  CredentialsProviderError:
    'no AWS credentials were found: run `aws configure` or `aws sso login`, or set AWS_PROFILE (or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)',
};

/**
 * Each command's module is imported when the command runs, never at start-up: the modules only
 * some commands need (the synthesized stack and its interpreter, the planner and protocol, DuckDB,
 * the AWS SDKs) stay unloaded for `--help`, `status` and `visible` (test/cli/startup.test.ts).
 */
const COMMANDS: Record<CommandName, Handler> = {
  demo: async (options, io) => (await import('./commands/demo.ts')).demoCommand(options, io),
  run: async (options, io) => (await import('./commands/run.ts')).runCommand(options, io),
  plan: async (options, io) => (await import('./commands/plan.ts')).planCommand(options, io),
  recover: async (options, io) => (await import('./commands/recover.ts')).recoverCommand(options, io),
  status: async (options, io) => (await import('./commands/status.ts')).statusCommand(options, io),
  receipts: async (options, io) => (await import('./commands/receipts.ts')).receiptsCommand(options, io),
  audit: async (options, io) => (await import('./commands/audit.ts')).auditCommand(options, io),
  verify: async (options, io) => (await import('./commands/verify.ts')).verifyCommand(options, io),
  visible: async (options, io) => (await import('./commands/visible.ts')).visibleCommand(options, io),
  repair: async (options, io) => (await import('./commands/repair.ts')).repairCommand(options, io),
  release: async (options, io) => (await import('./commands/release.ts')).releaseCommand(options, io),
  retention: async (options, io) => (await import('./commands/retention.ts')).retentionCommand(options, io),
  ...(Object.fromEntries(
    SFN_COMMAND_NAMES.map((name): [string, Handler] => [
      name,
      async (options, io) => (await import('./commands/sfn/sfn.ts')).SFN_COMMANDS[name](options, io),
    ]),
  ) as Record<(typeof SFN_COMMAND_NAMES)[number], Handler>),
  doctor: async (options, io) =>
    (await import('./commands/doctor/doctor.ts')).doctorCommand(options as DoctorOptions, io),
};

/** Every command the CLI runs, in the order its messages list them. */
export const COMMAND_NAMES: readonly string[] = Object.keys(COMMANDS);

export type { TierName };
