/**
 * Footer key-value metadata for a job's outputs, from its inputs'. Writers keep facts about a
 * table there that their own readers rely on: Arc names a table's tag columns in `arc:tags`, and
 * its compactor and dedup read that key. What no input disagrees about is carried over; the rest is
 * dropped, and the job says which keys.
 */

/** Arc's key: the tag columns, comma-separated and sorted. Outputs carry the sorted union. */
export const ARC_TAGS = 'arc:tags';

/**
 * Arrow's serialized schema of the writer's Arrow table. Never carried over: it describes the
 * input's types, and an output's types can differ (a widened column, an ENUM sort, BIGINT merged
 * into DOUBLE), so an Arrow reader trusting it would read the output wrongly.
 */
export const ARROW_SCHEMA = 'ARROW:schema';

export interface FooterMetadataInput {
  readonly key: string;
  /** The input's footer key-value metadata; null values cannot be written back. */
  readonly metadata: Readonly<Record<string, string | null>>;
}

export interface MergedFooterMetadata {
  /** What every output carries. */
  readonly kept: Readonly<Record<string, string>>;
  /** Keys some input had that the outputs do not carry, sorted. */
  readonly dropped: readonly string[];
}

/**
 * A key is kept when every input has it with the same (text) value. `arc:tags` is the sorted
 * union of the inputs' tag names (an input without the key adds none). `ARROW:schema` and every
 * other key are dropped.
 */
export function mergeFooterMetadata(inputs: readonly FooterMetadataInput[]): MergedFooterMetadata {
  const keys = new Set<string>();
  for (const input of inputs) for (const key of Object.keys(input.metadata)) keys.add(key);
  const kept: Record<string, string> = {};
  const dropped: string[] = [];
  for (const key of [...keys].sort()) {
    const values = inputs.map((input) =>
      Object.hasOwn(input.metadata, key) ? input.metadata[key] : undefined,
    );
    if (key === ARC_TAGS) {
      const tags = arcTagsUnion(values);
      if (tags === undefined) dropped.push(key);
      else kept[key] = tags;
      continue;
    }
    const [first] = values;
    if (key !== ARROW_SCHEMA && typeof first === 'string' && values.every((v) => v === first)) {
      kept[key] = first;
    } else {
      dropped.push(key);
    }
  }
  return { kept, dropped };
}

/** The sorted union of comma-separated tag lists; undefined if a value present is not text. */
function arcTagsUnion(values: readonly (string | null | undefined)[]): string | undefined {
  const tags = new Set<string>();
  for (const value of values) {
    if (value === undefined) continue;
    if (value === null) return undefined;
    for (const tag of value.split(',')) {
      const name = tag.trim();
      if (name !== '') tags.add(name);
    }
  }
  return [...tags].sort().join(',');
}
