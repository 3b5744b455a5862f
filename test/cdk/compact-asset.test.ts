/**
 * Really bundles the Lambdas, the canary's included (local esbuild, then npm installs DuckDB for
 * linux/arm64 into each asset whose handler runs DuckDB, and polars into the compact one) and
 * inspects the cloud assembly: what `cdk deploy` would upload. The canary's Lambdas are also run from their bundles, seed, check and
 * remove, against fauxqs S3 (this host's DuckDB binding standing in for the arm64 one).
 * Needs the npm registry or a warm npm cache for @duckdb/node-bindings-linux-arm64 and
 * nodejs-polars-linux-arm64-gnu.
 */

import { spawn, spawnSync } from 'node:child_process';
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
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STEPS } from '../../cdk/constructs/compactor-functions.ts';
import { installedCompactVersions, installedDuckDbVersions, PROJECT_ROOT } from '../../cdk/duckdb-arm64.ts';
import type { CanarySeedOutput } from '../../functions/canary-seed.ts';
import { CANARY_STEPS, ENV } from '../../functions/contract.ts';
import { startFauxqsS3 } from '../support/fauxqs-server.ts';
import { resourcesOfType, type Synthesized, synth } from './synth.ts';

/**
 * Lambda's limit for a function's unzipped code and layers (250 MB): the deployment package's
 * unzipped size in https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html, the
 * account's CodeSizeUnzipped in https://docs.aws.amazon.com/lambda/latest/api/API_AccountLimit.html.
 */
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

/** What Lambda's runtime passes a handler beside the event (the fields the middleware reads). */
const CONTEXT = {
  awsRequestId: 'asset-test',
  functionName: 'asset-test',
  functionVersion: '$LATEST',
  invokedFunctionArn: 'arn:aws:lambda:us-east-1:123456789012:function:asset-test',
  memoryLimitInMB: '1024',
  logGroupName: 'asset-test',
  logStreamName: 'asset-test',
  callbackWaitsForEmptyEventLoop: true,
};

/**
 * The Node script that imports a bundle as Lambda's runtime does; with an event (its argument), it
 * then invokes the handler and prints, on its last line, the result or, as the runtime reports a
 * thrown error, `{errorType, errorMessage}`. Without one it prints `typeof handler`.
 */
function bundleScript(indexMjs: string): string {
  return `const m = await import(${JSON.stringify(pathToFileURL(indexMjs).href)});
const [event] = process.argv.slice(1);
if (event === undefined) process.stdout.write(typeof m.handler);
else {
  const context = { ...${JSON.stringify(CONTEXT)}, getRemainingTimeInMillis: () => 120000 };
  const out = await m.handler(JSON.parse(event), context).then(
    (result) => ({ result }),
    (error) => ({ errorType: error.name, errorMessage: error.message }),
  );
  process.stdout.write('\\n' + JSON.stringify(out) + '\\n');
}`;
}

/**
 * Imports a bundle in a fresh Node (this one), as Lambda's runtime would, with no environment but
 * PATH, and reports `typeof handler` and what the import printed: importing a handler module only
 * defines the handler, so it reads no setting, prints nothing and leaves nothing running (the
 * process exits by itself).
 */
function importBundle(indexMjs: string): Loaded {
  const run = spawnSync(process.execPath, ['--input-type=module', '-e', bundleScript(indexMjs)], {
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '' },
    stdio: ['ignore', 'pipe', 'pipe'],
    timeout: 60_000,
  });
  if (run.status !== 0) return { ok: false, error: `${run.stderr}${run.error ?? ''}` };
  return { ok: true, handler: run.stdout, stderr: run.stderr };
}

type Invoked = { result: unknown } | { errorType: string; errorMessage: string };

/**
 * Invokes a bundle's handler with `event` in a fresh Node with `env` only, asynchronously: the
 * S3 server the handler calls runs in this process.
 */
function invokeBundle(indexMjs: string, event: unknown, env: Record<string, string>): Promise<Invoked> {
  return new Promise((done, fail) => {
    const child = spawn(
      process.execPath,
      ['--input-type=module', '-e', bundleScript(indexMjs), JSON.stringify(event)],
      { env, stdio: ['ignore', 'pipe', 'pipe'], timeout: 120_000 },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => {
      stdout += chunk;
    });
    child.stderr.on('data', (chunk) => {
      stderr += chunk;
    });
    child.on('error', fail);
    child.on('close', (status) => {
      const last = stdout.trimEnd().split('\n').at(-1) ?? '';
      if (status === 0 && last.startsWith('{')) done(JSON.parse(last) as Invoked);
      else fail(new Error(`${indexMjs} exited with ${status}: ${stderr}`));
    });
  });
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
  /** Each function's environment as the template sets it (references unresolved). */
  const envOf = new Map<string, Record<string, unknown>>();
  /** The asset keys of the compact step's functions (the large one and the small jobs' one). */
  const compactKeys: string[] = [];
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
      const variables = (fn.Properties.Environment as { Variables: Record<string, unknown> }).Variables;
      const step = variables.COMPACTOR_STEP;
      const key = (fn.Properties.Code as { S3Key: string }).S3Key;
      if (typeof step !== 'string') continue;
      if (step === 'compact') compactKeys.push(key);
      assetOf.set(step, join(s.outdir, `asset.${key.replace(/\.zip$/, '')}`));
      envOf.set(step, variables);
    }
  }, 240_000);

  afterAll(() => {
    if (s) rmSync(s.outdir, { recursive: true, force: true });
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  });

  it('bundles both compact functions (the large one and the small jobs’ one) from one asset', () => {
    expect(compactKeys).toHaveLength(2);
    expect(new Set(compactKeys).size).toBe(1);
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

  it('puts nodejs-polars and its linux-arm64 (glibc) binding, of the installed version, in the compact asset only', () => {
    const dir = asset('compact');
    const version = (pkg: string) =>
      JSON.parse(readFileSync(join(dir, 'node_modules', pkg, 'package.json'), 'utf8')).version;
    const polars = installedCompactVersions().polars;
    expect(version('nodejs-polars')).toBe(polars);
    expect(version('nodejs-polars-linux-arm64-gnu')).toBe(polars);
    expect(
      elfMachine(join(dir, 'node_modules/nodejs-polars-linux-arm64-gnu/nodejs-polars.linux-arm64-gnu.node')),
    ).toBe(183);
    // External to the bundle, required from node_modules when a job first could go to polars.
    expect(readFileSync(join(dir, 'index.mjs'), 'utf8')).toMatch(/\)\(\s*"nodejs-polars"\s*\)/);
    for (const step of DUCKDB_STEPS.filter((s) => s !== 'compact')) {
      expect(existsSync(join(asset(step), 'node_modules/nodejs-polars')), step).toBe(false);
    }
  });

  it.each(DUCKDB_STEPS)(
    'carries no x64 (or musl) binding in the %s asset and stays under the 250 MB unzipped limit',
    (step) => {
      const dir = asset(step);
      const all = files(dir);
      const names = all.map((f) => relative(dir, f));
      expect(names.filter((n) => /x64|musl|darwin|win32/.test(n))).toEqual([]);
      const bytes = all.reduce((sum, f) => sum + statSync(f).size, 0);
      process.stdout.write(`${step} asset: ${bytes} bytes unzipped\n`);
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

  it('runs the bundled canary Lambdas on fauxqs S3, this host binding in place of the arm64 one', async () => {
    const s3 = await startFauxqsS3('canary-lake');
    try {
      // The environment the stack gives each function, with the bucket (a reference in the
      // template) and the work folder here; S3 calls go to fauxqs.
      const invoke = (step: string, event: unknown) => {
        const env: Record<string, string> = {
          PATH: process.env.PATH ?? '',
          AWS_REGION: 'us-east-1',
          AWS_ACCESS_KEY_ID: 'test',
          AWS_SECRET_ACCESS_KEY: 'test',
          AWS_ENDPOINT_URL_S3: s3.endpoint,
        };
        for (const [name, value] of Object.entries(envOf.get(step) ?? {}))
          if (typeof value === 'string') env[name] = value;
        env[ENV.dataBucket] = s3.bucket;
        if (env[ENV.workDir] !== undefined) env[ENV.workDir] = mkdtempSync(join(scratch, 'work-'));
        const dir = DUCKDB_STEPS.includes(step) ? withHostBinding(asset(step), scratch) : asset(step);
        return invokeBundle(join(dir, 'index.mjs'), event, env);
      };
      const id = 'a5e7c0de';
      const seeded = await invoke('canary-seed', { id });
      expect(seeded).toMatchObject({ result: { id, table: expect.stringContaining(`canary-${id}/`) } });
      const seed = (seeded as { result: CanarySeedOutput }).result;
      expect(seed.files).toBeGreaterThan(0);
      expect(seed.rows).toBeGreaterThan(0);
      // No compaction ran: the check reads the rows with DuckDB and fails the canary, by name.
      expect(await invoke('canary-check', { id, hourStart: seed.hourStart })).toEqual({
        errorType: 'CanaryFailedError',
        errorMessage: expect.stringMatching(/rows exact, but \d+ raw file\(s\) .*the job did not finish/),
      });
      expect(await invoke('canary-remove', { id, hourStart: seed.hourStart })).toMatchObject({
        result: { ok: true, held: false },
      });
      const left = await s3.client.send(new ListObjectsV2Command({ Bucket: s3.bucket }));
      expect(left.KeyCount).toBe(0);
    } finally {
      await s3.stop();
    }
  });
});
