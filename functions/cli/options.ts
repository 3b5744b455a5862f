/**
 * The `compactor` command line's options: every option defined once (parseArgs type, value name,
 * help line), and per command the names of the options it reads. The parseArgs table of each
 * command and the option lines of `--help` are derived from these; an option a command does not
 * read fails before the command runs (strict-args.ts). Imports nothing heavy: --help reads it.
 */

import type { ParseArgsOptionsConfig } from 'node:util';
import type { TierName } from '../core/config.ts';
import { SMALL_ENGINE } from '../core/lambda-sizing.ts';

export interface OptionDef {
  readonly type: 'string' | 'boolean';
  readonly short?: string;
  /** The value's placeholder in the help line. */
  readonly value?: string;
  /** The help text; continuation lines are indented under the first. */
  readonly help: string;
  /**
   * The stack-context key the option sets (`<tier>`: the --tier's key). Its default is that key's,
   * which the help and docs/configuration.md show (cdk/config-reference.ts renders it).
   */
  readonly setting?: string;
  /** The default of an option that sets no key, as the help and the docs show it. */
  readonly default?: string;
}

/** A setting's key path (`OptionDef.setting`), its `<tier>` the given tier's. */
export function settingPath(setting: string, tier: TierName): string[] {
  return setting.split('.').map((part) => (part === '<tier>' ? tier : part));
}

/** Partitions `run` compacts at once unless --concurrency says otherwise. */
export const LOCAL_CONCURRENCY = 2;

/** Where `demo` writes its lake unless --dir says otherwise. */
export const DEMO_DIR = '.demo/lake';

/** `demo`'s --quiet unless given: its files were just written, so none is held back. */
export const DEMO_QUIET_SECONDS = '0';

/** How long doctor waits for its execution unless --timeout says otherwise. */
export const DOCTOR_TIMEOUT_S = 900;

/** Every option of every command, in the order `--help` lists them. */
export const OPTIONS = {
  store: {
    type: 'string',
    value: '<folder | s3://bucket/prefix>',
    help: 'the lake (required except for demo and doctor --stack)',
  },
  endpoint: {
    type: 'string',
    value: 'URL',
    help: 'S3-compatible endpoint (path-style), with an s3:// store',
  },
  region: { type: 'string', value: 'REGION', help: 'AWS region', default: '$AWS_REGION or us-east-1' },
  layout: {
    type: 'string',
    value: 'arc|hive|firehose|TEMPLATE',
    help: "partition layout, e.g. '{table}/dt={YYYY}-{MM}-{DD}/hour={HH}/'",
    setting: 'layout',
  },
  'partition-segments': {
    type: 'string',
    value: 'a,b',
    help: "the template segments your readers map to partition columns ('' for glob\nreaders only): no tier writes above the finest one",
    setting: 'partitionSegments',
  },
  'data-suffix': {
    type: 'string',
    value: 'SUFFIX',
    help: "suffix of raw input names ('' = any name, read as Parquet by its magic\nand footer)",
    setting: 'dataSuffix',
  },
  now: {
    type: 'string',
    value: 'ISO-TIME',
    help: 'act as if at this time (plans against it; leases still run in real time)',
  },
  tier: {
    type: 'string',
    value: 'TIER',
    help: 'hourly, daily, monthly or retention (a compaction tier also scopes\n--min-files/--min-age/--behind-after)',
  },
  monthly: {
    type: 'boolean',
    help: "turn the opt-in monthly tier on; then the daily tier hands a month's daily\nfiles to it",
    setting: 'tiers.monthly.enabled',
  },
  'min-files': {
    type: 'string',
    value: 'N',
    help: 'files a folder needs before it is compacted',
    setting: 'tiers.<tier>.minFiles',
  },
  'min-age': {
    type: 'string',
    value: 'SECONDS',
    help: 'how long after its period ends a folder becomes eligible',
    setting: 'tiers.<tier>.minAgeSeconds',
  },
  'behind-after': {
    type: 'string',
    value: 'SECONDS',
    help: 'warn that the tier is behind once its oldest eligible partition has been\neligible longer than this (the stack alarms on it)',
    setting: 'tiers.<tier>.behindAfterSeconds',
  },
  quiet: {
    type: 'string',
    value: 'SECONDS',
    help: 'skip folders holding a file written less than this ago',
    setting: 'quietSeconds',
  },
  concurrency: {
    type: 'string',
    value: 'N',
    help: "Map items run at once: the state machine's Map MaxConcurrency (an item runs its up to smallJobsPerItem small jobs at once)",
    default: String(LOCAL_CONCURRENCY),
  },
  context: {
    type: 'string',
    value: 'JSON',
    help: 'stack settings over cdk.json\'s "compactor" context, as `cdk deploy -c`\ngives them, e.g. \'{"tiers":{"hourly":{"minFiles":20}}}\'; the flags override\nboth (docs/configuration.md)',
  },
  'target-size': {
    type: 'string',
    value: 'SIZE',
    help: 'split outputs at about this size (under 5 GiB); the setting targetFileBytes\nsays how a size is judged',
    setting: 'targetFileBytes',
  },
  'row-group-size': {
    type: 'string',
    value: 'N',
    help: 'output row group size in rows',
    setting: 'rowGroupSize',
  },
  'max-job-bytes': {
    type: 'string',
    value: 'SIZE',
    help: 'input bytes one job may take',
    setting: 'maxJobBytes',
  },
  'max-job-files': {
    type: 'string',
    value: 'N',
    help: 'input files one job may take',
    setting: 'maxJobFiles',
  },
  'max-jobs-per-partition': {
    type: 'string',
    value: 'N',
    help: 'jobs one run takes on one partition, one after another',
    setting: 'maxJobsPerPartition',
  },
  'sort-keys': { type: 'string', value: 'a,b', help: 'sort keys after the time column', setting: 'sortKeys' },
  'time-column': { type: 'string', value: 'NAME', help: 'the time column', setting: 'timeColumn' },
  retention: {
    type: 'string',
    value: 'RULES',
    help: "days to keep per table path, most specific wins; * for every other\ntable, e.g. 'mydb/cpu/=30,mydb/=90,*=365'; none: retention is off",
    setting: 'retention.rules',
  },
  'retention-buffer': {
    type: 'string',
    value: 'HOURS',
    help: 'a file goes only once its hour/day ended this long after its days',
    setting: 'retention.bufferHours',
  },
  'memory-limit': {
    type: 'string',
    value: 'SIZE',
    help: `DuckDB memory limit (e.g. 1GB); DuckDB spills to --work-dir beyond it;\nrun's helper thread for small jobs has an engine of its own: ${SMALL_ENGINE.memoryLimit}, or this if less`,
    default: "DuckDB's (80% of RAM)",
  },
  threads: {
    type: 'string',
    value: 'N',
    help: `DuckDB threads (run's helper thread for small jobs: ${SMALL_ENGINE.threads})`,
    default: 'all cores',
  },
  'work-dir': {
    type: 'string',
    value: 'DIR',
    help: 'local scratch folder for downloaded inputs and outputs',
    default: "compactor-work in the system's temp folder",
  },
  'unsafe-single-writer-store': {
    type: 'boolean',
    help: 'skip the store probe (run, recover, repair, release, retention refuse a\nstore that ignores conditional writes, copies or deletes); only for a store\nnothing else writes to or compacts; warned on every run',
    default: 'off',
  },
  'dry-run': { type: 'boolean', help: 'report what would change and change nothing' },
  partition: {
    type: 'string',
    value: 'P',
    help: "a partition folder (mydb/cpu/2025/01/15/10/) or a folder above it; also\nas visible prints it (a path in the store's folder, an s3:// URL)",
  },
  since: {
    type: 'string',
    value: 'ISO-TIME',
    help: 'only jobs started at or after this time',
  },
  all: { type: 'boolean', help: 'every quarantined input' },
  dir: { type: 'string', value: 'DIR', help: 'the demo lake folder', default: DEMO_DIR },
  format: {
    type: 'string',
    value: 'F',
    help: 'a statement reading exactly the visible files: duckdb, clickhouse,\npolars, spark or athena',
  },
  sql: { type: 'boolean', help: 'the same as --format duckdb' },
  'state-machine': {
    type: 'string',
    value: 'ARN',
    help: 'the deployed state machine',
    default: '$COMPACTOR_STATE_MACHINE_ARN',
  },
  execution: { type: 'string', value: 'ARN', help: 'an execution of the state machine' },
  wait: {
    type: 'boolean',
    help: 'follow the execution; exit 0 on success, 1 on failure, 2 if still running\nafter 2 hours',
  },
  stack: { type: 'string', value: 'NAME', help: 'the deployed stack to check' },
  timeout: {
    type: 'string',
    value: 'SECONDS',
    help: 'how long doctor waits for its execution',
    default: String(DOCTOR_TIMEOUT_S),
  },
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
  'behind-after',
  'quiet',
  'target-size',
  'max-job-bytes',
  'max-job-files',
  'max-jobs-per-partition',
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
  receipts: [...STORE, ...LAYOUT, 'partition', 'since', 'json'],
  audit: [...STORE, ...LAYOUT, 'now', ...ENGINE, 'json'],
  verify: [...STORE, ...LAYOUT, ...ENGINE, 'json'],
  visible: [...STORE, ...LAYOUT, 'format', 'sql', ...ENGINE, 'json'],
  repair: [...STORE, ...LAYOUT, 'now', 'dry-run', ...ENGINE, 'unsafe-single-writer-store', 'json'],
  release: [
    ...STORE,
    ...LAYOUT,
    'partition',
    'all',
    'dry-run',
    ...ENGINE,
    'unsafe-single-writer-store',
    'json',
  ],
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

/**
 * Options a command defaults otherwise than OPTIONS says (and then not from cdk.json): the
 * default its `--help` shows, or null for none. demo's --quiet is read from here.
 */
export const COMMAND_DEFAULTS = {
  demo: { quiet: DEMO_QUIET_SECONDS },
  start: { region: "the ARN's (another is refused)" },
  watch: { region: "the ARN's (another is refused)" },
  redrive: { region: "the ARN's (another is refused)" },
  doctor: {
    region: "with --state-machine the ARN's; with --stack $AWS_REGION (one of the two required)",
    'state-machine': null,
  },
} as const satisfies { readonly [C in CommandName]?: Partial<Record<OptionName, string | null>> };

/** What `command`'s --help shows for `name`'s default: its own, else undefined (OPTIONS'). */
export function commandDefault(
  command: CommandName,
  name: OptionName,
): { shown: string | undefined } | undefined {
  const own: Partial<Record<OptionName, string | null>> | undefined =
    command in COMMAND_DEFAULTS ? COMMAND_DEFAULTS[command as keyof typeof COMMAND_DEFAULTS] : undefined;
  if (own === undefined || !Object.hasOwn(own, name)) return undefined;
  return { shown: own[name] ?? undefined };
}

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

/**
 * The `--help` lines of these options, in the table's order, each ending with its default
 * (`defaultOf`: option-reference.ts's, which reads a setting's from the stack's defaults) and the
 * stack key it sets.
 */
export function optionLines(
  names: readonly OptionName[],
  defaultOf: (name: OptionName) => string | undefined,
  scopeOf: (name: OptionName) => string | undefined = () => undefined,
  command?: CommandName,
): string {
  const wanted = new Set(names);
  const lines: string[] = [];
  for (const [name, def] of Object.entries(OPTIONS) as [OptionName, OptionDef][]) {
    if (!wanted.has(name)) continue;
    const label = `  ${def.short ? `-${def.short}, ` : ''}--${name}${def.value ? ` ${def.value}` : ''}`;
    const own = command === undefined ? undefined : commandDefault(command, name);
    const shown = own === undefined ? defaultOf(name) : own.shown;
    const scope = scopeOf(name);
    const notes = [
      ...(scope === undefined ? [] : [scope]),
      ...(shown === undefined ? [] : [`default ${shown}`]),
      ...(def.setting === undefined || own !== undefined ? [] : [`cdk.json: ${def.setting}`]),
    ];
    const [first = '', ...rest] = [
      ...def.help.split('\n'),
      ...(notes.length === 0 ? [] : [notes.join('; ')]),
    ];
    const indent = ' '.repeat(HELP_COLUMN);
    if (label.length < HELP_COLUMN) lines.push(`${label.padEnd(HELP_COLUMN)}${first}`);
    else lines.push(label, `${indent}${first}`);
    for (const line of rest) lines.push(`${indent}${line}`);
  }
  return lines.join('\n');
}
