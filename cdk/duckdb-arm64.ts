/**
 * DuckDB for linux/arm64, for the Lambdas that run it (compact, the canary's seed and check), and
 * nodejs-polars beside it for compact's merges of wide tables: which versions, and the shell
 * commands that install them into a bundle folder. npm installed the host's bindings (linux-x64
 * here), so bundling installs the arm64 ones from the registry or npm's cache; `npm ci` warms that
 * cache (cdk/duckdb-arm64-cache.ts, the package's postinstall) so synth and deploy then bundle
 * offline.
 */

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root: cdk/ -> ../ */
export const PROJECT_ROOT = fileURLToPath(new URL('../', import.meta.url));

/** The npm script that warms npm's cache with what bundling installs (package.json). */
export const WARM_CACHE_SCRIPT = 'postinstall';

/** The native packages an asset installs, at the installed versions, so they match what was tested. */
export interface NativeVersions {
  /** @duckdb/node-api. */
  readonly api: string;
  /** @duckdb/node-bindings (and its linux-arm64 binding). */
  readonly bindings: string;
  /** nodejs-polars (and its linux-arm64-gnu binding). Absent: the asset carries no polars. */
  readonly polars?: string;
}

function installedVersion(projectRoot: string, name: string, from?: string): string {
  const require = createRequire(join(projectRoot, 'package.json'));
  const path = require.resolve(`${name}/package.json`, from ? { paths: [from] } : undefined);
  return (JSON.parse(readFileSync(path, 'utf8')) as { version: string }).version;
}

/** The installed DuckDB packages' versions, so the arm64 binding matches what was tested. */
export function installedDuckDbVersions(projectRoot = PROJECT_ROOT): NativeVersions {
  const require = createRequire(join(projectRoot, 'package.json'));
  const apiDir = join(require.resolve('@duckdb/node-api/package.json'), '..');
  return {
    api: installedVersion(projectRoot, '@duckdb/node-api'),
    bindings: installedVersion(projectRoot, '@duckdb/node-bindings', apiDir),
  };
}

/** The compact Lambda's native packages: DuckDB's, and nodejs-polars for its merges of wide tables. */
export function installedCompactVersions(projectRoot = PROJECT_ROOT): NativeVersions {
  return { ...installedDuckDbVersions(projectRoot), polars: installedVersion(projectRoot, 'nodejs-polars') };
}

/** The arm64 binding package, at the installed version. */
export function arm64Binding(versions: NativeVersions = installedDuckDbVersions()): string {
  return `@duckdb/node-bindings-linux-arm64@${versions.bindings}`;
}

/** polars' arm64 binding package (glibc, as Lambda's Amazon Linux), at the given version. */
export function polarsArm64Binding(version: string): string {
  return `nodejs-polars-linux-arm64-gnu@${version}`;
}

/** The arm64 bindings an install with these versions needs, for messages. */
function bindingsNamed(versions: NativeVersions): string {
  return [arm64Binding(versions), ...(versions.polars ? [polarsArm64Binding(versions.polars)] : [])].join(
    ' and ',
  );
}

/**
 * The exit status of the install commands when npm could not get the packages: they have printed
 * their one line, so whoever runs the synth prints nothing more (isArm64Refusal).
 */
export const ARM64_REFUSED_STATUS = 3;

/** Whether a synth failed because the install commands refused, having said why in one line. */
export function isArm64Refusal(error: unknown): boolean {
  // CDK's local bundling reports "<command> exited with status <n>" (aws-lambda-nodejs util.js).
  return (
    error instanceof Error &&
    error.message.includes('@duckdb/node-bindings-linux-arm64') &&
    error.message.includes(`exited with status ${ARM64_REFUSED_STATUS}`)
  );
}

function shellQuote(value: string): string {
  return `'${value.replaceAll("'", `'\\''`)}'`;
}

/**
 * Shell commands that install DuckDB for linux/arm64 into a bundle folder, then prove the
 * arm64 binding is there and no x64 (or musl) one is. On failure they print `refused` and npm's
 * log path in one line, instead of npm's page of stack.
 */
export function duckDbInstallCommands(
  outputDir: string,
  versions: NativeVersions = installedDuckDbVersions(),
  refused = `compactor: bundling the DuckDB Lambdas needs ${bindingsNamed(versions)} (and their dependencies) from the npm registry or npm's cache, and npm could not get them: run "npm run ${WARM_CACHE_SCRIPT}" once in ${PROJECT_ROOT} with the registry reachable, then synth again (npm's output:`,
): string[] {
  const out = shellQuote(outputDir);
  // The platform bindings come as optional dependencies (of node-bindings, of nodejs-polars),
  // chosen by --os/--cpu/--libc (naming one explicitly fails: npm checks explicit packages against
  // the host). Optional means a mismatch is skipped silently, hence the `test -f` below.
  const packages = [
    `@duckdb/node-api@${versions.api}`,
    `@duckdb/node-bindings@${versions.bindings}`,
    ...(versions.polars ? [`nodejs-polars@${versions.polars}`] : []),
  ];
  const polars = versions.polars
    ? [
        `rm -rf ${out}/node_modules/nodejs-polars-linux-arm64-musl`,
        `test -f ${out}/node_modules/nodejs-polars-linux-arm64-gnu/nodejs-polars.linux-arm64-gnu.node`,
      ]
    : [];
  return [
    // Without its own package.json, npm would walk up and install into the project instead.
    `echo '{"private":true}' > ${out}/package.json`,
    [
      'log=$(mktemp) &&',
      'npm install',
      `--prefix ${out}`,
      '--no-save --no-package-lock --omit=dev --ignore-scripts --no-audit --no-fund --prefer-offline',
      '--loglevel=error --os=linux --cpu=arm64 --libc=glibc',
      ...packages,
      `>"$log" 2>&1 && rm -f "$log" || { echo ${shellQuote(refused)} "$log)" >&2; exit ${ARM64_REFUSED_STATUS}; }`,
    ].join(' '),
    `rm -f ${out}/package.json ${out}/node_modules/.package-lock.json`,
    `rm -rf ${out}/node_modules/@duckdb/node-bindings-linux-arm64-musl`,
    `test -f ${out}/node_modules/@duckdb/node-bindings-linux-arm64/duckdb.node`,
    ...polars,
    `test -z "$(ls -d ${out}/node_modules/@duckdb/*x64* ${out}/node_modules/*x64* 2>/dev/null)"`,
  ];
}
