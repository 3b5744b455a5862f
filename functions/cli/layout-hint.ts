/**
 * A hint for a lake read with the wrong `--layout`: when none of the first objects under the data
 * root is data in the configured layout, the presets that do read them. Lists at most SAMPLE
 * objects, only once a command found nothing to do (plan, run) or data outside the layout (verify).
 */

import type { CompactorConfig } from '../core/config.ts';
import { LAYOUT_PRESETS, Layout, type LayoutPreset } from '../core/layout.ts';
import type { ObjectStore } from '../core/object-store.ts';

const SAMPLE = 200;

export async function layoutHint(store: ObjectStore, config: CompactorConfig): Promise<string | undefined> {
  const { layout } = config;
  const keys: string[] = [];
  for await (const object of store.list(layout.dataPrefix)) {
    if (object.key.startsWith(layout.stateRoot)) continue;
    keys.push(object.key);
    if (keys.length >= SAMPLE) break;
  }
  if (keys.length === 0 || keys.some((key) => layout.parse(key) !== undefined)) return undefined;
  const none = `none of the first ${keys.length} object(s) under the data root is data in the ${layout.name} layout`;
  // A preset fits when it reads at least half of the sample as data.
  const fits = (Object.keys(LAYOUT_PRESETS) as LayoutPreset[]).filter((preset) => {
    if (preset === layout.name) return false;
    const other = Layout.create(preset, layout.dataPrefix);
    return keys.filter((key) => other.parse(key) !== undefined).length * 2 >= keys.length;
  });
  if (fits.length > 0) return `${none}; they read as ${fits.join(' or ')}: did you mean --layout ${fits[0]}?`;
  // A store one folder too deep (a table's folder, say): its keys lack the layout's first level.
  const rest = (key: string) => key.slice(layout.dataPrefix.length);
  const deeper = keys.filter((key) => layout.parse(`${layout.dataPrefix}any/${rest(key)}`) !== undefined);
  return deeper.length * 2 >= keys.length
    ? `${none}, but they are one folder down: --store names a folder inside the lake; point it at the lake's root, one folder up`
    : `${none}: pass the lake's --layout, a preset or a template (docs/layouts.md)`;
}
