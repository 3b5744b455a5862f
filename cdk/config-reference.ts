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

/** A `…Bytes` key's value in whole MiB or GiB (`512 MiB`, or `512MiB` with no separator), else undefined. */
export function wholeSize(key: string, value: unknown, separator = ' '): string | undefined {
  if (typeof value !== 'number' || !/Bytes$/.test(key) || value % MiB !== 0) return undefined;
  return value % (1024 * MiB) === 0
    ? `${value / 1024 / MiB}${separator}GiB`
    : `${value / MiB}${separator}MiB`;
}

function show(key: string, value: unknown): string {
  if (value === undefined) return 'none';
  return wholeSize(key, value) ?? `\`${JSON.stringify(value)}\``;
}

/** The stack leaves some sections to the core (`planning`): their defaults are the core's DEFAULTS. */
function defaultAt(defaults: unknown, path: readonly string[]): unknown {
  return valueAt(defaults, path) ?? valueAt(DEFAULTS, path);
}

/**
 * A stack key's default, as parseStackConfig fills it: with Express children (`value`) and with
 * Standard ones (`standard`), or the schema's words for one that follows another key (`text`).
 */
export interface SettingDefault {
  readonly value: unknown;
  readonly standard: unknown;
  readonly text: string | undefined;
}

function defaultOf(schema: z.ZodType, defaults: unknown, path: readonly string[]): SettingDefault {
  const value = defaultAt(defaults, path);
  const standard =
    defaults === STACK_DEFAULTS && keyPath(path) !== CHILD_TYPE ? defaultAt(STANDARD_DEFAULTS, path) : value;
  return { value, standard, text: z.globalRegistry.get(schema)?.defaultText };
}

/** The stack context's keys by their dotted path, walked once. */
let stackKeys: ReadonlyMap<string, z.ZodType> | undefined;

/** The default of the stack key at `path` (`['tiers', 'hourly', 'minFiles']`). */
export function stackSettingDefault(path: readonly string[]): SettingDefault {
  stackKeys ??= new Map(walk(stackContextSchema).map((entry) => [keyPath(entry.path), entry.schema]));
  const key = keyPath(path);
  const schema = stackKeys.get(key);
  if (!schema) throw new Error(`${key} is not a stack setting`);
  return defaultOf(schema, STACK_DEFAULTS, path);
}

/** Whether a key's default follows map.childExecutionType. */
export function byChildType(d: SettingDefault): boolean {
  return JSON.stringify(d.standard) !== JSON.stringify(d.value);
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
      const d = defaultOf(s, defaults, path);
      const shown = section
        ? ''
        : byChildType(d)
          ? `Express ${show(key, d.value)}, Standard ${show(key, d.standard)}`
          : (d.text ?? show(key, d.value));
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
  const commented = allowComments(withDefaults(schema, [])) as Record<string, unknown>;
  return { ...commented, title: 'compactor context (cdk.json "context.compactor")' };
}

/**
 * Each value key's default as JSON Schema's `default`, for editors to offer: the one parseStackConfig
 * fills. A default that follows another key (the child type, the layout) is left to the description.
 */
function withDefaults(node: Record<string, unknown>, path: readonly string[]): Record<string, unknown> {
  const properties = node.properties as Record<string, Record<string, unknown>> | undefined;
  if (properties !== undefined && node.type === 'object') {
    const filled = Object.fromEntries(
      Object.entries(properties).map(([key, child]) => [key, withDefaults(child, [...path, key])]),
    );
    return { ...node, properties: filled };
  }
  if (path.length === 0) return node;
  const d = stackSettingDefault(path);
  return d.value === undefined || d.text !== undefined || byChildType(d)
    ? node
    : { ...node, default: d.value };
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
