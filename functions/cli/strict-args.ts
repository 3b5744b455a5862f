/**
 * Reads the command line against the command's own options (options.ts): an option another
 * command takes, an unknown one, a missing or unexpected value each fail with one line of our
 * own that says what to do instead, never Node's parseArgs text.
 */

import { parseArgs } from 'node:util';
import {
  COMMAND_OPTIONS,
  type CommandName,
  commandsTaking,
  isCommandName,
  isOptionName,
  OPTIONS,
  type OptionName,
  optionsOf,
  type ParsedOptions,
  parseArgsConfig,
} from './options.ts';

export type ReadArgs =
  | { readonly ok: true; readonly command: CommandName | undefined; readonly options: ParsedOptions }
  /** The unknown command's name, for its own message, and the command it is a typo of, if any. */
  | { readonly ok: false; readonly unknownCommand: string; readonly nearestCommand?: CommandName }
  | { readonly ok: false; readonly usage: string };

const ALL = Object.keys(OPTIONS) as OptionName[];

/** Options whose absence from a command has a better answer than the commands that take them. */
const HINTS: Partial<Record<CommandName, Partial<Record<OptionName, string>>>> = {
  run: { 'dry-run': 'run has no --dry-run; `compactor plan --tier T` is the dry run' },
  recover: {
    'dry-run': 'recover has no dry run; `compactor status` lists what recover would resolve',
  },
};

export function readArgs(argv: readonly string[]): ReadArgs {
  // A lenient pass over every option finds the command and each option as typed; the command's
  // own table then decides what is allowed.
  const { positionals, tokens } = parseArgs({
    args: [...argv],
    options: parseArgsConfig(ALL),
    allowPositionals: true,
    strict: false,
    tokens: true,
  });
  const name = positionals[0];
  if (name === undefined || name === 'help') {
    const help = name === 'help' || tokens.some((t) => t.kind === 'option' && t.name === 'help');
    return { ok: true, command: undefined, options: { help } };
  }
  if (!isCommandName(name)) {
    const near = nearest(name, Object.keys(COMMAND_OPTIONS) as CommandName[]);
    return { ok: false, unknownCommand: name, ...(near === undefined ? {} : { nearestCommand: near }) };
  }
  const allowed = optionsOf(name);
  const see = `See compactor ${name} --help.`;
  for (const token of tokens) {
    if (token.kind !== 'option') continue;
    const raw = token.rawName;
    if (!isOptionName(token.name)) {
      const own = nearest(token.name, allowed);
      const other = own === undefined ? nearest(token.name, ALL) : undefined;
      // A near option of another command is no fix for this one: say whose it is.
      const hint =
        own !== undefined
          ? ` Did you mean --${own}?`
          : other !== undefined
            ? ` The nearest, --${other}, is not an option of ${name} (taken by ${commandsTaking(other).join(', ')}).`
            : '';
      return { ok: false, usage: `unknown option ${raw}.${hint} ${see}` };
    }
    const option = token.name;
    if (!allowed.includes(option)) {
      const special = HINTS[name]?.[option];
      if (special !== undefined) return { ok: false, usage: special };
      const takers = commandsTaking(option);
      return {
        ok: false,
        usage: `${name} takes no --${option} (${takers.length === 1 ? 'only' : 'taken by'} ${takers.join(', ')}). ${see}`,
      };
    }
    const def = OPTIONS[option];
    if (def.type === 'string') {
      if (token.value === undefined) return { ok: false, usage: `--${option} needs a value. ${see}` };
      // parseArgs refuses a separate value that starts with '-': most often a forgotten value.
      if (!token.inlineValue && token.value.startsWith('-')) {
        return {
          ok: false,
          usage: `--${option} needs a value, not ${token.value} (write --${option}=${token.value} if that is the value). ${see}`,
        };
      }
    } else if (token.inlineValue) {
      return { ok: false, usage: `--${option} takes no value. ${see}` };
    }
  }
  if (positionals.length > 1) return { ok: false, usage: `unexpected argument "${positionals[1]}". ${see}` };
  try {
    const parsed = parseArgs({
      args: [...argv],
      options: parseArgsConfig(allowed),
      allowPositionals: true,
      strict: true,
    });
    return { ok: true, command: name, options: parsed.values as ParsedOptions };
  } catch {
    // Every case parseArgs refuses is caught above; this line stands in for its text if not.
    return { ok: false, usage: `cannot read the options of ${name}. ${see}` };
  }
}

/** The closest name within a typo's reach (transpositions count once), if any. */
function nearest<Name extends string>(typed: string, names: readonly Name[]): Name | undefined {
  const reach = Math.max(1, Math.min(3, Math.floor(typed.length / 3)));
  let best: { name: Name; distance: number } | undefined;
  for (const name of names) {
    const distance = editDistance(typed, name);
    if (distance <= reach && (best === undefined || distance < best.distance)) best = { name, distance };
  }
  return best?.name;
}

/** Optimal string alignment distance: insertions, deletions, substitutions, adjacent swaps. */
function editDistance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const row = d[i] as number[];
      const up = d[i - 1] as number[];
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      row[j] = Math.min((up[j] as number) + 1, (row[j - 1] as number) + 1, (up[j - 1] as number) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        row[j] = Math.min(row[j] as number, ((d[i - 2] as number[])[j - 2] as number) + 1);
      }
    }
  }
  return (d[a.length] as number[])[b.length] as number;
}
