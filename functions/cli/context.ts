/** Builds the store, configuration, clock and engine from CLI options, once per command. */

import { statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { CONTEXT_KEY, lambdaConfigInput, parseStackConfig, type StackConfig } from '../../cdk/config.ts';
import { compactorContextOver, mergeContext } from '../../cdk/config-context.ts';
import type { DuckDbEngine } from '../adapters/duckdb-engine/duckdb-engine.ts';
import { newScratchName, removeGoneScratch } from '../adapters/local-owner.ts';
import { LocalFolderStore } from '../adapters/local-store/local-store.ts';
import {
  type CompactorConfig,
  type ConfigInput,
  JOB_KINDS,
  type JobKind,
  parseConfig,
  TIERS,
  type TierName,
} from '../core/config.ts';
import { type Clock, systemClock } from '../core/engine.ts';
import { ConfigError } from '../core/errors.ts';
import { isPlainObject } from '../core/is-plain-object.ts';
import type { ObjectStore } from '../core/object-store.ts';
import { OPTIONS, type OptionName, settingPath } from './options.ts';

export interface CliOptions {
  readonly store?: string;
  readonly endpoint?: string;
  readonly region?: string;
  readonly layout?: string;
  readonly now?: string;
  readonly tier?: string;
  readonly monthly?: boolean;
  readonly 'min-files'?: string;
  readonly 'min-age'?: string;
  readonly 'behind-after'?: string;
  readonly quiet?: string;
  readonly concurrency?: string;
  readonly 'target-size'?: string;
  readonly 'row-group-size'?: string;
  readonly 'max-job-bytes'?: string;
  readonly 'max-job-files'?: string;
  readonly 'max-jobs-per-partition'?: string;
  readonly 'sort-keys'?: string;
  readonly 'time-column'?: string;
  /** Comma-separated template segments readers map to partition columns ('' for none). */
  readonly 'partition-segments'?: string;
  readonly 'data-suffix'?: string;
  readonly 'memory-limit'?: string;
  readonly threads?: string;
  readonly 'work-dir'?: string;
  readonly retention?: string;
  readonly 'retention-buffer'?: string;
  /** Stack settings (cdk.json's `compactor` context shape) merged over cdk.json's: parseStackContext. */
  readonly context?: string;
  /** Skip the store probe: only for a store that provably has a single writer (warned on every run). */
  readonly 'unsafe-single-writer-store'?: boolean;
}

export interface StoreTarget {
  readonly store: ObjectStore;
  readonly dataPrefix: string;
  /** Local folder of the data root, when the store is a folder (DuckDB reads it in place). */
  readonly localRoot?: string;
}

/** The S3 SDK is loaded only for an s3:// store: commands over a folder start without it. */
export async function openStore(
  options: Pick<CliOptions, 'store' | 'endpoint' | 'region'>,
): Promise<StoreTarget> {
  const target = options.store;
  if (!target) throw new ConfigError('--store is required: a local folder or s3://bucket/prefix');
  if (target.startsWith('s3://')) {
    const [bucket = '', ...rest] = target.slice('s3://'.length).split('/');
    if (bucket === '') {
      throw new ConfigError(`--store ${target}: no bucket name; use s3://BUCKET or s3://BUCKET/PREFIX`);
    }
    const prefix = rest.filter(Boolean).join('/');
    const { createS3Client, S3Store } = await import('../adapters/s3-store/s3-store.ts');
    const client = createS3Client({
      ...(options.endpoint ? { endpoint: options.endpoint } : {}),
      region: options.region ?? process.env.AWS_REGION ?? 'us-east-1',
    });
    return { store: new S3Store({ client, bucket }), dataPrefix: prefix === '' ? '' : `${prefix}/` };
  }
  if (options.endpoint) throw new ConfigError('--endpoint only applies to an s3:// store');
  const root = resolve(target);
  // A mistyped path must not become an empty lake that "compacted nothing" (exit 0); only
  // `demo` creates its folder.
  const found = statSync(root, { throwIfNoEntry: false });
  if (!found) {
    throw new ConfigError(
      `--store ${target}: no such folder (${root}); point --store at your lake's data root, or run \`compactor demo --dir ${target}\` to make a demo lake there`,
    );
  }
  if (!found.isDirectory()) {
    throw new ConfigError(
      `--store ${target}: ${root} is a file, not a folder; point --store at the folder that holds your lake's tables`,
    );
  }
  return { store: new LocalFolderStore(root), dataPrefix: '', localRoot: root };
}

export function parseTier(value: string | undefined): JobKind {
  if (value === undefined) throw new ConfigError(`--tier is required: ${JOB_KINDS.join(', ')}`);
  if (!JOB_KINDS.includes(value as JobKind))
    throw new ConfigError(`--tier ${value}: use ${JOB_KINDS.join(', ')}`);
  return value as JobKind;
}

/** Why a retention cycle would expire nothing, and the fix. */
export const NO_RETENTION_RULE =
  'no retention rule: pass --retention TABLE=DAYS[,...], e.g. --retention "mydb/cpu/=30,mydb/=90,*=365" (or set retention.rules in cdk.json)';

/** A retention run with no rule would list nothing and expire nothing: refused up front. */
export function requireRetentionRules(config: CompactorConfig): void {
  if (config.retention.rules.length === 0) throw new ConfigError(NO_RETENTION_RULE);
}

/** `--retention 'mydb/cpu/=30,mydb/=90,*=365'`: days to keep per table path, `*` for every other table. */
export function parseRetentionRules(value: string): Record<string, number> {
  const rules: Record<string, number> = {};
  // `none` (or nothing) turns retention off, whatever cdk.json says.
  if (value.trim().toLowerCase() === 'none') return rules;
  for (const part of value
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const at = part.lastIndexOf('=');
    const days = Number(part.slice(at + 1));
    if (at <= 0 || part.slice(at + 1).trim() === '' || !Number.isFinite(days)) {
      throw new ConfigError(
        `--retention ${value}: use TABLE=DAYS[,TABLE=DAYS...], e.g. "mydb/cpu/=30,mydb/=90,*=365"`,
      );
    }
    rules[part.slice(0, at).trim()] = days;
  }
  return rules;
}

const SIZE = /^(\d+(?:\.\d+)?)\s*(b|kb|kib|mb|mib|gb|gib)?$/i;
const UNITS: Record<string, number> = {
  b: 1,
  kb: 1e3,
  kib: 1024,
  mb: 1e6,
  mib: 1024 ** 2,
  gb: 1e9,
  gib: 1024 ** 3,
};

export function parseSize(name: string, value: string): number {
  const match = SIZE.exec(value.trim());
  if (!match) throw new ConfigError(`--${name} ${value}: use a size like 512MiB or 1GB`);
  return Math.round(Number(match[1]) * (UNITS[(match[2] ?? 'b').toLowerCase()] ?? 1));
}

/** A whole-number option's value, `min` or more. */
export function parseWhole(name: string, value: string, min = 0): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < min) {
    throw new ConfigError(`--${name} ${value}: use a whole number${min > 0 ? ` from ${min}` : ''}`);
  }
  return n;
}

/** The options that set a stack key (OPTIONS' `setting`). */
type FlagName = {
  [K in OptionName]: (typeof OPTIONS)[K] extends { readonly setting: string } ? K : never;
}[OptionName];

/**
 * The settings flags as stack-context keys: a flag sets its key (OPTIONS' `setting`) over cdk.json's
 * `compactor` context and --context, and the stack's parser then reads it as `cdk synth` would.
 * Each reads its value here; the per-tier flags name the --tier's key.
 */
const FLAG_VALUES: { readonly [F in FlagName]: (raw: string | true, flag: string) => unknown } = {
  layout: (raw) => raw,
  'partition-segments': (raw) => String(raw).split(',').filter(Boolean),
  'data-suffix': (raw) => raw,
  monthly: () => true,
  'min-files': (raw, flag) => parseWhole(flag, String(raw)),
  'min-age': (raw, flag) => parseWhole(flag, String(raw)),
  'behind-after': (raw, flag) => parseWhole(flag, String(raw)),
  retention: (raw) => parseRetentionRules(String(raw)),
  'retention-buffer': (raw, flag) => parseWhole(flag, String(raw)),
  quiet: (raw, flag) => parseWhole(flag, String(raw)),
  'target-size': (raw, flag) => parseSize(flag, String(raw)),
  'row-group-size': (raw, flag) => parseWhole(flag, String(raw)),
  'max-job-bytes': (raw, flag) => parseSize(flag, String(raw)),
  'max-job-files': (raw, flag) => parseWhole(flag, String(raw)),
  'max-jobs-per-partition': (raw, flag) => parseWhole(flag, String(raw)),
  'sort-keys': (raw) => String(raw).split(',').filter(Boolean),
  'time-column': (raw) => raw,
};

export const CONTEXT_FLAGS: readonly {
  readonly flag: FlagName;
  /** The context key, as its path; `tier` is the --tier the flag scopes. */
  readonly key: (tier: TierName) => readonly string[];
  readonly value: (raw: string | true, flag: string) => unknown;
}[] = (Object.keys(FLAG_VALUES) as FlagName[]).map((flag) => ({
  flag,
  key: (tier) => settingPath(OPTIONS[flag].setting, tier),
  value: FLAG_VALUES[flag],
}));

const TIER_FLAGS: readonly FlagName[] = CONTEXT_FLAGS.filter(({ flag }) =>
  OPTIONS[flag].setting.includes('<tier>'),
).map(({ flag }) => flag);

/**
 * The flag of this command that set `setting` (a key as the steps name it, e.g. `timeColumn`),
 * with its value as given: `--time-column ts`. Undefined when cdk.json, --context or the default
 * set it.
 */
export function flagThatSet(options: CliOptions, setting: string): string | undefined {
  const found = CONTEXT_FLAGS.find(
    ({ flag }) => OPTIONS[flag].setting === setting && options[flag] !== undefined,
  );
  if (found === undefined) return undefined;
  const value = options[found.flag];
  return value === true ? `--${found.flag}` : `--${found.flag} ${String(value)}`;
}

/**
 * `base` with each settings flag given set at its key, whole: a flag replaces its key's value, even
 * an object's (`--retention 'mydb/=30'` is the whole rule set, not one more rule beside cdk.json's;
 * `none` leaves none); the objects above it are copied, not replaced. Also which flag set each key.
 */
export function flagsOver(
  base: Record<string, unknown>,
  options: CliOptions,
): {
  readonly context: Record<string, unknown>;
  readonly flagOfKey: ReadonlyMap<string, string>;
} {
  const given = CONTEXT_FLAGS.filter(({ flag }) => options[flag] !== undefined && options[flag] !== false);
  const tier = options.tier;
  if (given.some(({ flag }) => TIER_FLAGS.includes(flag)) && !TIERS.includes(tier as TierName)) {
    throw new ConfigError(
      `${TIER_FLAGS.map((flag) => `--${flag}`).join(' and ')} apply to one tier: add --tier ${TIERS.join(', --tier ')}`,
    );
  }
  let context = base;
  const flagOfKey = new Map<string, string>();
  for (const { flag, key, value } of given) {
    const path = key(tier as TierName);
    context = withKey(context, path, value(options[flag] as string | true, flag));
    flagOfKey.set(`${CONTEXT_KEY}.${path.join('.')}`, `--${flag}`);
  }
  return { context, flagOfKey };
}

/** A copy of `context` with `value` at `path`, the objects on the way copied (or made). */
function withKey(
  context: Record<string, unknown>,
  path: readonly string[],
  value: unknown,
): Record<string, unknown> {
  const [head, ...rest] = path;
  if (head === undefined) return context;
  const inner = context[head];
  return {
    ...context,
    [head]: rest.length === 0 ? value : withKey(isPlainObject(inner) ? inner : {}, rest, value),
  };
}

/**
 * The one default a local command does not share with the stack: a cycle run by hand lists the
 * whole lake, as a sweep does. The stack's windowed cycles list only recent windows between sweeps
 * (a day apart for hourly), so `plan` right after a `run` would not show older folders, and each run
 * would leave sweep records in the lake. cdk.json or --context `planning.listing` overrides it.
 */
export const LOCAL_CONTEXT: Readonly<Record<string, unknown>> = { planning: { listing: 'full' } };

/**
 * Keys a local command drops before parsing: hourly's and daily's `enabled` only pause their
 * schedules, and a command run by hand has none. cdk.json spells out daily's `true`, which a
 * hive or firehose --layout would otherwise refuse (the planner still refuses such a daily run).
 */
const SCHEDULE_SWITCHES: readonly TierName[] = ['hourly', 'daily'];

function withoutScheduleSwitches(context: Record<string, unknown>): Record<string, unknown> {
  const tiers = context.tiers;
  if (typeof tiers !== 'object' || tiers === null || Array.isArray(tiers)) return context;
  const out: Record<string, unknown> = { ...(tiers as Record<string, unknown>) };
  for (const tier of SCHEDULE_SWITCHES) {
    const settings = out[tier];
    if (typeof settings !== 'object' || settings === null || Array.isArray(settings)) continue;
    const { enabled: _, ...rest } = settings as Record<string, unknown>;
    out[tier] = rest;
  }
  return { ...context, tiers: out };
}

/**
 * The stack settings a local command runs with, resolved as the deployed stack's: LOCAL_CONTEXT,
 * cdk.json's `compactor` context over it, --context merged over it, the settings flags over that
 * (CONTEXT_FLAGS), parsed by the stack's parser.
 */
export function resolveStackConfig(options: CliOptions): StackConfig {
  const flags = flagsOver(
    mergeContext(LOCAL_CONTEXT, compactorContextOver(parseStackContext(options.context))),
    options,
  );
  const { context } = flags;
  try {
    return parseStackConfig(withoutScheduleSwitches(context));
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    // Name the flag when one set the key the message is about.
    // The parser names a key as `compactor.a.b` or, after `context compactor:`, as `a.b`.
    const named = (key: string) =>
      error.message.includes(key) || error.message.includes(`: ${key.slice(CONTEXT_KEY.length + 1)}`);
    const flag = [...flags.flagOfKey].find(([key]) => named(key))?.[1];
    if (flag === undefined) throw error;
    throw new ConfigError(`${error.message} (set by ${flag})`, { cause: error });
  }
}

/**
 * What the Lambdas get as COMPACTOR_CONFIG from the resolved stack settings (resolveStackConfig),
 * with the store's data prefix for the stack's dataPrefix.
 */
export function resolveConfigInput(options: CliOptions, dataPrefix: string): ConfigInput {
  return {
    ...lambdaConfigInput(resolveStackConfig(options)),
    dataPrefix,
    ...(options['unsafe-single-writer-store'] === true ? { unsafeSingleWriterStore: true } : {}),
  };
}

/** The config a local command runs with, resolved as the deployed stack's (resolveConfigInput). */
export function buildConfig(options: CliOptions, dataPrefix: string): CompactorConfig {
  return parseConfig(resolveConfigInput(options, dataPrefix));
}

export function buildClock(now: string | undefined): Clock {
  if (now === undefined) return systemClock;
  const at = Date.parse(now);
  if (Number.isNaN(at)) throw new ConfigError(`--now ${now}: use an ISO time like 2025-01-15T12:00:00Z`);
  // Acts as if at the given time, advancing with real time so leases still run out.
  const offset = at - Date.now();
  return { now: () => new Date(Date.now() + offset) };
}

/** The local scratch folder: --work-dir (created if missing), else the system temp folder's compactor-work. */
export function workDirOf(options: Pick<CliOptions, 'work-dir'>): string {
  const dir = resolve(options['work-dir'] ?? join(tmpdir(), 'compactor-work'));
  const stat = statSync(dir, { throwIfNoEntry: false });
  if (stat !== undefined && !stat.isDirectory()) {
    throw new ConfigError(`--work-dir ${dir} is not a folder: pass a folder (it is created if missing)`);
  }
  return dir;
}

/**
 * The command's engine. `quiet`: polars' absence is not said again (a run's helper thread, whose
 * main thread said it).
 */
export async function buildEngine(
  options: CliOptions,
  quiet = false,
): Promise<{ engine: DuckDbEngine; workDir: string }> {
  const workDir = workDirOf(options);
  await removeGoneScratch(workDir);
  // DuckDB's native library is loaded by the commands that merge or read Parquet, not by all.
  const { DuckDbEngine } = await import('../adapters/duckdb-engine/duckdb-engine.ts');
  const { loadPolarsWriter } = await import('../adapters/polars-engine/polars-engine.ts');
  const memoryLimit = options['memory-limit'];
  const threads = options.threads === undefined ? undefined : parseWhole('threads', options.threads, 1);
  // As the compact Lambda: polars writes the merges the core gives it (core/merge-engine.ts).
  const polars = await loadPolarsWriter({
    onUnavailable: (reason) => {
      if (!quiet) process.stderr.write(`compactor: ${reason}\n`);
    },
    ...(threads !== undefined ? { threads } : {}),
  });
  try {
    const engine = await DuckDbEngine.create({
      // A spill folder of this engine's own: DuckDB names its spill files alike in every
      // instance, so two engines (another run's, the helper thread's) must not share one. DuckDB
      // makes it when it first spills and removes it when it closes; a killed process's is
      // removed by the next engine built here.
      tempDirectory: join(workDir, newScratchName()),
      ...(memoryLimit !== undefined ? { memoryLimit } : {}),
      ...(threads !== undefined ? { threads } : {}),
      mergeWriters: [polars],
    });
    return { engine, workDir };
  } catch (error) {
    // The engine names the value DuckDB refused; the user typed an option.
    if (!(error instanceof ConfigError) || memoryLimit === undefined) throw error;
    throw new ConfigError(`--memory-limit: ${error.message}; e.g. --memory-limit 1GB`, { cause: error });
  }
}

/** `--context JSON`: stack settings (cdk.json's `compactor` context) a command runs with. */
export function parseStackContext(text: string | undefined): Record<string, unknown> {
  if (text === undefined) return {};
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    if (!(error instanceof SyntaxError)) throw error;
    throw new ConfigError(`--context is not JSON: ${error.message}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ConfigError(
      '--context must be a JSON object, e.g. \'{"map":{"toleratedFailurePercentage":20}}\'',
    );
  }
  return value as Record<string, unknown>;
}
