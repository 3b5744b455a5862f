/** Small numeric helpers for the bench. */

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

export function sum(values: readonly number[]): number {
  return values.reduce((total, v) => total + v, 0);
}

export interface Span {
  readonly start: number;
  readonly end: number;
}

/** Length of the union of the spans that fall in [from, to]. */
export function unionMs(spans: readonly Span[], from = -Infinity, to = Infinity): number {
  const clipped = spans
    .map((s) => ({ start: Math.max(s.start, from), end: Math.min(s.end, to) }))
    .filter((s) => s.end > s.start)
    .sort((a, b) => a.start - b.start);
  let total = 0;
  let end = -Infinity;
  for (const s of clipped) {
    if (s.start >= end) {
      total += s.end - s.start;
      end = s.end;
    } else if (s.end > end) {
      total += s.end - end;
      end = s.end;
    }
  }
  return total;
}

/** Length of the time in `a`'s spans not covered by any of `b`'s, within [from, to]. */
export function exclusiveMs(a: readonly Span[], b: readonly Span[], from: number, to: number): number {
  return unionMs([...a, ...b], from, to) - unionMs(b, from, to);
}
