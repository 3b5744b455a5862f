/**
 * The options' defaults as `--help` and docs/configuration.md's "CLI options" table show them. A
 * settings option (OPTIONS' `setting`) has its key's default, read from the stack's defaults the
 * way parseStackConfig fills them (cdk/config-reference.ts); any other option has its own
 * `default`. Loaded only for --help and by the docs test: it brings the settings schema.
 */

import {
  byChildType,
  type SettingDefault,
  stackSettingDefault,
  wholeSize,
} from '../../cdk/config-reference.ts';
import { TIERS } from '../core/config.ts';
import { OPTIONS, type OptionDef, type OptionName, settingPath } from './options.ts';

/** A default value as a flag would spell it: `512MiB`, `a,b`, `off`, `none`. */
function asFlag(setting: string, value: unknown): string {
  if (value === undefined) return 'none';
  if (typeof value === 'boolean') return value ? 'on' : 'off';
  const size = wholeSize(setting, value, '');
  if (size !== undefined) return size;
  if (Array.isArray(value)) return value.length === 0 ? 'none' : value.join(',');
  if (typeof value === 'object' && value !== null) {
    return Object.keys(value).length === 0 ? 'none' : JSON.stringify(value);
  }
  return String(value);
}

function shown(setting: string, d: SettingDefault): string {
  if (byChildType(d)) {
    return `${asFlag(setting, d.value)} with Express children, ${asFlag(setting, d.standard)} with Standard`;
  }
  return d.text ?? asFlag(setting, d.value);
}

/** The default of `name` as the help and the docs show it; undefined when it has none to show. */
export function optionDefault(name: OptionName): string | undefined {
  const def: OptionDef = OPTIONS[name];
  if (def.setting === undefined) return def.default;
  const setting = def.setting;
  if (!setting.includes('<tier>')) return shown(setting, stackSettingDefault(setting.split('.')));
  // A per-tier option sets the --tier's key: its default is each tier's.
  return TIERS.map(
    (tier) => `${tier} ${shown(setting, stackSettingDefault(settingPath(setting, tier)))}`,
  ).join(', ');
}

export interface OptionRow {
  /** `--min-files N`. */
  readonly option: string;
  readonly default: string;
  readonly meaning: string;
}

/**
 * The options the "CLI options" table lists: those that set a stack key, then those that tune how
 * a hand-run command runs. Store, time and output options are each command's (docs/cli.md).
 */
const TUNING: readonly OptionName[] = [
  'context',
  'concurrency',
  'memory-limit',
  'threads',
  'work-dir',
  'unsafe-single-writer-store',
];

export function cliOptionRows(): OptionRow[] {
  const names = (Object.keys(OPTIONS) as OptionName[]).filter(
    (name) => (OPTIONS[name] as OptionDef).setting !== undefined,
  );
  return [...names, ...TUNING].map((name) => {
    const def: OptionDef = OPTIONS[name];
    const meaning = def.help.replaceAll('\n', ' ');
    return {
      option: `--${name}${def.value === undefined ? '' : ` ${def.value}`}`,
      default: optionDefault(name) ?? 'none',
      meaning:
        def.setting === undefined
          ? meaning
          : `${meaning}; as \`${def.setting}\`${def.setting.includes('<tier>') ? ' of the --tier' : ''}`,
    };
  });
}

/** A markdown table of `rows`: option, default, meaning. */
export function optionsTable(rows: readonly OptionRow[]): string {
  const cell = (s: string) => s.replaceAll('|', '\\|');
  return [
    '| option | default | meaning |',
    '|---|---|---|',
    ...rows.map((r) => `| \`${cell(r.option)}\` | ${cell(r.default)} | ${cell(r.meaning)} |`),
  ].join('\n');
}
