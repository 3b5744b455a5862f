import { describe, expect, it } from 'vitest';
import { table } from '../../functions/cli/format.ts';

/** The terminal column at which each cell of a line starts, by its text. */
function columnOf(line: string, cell: string): number {
  const before = line.slice(0, line.indexOf(cell));
  // Full-width (CJK) characters take two columns.
  return [...before].reduce((n, ch) => n + (/[\u3000-\u9fff\uff00-\uffef]/.test(ch) ? 2 : 1), 0);
}

describe('table', () => {
  it('aligns columns in terminal columns: CJK table paths take two a character', () => {
    const text = table(
      ['table', 'files', 'note'],
      [
        ['数据/表/', 3, '@one'],
        ['mydb/cpu/', 12, '@two'],
        ['日志/库/cpu/', 7, '@three'],
      ],
    );
    const lines = text.split('\n');
    const notes = lines.slice(2).map((line, i) => columnOf(line, ['@one', '@two', '@three'][i] as string));
    expect(new Set(notes).size).toBe(1);
    expect(columnOf(lines[0] ?? '', 'note')).toBe(notes[0]);
    // Numbers stay right-aligned: their last digits end in one column.
    const counts = ['3', '12', '7'];
    const ends = lines.slice(2).map((line, i) => {
      const count = counts[i] ?? '';
      return columnOf(line, `  ${count}  `) + 2 + count.length;
    });
    expect(new Set(ends).size).toBe(1);
  });

  it('keeps a number column right-aligned when some of its cells are blank (a skipped row)', () => {
    const lines = table(
      ['day', 'files', 'note'],
      [
        ['a', 24, 'x'],
        ['b', '', 'y'],
        ['c', 3, 'z'],
      ],
    ).split('\n');
    expect(lines[2]).toBe(`a${' '.repeat(7)}24  x`);
    expect(lines[3]).toBe(`b${' '.repeat(11)}y`);
    expect(lines[4]).toBe(`c${' '.repeat(8)}3  z`);
  });
});
