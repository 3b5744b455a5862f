/**
 * CLI start-up: commands that need neither the stack nor an engine (`--help`, `status`, `visible`)
 * load none of the heavy modules (aws-cdk-lib, the ASL interpreter, DuckDB's native library, the
 * AWS SDKs, the Lambda middleware): `compactor` runs in a child Node whose module resolution is
 * logged. The time itself is measured by `npm run bench` (orchestration section), not here.
 */

import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { useTempDir } from '../support/engine-fixture.ts';

const MAIN = fileURLToPath(new URL('../../functions/cli/main.ts', import.meta.url));

// A resolve hook (it runs on Node's loader thread) that writes every resolved URL to stderr.
const HOOK = `export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  process.stderr.write('RESOLVED ' + resolved.url + '\\n');
  return resolved;
}`;
const REGISTER = `import { register } from 'node:module'; register(${JSON.stringify(`data:text/javascript,${encodeURIComponent(HOOK)}`)});`;

/** What a command that needs them loads; a light command must load none. */
const HEAVY = [
  '/node_modules/aws-cdk-lib/',
  '/node_modules/aws-local-stepfunctions/',
  '/node_modules/@duckdb/',
  '/node_modules/@aws-sdk/',
  '/node_modules/@aws-lambda-powertools/',
  '/node_modules/@middy/',
  '/node_modules/hyparquet/',
];

async function modulesLoadedBy(
  ...argv: string[]
): Promise<{ code: number; stdout: string; loaded: string[] }> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ['--import', `data:text/javascript,${encodeURIComponent(REGISTER)}`, MAIN, ...argv],
      { maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : undefined;
        if (code === undefined) {
          reject(error);
          return;
        }
        const loaded = stderr
          .split('\n')
          .filter((line) => line.startsWith('RESOLVED '))
          .map((line) => line.slice('RESOLVED '.length));
        resolve({ code, stdout, loaded });
      },
    );
  });
}

let lake: string;

useTempDir('cli-startup-', (dir) => {
  lake = dir;
});

describe('CLI start-up', () => {
  it.each([
    '--help',
    'status --store <lake>',
    'visible --store <lake>',
    'visible --format duckdb --store <lake>',
  ])('compactor %s loads none of the stack, interpreter, DuckDB or AWS SDK modules', async (command) => {
    const run = await modulesLoadedBy(...command.split(' ').map((arg) => (arg === '<lake>' ? lake : arg)));
    expect(run.code).toBe(0);
    // The log works: the CLI's own modules are in it.
    expect(run.loaded.some((url) => url.endsWith('/functions/cli/compactor.ts'))).toBe(true);
    expect(run.loaded.filter((url) => HEAVY.some((heavy) => url.includes(heavy)))).toEqual([]);
  });

  it('a command that merges loads DuckDB when it runs (the check above would see it)', async () => {
    const run = await modulesLoadedBy('verify', '--store', lake);
    expect(run.code).toBe(0);
    expect(run.loaded.some((url) => url.includes('/node_modules/@duckdb/'))).toBe(true);
  });
});
