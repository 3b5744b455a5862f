/**
 * The compact asset's DuckDB install (duckDbInstallCommands) run by real npm with no registry and
 * an empty cache, as on an offline machine whose npm cache never held the arm64 binding: one line
 * that names the package and the fix, not npm's page of stack.
 */

import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { duckDbInstallCommands, installedDuckDbVersions } from '../../cdk/constructs/compactor-functions.ts';
import { useTempDir } from '../support/engine-fixture.ts';

let dir: string;
useTempDir('duckdb-install-', (d) => {
  dir = d;
});

describe('the compact asset DuckDB install', () => {
  it('offline with a cache that lacks the arm64 binding fails in one line naming the package and the fix', () => {
    const out = join(dir, 'asset');
    const cache = join(dir, 'empty-cache');
    spawnSync('mkdir', ['-p', out, cache]);
    const run = spawnSync('bash', ['-c', duckDbInstallCommands(out).join(' && ')], {
      env: { ...process.env, npm_config_cache: cache, npm_config_offline: 'true' },
      encoding: 'utf8',
    });
    expect(run.status).not.toBe(0);
    const lines = run.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    const binding = `@duckdb/node-bindings-linux-arm64@${installedDuckDbVersions().bindings}`;
    expect(lines[0]).toContain(`needs ${binding}`);
    expect(lines[0]).toContain(`run "npm cache add ${binding}" once with the registry reachable`);
    // npm's own words are kept for whoever wants them.
    const log = /npm's output: (\S+)\)$/.exec(lines[0] ?? '')?.[1] ?? '';
    expect(existsSync(log)).toBe(true);
    expect(readFileSync(log, 'utf8')).toMatch(/ENOTCACHED|offline/i);
  });
});
