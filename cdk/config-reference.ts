/**
 * The settings' reference, derived from the schemas: every key with its meaning and default, as
 * docs/configuration.md's tables print them, and the JSON Schema editors use for cdk.json's
 * `compactor` context (cdk/compactor-context.schema.json). test/cdk/config-reference.test.ts
 * fails when the committed files differ from what this renders.
 */

import * as z from 'zod';
import { CONFIG_KEYS, DEFAULTS } from '../functions/core/config.ts';
import { configInputSchema, keyPath } from '../functions/core/config-schema.ts';
import { parseStackConfig } from './config.ts';
import { MiB, STACK_DEFAULTS } from './config-defaults.ts';
import { stackContextSchema } from './config-schema.ts';

export interface SettingRow {
  /** `tiers.hourly.minFiles`, `dedup`. */
  readonly key: string;
  readonly meaning: string;
  readonly default: string;
  /** A section (an object of named settings) rather than one value. */
  readonly section: boolean;
}

const CHILD_TYPE = 'map.childExecutionType';

/**
 * The stack's defaults with Standard children. A default that differs from STACK_DEFAULTS (the
 * Express ones) follows the child type, so the docs show both, as parseStackConfig fills them.
 */
const STANDARD_DEFAULTS = parseStackConfig({ map: { childExecutionType: 'STANDARD' } });

function unwrap(schema: z.ZodType): z.ZodType {
  return schema instanceof z.ZodOptional ? unwrap(schema.unwrap() as z.ZodType) : schema;
}

/** Every key of `schema` in order, sections before their keys; a table-path map is one key. */
function walk(schema: z.ZodType, path: readonly string[] = []): { path: string[]; schema: z.ZodType }[] {
  const inner = unwrap(schema);
  if (!(inner instanceof z.ZodObject)) return [];
  return Object.entries(inner.shape as Record<string, z.ZodType>).flatMap(([key, child]) => [
    { path: [...path, key], schema: unwrap(child) },
    ...walk(child, [...path, key]),
  ]);
}

function valueAt(root: unknown, path: readonly string[]): unknown {
  let value = root;
  for (const key of path) value = (value as Record<string, unknown> | undefined)?.[key];
  return value;
}

function show(key: string, value: unknown): string {
  if (value === undefined) return 'none';
  if (typeof value === 'number' && /Bytes$/.test(key) && value % MiB === 0) {
    return value % (1024 * MiB) === 0 ? `${value / 1024 / MiB} GiB` : `${value / MiB} MiB`;
  }
  return `\`${JSON.stringify(value)}\``;
}

/** The stack leaves some sections to the core (`planning`): their defaults are the core's DEFAULTS. */
function defaultAt(defaults: unknown, path: readonly string[]): unknown {
  return valueAt(defaults, path) ?? valueAt(DEFAULTS, path);
}

function rows(
  schema: z.ZodType,
  defaults: unknown,
  keep: (path: readonly string[]) => boolean,
): SettingRow[] {
  return walk(schema)
    .filter(({ path }) => keep(path))
    .map(({ path, schema: s }) => {
      const key = keyPath(path);
      const section = s instanceof z.ZodObject;
      const value = defaultAt(defaults, path);
      const standard = defaults === STACK_DEFAULTS ? defaultAt(STANDARD_DEFAULTS, path) : value;
      const shown = section
        ? ''
        : key !== CHILD_TYPE && JSON.stringify(standard) !== JSON.stringify(value)
          ? `Express ${show(key, value)}, Standard ${show(key, standard)}`
          : (z.globalRegistry.get(s)?.defaultText ?? show(key, value));
      return { key, meaning: s.description ?? '', default: shown, section };
    });
}

/** The stack context's keys (cdk.json's `compactor`, `--context`), with STACK_DEFAULTS. */
export function stackSettingRows(): SettingRow[] {
  return rows(stackContextSchema, STACK_DEFAULTS, () => true);
}

/** COMPACTOR_CONFIG's keys that the stack context does not have, with the core's DEFAULTS. */
export function lambdaOnlySettingRows(): SettingRow[] {
  const stack = new Set(Object.keys(stackContextSchema.shape));
  const only = new Set(CONFIG_KEYS.filter((k) => !stack.has(k)));
  return rows(configInputSchema, DEFAULTS, (path) => only.has(path[0] as (typeof CONFIG_KEYS)[number]));
}

/** A markdown table of `rows`: key, default, meaning. */
export function settingsTable(settings: readonly SettingRow[]): string {
  const cell = (s: string) => s.replaceAll('|', '\\|');
  return [
    '| key | default | meaning |',
    '|---|---|---|',
    ...settings.map((r) => `| \`${r.key}\` | ${cell(r.default)} | ${cell(r.meaning)} |`),
  ].join('\n');
}

/** The JSON Schema of the `compactor` context, for editors (VS Code's `json.schemas`, cdk.json). */
export function contextJsonSchema(): Record<string, unknown> {
  const schema = z.toJSONSchema(stackContextSchema, { io: 'input' }) as Record<string, unknown>;
  const commented = allowComments(schema) as Record<string, unknown>;
  return { ...commented, title: 'compactor context (cdk.json "context.compactor")' };
}

/**
 * cdk.json documents a setting with a "//" key beside it, and the parser drops such keys from
 * every object (withoutComments): so every object of the schema, table-path maps too, takes them.
 */
function allowComments(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(allowComments);
  if (typeof node !== 'object' || node === null) return node;
  const out = Object.fromEntries(Object.entries(node).map(([k, v]) => [k, allowComments(v)]));
  return out.type === 'object' ? { ...out, patternProperties: { '^//': {} } } : out;
}
