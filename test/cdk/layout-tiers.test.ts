/**
 * The stack's tier enablement follows the layout's readers (Layout.tierRefusal): a hive or
 * firehose stack gets no daily schedule by default, and `tiers.daily.enabled: true` on one fails
 * `cdk synth` (createApp parses the context) with the tier, the layout and the reason.
 */

import { describe, expect, it } from 'vitest';
import { lambdaConfigInput, parseStackConfig } from '../../cdk/config.ts';
import { parseConfig } from '../../functions/core/config.ts';
import { configError } from '../support/config-error.ts';
import { resourcesOfType, synth } from './synth.ts';

describe('stack config: tiers the layout refuses', () => {
  it.each(['hive', 'firehose'])('%s: daily is off by default and the Lambdas agree', (layout) => {
    const config = parseStackConfig({ layout });
    expect(config.tiers.daily.enabled).toBe(false);
    expect(config.tiers.hourly.enabled).toBe(true);
    expect(parseConfig(lambdaConfigInput(config)).tiers.daily.enabled).toBe(false);
  });

  it('arc keeps its daily schedule', () => {
    expect(parseStackConfig({}).tiers.daily.enabled).toBe(true);
  });

  it('hive with tiers.daily.enabled true is a ConfigError naming the key, the layout and the reason', () => {
    const error = configError(() =>
      parseStackConfig({ layout: 'hive', tiers: { daily: { enabled: true } } }),
    );
    expect(error.message).toMatch(
      /^context compactor\.tiers\.daily\.enabled cannot be true: the daily tier would write its outputs in the day folder, above the partition segment "hour=\{HH\}" of layout "hive"/,
    );
  });

  it('partitionSegments and dataSuffix reach the Lambdas; hive with [] keeps daily', () => {
    const config = parseStackConfig({ layout: 'hive', partitionSegments: [], dataSuffix: '.parq' });
    expect(config.tiers.daily.enabled).toBe(true);
    const input = lambdaConfigInput(config);
    expect(input).toMatchObject({ partitionSegments: [], dataSuffix: '.parq' });
    expect(parseConfig(input).layout.dataSuffix).toBe('.parq');
    expect(configError(() => parseStackConfig({ partitionSegments: 'hour' })).message).toMatch(
      /^context compactor\.partitionSegments must be a list/,
    );
  });

  it('a synthesized hive stack has the hourly schedule and no daily one', () => {
    const { json } = synth({ compactor: { layout: 'hive' } });
    const names = resourcesOfType(json, 'AWS::Scheduler::Schedule').map(([id]) => id);
    expect(names.some((id) => /hourly/i.test(id))).toBe(true);
    expect(names.some((id) => /daily/i.test(id))).toBe(false);
    expect(
      configError(() => synth({ compactor: { layout: 'hive', tiers: { daily: { enabled: true } } } }))
        .message,
    ).toContain('tiers.daily.enabled cannot be true');
  }, 120_000);
});
