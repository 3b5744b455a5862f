/**
 * The settings' one schema (zod): the shape, type, range and meaning of every setting the
 * Lambdas take as COMPACTOR_CONFIG. The stack's context (cdk/config-schema.ts) is built from the
 * same pieces, so a key is checked and described once for the stack, the Lambdas and the CLI;
 * docs/configuration.md's tables and the JSON Schema for cdk.json are generated from them.
 *
 * What the schema cannot know stays in config.ts: whether a table path belongs to the layout,
 * dedup keys against the time column, which tiers a layout allows. Defaults live in DEFAULTS
 * (config.ts) and STACK_DEFAULTS (cdk), which the generated docs read.
 */

import * as z from 'zod';
import { ConfigError } from './errors.ts';

const MiB = 1024 * 1024;
/** One CopyObject copies at most 5 GB: an output must stay below it. */
const MAX_TARGET_FILE_BYTES = 5 * 1024 * MiB - MiB;
/** A century: a longer retention is a typo, not a policy. */
const MAX_RETENTION_DAYS = 36_500;
/**
 * The most inputs `maxJobFiles` can ever allow. A manifest is checked against this, not against
 * today's setting, so lowering the setting while a job is live does not make its manifest invalid.
 */
export const MAX_JOB_FILES = 10_000;
/**
 * A child workflow's output holds every job's outcome (about 1 KB each) under Step Functions'
 * 256 KiB payload limit (https://docs.aws.amazon.com/step-functions/latest/dg/service-quotas.html),
 * and its jobs' Lambdas run at once: 40 keeps both far from their limits.
 */
export const MAX_SMALL_JOBS_PER_ITEM = 40;
/**
 * Sweep records live under plans/, which the bucket's lifecycle rule expires after 15 days: a
 * longer interval would find no record and sweep every cycle.
 */
const MAX_SWEEP_EVERY_HOURS = 336;

declare module 'zod' {
  interface GlobalMeta {
    /** The default as the docs print it, where no value states it (`the layout's`). */
    defaultText?: string;
  }
}

/** A whole number in [min, max]; every way to miss it gets the same message, naming the range. */
export function wholeNumber(min: number, max: number, unit = '') {
  const error = `must be a whole number${unit ? ` of ${unit}` : ''} from ${min} to ${max}`;
  return z.number({ error }).int({ error }).min(min, { error }).max(max, { error });
}

/** A size in bytes in [min, max], as wholeNumber, the bounds also in binary units: `5367660544 (4.99 GiB)`. */
export function byteCount(min: number, max: number) {
  const error = `must be a whole number of bytes from ${withUnit(min)} to ${withUnit(max)}`;
  return z.number({ error }).int({ error }).min(min, { error }).max(max, { error });
}

function withUnit(bytes: number): string {
  const units = ['KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let value = bytes;
  let unit = -1;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  // Rounded down, so a bound just under 5 GiB never reads as 5.
  return unit < 0 ? String(bytes) : `${bytes} (${(Math.floor(value * 100) / 100).toFixed(2)} ${units[unit]})`;
}

export function flag() {
  return z.boolean({ error: 'must be true or false' });
}

export function text(example: string) {
  return z.string({ error: `must be a string, e.g. ${example}` });
}

export function oneOf<const T extends readonly [string, ...string[]]>(values: T, meaning = '') {
  const quoted = values.map((v) => JSON.stringify(v));
  const choice = quoted.length === 2 ? quoted.join(' or ') : `one of ${quoted.join(', ')}`;
  const error = `must be ${choice}${meaning ? ` (${meaning})` : ''}`;
  return z.enum(values, { error });
}

/**
 * An object of named settings, each optional, that refuses any other key: a typo must not fall
 * back to a default. An unknown key's message lists the known ones (configIssue appends the key).
 */
export function section<const S extends Record<string, z.ZodType>>(shape: S, example: string) {
  const known = Object.keys(shape).join(', ');
  const optional = Object.fromEntries(Object.entries(shape).map(([k, v]) => [k, z.optional(v)])) as {
    [K in keyof S]: z.ZodOptional<S[K]>;
  };
  return z.strictObject(optional, {
    error: (issue) =>
      issue.code === 'unrecognized_keys'
        ? `is not a setting (known: ${known})`
        : `must be an object, e.g. ${example}`,
  });
}

/** Table path (without the data prefix, `mydb/cpu/`) -> a setting; paths are checked with the layout. */
export function tableMap<T extends z.ZodType>(value: T, what: string, example: string) {
  return z.record(z.string(), value, {
    error: `must be an object of table path -> ${what}, e.g. ${example}`,
  });
}

export function list<T extends z.ZodType>(item: T, what: string) {
  return z.array(item, { error: `must be a list of ${what}` }).readonly();
}

/** Units of an integer epoch time column: seconds, milli-, micro- or nanoseconds since 1970 UTC. */
export const TIME_UNITS = ['s', 'ms', 'us', 'ns'] as const;
export type TimeUnit = (typeof TIME_UNITS)[number];

const columnName = z.string({ error: 'must be a column name' }).min(1, { error: 'must be a column name' });

export const tierShape = {
  enabled: flag().describe(
    'hourly and daily always run (false only pauses their schedule); true turns the opt-in monthly tier on',
  ),
  minFiles: wholeNumber(1, 100_000).describe('files a folder needs before it is compacted'),
  minAgeSeconds: wholeNumber(0, 366 * 86_400).describe('delay after the hour/day/month ends'),
  behindAfterSeconds: wholeNumber(1, 366 * 86_400, 'seconds').describe(
    "how long a partition may stay eligible before the tier is behind: the backlog alarm fires, `compactor run` and `plan` warn; three of the tier's periods (see [backlog](operations.md#backlog))",
  ),
};

export const retentionShape = {
  rules: z
    .record(z.string(), wholeNumber(1, MAX_RETENTION_DAYS, 'days'), {
      error: 'must be an object of table path to days, e.g. {"mydb/cpu/": 30, "*": 365}',
    })
    .describe(
      'days to keep per table path, database prefix or `"*"`, e.g. `{"mydb/cpu/": 30, "mydb/": 90, "*": 365}`; empty: retention is off',
    ),
  bufferHours: wholeNumber(0, 24 * MAX_RETENTION_DAYS, 'hours').describe(
    'a file goes once its hour (a daily file: its day; a monthly file: its month) ended days + this ago',
  ),
};

const SWEEP_HOURS = `must be a number of hours from 0 (only when asked) to ${MAX_SWEEP_EVERY_HOURS} (14 days: sweep records expire with the plans after 15)`;
const sweepHours = z
  .number({ error: SWEEP_HOURS })
  .min(0, { error: SWEEP_HOURS })
  .max(MAX_SWEEP_EVERY_HOURS, { error: SWEEP_HOURS });

export const planningShape = {
  listing: oneOf(['windowed', 'full'] as const).describe('`"full"` lists the data root whole every cycle'),
  lookbackHours: wholeNumber(1, 24 * MAX_RETENTION_DAYS, 'hours').describe(
    'how long after a folder became due (or flushable) narrow cycles still list it',
  ),
  sweepEveryHours: z
    .union(
      [sweepHours, section({ hourly: sweepHours, daily: sweepHours, monthly: sweepHours }, '{"daily": 168}')],
      {
        error: 'must be a number of hours or an object per tier, e.g. {"hourly": 24, "daily": 168}',
      },
    )
    .describe(
      'one number, or per tier; 0 = only when the execution input says `"sweep": true`; at most 336: how old the last sweep may get',
    ),
  listConcurrency: wholeNumber(1, 1000).describe('table listings at once'),
};

const dedupEntry = z.strictObject(
  {
    mode: oneOf(['exact', 'last'] as const),
    keys: list(columnName, 'the columns that identify a series').optional(),
  },
  {
    error: (issue) =>
      issue.code === 'unrecognized_keys'
        ? 'is not a setting (known: mode, keys)'
        : 'must be an object, e.g. {"mode": "exact"}',
  },
);

/** A table's dedup as written: `{"mode": "exact"}` or `{"mode": "last", "keys": [...]}`. */
export type DedupInput = z.input<typeof dedupEntry>;

/**
 * The settings the stack and the Lambdas share, each once: the stack's context takes them at the
 * same keys (with a schedule added to the tiers and retention).
 */
export const sharedShape = {
  dataPrefix: text('"lake/"').describe('data root in the bucket; state lives under `<prefix>_compaction/`'),
  layout: text('"arc"').describe(
    '`arc`, `hive`, `firehose` or a template; on `hive` and `firehose` only the hourly tier runs (see [layouts](layouts.md))',
  ),
  partitionSegments: list(
    z.string({ error: 'must be a template segment' }),
    'the layout\'s segments readers map to partition columns, e.g. ["dt={YYYY}-{MM}-{DD}", "hour={HH}"] or []',
  ).meta({
    description:
      'the template segments readers map to partition columns (a tier never writes above the finest one)',
    defaultText: "the layout's",
  }),
  dataSuffix: text('".parquet", or "" for any name').meta({
    description: 'the input suffix (`""`: any name, checked as Parquet by its magic and footer)',
    defaultText: "the layout's",
  }),
  quietSeconds: wholeNumber(0, 86_400, 'seconds').describe('skip folders holding a file newer than this'),
  targetFileBytes: byteCount(1, MAX_TARGET_FILE_BYTES).describe(
    'split outputs at about this size (under 5 GiB), judged at first by the input bytes: inputs that compress less than the output make smaller files',
  ),
  rowGroupSize: wholeNumber(1, Number.MAX_SAFE_INTEGER).describe('output row group size in rows'),
  maxJobBytes: byteCount(1, Number.MAX_SAFE_INTEGER).describe("a job's input bytes at most"),
  maxJobFiles: wholeNumber(1, MAX_JOB_FILES).describe("a job's input files at most"),
  maxJobsPerPartition: wholeNumber(1, 100).describe(
    'jobs one execution runs on one partition, one after another, so a backlog beyond `maxJobFiles` or `maxJobBytes` drains in one execution (each job its own manifest)',
  ),
  smallJobsPerItem: wholeNumber(1, MAX_SMALL_JOBS_PER_ITEM).describe(
    "small jobs (a compaction job of at most the small compact function's input bytes, or a retention job) of one table that one Map item carries: one child workflow runs them at once, each its own chain and manifest, and shares its start among them; 1 gives every job its own item, the child then one job's chain (the stack's default with `STANDARD` children, which bill each state)",
  ),
  receiptDays: wholeNumber(1, 36_500, 'days').describe(
    "how long each committed job's receipt is kept under the state root's receipts/ (the bucket's lifecycle rule expires them; a local run removes its own)",
  ),
  sortKeys: list(columnName, 'column names').describe(
    'sort keys after the time column; a partition none of whose inputs has one is not sorted by it, and `compactor run` says so',
  ),
  timeColumn: columnName.describe('the time column'),
  timeColumns: tableMap(columnName, 'column name', '{"mydb/cpu/": "ts"}').describe(
    'table path -> its time column, for tables whose time column is not `timeColumn`',
  ),
  dedup: tableMap(
    dedupEntry,
    'setting',
    '{"mydb/cpu/": {"mode": "exact"}, "mydb/mem/": {"mode": "last", "keys": ["host"]}}',
  ).describe(
    'table path -> `{"mode": "exact"}` or `{"mode": "last", "keys": [...]}`, see [Dedup](layouts.md#dedup-per-table-off-by-default)',
  ),
  naiveTimestampsUtc: list(
    z.string({ error: 'must be a table path' }),
    'table paths, e.g. ["mydb/cpu/"]',
  ).describe(
    'table paths (`mydb/cpu/`) whose naive TIMESTAMP values are UTC: they merge with TIMESTAMPTZ inputs',
  ),
  timeUnits: tableMap(
    oneOf(TIME_UNITS, 'seconds, milliseconds, microseconds, nanoseconds since 1970-01-01 UTC'),
    '"s" | "ms" | "us" | "ns"',
    '{"mydb/cpu/": "ms"}',
  ).describe(
    "table path -> unit of its integer epoch time column: each input's times are checked against its folder's period, see [layouts](layouts.md)",
  ),
  planning: section(planningShape, '{"lookbackHours": 48}').describe(
    'how the Plan step lists the lake (see [planning at lake scale](operations.md#watch-and-inspect))',
  ),
};

/** COMPACTOR_CONFIG: what the Lambdas (and the CLI, after resolving flags and context) take. */
export const configInputSchema = section(
  {
    ...sharedShape,
    tiers: section(
      {
        hourly: section(tierShape, '{"minFiles": 10}'),
        daily: section(tierShape, '{"minFiles": 2}'),
        monthly: section(tierShape, '{"enabled": true}'),
      },
      '{"hourly": {"minFiles": 10}}',
    ),
    retention: section(retentionShape, '{"rules": {"*": 365}}'),
    leaseSeconds: wholeNumber(1, Number.MAX_SAFE_INTEGER, 'seconds').describe(
      "a job's lease, renewed at each step (see [the protocol](protocol.md#the-steps)): it must outlive any step's Lambda, or recovery could take over a job still running; the stack writes its longest Lambda timeout + 300 s",
    ),
    failureBackoff: section(
      {
        after: wholeNumber(1, 1000).describe('failures in a row before a partition is backed off'),
        baseSeconds: wholeNumber(1, Number.MAX_SAFE_INTEGER, 'seconds').describe('the first backoff'),
        maxSeconds: wholeNumber(1, Number.MAX_SAFE_INTEGER, 'seconds').describe('the longest backoff'),
      },
      '{"after": 3}',
    ).describe(
      'how long a partition that keeps failing is left alone; the stack leaves these at their defaults',
    ),
    unsafeSingleWriterStore: z
      .boolean({
        error:
          'must be true or false; true skips the store probe and is safe only for a store with a single writer',
      })
      .describe("skip the store probe (the CLI's `--unsafe-single-writer-store`); the stack never sets it"),
  },
  '{"layout": "arc"}',
);

export type ConfigInput = z.input<typeof configInputSchema>;

/** `tiers.hourly.minFiles`, `dedup["mydb/cpu/"].mode`: a key as the docs and messages write it. */
export function keyPath(path: readonly PropertyKey[]): string {
  return path
    .map((segment, i) =>
      typeof segment === 'string' && /^[A-Za-z_][A-Za-z0-9_]*$/.test(segment)
        ? `${i === 0 ? '' : '.'}${segment}`
        : `[${JSON.stringify(typeof segment === 'symbol' ? String(segment) : segment)}]`,
    )
    .join('');
}

/**
 * The first problem of a failed parse as one sentence naming the key, what it must be and what it
 * got: `tiers.hourly.minFiles must be a whole number from 1 to 100000, got 0`; `root` names the
 * whole value (`context compactor`), if it has a name.
 */
function configIssue(error: z.ZodError, root = ''): ConfigError {
  const found = error.issues[0];
  if (found === undefined) return new ConfigError(`${root || 'the configuration'} is not valid`);
  const issue = unionBranch(found);
  const path = [...issue.path];
  if (issue.code === 'unrecognized_keys' && issue.keys[0] !== undefined) path.push(issue.keys[0]);
  const inner = keyPath(path);
  const key = [root, inner].filter(Boolean).join(inner.startsWith('[') ? '' : '.') || 'the configuration';
  const got =
    issue.code === 'unrecognized_keys' || !('input' in issue)
      ? ''
      : `, got ${String(JSON.stringify(issue.input))}`;
  return new ConfigError(`${key} ${issue.message}${got}`, { cause: error });
}

/**
 * A union (a number, or an object per tier) that got an object reports what its object branch
 * found (`planning.sweepEveryHours.weekly is not a setting`), not only that no branch matched.
 */
function unionBranch(issue: z.core.$ZodIssue): z.core.$ZodIssue {
  if (issue.code !== 'invalid_union') return issue;
  for (const branch of issue.errors) {
    const first = branch[0];
    if (first !== undefined && !(first.code === 'invalid_type' && first.path.length === 0)) {
      return unionBranch({ ...first, path: [...issue.path, ...first.path] });
    }
  }
  return issue;
}

/** Parses `value` with `schema`, or throws the ConfigError of its first problem. */
export function parseSettings<S extends z.ZodType>(schema: S, value: unknown, root = ''): z.output<S> {
  const result = schema.safeParse(value, { reportInput: true });
  if (!result.success) throw configIssue(result.error, root);
  return result.data;
}
