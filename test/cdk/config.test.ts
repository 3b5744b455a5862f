import { describe, expect, it } from 'vitest';
import { cdkJsonContext } from '../../cdk/app.ts';
import { lambdaConfigInput, lambdaConfigJson, parseStackConfig, STACK_DEFAULTS } from '../../cdk/config.ts';
import { buildConfig } from '../../functions/cli/context.ts';
import { parseConfig } from '../../functions/core/config.ts';
import { duckDbMemoryLimit, vcpusFor } from '../../functions/core/lambda-sizing.ts';

describe('stack config: defaults', () => {
  it('gives every default when the context is absent', () => {
    expect(parseStackConfig(undefined)).toEqual(STACK_DEFAULTS);
    expect(STACK_DEFAULTS).toMatchObject({
      bucket: { create: true },
      dataPrefix: '',
      layout: 'arc',
      tiers: {
        hourly: { schedule: 'cron(10 * * * ? *)', minFiles: 10, minAgeSeconds: 3600, enabled: true },
        daily: { schedule: 'cron(30 3 * * ? *)', minFiles: 2, minAgeSeconds: 10800, enabled: true },
      },
      quietSeconds: 300,
      targetFileBytes: 512 * 1024 * 1024,
      // Express children's bounds (cdk/child-budget.ts).
      maxJobBytes: 256 * 1024 * 1024,
      maxJobFiles: 2000,
      sortKeys: [],
      timeColumn: 'time',
      map: { maxConcurrency: 10, toleratedFailurePercentage: 5, childExecutionType: 'EXPRESS' },
      lambda: {
        compact: { memoryMb: 3008, ephemeralStorageMb: 10240, timeoutSeconds: 36 },
        partitionSteps: { memoryMb: 512, ephemeralStorageMb: 512, timeoutSeconds: 9 },
        others: { memoryMb: 512, timeoutSeconds: 300 },
      },
      metricsNamespace: 'Compactor',
      removalPolicy: 'retain',
    });
  });

  it('cdk.json documents exactly the defaults (no drift between cdk.json and the code)', () => {
    expect(parseStackConfig(cdkJsonContext().compactor)).toEqual(STACK_DEFAULTS);
  });

  it('gives the Lambdas the core config, whose own parser accepts it, with a lease beyond the longest timeout', () => {
    const input = lambdaConfigInput(STACK_DEFAULTS);
    // The longest step is now recover/plan/summary (300 s): Express keeps the chain's short.
    expect(input.leaseSeconds).toBe(300 + 300);
    const core = parseConfig(JSON.parse(lambdaConfigJson(STACK_DEFAULTS)));
    expect(core.tiers).toEqual({
      // Behind after three of the tier's periods (a month at its longest).
      hourly: { enabled: true, minFiles: 10, minAgeSeconds: 3600, behindAfterSeconds: 3 * 3600 },
      daily: { enabled: true, minFiles: 2, minAgeSeconds: 10800, behindAfterSeconds: 3 * 86_400 },
      monthly: { enabled: false, minFiles: 2, minAgeSeconds: 86400, behindAfterSeconds: 3 * 31 * 86_400 },
    });
    expect(core.layout.dataPrefix).toBe('');
    expect(core.leaseSeconds).toBe(600);
  });
});

describe('stack config: overrides', () => {
  it('applies overrides and keeps defaults for the rest', () => {
    const config = parseStackConfig({
      bucket: { create: false, name: 'my-lake' },
      dataPrefix: 'lake/raw',
      layout: 'hive',
      tiers: {
        hourly: { minFiles: 4, schedule: 'rate(30 minutes)', behindAfterSeconds: 7200 },
        daily: { enabled: false },
      },
      sortKeys: ['host'],
      map: { maxConcurrency: 50, childExecutionType: 'STANDARD' },
      lambda: { compact: { memoryMb: 10240, timeoutSeconds: 600 } },
      alarmEmail: 'ops@example.com',
      removalPolicy: 'destroy',
    });
    expect(config.bucket).toEqual({ create: false, name: 'my-lake', encryption: 's3', kmsKeyArn: undefined });
    expect(config.dataPrefix).toBe('lake/raw/');
    expect(config.tiers.hourly).toEqual({
      schedule: 'rate(30 minutes)',
      minFiles: 4,
      minAgeSeconds: 3600,
      behindAfterSeconds: 7200,
      enabled: true,
    });
    expect(config.tiers.daily.enabled).toBe(false);
    expect(config.map).toEqual({
      maxConcurrency: 50,
      toleratedFailurePercentage: 5,
      childExecutionType: 'STANDARD',
    });
    expect(config.lambda.compact).toEqual({
      memoryMb: 10240,
      ephemeralStorageMb: 10240,
      timeoutSeconds: 600,
    });
    expect(config.alarmEmail).toBe('ops@example.com');
    const input = lambdaConfigInput(config);
    expect(input).toMatchObject({ layout: 'hive', dataPrefix: 'lake/raw/', sortKeys: ['host'] });
    expect(input.tiers?.hourly?.behindAfterSeconds).toBe(7200);
    // The lease covers the longest step: compact 600 s, others 300 s.
    expect(input.leaseSeconds).toBe(900);
  });

  it('passes retention rules and buffer to the Lambdas; the core parses them', () => {
    expect(STACK_DEFAULTS.retention).toEqual({
      rules: {},
      bufferHours: 24,
      schedule: 'cron(0 5 * * ? *)',
      enabled: true,
    });
    const config = parseStackConfig({
      retention: { rules: { '//': 'a note', 'mydb/cpu/': 30, '*': 365 }, bufferHours: 6 },
    });
    expect(config.retention.rules).toEqual({ 'mydb/cpu/': 30, '*': 365 });
    const core = parseConfig(JSON.parse(lambdaConfigJson(config)));
    expect(core.retention).toEqual({
      rules: [
        { table: 'mydb/cpu/', days: 30 },
        { table: '*', days: 365 },
      ],
      bufferHours: 6,
    });
  });

  it('accepts the JSON string the CDK CLI passes for -c compactor=...', () => {
    expect(parseStackConfig('{"dataPrefix":"x","map":{"toleratedFailurePercentage":0}}')).toMatchObject({
      dataPrefix: 'x/',
      map: { maxConcurrency: 10, toleratedFailurePercentage: 0 },
    });
  });

  it('ignores "//" comment keys', () => {
    expect(parseStackConfig({ '//': 'a note', tiers: { '//': 'another' } })).toEqual(STACK_DEFAULTS);
  });

  it('passes dedup to the Lambdas per table, and leaves it out of their config when none is set', () => {
    expect(lambdaConfigInput(STACK_DEFAULTS)).not.toHaveProperty('dedup');
    const dedup = { 'mydb/cpu/': { mode: 'exact' }, 'mydb/mem/': { mode: 'last', keys: ['host'] } };
    const config = parseStackConfig({ dedup: { '//': 'cpu writers retry', ...dedup } });
    expect(config.dedup).toEqual(dedup);
    const core = parseConfig(JSON.parse(lambdaConfigJson(config)));
    expect([...core.dedup]).toEqual([
      ['mydb/cpu/', { mode: 'exact' }],
      ['mydb/mem/', { mode: 'last', keys: ['host'] }],
    ]);
  });

  it('passes naiveTimestampsUtc to the Lambdas, and leaves it out of their config when none is set', () => {
    expect(lambdaConfigInput(STACK_DEFAULTS)).not.toHaveProperty('naiveTimestampsUtc');
    const config = parseStackConfig({ naiveTimestampsUtc: ['mydb/cpu/'] });
    const core = parseConfig(JSON.parse(lambdaConfigJson(config)));
    expect([...core.naiveTimestampsUtc]).toEqual(['mydb/cpu/']);
  });

  it('passes timeUnits to the Lambdas (and to a CLI run, as --context), and leaves it out when none is set', async () => {
    expect(lambdaConfigInput(STACK_DEFAULTS)).not.toHaveProperty('timeUnits');
    const config = parseStackConfig({ timeUnits: { 'mydb/cpu/': 'ms' } });
    const core = parseConfig(JSON.parse(lambdaConfigJson(config)));
    expect([...core.timeUnits]).toEqual([['mydb/cpu/', 'ms']]);
    const local = buildConfig(
      { context: JSON.stringify({ timeUnits: { 'mydb/cpu/': 'ns' }, naiveTimestampsUtc: ['mydb/mem/'] }) },
      '',
    );
    expect([...local.timeUnits]).toEqual([['mydb/cpu/', 'ns']]);
    expect([...local.naiveTimestampsUtc]).toEqual(['mydb/mem/']);
  });

  it('sizes DuckDB from the compact memory: ~75% of it and one thread per vCPU', () => {
    expect(duckDbMemoryLimit(3008)).toBe('2200MB');
    expect(duckDbMemoryLimit(10240)).toBe('7600MB');
    expect(vcpusFor(1769)).toBe(1);
    expect(vcpusFor(3008)).toBe(2);
    expect(vcpusFor(10240)).toBe(6);
  });
});

describe('stack config: bucket encryption', () => {
  const key = 'arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab';
  it.each([
    ['a created bucket, by default', {}, { create: true, encryption: 's3', kmsKeyArn: undefined }],
    [
      'a created bucket under its own key',
      { encryption: 'kms' },
      { encryption: 'kms', kmsKeyArn: undefined },
    ],
    ['a created bucket under a named key', { kmsKeyArn: key }, { encryption: 'kms', kmsKeyArn: key }],
    [
      'an imported SSE-KMS bucket',
      { create: false, name: 'lake', kmsKeyArn: key },
      { create: false, encryption: 'kms', kmsKeyArn: key },
    ],
  ])('%s', (_name, bucket, expected) => {
    expect(parseStackConfig({ bucket }).bucket).toMatchObject(expected);
  });
});

describe('stack config: invalid values fail and name the key', () => {
  const cases: [string, unknown, RegExp][] = [
    ['not an object', 42, /context compactor must be an object/],
    ['not JSON', '{dataPrefix:', /context compactor must be a JSON object/],
    ['unknown key', { dataprefix: 'x' }, /compactor\.dataprefix is not a setting/],
    ['unknown tier', { tiers: { weekly: {} } }, /compactor\.tiers\.weekly is not a setting/],
    [
      'unknown nested key',
      { lambda: { compact: { memory: 1 } } },
      /compactor\.lambda\.compact\.memory is not a setting/,
    ],
    ['import without name', { bucket: { create: false } }, /compactor\.bucket\.name is required/],
    [
      'bad bucket name',
      { bucket: { name: 'Bad_Name' } },
      /compactor\.bucket\.name is not a valid S3 bucket name/,
    ],
    ['encryption', { bucket: { encryption: 'aes' } }, /compactor\.bucket\.encryption must be "s3".*or "kms"/],
    [
      'key alias',
      { bucket: { kmsKeyArn: 'arn:aws:kms:eu-west-1:111122223333:alias/lake' } },
      /compactor\.bucket\.kmsKeyArn must be the key's ARN .* not an alias/,
    ],
    ['key id', { bucket: { kmsKeyArn: '1234abcd' } }, /compactor\.bucket\.kmsKeyArn is not a KMS key ARN/],
    [
      'key with s3',
      {
        bucket: {
          encryption: 's3',
          kmsKeyArn: 'arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab',
        },
      },
      /compactor\.bucket\.kmsKeyArn names a KMS key, but bucket\.encryption is "s3"/,
    ],
    [
      'imported kms without key',
      { bucket: { create: false, name: 'lake', encryption: 'kms' } },
      /compactor\.bucket\.kmsKeyArn is required for an imported SSE-KMS bucket/,
    ],
    [
      'minFiles zero',
      { tiers: { hourly: { minFiles: 0 } } },
      /compactor\.tiers\.hourly\.minFiles must be a whole number/,
    ],
    [
      'minFiles string',
      { tiers: { daily: { minFiles: '2' } } },
      /compactor\.tiers\.daily\.minFiles must be a whole number/,
    ],
    [
      'schedule',
      { tiers: { daily: { schedule: '0 3 * * *' } } },
      /compactor\.tiers\.daily\.schedule must be a Scheduler expression/,
    ],
    [
      'enabled',
      { tiers: { daily: { enabled: 'no' } } },
      /compactor\.tiers\.daily\.enabled must be true or false/,
    ],
    ['prefix slash', { dataPrefix: '/lake' }, /compactor\.dataPrefix must not start with "\/"/],
    ['prefix wildcard', { dataPrefix: 'la*ke' }, /compactor\.dataPrefix must not contain/],
    ['prefix dotdot', { dataPrefix: 'a/../b' }, /compactor\.dataPrefix must not hold/],
    ['sortKeys', { sortKeys: 'host' }, /compactor\.sortKeys must be a list of column names/],
    [
      'concurrency',
      { map: { maxConcurrency: 0 } },
      /compactor\.map\.maxConcurrency must be a whole number from 1 to 10000/,
    ],
    [
      'tolerated',
      { map: { toleratedFailurePercentage: 101 } },
      /compactor\.map\.toleratedFailurePercentage must be/,
    ],
    [
      'memory',
      { lambda: { compact: { memoryMb: 64 } } },
      /compactor\.lambda\.compact\.memoryMb must be a whole number from 128 to 10240/,
    ],
    [
      'timeout',
      { lambda: { others: { timeoutSeconds: 901 } } },
      /compactor\.lambda\.others\.timeoutSeconds must be/,
    ],
    [
      'storage',
      { lambda: { compact: { ephemeralStorageMb: 100 } } },
      /compactor\.lambda\.compact\.ephemeralStorageMb must be/,
    ],
    [
      'retention rules',
      { retention: { rules: ['mydb/'] } },
      /compactor\.retention\.rules must be an object of table path to days/,
    ],
    [
      'retention days',
      { retention: { rules: { 'mydb/': 0 } } },
      /context compactor\.retention\.rules\["mydb\/"\] must be a whole number of days from 1 to 36500, got 0/,
    ],
    [
      'retention path',
      { retention: { rules: { 'mydb/cpu/2025/': 30 } } },
      /retention\.rules\["mydb\/cpu\/2025\/"\]: layout .* names a table with 2 segment/,
    ],
    [
      'retention schedule',
      { retention: { schedule: 'daily' } },
      /compactor\.retention\.schedule must be a Scheduler expression/,
    ],
    ['retention buffer', { retention: { bufferHours: -1 } }, /compactor\.retention\.bufferHours must be/],
    ['retention key', { retention: { days: 30 } }, /compactor\.retention\.days is not a setting/],
    ['email', { alarmEmail: 'ops' }, /compactor\.alarmEmail is not an email address/],
    [
      'namespace',
      { metricsNamespace: 'AWS/Lambda' },
      /compactor\.metricsNamespace is not a custom CloudWatch namespace/,
    ],
    ['removal', { removalPolicy: 'snapshot' }, /compactor\.removalPolicy must be "retain" or "destroy"/],
    ['dedup list', { dedup: ['mydb/cpu/'] }, /compactor\.dedup must be an object of table path/],
    [
      'dedup table',
      { dedup: { 'mydb/cpu': { mode: 'exact' } } },
      /^context compactor: dedup\["mydb\/cpu"\]: "mydb\/cpu" is not a table of layout/,
    ],
    [
      'dedup table of another layout',
      { layout: 'hive', dedup: { 'mydb/cpu/': { mode: 'exact' } } },
      /dedup\["mydb\/cpu\/"\]: "mydb\/cpu\/" is not a table of layout "\{table\}/,
    ],
    [
      'dedup keys',
      { dedup: { 'mydb/mem/': { mode: 'last' } } },
      /^context compactor: dedup\["mydb\/mem\/"\]\.keys must list the columns/,
    ],
    [
      'naiveTimestampsUtc not a list',
      { naiveTimestampsUtc: 'mydb/cpu/' },
      /compactor\.naiveTimestampsUtc must be a list of table paths/,
    ],
    [
      'naiveTimestampsUtc table',
      { naiveTimestampsUtc: ['mydb/cpu'] },
      /^context compactor: naiveTimestampsUtc: "mydb\/cpu" is not a table of layout/,
    ],
    [
      'timeUnits not an object',
      { timeUnits: ['mydb/cpu/'] },
      /compactor\.timeUnits must be an object of table path -> "s" \| "ms" \| "us" \| "ns"/,
    ],
    [
      'timeUnits unit',
      { timeUnits: { 'mydb/cpu/': 'seconds' } },
      /^context compactor\.timeUnits\["mydb\/cpu\/"\] must be one of "s", "ms", "us", "ns"/,
    ],
    [
      'timeUnits table',
      { timeUnits: { 'mydb/cpu': 'ms' } },
      /^context compactor: timeUnits\["mydb\/cpu"\]: "mydb\/cpu" is not a table of layout/,
    ],
    [
      'job larger than /tmp',
      { maxJobBytes: 8 * 1024 ** 3, lambda: { compact: { ephemeralStorageMb: 4096 } } },
      /compactor\.maxJobBytes \(8589934592\) must fit the compact Lambda's \/tmp/,
    ],
  ];
  it.each(cases)('%s', (_name, value, message) => {
    expect(() => parseStackConfig(value)).toThrow(message);
  });

  it("fails synth with the core's own message for what the core rejects", () => {
    // The layout is the core's rule (its message, prefixed); the target size and the time column
    // are checked by the core's schema, which the stack's is built from: the same words.
    expect(() => parseStackConfig({ layout: '{table}/{YYYY}/{MM}/{DD}/' })).toThrow(
      /^context compactor: layout "\{table\}\/\{YYYY\}\/\{MM\}\/\{DD\}\/" must contain \{HH\} exactly once$/,
    );
    expect(() => parseStackConfig({ targetFileBytes: 6 * 1024 ** 3 })).toThrow(
      /^context compactor\.targetFileBytes must be a whole number of bytes from 1 to 5367660544 \(4\.99 GiB\), got 6442450944$/,
    );
    expect(() => parseStackConfig({ timeColumn: '' })).toThrow(
      /^context compactor\.timeColumn must be a column name, got ""$/,
    );
  });

  it('throws the core ConfigError class', () => {
    try {
      parseStackConfig({ removalPolicy: 'x' });
      expect.unreachable();
    } catch (error) {
      expect((error as Error).name).toBe('ConfigError');
    }
  });
});
