/**
 * The package's postinstall: runs the compact asset's DuckDB and polars install once into a throwaway folder,
 * so npm's cache holds every package and manifest bundling needs and `cdk synth`/`cdk deploy`
 * then bundle with no registry. `npm ci` fetches tarballs by the lock file only, leaving out the
 * arm64 binding (another platform's optional dependency) and the registry manifests an install of
 * named packages reads, so it alone does not make bundling work offline.
 *
 * Local runs and the tests' in-process Lambdas do not need the arm64 binding, so a failure here
 * (an offline `npm ci` from a cache that lacks it) is one line on stderr, not a failed install:
 * bundling then says the same, with the fix.
 */

import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  arm64Binding,
  duckDbInstallCommands,
  installedCompactVersions,
  PROJECT_ROOT,
  polarsArm64Binding,
  WARM_CACHE_SCRIPT,
} from './duckdb-arm64.ts';

// The compact asset's install: DuckDB's packages and polars', so every asset's install is cached.
const versions = installedCompactVersions();
const binding = `${arm64Binding(versions)} and ${polarsArm64Binding(versions.polars ?? '')}`;
const dir = mkdtempSync(join(tmpdir(), 'compactor-duckdb-arm64-'));
const refused = `compactor: could not put ${binding} in npm's cache for offline synth; synth will fetch it from the registry, or run "npm run ${WARM_CACHE_SCRIPT}" in ${PROJECT_ROOT} when the registry is reachable (npm's output:`;
const run = spawnSync('bash', ['-c', duckDbInstallCommands(dir, versions, refused).join(' && ')], {
  stdio: ['ignore', 'inherit', 'inherit'],
});
rmSync(dir, { recursive: true, force: true });
if (run.status === 0) process.stdout.write(`compactor: npm's cache holds ${binding} for offline synth\n`);
