/** Builds the store, configuration, clock and engine from CLI options, once per command. */

import { statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { DuckDbEngine } from '../adapters/duckdb-engine.ts';
import { LocalFolderStore } from '../adapters/local-store.ts';
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
import type { ObjectStore } from '../core/object-store.ts';

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
  readonly quiet?: string;
  readonly concurrency?: string;
  readonly 'target-size'?: string;
  readonly 'row-group-size'?: string;
  readonly 'max-job-bytes'?: string;
  readonly 'max-job-files'?: string;
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
    if (bucket === '') throw new ConfigError(`--store ${target}: no bucket name`);
    const prefix = rest.filter(Boolean).join('/');
    const { createS3Client, S3Store } = await import('../adapters/s3-store.ts');
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
  if (!found.isDirectory()) throw new ConfigError(`--store ${target}: ${root} is a file, not a folder`);
  return { store: new LocalFolderStore(root), dataPrefix: '', localRoot: root };
}

export function parseTier(value: string | undefined): JobKind {
  if (value === undefined) throw new ConfigError(`--tier is required: ${JOB_KINDS.join(', ')}`);
  if (!JOB_KINDS.includes(value as JobKind))
    throw new ConfigError(`--tier ${value}: use ${JOB_KINDS.join(', ')}`);
  return value as JobKind;
}

/** `--retention 'mydb/cpu/=30,mydb/=90,*=365'`: days to keep per table path, `*` for every other table. */
export function parseRetentionRules(value: string): Record<string, number> {
  const rules: Record<string, number> = {};
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

export function parseWhole(name: string, value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 0) throw new ConfigError(`--${name} ${value}: use a whole number`);
  return n;
}

export function buildConfig(
  options: CliOptions,
  dataPrefix: string,
  overrides: ConfigInput = {},
): CompactorConfig {
  const tier = options.tier as JobKind | undefined;
  const tierOverride: Partial<Record<string, number>> = {};
  if (options['min-files'] !== undefined)
    tierOverride.minFiles = parseWhole('min-files', options['min-files']);
  if (options['min-age'] !== undefined)
    tierOverride.minAgeSeconds = parseWhole('min-age', options['min-age']);
  if (Object.keys(tierOverride).length > 0 && !TIERS.includes(tier as TierName)) {
    throw new ConfigError(
      `--min-files and --min-age apply to one tier: add --tier ${TIERS.join(', --tier ')}`,
    );
  }
  let tiers = overrides.tiers;
  if (options.monthly) tiers = { ...tiers, monthly: { ...tiers?.monthly, enabled: true } };
  if (tier !== undefined && tier !== 'retention' && Object.keys(tierOverride).length > 0)
    tiers = { ...tiers, [tier]: { ...tiers?.[tier], ...tierOverride } };
  const retention = {
    ...overrides.retention,
    ...(options.retention !== undefined ? { rules: parseRetentionRules(options.retention) } : {}),
    ...(options['retention-buffer'] !== undefined
      ? { bufferHours: parseWhole('retention-buffer', options['retention-buffer']) }
      : {}),
  };
  return parseConfig({
    // A cycle run by hand lists the whole lake, as a sweep does: the schedule's narrow cycles
    // (planning.listing "windowed", the stack's default) rely on sweep records a CLI lake has not.
    planning: { listing: 'full' },
    ...overrides,
    dataPrefix,
    ...(options.layout !== undefined ? { layout: options.layout } : {}),
    ...(tiers ? { tiers } : {}),
    ...(Object.keys(retention).length > 0 ? { retention } : {}),
    ...(options.quiet !== undefined ? { quietSeconds: parseWhole('quiet', options.quiet) } : {}),
    ...(options['target-size'] !== undefined
      ? { targetFileBytes: parseSize('target-size', options['target-size']) }
      : {}),
    ...(options['row-group-size'] !== undefined
      ? { rowGroupSize: parseWhole('row-group-size', options['row-group-size']) }
      : {}),
    ...(options['max-job-bytes'] !== undefined
      ? { maxJobBytes: parseSize('max-job-bytes', options['max-job-bytes']) }
      : {}),
    ...(options['max-job-files'] !== undefined
      ? { maxJobFiles: parseWhole('max-job-files', options['max-job-files']) }
      : {}),
    ...(options['sort-keys'] !== undefined
      ? { sortKeys: options['sort-keys'].split(',').filter(Boolean) }
      : {}),
    ...(options['time-column'] !== undefined ? { timeColumn: options['time-column'] } : {}),
    ...(options['partition-segments'] !== undefined
      ? { partitionSegments: options['partition-segments'].split(',').filter(Boolean) }
      : {}),
    ...(options['data-suffix'] !== undefined ? { dataSuffix: options['data-suffix'] } : {}),
    ...(options['unsafe-single-writer-store'] === true ? { unsafeSingleWriterStore: true } : {}),
  });
}

export function buildClock(now: string | undefined): Clock {
  if (now === undefined) return systemClock;
  const at = Date.parse(now);
  if (Number.isNaN(at)) throw new ConfigError(`--now ${now}: use an ISO time like 2025-01-15T12:00:00Z`);
  // Acts as if at the given time, advancing with real time so leases still run out.
  const offset = at - Date.now();
  return { now: () => new Date(Date.now() + offset) };
}

/** The local scratch folder: --work-dir, else the system temp folder's compactor-work. */
export function workDirOf(options: Pick<CliOptions, 'work-dir'>): string {
  return resolve(options['work-dir'] ?? join(tmpdir(), 'compactor-work'));
}

export async function buildEngine(options: CliOptions): Promise<{ engine: DuckDbEngine; workDir: string }> {
  const workDir = workDirOf(options);
  // DuckDB's native library is loaded by the commands that merge or read Parquet, not by all.
  const { DuckDbEngine } = await import('../adapters/duckdb-engine.ts');
  const engine = await DuckDbEngine.create({
    tempDirectory: join(workDir, 'spill'),
    ...(options['memory-limit'] !== undefined ? { memoryLimit: options['memory-limit'] } : {}),
    ...(options.threads !== undefined ? { threads: parseWhole('threads', options.threads) } : {}),
  });
  return { engine, workDir };
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
