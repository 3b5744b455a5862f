/** What the bench's renderings share: tool labels and colours, number formats, Markdown tables. */

import type { Comparison } from './compare.ts';
import type { Tool } from './worker.ts';

export const MIB = 2 ** 20;

export const TOOL_LABEL: Record<Tool, string> = {
  product: 'product (compact step)',
  duckdb: 'raw DuckDB COPY',
  'polars-scan': 'polars scan+collect',
  'polars-sink': 'polars scan+sink',
  'polars-read': 'polars read+concat',
  floor: 'I/O floor',
  fetch: 'fetch floor',
  write: 'DuckDB write only',
  footers: 'footer pass',
};

export const TOOL_COLOR: Record<Tool, string> = {
  product: '#1f77b4',
  duckdb: '#7f7f7f',
  'polars-scan': '#ff7f0e',
  'polars-sink': '#ff7f0e',
  'polars-read': '#ff7f0e',
  floor: '#2ca02c',
  fetch: '#98df8a',
  write: '#c7c7c7',
  footers: '#dbdb8d',
};

export function label(c: Comparison, tool: Tool): string {
  return tool === c.polarsBest
    ? `polars best (${TOOL_LABEL[tool].replace('polars ', '')})`
    : TOOL_LABEL[tool];
}

export const f1 = (n: number) => n.toFixed(1);
export const f2 = (n: number) => n.toFixed(2);
export const int = (n: number) => Math.round(n).toLocaleString('en-US');
export const secs = (ms: number) => f2(ms / 1000);
export const usd = (n: number) => (n >= 0.01 ? `$${n.toFixed(3)}` : `$${n.toFixed(5)}`);

export function table(
  headers: readonly string[],
  rows: readonly (readonly string[])[],
  align?: string,
): string {
  const sep = align ?? headers.map((_, i) => (i === 0 ? '---' : '---:')).join(' | ');
  return [`| ${headers.join(' | ')} |`, `| ${sep} |`, ...rows.map((r) => `| ${r.join(' | ')} |`)].join('\n');
}

/** Dollars to six decimals: a job's terms are millionths. */
export const usd6 = (n: number) => `$${n.toFixed(6)}`;

/** A wall time as a reader reads it: seconds under ten minutes, minutes above. */
export const duration = (seconds: number) =>
  seconds < 600 ? `${Math.round(seconds)} s` : `${Math.round(seconds / 60)} min`;
