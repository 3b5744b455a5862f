/**
 * The settings' reference is generated from the schemas (cdk/config-reference.ts): the key tables
 * of docs/configuration.md and cdk/compactor-context.schema.json. A change to a setting fails
 * this test until they are written again: `UPDATE_DOCS=1 npx vitest run test/cdk/config-reference.test.ts`.
 * The JSON Schema is checked by a real JSON Schema evaluator (ajv, draft 2020-12) against cdk.json.
 */

import { readFileSync, writeFileSync } from 'node:fs';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import { lambdaConfigInput, parseStackConfig } from '../../cdk/config.ts';
import { cdkJsonContext } from '../../cdk/config-context.ts';
import {
  contextJsonSchema,
  lambdaOnlySettingRows,
  settingsTable,
  stackSettingRows,
} from '../../cdk/config-reference.ts';
import { cliOptionRows, optionsTable } from '../../functions/cli/option-reference.ts';
import { parseConfig } from '../../functions/core/config.ts';

const DOC = new URL('../../docs/configuration.md', import.meta.url);
const SCHEMA = new URL('../../cdk/compactor-context.schema.json', import.meta.url);

function block(name: string, body: string): { start: string; end: string; text: string } {
  const start = `<!-- ${name}:start -->`;
  const end = `<!-- ${name}:end -->`;
  return { start, end, text: `${start}\n${body}\n${end}` };
}

/** Compares `path` with `expected`, or writes it when UPDATE_DOCS is set. */
function generated(path: URL, current: string, expected: string, whole: string): void {
  if (process.env.UPDATE_DOCS && current !== expected) {
    writeFileSync(path, whole.replace(current, expected));
    return;
  }
  expect(current).toBe(expected);
}

describe('docs/configuration.md', () => {
  it.each([
    ['context-keys', () => settingsTable(stackSettingRows())],
    ['lambda-config-keys', () => settingsTable(lambdaOnlySettingRows())],
    ['cli-options', () => optionsTable(cliOptionRows())],
  ])('its %s table is the schema rendered', (name, render) => {
    const text = readFileSync(DOC, 'utf8');
    const b = block(name, render());
    const from = text.indexOf(b.start);
    const to = text.indexOf(b.end);
    expect(from, `docs/configuration.md has no ${b.start} block`).toBeGreaterThanOrEqual(0);
    generated(DOC, text.slice(from, to + b.end.length), b.text, text);
  });

  it('gives every key a meaning, and every value key a default', () => {
    for (const row of [...stackSettingRows(), ...lambdaOnlySettingRows()]) {
      expect(row.meaning, row.key).not.toBe('');
      if (!row.section) expect(row.default, row.key).not.toBe('');
    }
  });
});

describe('cdk/compactor-context.schema.json', () => {
  it('is the schema rendered', () => {
    const expected = `${JSON.stringify(contextJsonSchema(), null, 2)}\n`;
    let current = '';
    try {
      current = readFileSync(SCHEMA, 'utf8');
    } catch {
      // Absent: written below when UPDATE_DOCS is set.
    }
    if (process.env.UPDATE_DOCS && current !== expected) writeFileSync(SCHEMA, expected);
    else expect(current).toBe(expected);
  });

  const validate = new Ajv2020({ strict: false }).compile(contextJsonSchema());

  it("accepts cdk.json's own context, comments included", () => {
    const context = cdkJsonContext().compactor;
    expect(JSON.stringify(context)).toContain('"//');
    expect(validate(context), JSON.stringify(validate.errors)).toBe(true);
  });

  it('accepts a "//" comment in a table-path map, as the stack does', () => {
    const context = { retention: { rules: { '//': 'a year for everything', '*': 365 } } };
    expect(validate(context), JSON.stringify(validate.errors)).toBe(true);
    expect(parseStackConfig(context).retention.rules).toEqual({ '*': 365 });
  });

  it.each([
    [{ tiers: { hourly: { minFiles: 0 } } }, '/tiers/hourly/minFiles'],
    [{ tiers: { hourly: { minFile: 3 } } }, '/tiers/hourly'],
    [{ map: { childExecutionType: 'express' } }, '/map/childExecutionType'],
    [{ timeUnits: { 'mydb/cpu/': 'seconds' } }, '/timeUnits/mydb~1cpu~1'],
    [{ retention: { rules: { '*': 0 } } }, '/retention/rules/*'],
    [{ planning: { sweepEveryHours: 400 } }, '/planning/sweepEveryHours'],
  ])('refuses %j at %s, as the stack does', (context, where) => {
    expect(validate(context)).toBe(false);
    expect(validate.errors?.map((e) => e.instancePath)).toContain(where);
    expect(() => parseStackConfig(context)).toThrow(/^context compactor\./);
  });

  it('carries the defaults parseStackConfig fills: an editor filling them changes nothing', () => {
    const schema = contextJsonSchema();
    // Every section present and empty, so ajv's useDefaults can fill each of its keys.
    const sections = (node: Record<string, unknown>): Record<string, unknown> =>
      Object.fromEntries(
        Object.entries((node.properties ?? {}) as Record<string, Record<string, unknown>>)
          .filter(([, child]) => child.type === 'object' && child.properties !== undefined)
          .map(([key, child]) => [key, sections(child)]),
      );
    const filled = sections(schema);
    const fill = new Ajv2020({ strict: false, useDefaults: true }).compile(schema);
    expect(fill(filled), JSON.stringify(fill.errors)).toBe(true);
    expect(JSON.stringify(filled)).toContain('"minFiles":10');
    // The stack leaves `planning` to the core, which fills its defaults: compare what the Lambdas get too.
    const effective = (context: Record<string, unknown>) => {
      const stack = parseStackConfig(context);
      return { stack: { ...stack, planning: undefined }, lambdas: parseConfig(lambdaConfigInput(stack)) };
    };
    expect(effective(filled)).toEqual(effective({}));
  });
});
