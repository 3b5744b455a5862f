/**
 * The half-compacted verdict, written once for `compactor verify` and `compactor audit`: an hour
 * where an output sits beside raw files older than it that no job holds.
 */

import type { CompactorConfig } from './config.ts';
import type { ObjectSummary } from './object-store.ts';

/**
 * Partitions where an output sits beside raw files older than it and no job holds them: what a
 * compactor that deletes inputs after its upload leaves when the delete fails.
 */
export function halfCompacted(
  config: CompactorConfig,
  objects: readonly ObjectSummary[],
  isHeld: (key: string) => boolean,
): { readonly folder: string; readonly day: string; readonly olderRaw: number }[] {
  const hours = new Map<string, { outputs: number[]; raw: number[]; day: string }>();
  for (const object of objects) {
    const parsed = config.layout.parse(object.key);
    if (!parsed?.hourFolder || isHeld(object.key)) continue;
    const h = hours.get(parsed.hourFolder) ?? {
      outputs: [],
      raw: [],
      day: parsed.dayFolder ?? parsed.hourFolder,
    };
    (parsed.level === 0 ? h.raw : h.outputs).push(object.lastModified.getTime());
    hours.set(parsed.hourFolder, h);
  }
  const found: { folder: string; day: string; olderRaw: number }[] = [];
  for (const [folder, h] of hours) {
    if (h.outputs.length === 0) continue;
    const newest = Math.max(...h.outputs);
    const olderRaw = h.raw.filter((t) => t < newest).length;
    if (olderRaw > 0) found.push({ folder, day: h.day, olderRaw });
  }
  return found;
}
