/**
 * `npm run demo`, the README's first command, end to end: it writes 1,224 small files, compacts
 * them hourly then daily through the synthesized state machine, and must end with equal rows.
 * Its own file, since it takes about 30 s alone.
 */

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cli, dataKeys } from '../support/cli-lake.ts';
import { HANG_GUARD_MS } from '../support/hang-guard.ts';

const dirs: string[] = [];

afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

describe('demo', () => {
  it(
    'compacts the demo lake hourly then daily and reports equal rows, exit 0',
    async () => {
      const dir = await mkdtemp(join(tmpdir(), 'demo-cmd-'));
      dirs.push(dir);
      const result = await cli('demo', '--dir', join(dir, 'lake'));
      expect(result.code, result.err.slice(-5).join('\n')).toBe(0);
      expect(result.text).toMatch(/^== hourly cycle ==$/m);
      expect(result.text).toMatch(/^== daily cycle ==$/m);
      expect(result.text).not.toMatch(/monthly|FAILED/);
      // Its days-old hours are by design: no tier is called behind.
      expect(result.err.join('\n')).not.toMatch(/behind/);
      expect(result.text).toMatch(/^rows equal: 306,000 before and after; files 1224 -> 6 \(204x fewer\)$/m);
      expect(await dataKeys(join(dir, 'lake'))).toHaveLength(6);
      // Every command the demo suggests works on the lake it leaves: exit 0, the audit clean.
      const tries = [...result.text.matchAll(/^ {2}compactor (.+)$/gm)].map((m) => (m[1] ?? '').split(' '));
      expect(tries.map((t) => t[0])).toEqual(['status', 'visible', 'receipts', 'audit']);
      for (const args of tries) {
        const tried = await cli(...args);
        expect(tried.code, `compactor ${args.join(' ')}: ${tried.err.slice(-5).join('\n')}`).toBe(0);
      }
    },
    HANG_GUARD_MS,
  );
});
