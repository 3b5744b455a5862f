/**
 * Really bundles the Lambdas, the canary's included (local esbuild, then npm installs DuckDB for
 * linux/arm64 into each asset whose handler runs DuckDB) and inspects the cloud assembly: what
 * `cdk deploy` would upload.
 * Needs the npm registry or a warm npm cache for @duckdb/node-bindings-linux-arm64.
 */

import { spawnSync } from 'node:child_process';
import {
  closeSync,
  cpSync,
  existsSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STEPS } from '../../cdk/constructs/compactor-functions.ts';
import { installedDuckDbVersions, PROJECT_ROOT } from '../../cdk/duckdb-arm64.ts';
import { CANARY_STEPS } from '../../functions/contract.ts';
import { resourcesOfType, type Synthesized, synth } from './synth.ts';

/** Lambda's limit for a function's unzipped code and layers (250 MB). */
const LAMBDA_UNZIPPED_LIMIT = 250 * 1000 * 1000;

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    return entry.isDirectory() ? files(path) : [path];
  });
}

/** ELF e_machine: 183 = AArch64, 62 = x86-64. */
function elfMachine(path: string): number {
  const fd = openSync(path, 'r');
  try {
    const header = Buffer.alloc(20);
    readSync(fd, header, 0, 20, 0);
    expect(header.subarray(0, 4).toString('latin1')).toBe('\x7fELF');
    return header.readUInt16LE(18);
  } finally {
    closeSync(fd);
  }
}

type Loaded = { ok: true; handler: string; stderr: string } | { ok: false; error: string };

/**
 * Imports a bundle in a fresh Node (this one), as Lambda's runtime would, with no environment but
 * PATH, and reports `typeof handler` and what the import printed: importing a handler module only
 * defines the handler, so it reads no setting, prints nothing and leaves nothing running (the
 * process exits by itself).
 */
function importBundle(indexMjs: string): Loaded {
  const script = `const m = await import(${JSON.stringify(pathToFileURL(indexMjs).href)}); process.stdout.write(typeof m.handler);`;
  const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '' },
    stdio: ['ignore', 'pipe', 'pipe'],
    timeout: 60_000,
  });
  if (run.status !== 0) return { ok: false, error: `${run.stderr}${run.error ?? ''}` };
  return { ok: true, handler: run.stdout, stderr: run.stderr };
}

/** The DuckDB binding package of this host, as node-bindings asks for it. */
const HOST_BINDING = `@duckdb/node-bindings-${process.platform}-${process.arch}`;

/**
 * A copy of a DuckDB asset with this host's binding (of the same version, the one npm installed
 * for the tests) in place of the linux-arm64 one, so that on an x64 host the bundle loads past the
 * binding and the rest of its module is exercised too. The JavaScript is the asset's own.
 */
function withHostBinding(dir: string, scratch: string): string {
  const copy = mkdtempSync(join(scratch, 'host-binding-'));
  cpSync(dir, copy, {
    recursive: true,
    filter: (src) => !src.includes('@duckdb/node-bindings-linux-arm64'),
  });
  const project = createRequire(join(PROJECT_ROOT, 'package.json'));
  const bindingsDir = dirname(
    createRequire(project.resolve('@duckdb/node-api/package.json')).resolve(
      '@duckdb/node-bindings/package.json',
    ),
  );
  const host = dirname(
    createRequire(join(bindingsDir, 'package.json')).resolve(`${HOST_BINDING}/package.json`),
  );
  symlinkSync(host, join(copy, 'node_modules', HOST_BINDING), 'dir');
  return copy;
}

const lock = JSON.parse(readFileSync(join(PROJECT_ROOT, 'package-lock.json'), 'utf8')) as {
  packages: Record<string, { dev?: boolean }>;
};

/** Packages a deployed Lambda must not carry though they are dependencies: the stack's and the local runner's. */
const STACK_ONLY_PACKAGES = ['aws-cdk-lib', 'constructs', 'aws-local-stepfunctions'];

/**
 * What a bundle was built from, read from its source map (esbuild lists every input): the
 * project's own files (relative to the project) and the installed packages (their lock-file keys,
 * `node_modules/a/node_modules/b` when nested).
 */
function bundleInputs(dir: string): { files: string[]; packages: string[] } {
  const map = JSON.parse(readFileSync(join(dir, 'index.mjs.map'), 'utf8')) as { sources: string[] };
  const root = realpathSync(PROJECT_ROOT);
  const files = new Set<string>();
  const packages = new Set<string>();
  for (const source of map.sources) {
    const pkg = /node_modules\/(?:@[^/]+\/)?[^/]+(?:\/node_modules\/(?:@[^/]+\/)?[^/]+)*/.exec(source);
    if (pkg) packages.add(pkg[0]);
    else files.add(relative(root, resolve(dir, source)));
  }
  return { files: [...files].sort(), packages: [...packages].sort() };
}

/** Every step this stack deploys a Lambda for, the canary's included (the test enables it). */
const DEPLOYED = [...STEPS, ...CANARY_STEPS];

/** The steps whose handlers run DuckDB (compact merges; the canary seeds and reads its Parquet). */
const DUCKDB_STEPS = ['compact', 'canary-seed', 'canary-check'];

describe('bundled Lambda assets (the canary enabled, so every Lambda the stack can deploy)', () => {
  let s: Synthesized;
  let scratch: string;
  const assetOf = new Map<string, string>();
  const asset = (step: string) => {
    const dir = assetOf.get(step);
    if (!dir) throw new Error(`no asset for ${step}`);
    return dir;
  };

  beforeAll(() => {
    // One synth bundles all of them: the compaction functions do not change with the canary.
    s = synth({ bundle: true, keep: true, compactor: { canary: { enabled: true } } });
    scratch = mkdtempSync(join(tmpdir(), 'compactor-assets-'));
    for (const [, fn] of resourcesOfType(s.json, 'AWS::Lambda::Function')) {
      const step = (fn.Properties.Environment as { Variables: Record<string, string> }).Variables
        .COMPACTOR_STEP;
      const key = (fn.Properties.Code as { S3Key: string }).S3Key;
      if (step) assetOf.set(step, join(s.outdir, `asset.${key.replace(/\.zip$/, '')}`));
    }
  }, 240_000);

  afterAll(() => {
    if (s) rmSync(s.outdir, { recursive: true, force: true });
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  });

  it('bundles every step into an ESM index.mjs', () => {
    expect([...assetOf.keys()].sort()).toEqual([...DEPLOYED].sort());
    for (const [step, dir] of assetOf) {
      const index = join(dir, 'index.mjs');
      expect(existsSync(index), step).toBe(true);
      expect(readFileSync(index, 'utf8').startsWith('import { createRequire'), step).toBe(true);
    }
  });

  it.each(DUCKDB_STEPS)(
    'puts the linux-arm64 DuckDB binding, of the installed version, in the %s asset',
    (step) => {
      const dir = asset(step);
      const duckdb = join(dir, 'node_modules/@duckdb');
      const versions = installedDuckDbVersions();
      const version = (pkg: string) =>
        JSON.parse(readFileSync(join(duckdb, pkg, 'package.json'), 'utf8')).version;
      expect(version('node-api')).toBe(versions.api);
      expect(version('node-bindings')).toBe(versions.bindings);
      expect(version('node-bindings-linux-arm64')).toBe(versions.bindings);
      expect(elfMachine(join(duckdb, 'node-bindings-linux-arm64/duckdb.node'))).toBe(183);
      expect(elfMachine(join(duckdb, 'node-bindings-linux-arm64/libduckdb.so'))).toBe(183);
      // DuckDB is external to the bundle: loaded from node_modules at run time.
      expect(readFileSync(join(dir, 'index.mjs'), 'utf8')).toMatch(/from\s*"@duckdb\/node-api"/);
    },
  );

  it.each(DUCKDB_STEPS)(
    'carries no x64 (or musl) binding in the %s asset and stays under the 250 MB unzipped limit',
    (step) => {
      const dir = asset(step);
      const all = files(dir);
      const names = all.map((f) => relative(dir, f));
      expect(names.filter((n) => /x64|musl|darwin|win32/.test(n))).toEqual([]);
      const bytes = all.reduce((sum, f) => sum + statSync(f).size, 0);
      expect(bytes).toBeLessThan(LAMBDA_UNZIPPED_LIMIT);
      for (const f of all.filter((n) => n.endsWith('.node') || n.endsWith('.so')))
        expect(elfMachine(f), f).toBe(183);
    },
  );

  it('keeps DuckDB out of every other step, whose bundles load on Node 22', () => {
    for (const step of DEPLOYED.filter((s) => !DUCKDB_STEPS.includes(s))) {
      const dir = asset(step);
      expect(readFileSync(join(dir, 'index.mjs'), 'utf8'), step).not.toMatch(/@duckdb\/node-api/);
      expect(existsSync(join(dir, 'node_modules')), step).toBe(false);
      expect(importBundle(join(dir, 'index.mjs')), step).toEqual({
        ok: true,
        handler: 'function',
        stderr: '',
      });
    }
  });

  it.each(DUCKDB_STEPS)(
    'loads the %s bundle up to the native binding (arm64 only, so not on an x64 host)',
    (step) => {
      const result = importBundle(join(asset(step), 'index.mjs'));
      if (process.platform === 'linux' && process.arch === 'arm64') {
        expect(result).toEqual({ ok: true, handler: 'function', stderr: '' });
      } else {
        // It resolved @duckdb/node-api from its own node_modules and asked for this host's binding.
        expect(result.ok).toBe(false);
        expect(result.ok ? '' : result.error).toContain(HOST_BINDING);
      }
    },
  );

  it.each(DUCKDB_STEPS)('loads the whole %s bundle, this host binding in place of the arm64 one', (step) => {
    const copy = withHostBinding(asset(step), scratch);
    expect(importBundle(join(copy, 'index.mjs'))).toEqual({ ok: true, handler: 'function', stderr: '' });
  });

  it.each(DEPLOYED)('builds %s from the Lambda code and production packages only', (step) => {
    const { files: own, packages } = bundleInputs(asset(step));
    expect(own).toContain(`functions/${step}.ts`);
    // No CLI, no local runner, no stack, no test or bench code.
    expect(
      own.filter(
        (f) =>
          !f.startsWith('functions/') ||
          f.startsWith('functions/cli/') ||
          f.startsWith('functions/local-runner/'),
      ),
    ).toEqual([]);
    expect(packages.length).toBeGreaterThan(0);
    // Each package is one `npm ci --omit=dev` installs, and none is the stack's or the local runner's.
    expect(packages.filter((p) => lock.packages[p] === undefined || lock.packages[p]?.dev)).toEqual([]);
    expect(
      packages.filter((p) => STACK_ONLY_PACKAGES.some((name) => p.endsWith(`node_modules/${name}`))),
    ).toEqual([]);
  });
});
