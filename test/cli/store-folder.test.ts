/**
 * A local --store folder that does not exist is an error (exit 2, naming the folder and the
 * fix), never an empty lake: `run --tier hourly --store /nonexistent/x` used to create the folder
 * and report success with 0 objects. Only `demo` makes a folder.
 */

import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../functions/cli/compactor.ts';

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'store-folder-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

async function cli(...argv: string[]): Promise<{ code: number; err: string; out: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(argv, { out: (l) => out.push(l), err: (l) => err.push(l) });
  return { code, err: err.join('\n'), out: out.join('\n') };
}

describe('a --store folder that does not exist', () => {
  it.each([['run', '--tier', 'hourly'], ['status'], ['plan', '--tier', 'hourly'], ['recover']])(
    '%s exits 2 naming the folder, and creates nothing',
    async (...command) => {
      const missing = join(root, 'nonexistent', 'x');
      const result = await cli(...command, '--store', missing);
      expect(result.code).toBe(2);
      expect(result.err).toContain(`--store ${missing}: no such folder`);
      expect(result.err).toContain('compactor demo --dir');
      expect(existsSync(join(root, 'nonexistent'))).toBe(false);
    },
  );

  it('a file given as --store is refused too', async () => {
    const file = join(root, 'a-file');
    await writeFile(file, 'x');
    const result = await cli('status', '--store', file);
    expect(result.code).toBe(2);
    expect(result.err).toContain('is a file, not a folder');
  });
});
