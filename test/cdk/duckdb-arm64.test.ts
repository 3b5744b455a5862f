/**
 * The compact asset's DuckDB and polars install (duckDbInstallCommands) run by real npm with no registry:
 * - from an empty cache, as on an offline machine whose npm cache never held the arm64 binding:
 *   one line that names the package and the fix, not npm's page of stack;
 * - from the cache the package's postinstall (`npm ci` runs it) leaves: it installs, offline.
 * The second needs the npm registry once, as `npm ci` does.
 */

import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  ARM64_REFUSED_STATUS,
  arm64Binding,
  duckDbInstallCommands,
  installedCompactVersions,
  PROJECT_ROOT,
  polarsArm64Binding,
  WARM_CACHE_SCRIPT,
} from '../../cdk/duckdb-arm64.ts';
import { useTempDir } from '../support/engine-fixture.ts';

let dir: string;
useTempDir('duckdb-arm64-', (d) => {
  dir = d;
});

function installOffline(out: string, cache: string, versions = installedCompactVersions()) {
  mkdirSync(out, { recursive: true });
  return spawnSync('bash', ['-c', duckDbInstallCommands(out, versions).join(' && ')], {
    env: { ...process.env, npm_config_cache: cache, npm_config_offline: 'true' },
    encoding: 'utf8',
  });
}

describe('the compact asset DuckDB install', () => {
  it('offline with a cache that lacks the arm64 binding fails in one line naming the package and the fix', () => {
    const cache = join(dir, 'empty-cache');
    mkdirSync(cache);
    const run = installOffline(join(dir, 'asset'), cache);
    expect(run.status).toBe(ARM64_REFUSED_STATUS);
    const lines = run.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(
      `needs ${arm64Binding()} and ${polarsArm64Binding(installedCompactVersions().polars ?? '')}`,
    );
    expect(lines[0]).toContain(
      `run "npm run ${WARM_CACHE_SCRIPT}" once in ${PROJECT_ROOT} with the registry reachable`,
    );
    // npm's own words are kept for whoever wants them.
    const log = /npm's output: (\S+)\)$/.exec(lines[0] ?? '')?.[1] ?? '';
    expect(existsSync(log)).toBe(true);
    expect(readFileSync(log, 'utf8')).toMatch(/ENOTCACHED|offline/i);
  });

  it('installs offline from the cache the postinstall leaves, starting from an empty one', () => {
    const cache = join(dir, 'cold-cache');
    mkdirSync(cache);
    const script = JSON.parse(readFileSync(join(PROJECT_ROOT, 'package.json'), 'utf8')).scripts[
      WARM_CACHE_SCRIPT
    ];
    expect(script).toBe('node cdk/duckdb-arm64-cache.ts');
    const warm = spawnSync('npm', ['run', '--silent', WARM_CACHE_SCRIPT], {
      cwd: PROJECT_ROOT,
      env: { ...process.env, npm_config_cache: cache },
      encoding: 'utf8',
    });
    expect(warm.stderr).toBe('');
    expect(warm.status).toBe(0);
    expect(warm.stdout).toContain("npm's cache holds @duckdb/node-bindings-linux-arm64@");
    const out = join(dir, 'asset');
    const run = installOffline(out, cache);
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    expect(existsSync(join(out, 'node_modules/@duckdb/node-bindings-linux-arm64/duckdb.node'))).toBe(true);
    expect(
      existsSync(join(out, 'node_modules/nodejs-polars-linux-arm64-gnu/nodejs-polars.linux-arm64-gnu.node')),
    ).toBe(true);
  }, 120_000);

  it("a synth offline with a cold cache ends with that one line, not CDK's stack", () => {
    const cache = join(dir, 'synth-cold-cache');
    mkdirSync(cache);
    const synth = spawnSync(join(PROJECT_ROOT, 'node_modules/.bin/node'), ['cdk/app.ts'], {
      cwd: PROJECT_ROOT,
      env: {
        ...process.env,
        npm_config_cache: cache,
        npm_config_offline: 'true',
        CDK_OUTDIR: join(dir, 'out'),
      },
      encoding: 'utf8',
    });
    expect(synth.status).toBe(1);
    expect(synth.stderr).not.toMatch(/FailedToBundleAsset|triggerUncaughtException| {4}at /);
    const ours = synth.stderr.split('\n').filter((l) => l.startsWith('compactor: '));
    expect(ours).toHaveLength(1);
    expect(ours[0]).toContain(`run "npm run ${WARM_CACHE_SCRIPT}" once`);
  }, 120_000);
});
