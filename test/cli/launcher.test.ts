/**
 * The `compactor` launcher (bin/compactor.mjs), as the README has users run it: on the system's
 * own Node (20 here, which cannot run the TypeScript CLI) it starts the project's Node 22; it
 * runs in the folder it was called from, also through `npm run` (INIT_CWD); exit codes pass through.
 */

import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { useTempDir } from '../support/engine-fixture.ts';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const LAUNCHER = join(REPO, 'bin', 'compactor.mjs');

/** The first `node` on PATH that is not a project's (npm puts node_modules/.bin first). */
function systemNode(): string {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir.includes('node_modules')) continue;
    const candidate = join(dir, 'node');
    if (existsSync(candidate)) return candidate;
  }
  throw new Error('no system node on PATH');
}

/** PATH without the project's bin folders, as a user's shell has it. */
const USER_PATH = (process.env.PATH ?? '')
  .split(delimiter)
  .filter((dir) => !dir.includes('node_modules'))
  .join(delimiter);

let dir: string;
useTempDir('launcher-', (d) => {
  dir = d;
});

describe('bin/compactor.mjs', () => {
  const node = systemNode();
  const version = spawnSync(node, ['--version'], { encoding: 'utf8' }).stdout.trim();

  it(`runs on the system's Node (${version}) and resolves paths in the caller's folder`, async () => {
    await mkdir(join(dir, 'lake'));
    const env: NodeJS.ProcessEnv = { ...process.env, PATH: USER_PATH };
    delete env.npm_lifecycle_event;
    delete env.INIT_CWD;
    const status = spawnSync(node, [LAUNCHER, 'status', '--store', 'lake'], {
      cwd: dir,
      env,
      encoding: 'utf8',
    });
    expect(status.stderr).toBe('');
    expect(status.status).toBe(0);
    expect(status.stdout).toContain('live manifests: 0');
    // The CLI's exit codes pass through: a missing folder is a usage error, named in the caller's folder.
    const missing = spawnSync(node, [LAUNCHER, 'status', '--store', 'nowhere'], {
      cwd: dir,
      env,
      encoding: 'utf8',
    });
    expect(missing.status).toBe(2);
    expect(missing.stderr).toContain(join(dir, 'nowhere'));
  });

  it('through npm run, resolves paths in the folder npm was called from', async () => {
    await mkdir(join(dir, 'lake'), { recursive: true });
    const npm = spawnSync(
      'npm',
      ['--prefix', REPO, 'run', '-s', 'compactor', '--', 'status', '--store', 'lake'],
      {
        cwd: dir,
        env: { ...process.env, PATH: USER_PATH },
        encoding: 'utf8',
      },
    );
    expect(npm.stderr).toBe('');
    expect(npm.status).toBe(0);
    expect(npm.stdout).toContain('live manifests: 0');
  });

  it('interrupted (SIGINT), dies of the signal the CLI ends with, not with exit 0', async () => {
    const env: NodeJS.ProcessEnv = { ...process.env, PATH: USER_PATH };
    delete env.npm_lifecycle_event;
    const child = spawn(node, [LAUNCHER, 'demo', '--dir', join(dir, 'demo')], { cwd: dir, env });
    let output = '';
    const progressed = new Promise<void>((resolve) => {
      const onData = (chunk: Buffer) => {
        output += chunk.toString();
        // Interrupt once the compaction is under way.
        if (/\[1\/\d+\]/.test(output)) resolve();
      };
      child.stdout.on('data', onData);
      child.stderr.on('data', onData);
    });
    const ended = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.on('exit', (code, signal) => resolve({ code, signal })),
    );
    await progressed;
    child.kill('SIGINT');
    const { code, signal } = await ended;
    expect({ code, signal }, output).toEqual({ code: null, signal: 'SIGINT' });
  }, 120_000);
});
