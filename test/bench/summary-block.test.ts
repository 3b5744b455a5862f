import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { renderMarkdown } from '../../bench/report.ts';
import type { BenchResults } from '../../bench/results.ts';
import {
  BLOCK_END,
  BLOCK_START,
  currentSummaryBlock,
  renderSummaryBlock,
  replaceSummaryBlock,
  SUMMARY_FILES,
} from '../../bench/summary-block.ts';

const ROOT = join(import.meta.dirname, '..', '..');

describe('the generated bench summary', () => {
  it('replaces exactly the text between the markers, and refuses a file without them, naming it', () => {
    const text = `# Title\n\nbefore\n${BLOCK_START}\nold numbers\n${BLOCK_END}\nafter\n`;
    expect(replaceSummaryBlock(text, `${BLOCK_START}\nnew\n${BLOCK_END}`, 'X.md')).toBe(
      `# Title\n\nbefore\n${BLOCK_START}\nnew\n${BLOCK_END}\nafter\n`,
    );
    expect(() => replaceSummaryBlock('no markers', 'b', 'docs/x.md')).toThrow(
      /docs\/x\.md needs exactly one pair/,
    );
    expect(() => replaceSummaryBlock(`${text}${BLOCK_START}\n`, 'b', 'Y.md')).toThrow(/Y\.md/);
  });

  // The README's and docs' numbers are those of bench/results.json, the last full run: a number
  // edited by hand, or results regenerated without the docs, fails here.
  it('bench/results.md is what bench/results.json renders to (npm run bench -- --render)', async () => {
    const results = JSON.parse(await readFile(join(ROOT, 'bench', 'results.json'), 'utf8')) as BenchResults;
    expect(await readFile(join(ROOT, 'bench', 'results.md'), 'utf8')).toBe(renderMarkdown(results));
  });

  it.each(SUMMARY_FILES.map((f) => [f.path, f] as const))(
    '%s holds the block rendered from bench/results.json',
    async (path, file) => {
      const results = JSON.parse(await readFile(join(ROOT, 'bench', 'results.json'), 'utf8')) as BenchResults;
      const text = await readFile(join(ROOT, path), 'utf8');
      expect(currentSummaryBlock(text)).toBe(renderSummaryBlock(results, file));
    },
  );
});
