/**
 * The `compactor` command line's options: every option defined once (parseArgs type, value name,
 * help line), and per command the names of the options it reads. The parseArgs table of each
 * command and the option lines of `--help` are derived from these; an option a command does not
 * read fails before the command runs (strict-args.ts). Imports nothing heavy: --help reads it.
 */

import type { ParseArgsOptionsConfig } from 'node:util';

interface OptionDef {
  readonly type: 'string' | 'boolean';
  readonly short?: string;
  /** The value's placeholder in the help line. */
  readonly value?: string;
  /** The help text; continuation lines are indented under the first. */
  readonly help: string;
}

/** Every option of every command, in the order `--help` lists them. */
export const OPTIONS = {
  store: {
    type: 'string',
    value: '<folder | s3://bucket/prefix>',
    help: 'the lake (required except for demo)',
  },
  endpoint: {
    type: 'string',
    value: 'URL',
    help: 'S3-compatible endpoint (path-style), with an s3:// store',
  },
  region: { type: 'string', value: 'REGION', help: 'AWS region (default $AWS_REGION or us-east-1)' },
  layout: {
    type: 'string',
    value: 'arc|hive|firehose|TEMPLATE',
    help: "partition layout (default arc), e.g. '{table}/dt={YYYY}-{MM}-{DD}/hour={HH}/'",
  },
  'partition-segments': {
    type: 'string',
    value: 'a,b',
    help: "the template segments your readers map to partition columns (default the\nlayout's; '' for glob readers only): no tier writes above the finest one",
  },
  'data-suffix': {
    type: 'string',
    value: 'SUFFIX',
    help: "suffix of raw input names (default the layout's; '' = any name, read as\nParquet by its magic and footer)",
  },
  now: {
    type: 'string',
    value: 'ISO-TIME',
    help: 'act as if at this time (plans against it; leases still run in real time)',
  },
  tier: {
    type: 'string',
    value: 'TIER',
    help: 'hourly, daily, monthly or retention (a compaction tier also scopes\n--min-files/--min-age)',
  },
  monthly: {
    type: 'boolean',
    help: "turn the opt-in monthly tier on (cdk.json: tiers.monthly.enabled);\nthen the daily tier hands a month's daily files to it",
  },
  'min-files': {
    type: 'string',
    value: 'N',
    help: 'files a folder needs before it is compacted (hourly 10, daily 2, monthly 2)',
  },
  'min-age': {
    type: 'string',
    value: 'SECONDS',
    help: 'how long after its period ends a folder becomes eligible (3600 / 10800 / 86400)',
  },
  quiet: {
    type: 'string',
    value: 'SECONDS',
    help: 'skip folders holding a file written less than this ago (300)',
  },
  concurrency: {
    type: 'string',
    value: 'N',
    help: "partitions compacted at once (2): the state machine's Map MaxConcurrency",
  },
  context: {
    type: 'string',
    value: 'JSON',
    help: 'stack settings over cdk.json\'s "compactor" context, as `cdk deploy -c`\ngives them, e.g. \'{"tiers":{"hourly":{"minFiles":20}}}\'; the flags override\nboth (docs/configuration.md)',
  },
  'target-size': { type: 'string', value: 'SIZE', help: 'split outputs at about this size (512MiB)' },
  'row-group-size': { type: 'string', value: 'N', help: 'output row group size in rows (122880)' },
  'max-job-bytes': { type: 'string', value: 'SIZE', help: 'input bytes one job may take (2GiB)' },
  'max-job-files': { type: 'string', value: 'N', help: 'input files one job may take (5000)' },
  'sort-keys': { type: 'string', value: 'a,b', help: 'sort keys after the time column' },
  'time-column': { type: 'string', value: 'NAME', help: 'time column (time)' },
  retention: {
    type: 'string',
    value: 'RULES',
    help: "days to keep per table path, most specific wins; * for every other\ntable, e.g. 'mydb/cpu/=30,mydb/=90,*=365' (default: none, retention off)",
  },
  'retention-buffer': {
    type: 'string',
    value: 'HOURS',
    help: 'a file goes only once its hour/day ended this long after its days (24)',
  },
  'memory-limit': { type: 'string', value: 'SIZE', help: 'DuckDB memory limit (e.g. 1GB; spills beyond it)' },
  threads: { type: 'string', value: 'N', help: 'DuckDB threads' },
  'work-dir': { type: 'string', value: 'DIR', help: 'local scratch folder (default: system temp)' },
  'unsafe-single-writer-store': {
    type: 'boolean',
    help: 'skip the store probe (run, recover, repair, retention refuse a store\nthat ignores conditional writes, copies or deletes); only for a store\nnothing else writes to or compacts; warned on every run',
  },
  'dry-run': { type: 'boolean', help: 'report what would change and change nothing' },
  dir: { type: 'string', value: 'DIR', help: 'the demo lake folder (default .demo/lake)' },
  format: {
    type: 'string',
    value: 'F',
    help: 'a statement reading exactly the visible files: duckdb, clickhouse,\npolars, spark or athena',
  },
  sql: { type: 'boolean', help: 'the same as --format duckdb' },
  'state-machine': {
    type: 'string',
    value: 'ARN',
    help: 'the deployed state machine (default $COMPACTOR_STATE_MACHINE_ARN)',
  },
  execution: { type: 'string', value: 'ARN', help: 'an execution of the state machine' },
  wait: { type: 'boolean', help: 'follow the execution; exit 0 on success, 1 on failure' },
  stack: { type: 'string', value: 'NAME', help: 'the deployed stack to check' },
  timeout: { type: 'string', value: 'SECONDS', help: 'how long doctor waits for its execution (900)' },
  json: { type: 'boolean', help: 'machine-readable output' },
  help: { type: 'boolean', short: 'h', help: 'this text' },
} as const satisfies Record<string, OptionDef>;

export type OptionName = keyof typeof OPTIONS;

/** The options as parsed: each command receives only those it takes. */
export type ParsedOptions = {
  readonly [K in OptionName]?: (typeof OPTIONS)[K]['type'] extends 'boolean' ? boolean : string;
};

// Groups read through context.ts's helpers, named once here.
/** openStore. */
const STORE = ['store', 'endpoint', 'region'] as const;
/**
 * buildConfig: cdk.json's `compactor` context, then --context, then the flags (the layout's here;
 * each command adds the ones it reads), resolved as the deployed stack resolves them.
 */
const LAYOUT = ['context', 'layout', 'partition-segments', 'data-suffix'] as const;
/** buildEngine. */
const ENGINE = ['memory-limit', 'threads', 'work-dir'] as const;
/** What the planner reads besides the layout. */
const PLANNING = [
  'tier',
  'monthly',
  'min-files',
  'min-age',
  'quiet',
  'target-size',
  'max-job-bytes',
  'max-job-files',
  'retention',
  'retention-buffer',
] as const;

/**
 * The options each command reads (besides --help, which every command takes). A command runs
 * with only these, so an option listed here that the command ignores would be a silent no-op.
 */
export const COMMAND_OPTIONS = {
  demo: ['dir', 'quiet', 'concurrency', ...ENGINE],
  run: [
    ...STORE,
    ...LAYOUT,
    ...PLANNING,
    'now',
    'concurrency',
    'row-group-size',
    'sort-keys',
    'time-column',
    ...ENGINE,
    'unsafe-single-writer-store',
    'json',
  ],
  plan: [...STORE, ...LAYOUT, ...PLANNING, 'now', 'json'],
  recover: [...STORE, ...LAYOUT, 'now', 'unsafe-single-writer-store', 'json'],
  status: [...STORE, ...LAYOUT, 'now', 'json'],
  verify: [...STORE, ...LAYOUT, ...ENGINE, 'json'],
  visible: [...STORE, ...LAYOUT, 'format', 'sql', ...ENGINE, 'json'],
  repair: [...STORE, ...LAYOUT, 'now', 'dry-run', ...ENGINE, 'unsafe-single-writer-store', 'json'],
  retention: [
    ...STORE,
    ...LAYOUT,
    'now',
    'dry-run',
    'retention',
    'retention-buffer',
    'max-job-files',
    'unsafe-single-writer-store',
    'json',
  ],
  start: ['tier', 'now', 'state-machine', 'region', 'wait'],
  watch: ['state-machine', 'execution', 'region'],
  redrive: ['execution', 'region', 'wait'],
  doctor: ['stack', 'state-machine', ...STORE, ...LAYOUT, 'timeout', ...ENGINE, 'json'],
} as const satisfies Record<string, readonly OptionName[]>;

export type CommandName = keyof typeof COMMAND_OPTIONS;

export function isCommandName(name: string): name is CommandName {
  return Object.hasOwn(COMMAND_OPTIONS, name);
}

export function isOptionName(name: string): name is OptionName {
  return Object.hasOwn(OPTIONS, name);
}

/** The options `command` takes: its own, then --help. */
export function optionsOf(command: CommandName): readonly OptionName[] {
  return [...COMMAND_OPTIONS[command], 'help'];
}

/** The parseArgs table of a command's options, or of every option. */
export function parseArgsConfig(names: readonly OptionName[]): ParseArgsOptionsConfig {
  return Object.fromEntries(
    names.map((name) => {
      const def: OptionDef = OPTIONS[name];
      return [name, def.short === undefined ? { type: def.type } : { type: def.type, short: def.short }];
    }),
  );
}

/** The commands that take `option`, in table order. */
export function commandsTaking(option: OptionName): CommandName[] {
  return (Object.keys(COMMAND_OPTIONS) as CommandName[]).filter((c) => optionsOf(c).includes(option));
}

const HELP_COLUMN = 30;

/** The `--help` lines of these options, in the table's order. */
export function optionLines(names: readonly OptionName[]): string {
  const wanted = new Set(names);
  const lines: string[] = [];
  for (const [name, def] of Object.entries(OPTIONS) as [OptionName, OptionDef][]) {
    if (!wanted.has(name)) continue;
    const label = `  ${def.short ? `-${def.short}, ` : ''}--${name}${def.value ? ` ${def.value}` : ''}`;
    const [first = '', ...rest] = def.help.split('\n');
    const indent = ' '.repeat(HELP_COLUMN);
    if (label.length < HELP_COLUMN) lines.push(`${label.padEnd(HELP_COLUMN)}${first}`);
    else lines.push(label, `${indent}${first}`);
    for (const line of rest) lines.push(`${indent}${line}`);
  }
  return lines.join('\n');
}
