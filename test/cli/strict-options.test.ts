/**
 * Strict commands: every command x every option, from the tables in functions/cli/options.ts. An
 * option a command takes reaches the command with its value; one it does not take exits 2 with
 * a one-line hint naming the commands that take it, and the command never runs. The commands'
 * modules are stand-ins that record their call, so nothing runs against a lake or AWS.
 */

import { readFileSync } from 'node:fs';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { COMMAND_NAMES } from '../../functions/cli/compactor.ts';
import {
  COMMAND_OPTIONS,
  type CommandName,
  commandsTaking,
  DEMO_QUIET_SECONDS,
  OPTIONS,
  type OptionName,
  optionsOf,
} from '../../functions/cli/options.ts';
import { cli } from '../support/cli-lake.ts';

const { calls, recorder } = vi.hoisted(() => {
  const calls: { command: string; options: Record<string, unknown> }[] = [];
  const recorder = (command: string) => async (options: Record<string, unknown>) => {
    calls.push({ command, options });
    return 0;
  };
  return { calls, recorder };
});

vi.mock('../../functions/cli/commands/demo.ts', () => ({ demoCommand: recorder('demo') }));
vi.mock('../../functions/cli/commands/run.ts', () => ({ runCommand: recorder('run') }));
vi.mock('../../functions/cli/commands/plan.ts', () => ({ planCommand: recorder('plan') }));
vi.mock('../../functions/cli/commands/recover.ts', () => ({ recoverCommand: recorder('recover') }));
vi.mock('../../functions/cli/commands/status.ts', () => ({ statusCommand: recorder('status') }));
vi.mock('../../functions/cli/commands/receipts.ts', () => ({ receiptsCommand: recorder('receipts') }));
vi.mock('../../functions/cli/commands/audit.ts', () => ({ auditCommand: recorder('audit') }));
vi.mock('../../functions/cli/commands/verify.ts', () => ({ verifyCommand: recorder('verify') }));
vi.mock('../../functions/cli/commands/visible.ts', () => ({ visibleCommand: recorder('visible') }));
vi.mock('../../functions/cli/commands/repair.ts', () => ({ repairCommand: recorder('repair') }));
vi.mock('../../functions/cli/commands/release.ts', () => ({ releaseCommand: recorder('release') }));
vi.mock('../../functions/cli/commands/retention.ts', () => ({ retentionCommand: recorder('retention') }));
vi.mock('../../functions/cli/commands/sfn/sfn.ts', () => ({
  SFN_COMMANDS: { start: recorder('start'), watch: recorder('watch'), redrive: recorder('redrive') },
}));
vi.mock('../../functions/cli/commands/doctor/doctor.ts', () => ({ doctorCommand: recorder('doctor') }));

const COMMANDS = Object.keys(COMMAND_OPTIONS) as CommandName[];
const ALL = Object.keys(OPTIONS) as OptionName[];

/** The option as typed, with a value when it takes one, and the value the command should see. */
function typed(option: OptionName): { argv: string[]; value: unknown } {
  return OPTIONS[option].type === 'string'
    ? { argv: [`--${option}`, 'some-value'], value: 'some-value' }
    : { argv: [`--${option}`], value: true };
}

beforeEach(() => {
  calls.length = 0;
});

describe('the option tables', () => {
  it('name every command the CLI dispatches, and only options that exist', () => {
    expect([...COMMANDS].sort()).toEqual([...COMMAND_NAMES].sort());
    for (const command of COMMANDS) {
      for (const option of COMMAND_OPTIONS[command]) expect(ALL, `${command} --${option}`).toContain(option);
    }
  });

  it('give every option to some command, and are not one table shared by all', () => {
    for (const option of ALL) expect(commandsTaking(option), `--${option}`).not.toEqual([]);
    // Known answers, so a table shared again (or emptied) fails here and not only below.
    const refused: [CommandName, OptionName][] = [
      ['run', 'dry-run'],
      ['recover', 'dry-run'],
      ['status', 'tier'],
      ['status', 'dry-run'],
      ['demo', 'store'],
      ['plan', 'concurrency'],
      ['verify', 'now'],
      ['start', 'store'],
    ];
    for (const [command, option] of refused)
      expect(optionsOf(command), `${command} --${option}`).not.toContain(option);
    const taken: [CommandName, OptionName][] = [
      ['run', 'tier'],
      ['plan', 'tier'],
      ['repair', 'dry-run'],
      ['retention', 'dry-run'],
      ['visible', 'format'],
      ['demo', 'dir'],
      ['doctor', 'stack'],
      ['redrive', 'execution'],
    ];
    for (const [command, option] of taken)
      expect(optionsOf(command), `${command} --${option}`).toContain(option);
  });
});

describe('every command x every option', () => {
  const cases = COMMANDS.flatMap((command) => ALL.map((option) => [command, option] as const));

  it.each(cases)('%s --%s', async (command, option) => {
    const { argv, value } = typed(option);
    const result = await cli(command, ...argv);
    if (option === 'help') {
      // Every command takes --help: its own usage, and the command does not run.
      expect(result.code).toBe(0);
      expect(result.text).toContain(`Usage: compactor ${command}`);
      expect(calls).toEqual([]);
      return;
    }
    if (optionsOf(command).includes(option)) {
      expect(result.err, result.err.join('\n')).toEqual([]);
      expect(result.code).toBe(0);
      expect(calls).toHaveLength(1);
      expect(calls[0]?.command).toBe(command);
      expect(calls[0]?.options[option]).toEqual(value);
      // The command sees only options it takes.
      for (const key of Object.keys(calls[0]?.options ?? {})) expect(optionsOf(command)).toContain(key);
      return;
    }
    expect(result.code).toBe(2);
    expect(result.out).toEqual([]);
    expect(result.err).toHaveLength(1);
    const line = result.err[0] ?? '';
    expect(line).not.toContain('\n');
    expect(line).not.toContain('positional argument');
    if (option === 'dry-run' && (command === 'run' || command === 'recover')) {
      expect(line).toContain(
        command === 'run' ? '`compactor plan --tier T` is the dry run' : '`compactor status`',
      );
    } else {
      expect(line).toContain(`${command} takes no --${option}`);
      for (const other of commandsTaking(option)) expect(line).toContain(other);
    }
    expect(calls, 'the command did not run').toEqual([]);
  });
});

describe('parse failures say what to do, never in parseArgs words', () => {
  it.each([
    [['run', '--teir', 'hourly'], 'unknown option --teir. Did you mean --tier?'],
    [
      ['plan', '--tier', 'hourly', '--dryrun'],
      'unknown option --dryrun. The nearest, --dry-run, is not an option of plan (taken by repair, release, retention).',
    ],
    [
      ['status', '--teir', 'hourly'],
      'unknown option --teir. The nearest, --tier, is not an option of status (taken by run, plan, start).',
    ],
    [['status', '--sotre', 'x'], 'Did you mean --store?'],
    [['status', '--bogus'], 'unknown option --bogus.'],
    [['plan', '-x'], 'unknown option -x.'],
    [['run', '--tier'], '--tier needs a value'],
    [['run', '--tier', '--json'], '--tier needs a value, not --json'],
    [['repair', '--dry-run=yes'], '--dry-run takes no value'],
    [['status', 'extra'], 'unexpected argument "extra"'],
  ])('%j', async (argv, message) => {
    const result = await cli(...argv);
    expect(result.code).toBe(2);
    expect(result.err).toHaveLength(1);
    expect(result.err[0]).toContain(message);
    expect(result.err[0]).not.toMatch(/positional argument|argument missing|ambiguous|Option '/);
    expect(calls).toEqual([]);
  });

  it('an unknown command still lists the commands, and names the one it is a typo of', async () => {
    const result = await cli('compact', '--store', 'x');
    expect(result.code).toBe(2);
    expect(result.err[0]).toContain('unknown command "compact"');
    expect(result.err[0]).not.toContain('Did you mean');
    const typo = await cli('stauts', '--store', 'x');
    expect(typo.code).toBe(2);
    expect(typo.err[0]).toContain('unknown command "stauts". Did you mean status? Commands: demo, run,');
    expect(calls).toEqual([]);
  });
});

describe("a command's --help shows the defaults it applies", () => {
  /** The lines of `--name` in `command --help`: its label line and those indented under it. */
  async function optionHelp(command: CommandName, name: OptionName): Promise<string> {
    const lines = (await cli(command, '--help')).text.split('\n');
    const start = lines.findIndex((line) => line.trimStart().startsWith(`--${name}`));
    let end = start + 1;
    while (end < lines.length && /^ {6,}\S/.test(lines[end] ?? '')) end++;
    return lines.slice(start, end).join(' ');
  }

  it("demo: --quiet 0, the value demo runs with, not cdk.json's quietSeconds", async () => {
    const help = await optionHelp('demo', 'quiet');
    expect(help).toContain(`default ${DEMO_QUIET_SECONDS}`);
    expect(help).not.toContain('cdk.json');
    expect(await optionHelp('run', 'quiet')).toContain('cdk.json: quietSeconds');
  });

  it("start, watch, redrive: the ARN's region; doctor: no state machine from the environment", async () => {
    for (const command of ['start', 'watch', 'redrive'] as const) {
      expect(await optionHelp(command, 'region')).toContain("default the ARN's");
    }
    expect(await optionHelp('plan', 'region')).toContain('default $AWS_REGION or us-east-1');
    expect(await optionHelp('start', 'state-machine')).toContain('$COMPACTOR_STATE_MACHINE_ARN');
    expect(await optionHelp('doctor', 'state-machine')).not.toContain('default');
    expect(await optionHelp('doctor', 'region')).toContain('--stack $AWS_REGION');
  });
});

describe('docs/cli.md', () => {
  it("lists under each command exactly the options of the command's table", () => {
    const page = readFileSync(new URL('../../docs/cli.md', import.meta.url), 'utf8');
    const listed = new Map<string, string[]>();
    for (const section of page.split(/^### /m).slice(1)) {
      const command = /^`compactor ([a-z-]+)`/.exec(section)?.[1];
      const line = /^Options: (.*)$/m.exec(section)?.[1];
      if (command !== undefined && line !== undefined) {
        listed.set(
          command,
          [...line.matchAll(/`--([a-z-]+)`/g)].map((m) => m[1] ?? ''),
        );
      }
    }
    for (const command of COMMANDS)
      expect(listed.get(command), command).toEqual([...COMMAND_OPTIONS[command]]);
  });
});
