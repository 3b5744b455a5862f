/** Plain-text formatting for the CLI: aligned tables, sizes, durations, text on one line. */

import stringWidth from 'string-width';

export function formatBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${unit === 0 ? value : value.toFixed(1)} ${units[unit]}`;
}

export function formatCount(n: number | bigint): string {
  return n.toLocaleString('en-US');
}

export function formatDuration(ms: number): string {
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)} s`;
}

/**
 * Renders rows as an aligned table; numbers right-aligned. Cells are measured in terminal columns,
 * so table paths in CJK (two columns a character) or with combining marks stay aligned.
 */
export function table(header: readonly string[], rows: readonly (readonly (string | number)[])[]): string {
  const cells = [header, ...rows.map((r) => r.map(String))];
  const widths = header.map((_, i) => Math.max(...cells.map((r) => stringWidth(r[i] ?? ''))));
  // A blank cell (a skipped row's bytes) keeps its column right-aligned.
  const numeric = header.map(
    (_, i) =>
      rows.some((r) => typeof r[i] === 'number') &&
      rows.every((r) => typeof r[i] === 'number' || r[i] === ''),
  );
  const pad = (cell: string, i: number) => ' '.repeat(Math.max(0, (widths[i] ?? 0) - stringWidth(cell)));
  const line = (r: readonly string[]) =>
    r
      .map((c, i) => (numeric[i] ? pad(c, i) + c : c + pad(c, i)))
      .join('  ')
      .trimEnd();
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...cells.slice(1).map(line)].join('\n');
}

/** Text on one line (whitespace runs collapsed), cut at `max` characters: a message or cause in a row. */
export function oneLine(text: string, max = 500): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max)}...` : flat;
}

/** Said only when it happened: records of objects that are gone, removed. */
export function quarantinePrunedNote(pruned: number): string {
  return pruned > 0 ? `, ${pruned} quarantine record(s) of objects that are gone pruned` : '';
}
