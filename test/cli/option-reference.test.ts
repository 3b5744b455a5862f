/**
 * The options' defaults: a settings option shows its key's default, read from the stack's defaults
 * as parseStackConfig fills them (Express and Standard where they differ), and `--help` prints what
 * the docs table prints. The table itself is checked against docs/configuration.md in
 * test/cdk/config-reference.test.ts.
 */

import { describe, expect, it } from 'vitest';
import { parseStackConfig } from '../../cdk/config.ts';
import { cliOptionRows, optionDefault } from '../../functions/cli/option-reference.ts';
import { OPTIONS, type OptionName } from '../../functions/cli/options.ts';
import { cli } from '../support/cli-lake.ts';

const SETTINGS = (Object.keys(OPTIONS) as OptionName[]).filter(
  (name) => (OPTIONS[name] as { readonly setting?: string }).setting !== undefined,
);

describe('option defaults', () => {
  it('follow the stack defaults, by child type where they differ', () => {
    const express = parseStackConfig({});
    const standard = parseStackConfig({ map: { childExecutionType: 'STANDARD' } });
    expect(express.maxJobFiles).not.toBe(standard.maxJobFiles);
    expect(optionDefault('max-job-files')).toBe(
      `${express.maxJobFiles} with Express children, ${standard.maxJobFiles} with Standard`,
    );
    expect(optionDefault('min-files')).toBe(
      `hourly ${express.tiers.hourly.minFiles}, daily ${express.tiers.daily.minFiles}, monthly ${express.tiers.monthly.minFiles}`,
    );
    expect(optionDefault('quiet')).toBe(String(express.quietSeconds));
    expect(optionDefault('monthly')).toBe('off');
  });

  it('change when a stack default changes (a settings option has no default of its own)', () => {
    for (const name of SETTINGS) {
      expect((OPTIONS[name] as { readonly default?: string }).default, name).toBeUndefined();
      expect(optionDefault(name), name).toBeDefined();
    }
  });

  it.each(SETTINGS)('--help shows --%s with its default and key, as the docs table does', async (name) => {
    const run = await cli('run', '--help');
    expect(run.code).toBe(0);
    const setting = (OPTIONS[name] as { readonly setting: string }).setting;
    const lines = run.text.split('\n');
    const at = lines.findIndex((line) => line.startsWith(`  --${name} `) || line === `  --${name}`);
    expect(at, name).toBeGreaterThanOrEqual(0);
    const block = lines.slice(at, at + 4).join('\n');
    expect(block).toContain(`default ${optionDefault(name)}; cdk.json: ${setting}`);
    const row = cliOptionRows().find((r) => r.option.startsWith(`--${name}`));
    expect(row?.default).toBe(optionDefault(name));
  });
});
