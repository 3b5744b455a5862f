/**
 * Splits a stretch of wall time among named buckets from timed spans that nest and may overlap,
 * so that the buckets add up to the stretch exactly: each moment goes to the deepest spans
 * running then (equal shares when several run at once, as concurrent calls do), and a moment no
 * span covers to the gap bucket. A span's own bucket therefore gets only its exclusive time:
 * a store call inside a step handler counts for the call, not for the handler too.
 */

export interface LevelSpan {
  readonly bucket: string;
  /** Nesting depth: deeper spans take the moments they cover from shallower ones. */
  readonly level: number;
  readonly start: number;
  readonly end: number;
}

export interface Bucket {
  readonly bucket: string;
  readonly ms: number;
}

/** Every moment of [from, to] in exactly one bucket (or split evenly among several); sums to to - from. */
export function attribute(spans: readonly LevelSpan[], from: number, to: number, gap: string): Bucket[] {
  const totals = new Map<string, number>();
  const add = (bucket: string, ms: number) => totals.set(bucket, (totals.get(bucket) ?? 0) + ms);
  const events: { at: number; span: LevelSpan; delta: 1 | -1 }[] = [];
  for (const span of spans) {
    const start = Math.max(span.start, from);
    const end = Math.min(span.end, to);
    if (!(end > start)) continue;
    events.push({ at: start, span, delta: 1 }, { at: end, span, delta: -1 });
  }
  events.sort((a, b) => a.at - b.at);
  // Running spans by level, then by bucket (how many of that bucket's spans run).
  const running = new Map<number, Map<string, number>>();
  let at = from;
  const credit = (until: number) => {
    const ms = until - at;
    if (ms <= 0) return;
    const deepest = Math.max(
      -Infinity,
      ...[...running.entries()].filter(([, b]) => b.size > 0).map(([l]) => l),
    );
    const buckets = running.get(deepest);
    if (!buckets) {
      add(gap, ms);
      return;
    }
    let count = 0;
    for (const n of buckets.values()) count += n;
    for (const [bucket, n] of buckets) add(bucket, (ms * n) / count);
  };
  for (const event of events) {
    credit(event.at);
    at = Math.max(at, event.at);
    const level = running.get(event.span.level) ?? new Map<string, number>();
    running.set(event.span.level, level);
    const n = (level.get(event.span.bucket) ?? 0) + event.delta;
    if (n === 0) level.delete(event.span.bucket);
    else level.set(event.span.bucket, n);
  }
  credit(to);
  return [...totals.entries()].map(([bucket, ms]) => ({ bucket, ms }));
}

/** The buckets in a fixed order (unknown ones after, largest first), each with its share of the total. */
export function orderBuckets(
  buckets: readonly Bucket[],
  order: readonly string[],
): { readonly bucket: string; readonly ms: number; readonly share: number }[] {
  const total = buckets.reduce((sum, b) => sum + b.ms, 0);
  const rank = (name: string) => {
    const i = order.indexOf(name);
    return i === -1 ? order.length : i;
  };
  return [...buckets]
    .sort((a, b) => rank(a.bucket) - rank(b.bucket) || b.ms - a.ms)
    .map((b) => ({ ...b, share: total > 0 ? b.ms / total : 0 }));
}
