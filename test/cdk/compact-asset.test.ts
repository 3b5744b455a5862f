/**
 * Really bundles the Lambdas (local esbuild, then npm installs DuckDB for linux/arm64 into the
 * compact asset) and inspects the cloud assembly: what `cdk deploy` would upload.
 * Needs the npm registry or a warm npm cache for @duckdb/node-bindings-linux-arm64.
 */

import { execFileSync } from 'node:child_process';
import {
  closeSync,
  existsSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  rmSync,
  statSync,
} from 'node:fs';
import { join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STEPS } from '../../cdk/constructs/compactor-functions.ts';
import { installedDuckDbVersions } from '../../cdk/duckdb-arm64.ts';
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

/** Imports a bundle in a fresh Node (this one), as Lambda's runtime would, and reports `typeof handler`. */
function importBundle(indexMjs: string): { ok: true; handler: string } | { ok: false; error: string } {
  try {
    const out = execFileSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `const m = await import(${JSON.stringify(pathToFileURL(indexMjs).href)}); process.stdout.write(typeof m.handler);`,
      ],
      { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] },
    );
    return { ok: true, handler: out };
  } catch (error) {
    return { ok: false, error: String((error as { stderr?: string }).stderr ?? error) };
  }
}

describe('bundled Lambda assets', () => {
  let s: Synthesized;
  const assetOf = new Map<string, string>();

  beforeAll(() => {
    s = synth({ bundle: true, keep: true });
    for (const [, fn] of resourcesOfType(s.json, 'AWS::Lambda::Function')) {
      const step = (fn.Properties.Environment as { Variables: Record<string, string> }).Variables
        .COMPACTOR_STEP;
      const key = (fn.Properties.Code as { S3Key: string }).S3Key;
      if (step) assetOf.set(step, join(s.outdir, `asset.${key.replace(/\.zip$/, '')}`));
    }
  }, 240_000);

  afterAll(() => {
    if (s) rmSync(s.outdir, { recursive: true, force: true });
  });

  it('bundles every step into an ESM index.mjs', () => {
    expect([...assetOf.keys()].sort()).toEqual([...STEPS].sort());
    for (const [step, dir] of assetOf) {
      const index = join(dir, 'index.mjs');
      expect(existsSync(index), step).toBe(true);
      expect(readFileSync(index, 'utf8').startsWith('import { createRequire'), step).toBe(true);
    }
  });

  it('puts the linux-arm64 DuckDB binding, of the installed version, in the compact asset', () => {
    const dir = assetOf.get('compact') as string;
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
  });

  it('carries no x64 (or musl) binding and stays under the 250 MB unzipped limit', () => {
    const dir = assetOf.get('compact') as string;
    const all = files(dir);
    const names = all.map((f) => relative(dir, f));
    expect(names.filter((n) => /x64|musl|darwin|win32/.test(n))).toEqual([]);
    const bytes = all.reduce((sum, f) => sum + statSync(f).size, 0);
    expect(bytes).toBeLessThan(LAMBDA_UNZIPPED_LIMIT);
    for (const f of all.filter((n) => n.endsWith('.node') || n.endsWith('.so')))
      expect(elfMachine(f), f).toBe(183);
  });

  it('keeps DuckDB out of every other step, whose bundles load on Node 22', () => {
    for (const [step, dir] of assetOf) {
      if (step === 'compact') continue;
      expect(existsSync(join(dir, 'node_modules')), step).toBe(false);
      expect(importBundle(join(dir, 'index.mjs')), step).toEqual({ ok: true, handler: 'function' });
    }
  });

  it('loads the compact bundle up to the native binding (arm64 only, so not on an x64 host)', () => {
    const result = importBundle(join(assetOf.get('compact') as string, 'index.mjs'));
    if (process.platform === 'linux' && process.arch === 'arm64') {
      expect(result).toEqual({ ok: true, handler: 'function' });
    } else {
      // It resolved @duckdb/node-api from its own node_modules and asked for this host's binding.
      expect(result.ok).toBe(false);
      expect(result.ok ? '' : result.error).toMatch(/@duckdb\/node-bindings-[a-z0-9]+-[a-z0-9]+/);
    }
  });
});
