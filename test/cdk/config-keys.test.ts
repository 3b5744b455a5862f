/**
 * Every key of the stack context's schema, one by one: set in the context, it changes a local command's
 * effective config (what the CLI builds) as it changes the deployed one (the core's parse of
 * lambdaConfigInput, the synthesized COMPACTOR_CONFIG), or it is deploy-only, with the reason.
 * A new key fails here until it is classified.
 */

import { describe, expect, it } from 'vitest';
import { lambdaConfigInput, parseStackConfig } from '../../cdk/config.ts';
import { compactorContextOver, mergeContext } from '../../cdk/config-context.ts';
import { stackSettingRows } from '../../cdk/config-reference.ts';
import { resolveConfigInput } from '../../functions/cli/context.ts';
import { type CompactorConfig, parseConfig } from '../../functions/core/config.ts';

const MiB = 1024 * 1024;
const STANDARD = { map: { childExecutionType: 'STANDARD' } };
const WINDOWED = { planning: { listing: 'windowed' } };

/** Keys only the deployment reads: none reaches COMPACTOR_CONFIG. */
const DEPLOY_ONLY: Record<string, string> = {
  'bucket.create': 'whether the stack owns the bucket; a local command is given its store',
  'bucket.name': 'the bucket the stack creates or imports; a local command is given its store',
  'bucket.encryption': "the bucket's default encryption (IAM and KMS grants)",
  'bucket.kmsKeyArn': "the KMS key the stack's roles are granted",
  dataPrefix: "the store's data prefix (s3://bucket/prefix or a folder) replaces it locally",
  'tiers.hourly.schedule': 'an EventBridge schedule',
  'tiers.daily.schedule': 'an EventBridge schedule',
  'tiers.monthly.schedule': 'an EventBridge schedule',
  'tiers.hourly.enabled': "pauses hourly's schedule only",
  'tiers.daily.enabled': "pauses daily's schedule only",
  'retention.schedule': 'an EventBridge schedule',
  'retention.enabled': "pauses retention's schedule only",
  'map.maxConcurrency': "the Map's MaxConcurrency (locally --concurrency)",
  'map.toleratedFailurePercentage': "the Summary step's tolerance, read from the state machine definition",
  'lambda.compact.memoryMb': 'Lambda sizing',
  'lambda.compact.ephemeralStorageMb': 'Lambda sizing (checked against maxJobBytes at synth)',
  'lambda.partitionSteps.memoryMb': 'Lambda sizing',
  'lambda.partitionSteps.ephemeralStorageMb': 'Lambda sizing',
  'lambda.others.memoryMb': 'Lambda sizing',
  'lambda.others.ephemeralStorageMb': 'Lambda sizing',
  'canary.enabled': 'deploys the scheduled canary state machine, its Lambdas, schedule and alarms',
  'canary.schedule': 'an EventBridge schedule',
  alarmEmail: "the alarms' SNS subscription",
  metricsNamespace: "the dashboard's and alarms' CloudWatch namespace",
  removalPolicy: "the created bucket's and logs' removal policy",
};

/** Keys that reach COMPACTOR_CONFIG: a value that changes it, over `base` when one is needed. */
const PROTOCOL: Record<string, { readonly value: unknown; readonly base?: Record<string, unknown> }> = {
  // cdk.json spells out daily's `enabled: true`, which hive refuses.
  layout: { value: 'hive', base: { tiers: { daily: { enabled: false } } } },
  partitionSegments: { value: ['{HH}'], base: { tiers: { daily: { enabled: false } } } },
  dataSuffix: { value: '' },
  'tiers.hourly.minFiles': { value: 50 },
  'tiers.hourly.behindAfterSeconds': { value: 14_400 },
  'tiers.hourly.minAgeSeconds': { value: 7200 },
  'tiers.daily.minFiles': { value: 5 },
  'tiers.daily.behindAfterSeconds': { value: 5 * 86_400 },
  'tiers.daily.minAgeSeconds': { value: 20_000 },
  'tiers.monthly.minFiles': { value: 5 },
  'tiers.monthly.behindAfterSeconds': { value: 60 * 86_400 },
  'tiers.monthly.minAgeSeconds': { value: 100_000 },
  'tiers.monthly.enabled': { value: true },
  'retention.rules': { value: { '*': 30 } },
  'retention.bufferHours': { value: 48 },
  quietSeconds: { value: 60 },
  targetFileBytes: { value: 256 * MiB },
  rowGroupSize: { value: 65_536 },
  maxJobBytes: { value: 128 * MiB },
  maxJobFiles: { value: 1000 },
  maxJobsPerPartition: { value: 3 },
  smallJobsPerItem: { value: 4 },
  receiptDays: { value: 30 },
  sortKeys: { value: ['host'] },
  timeColumn: { value: 'ts' },
  dedup: { value: { 'db/cpu/': { mode: 'exact' } } },
  naiveTimestampsUtc: { value: ['db/cpu/'] },
  timeColumns: { value: { 'db/cpu/': 'ts' } },
  timeUnits: { value: { 'db/cpu/': 'ms' } },
  // Local runs list in full unless told (docs/configuration.md): from windowed, both change alike.
  'planning.listing': { value: 'full', base: WINDOWED },
  'planning.lookbackHours': { value: 12, base: WINDOWED },
  'planning.sweepEveryHours': { value: 12, base: WINDOWED },
  'planning.listConcurrency': { value: 8, base: WINDOWED },
  // The job bounds and timeouts default by it.
  'map.childExecutionType': { value: 'STANDARD' },
  // The lease outlives the longest step timeout; Express caps the chain, so over Standard.
  'lambda.compact.timeoutSeconds': { value: 800, base: STANDARD },
  'lambda.partitionSteps.timeoutSeconds': {
    value: 800,
    base: { ...STANDARD, lambda: { compact: { timeoutSeconds: 100 } } },
  },
  'lambda.others.timeoutSeconds': { value: 600 },
};

function contextWith(key: string, value: unknown): Record<string, unknown> {
  return key.split('.').reduceRight<unknown>((inner, part) => ({ [part]: inner }), value) as Record<
    string,
    unknown
  >;
}

function localConfig(context: Record<string, unknown>): CompactorConfig {
  return parseConfig(resolveConfigInput({ context: JSON.stringify(context) }, ''));
}

function deployedConfig(context: Record<string, unknown>): CompactorConfig {
  return parseConfig({
    ...lambdaConfigInput(parseStackConfig(compactorContextOver(context))),
    dataPrefix: '',
  });
}

/** The local default of planning.listing differs on purpose (docs/configuration.md). */
function withoutPlanning(config: CompactorConfig): Omit<CompactorConfig, 'planning'> {
  const { planning: _, ...rest } = config;
  return rest;
}

/** Every settable key of the schema; a table-path map (dedup, retention.rules) is one key. */
const KEYS = stackSettingRows()
  .filter((row) => !row.section)
  .map((row) => row.key);

describe('every stack context key', () => {
  it('is classified: reaching COMPACTOR_CONFIG or deploy-only, and nothing else is listed', () => {
    const unclassified = KEYS.filter((key) => !(key in PROTOCOL) && !(key in DEPLOY_ONLY));
    expect(unclassified, 'add each to PROTOCOL (with a value) or DEPLOY_ONLY (with the reason)').toEqual([]);
    expect([...Object.keys(PROTOCOL), ...Object.keys(DEPLOY_ONLY)].filter((k) => !KEYS.includes(k))).toEqual(
      [],
    );
    expect(Object.keys(PROTOCOL).filter((key) => key in DEPLOY_ONLY)).toEqual([]);
  });

  it.each(Object.entries(PROTOCOL))(
    '%s changes the local config as it changes the deployed one',
    (key, { value, base = {} }) => {
      const changed = mergeContext(base, contextWith(key, value));
      const deployed = deployedConfig(changed);
      const local = localConfig(changed);
      expect(deployed).not.toEqual(deployedConfig(base));
      expect(local).not.toEqual(localConfig(base));
      if (key.startsWith('planning.')) expect(local).toEqual(deployed);
      else expect(withoutPlanning(local)).toEqual(withoutPlanning(deployed));
    },
  );

  it.each(Object.keys(DEPLOY_ONLY))(
    '%s leaves the deployed COMPACTOR_CONFIG and the local config as they are',
    (key) => {
      const defaults = lambdaConfigInput(parseStackConfig(compactorContextOver()));
      const value = deployOnlyValue(key);
      const base = key === 'bucket.kmsKeyArn' ? { bucket: { create: true, encryption: 'kms' } } : {};
      const changed = lambdaConfigInput(
        parseStackConfig(compactorContextOver(mergeContext(base, contextWith(key, value)))),
      );
      expect({ ...changed, dataPrefix: '' }).toEqual({ ...defaults, dataPrefix: '' });
      expect(localConfig(mergeContext(base, contextWith(key, value)))).toEqual(localConfig(base));
    },
  );
});

/** A valid value other than the default for a deploy-only key. */
function deployOnlyValue(key: string): unknown {
  const values: Record<string, unknown> = {
    'bucket.create': true,
    'bucket.name': 'my-lake',
    'bucket.encryption': 'kms',
    'bucket.kmsKeyArn': 'arn:aws:kms:us-east-1:123456789012:key/11111111-2222-3333-4444-555555555555',
    dataPrefix: 'lake/',
    alarmEmail: 'ops@example.com',
    metricsNamespace: 'Other',
    removalPolicy: 'destroy',
    'map.maxConcurrency': 3,
    'map.toleratedFailurePercentage': 20,
    'canary.enabled': true,
  };
  if (key in values) return values[key];
  if (key.endsWith('.schedule')) return 'rate(2 hours)';
  if (key.endsWith('.enabled')) return false;
  if (key.endsWith('.memoryMb')) return 1024;
  if (key.endsWith('.ephemeralStorageMb')) return key.includes('compact') ? 10_240 : 1024;
  throw new Error(`no test value for ${key}`);
}

describe('a settings flag over --context', () => {
  const context = JSON.stringify({
    retention: { rules: { '*': 365, 'db/': 90 } },
    tiers: { hourly: { minFiles: 7 } },
  });
  const rules = (retention?: string) =>
    parseConfig(resolveConfigInput({ context, ...(retention === undefined ? {} : { retention }) }, ''))
      .retention.rules;

  it('sets its key whole: --retention is the rule set, none is no rule, and keys beside a flag keep --context', () => {
    expect(rules()).toHaveLength(2);
    expect(rules('db/cpu/=30').map((r) => [r.table, r.days])).toEqual([['db/cpu/', 30]]);
    expect(rules('none')).toEqual([]);
    const config = parseConfig(
      resolveConfigInput({ context, tier: 'hourly', 'min-age': '60', retention: 'none' }, ''),
    );
    // --min-age sets tiers.hourly.minAgeSeconds; --context's tiers.hourly.minFiles stays.
    expect(config.tiers.hourly).toMatchObject({ minFiles: 7, minAgeSeconds: 60 });
  });
});
