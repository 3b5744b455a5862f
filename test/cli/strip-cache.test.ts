import { execFile } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { type LoadFnOutput, stripTypeScriptTypes } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { stripCacheLoad } from '../../functions/cli/strip-cache.ts';

const MAIN = fileURLToPath(new URL('../../functions/cli/main.ts', import.meta.url));
const SOURCE = 'export const answer: number = 42;\nexport type Unused = { readonly a: string };\n';
const context = { conditions: [], format: undefined, importAttributes: {} };

/** A fresh temp folder for each test, removed after it. */
function useTempDir(prefix: string): () => string {
  let current: string | undefined;
  beforeEach(() => {
    current = mkdtempSync(join(tmpdir(), prefix));
  });
  afterEach(() => {
    if (current) rmSync(current, { recursive: true, force: true });
  });
  return () => current as string;
}

describe('stripCacheLoad', () => {
  const dir = useTempDir('strip-cache-');

  function project(name: string, source: string): string {
    const src = join(dir(), 'project', 'src');
    mkdirSync(src, { recursive: true });
    writeFileSync(join(src, name), source);
    return pathToFileURL(join(src, name)).href;
  }
  const rootUrl = () => `${pathToFileURL(join(dir(), 'project')).href}/`;
  const never = () => {
    throw new Error('nextLoad was called');
  };
  const entries = (cache: string) => (existsSync(cache) ? readdirSync(cache) : []);

  it("gives a project module stripped as Node strips it, and the next load the cache's copy", () => {
    const url = project('a.ts', SOURCE);
    const cache = join(dir(), 'cache');
    const first = stripCacheLoad(rootUrl(), cache)(url, context, never);
    expect(first).toEqual({
      format: 'module',
      source: stripTypeScriptTypes(SOURCE, { mode: 'strip' }),
      shortCircuit: true,
    });
    const [entry] = entries(cache);
    expect(entries(cache)).toHaveLength(1);
    // A later process reads the entry instead of stripping again.
    writeFileSync(join(cache, entry as string), 'export const answer = 7;\n');
    expect(stripCacheLoad(rootUrl(), cache)(url, context, never).source).toBe('export const answer = 7;\n');
    // An edited module is a new entry.
    writeFileSync(fileURLToPath(url), `${SOURCE}export const more = 1;\n`);
    expect(stripCacheLoad(rootUrl(), cache)(url, context, never).source).toContain('more = 1');
    expect(entries(cache)).toHaveLength(2);
  });

  it('leaves other modules to Node: outside the project, under node_modules, not TypeScript', () => {
    const load = stripCacheLoad(rootUrl(), join(dir(), 'cache'));
    const loaded: LoadFnOutput = { format: 'module', source: 'export {};', shortCircuit: true };
    const next = vi.fn((_url: string) => loaded);
    const urls = [
      pathToFileURL(join(dir(), 'elsewhere.ts')).href,
      pathToFileURL(join(dir(), 'project', 'node_modules', 'x', 'index.ts')).href,
      pathToFileURL(join(dir(), 'project', 'src', 'plain.js')).href,
    ];
    for (const url of urls) expect(load(url, context, next)).toBe(loaded);
    expect(next.mock.calls.map(([url]) => url)).toEqual(urls);
  });

  it('strips without a cache it cannot write', () => {
    const url = project('b.ts', SOURCE);
    const blocked = join(dir(), 'a-file');
    writeFileSync(blocked, '');
    const out = stripCacheLoad(rootUrl(), join(blocked, 'cache'))(url, context, never);
    expect(out.source).toBe(stripTypeScriptTypes(SOURCE, { mode: 'strip' }));
  });
});

describe('the CLI with the cache', () => {
  const dir = useTempDir('strip-cache-cli-');

  function help(env: Record<string, string>): Promise<string> {
    return new Promise((resolve, reject) =>
      execFile(
        process.execPath,
        [MAIN, '--help'],
        { env: { ...process.env, ...env } },
        (error, stdout, stderr) =>
          error ? reject(new Error(`${error.message}\n${stderr}`)) : resolve(`${stdout}${stderr}`),
      ),
    );
  }

  it('keeps its stripped modules in the temp folder, prints the same, and none when caches are off', async () => {
    const withCache = join(dir(), 'on');
    const withoutCache = join(dir(), 'off');
    mkdirSync(withCache);
    mkdirSync(withoutCache);
    const first = await help({ TMPDIR: withCache });
    const stripped = join(withCache, 'compactor-stripped-modules');
    expect(readdirSync(stripped).length).toBeGreaterThan(3);
    expect(await help({ TMPDIR: withCache })).toBe(first);
    expect(first).not.toMatch(/ExperimentalWarning/);
    expect(await help({ TMPDIR: withoutCache, NODE_DISABLE_COMPILE_CACHE: '1' })).toBe(first);
    expect(existsSync(join(withoutCache, 'compactor-stripped-modules'))).toBe(false);
    expect(readFileSync(join(stripped, readdirSync(stripped)[0] as string), 'utf8')).not.toBe('');
  });
});
