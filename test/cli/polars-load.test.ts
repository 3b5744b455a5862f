/**
 * nodejs-polars loads only for a job that could merge on it (merge-engine.ts): a run over narrow
 * tables compacts without loading it. The run is a process of its own, whose CommonJS module
 * cache (nodejs-polars is a CommonJS package, loaded with require) is read at its exit.
 */

import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { type LakeFile, writeLake } from '../support/lake-harness.ts';

const MAIN = join(import.meta.dirname, '..', '..', 'functions', 'cli', 'main.ts');

// At exit, whether any module of nodejs-polars is in the (process-wide) CommonJS cache.
const PROBE = `import { createRequire } from 'node:module';
const cache = createRequire(process.cwd() + '/').cache;
process.on('exit', () => process.stderr.write('POLARS LOADED ' + Object.keys(cache).some((k) => k.includes('/nodejs-polars/')) + '\\n'));`;

function node(args: readonly string[]): Promise<{ code: number; stdout: string; polarsLoaded: boolean }> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ['--import', `data:text/javascript,${encodeURIComponent(PROBE)}`, ...args],
      { maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : undefined;
        const probe = /POLARS LOADED (true|false)/.exec(stderr);
        if (code === undefined || probe === null) {
          reject(
            new Error(`node ${args.join(' ')}: ${error?.message ?? 'no probe line'}\n${stderr.slice(-2000)}`),
          );
          return;
        }
        resolve({ code, stdout, polarsLoaded: probe[1] === 'true' });
      },
    );
  });
}

const FILES: readonly LakeFile[] = [
  { key: 'db/cpu/2025/01/15/10/cpu_20250115_100500_1.parquet', rows: 40 },
  { key: 'db/cpu/2025/01/15/10/cpu_20250115_101500_2.parquet', rows: 40 },
  { key: 'db/cpu/2025/01/15/11/cpu_20250115_110500_3.parquet', rows: 30 },
];

let lake: string;
let root: string;

useEngineAndDir('polars-load-', async (engine, folder) => {
  root = folder;
  lake = join(folder, 'lake');
  await writeLake(engine, lake, FILES);
});

describe('nodejs-polars loads when a job could merge on it, not before', () => {
  it('the probe sees nodejs-polars when a process requires it', async () => {
    const run = await node(['-e', "require('nodejs-polars')"]);
    expect(run).toMatchObject({ code: 0, polarsLoaded: true });
  });

  it('compactor run over narrow small files compacts them without loading it', async () => {
    // Planned after the files were written: a plan at an earlier time holds their hours back.
    const later = new Date(Date.now() + 3_600_000).toISOString();
    const where = ['--store', lake, '--work-dir', join(root, 'work')];
    const run = await node([
      MAIN,
      'run',
      '--tier',
      'hourly',
      ...where,
      '--quiet',
      '0',
      '--now',
      later,
      '--json',
    ]);
    expect(run.code, run.stdout.slice(0, 3000)).toBe(0);
    expect(
      (JSON.parse(run.stdout) as { summary: { compacted: number } }).summary.compacted,
      run.stdout.slice(0, 3000),
    ).toBe(2);
    expect(run.polarsLoaded).toBe(false);
  });
});
