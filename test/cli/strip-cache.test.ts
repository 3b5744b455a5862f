import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { type LoadFnOutput, stripTypeScriptTypes } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it, vi } from 'vitest';
import { stripCacheLoad } from '../../functions/cli/strip-cache.ts';
import { useTempDir } from '../support/engine-fixture.ts';

const MAIN = fileURLToPath(new URL('../../functions/cli/main.ts', import.meta.url));
const SOURCE = 'export const answer: number = 42;\nexport type Unused = { readonly a: string };\n';
const context = { conditions: [], format: undefined, importAttributes: {} };

// One temp folder for the file (removed after it); each test works in a folder of its own in it.
let tmp = '';
useTempDir('strip-cache-', (dir) => {
  tmp = dir;
});
const testDir = (name: string): string => {
  const dir = join(tmp, name);
  mkdirSync(dir);
  return dir;
};

describe('stripCacheLoad', () => {
  function project(dir: string, name: string, source: string): string {
    const src = join(dir, 'project', 'src');
    mkdirSync(src, { recursive: true });
    writeFileSync(join(src, name), source);
    return pathToFileURL(join(src, name)).href;
  }
  const rootUrl = (dir: string) => `${pathToFileURL(join(dir, 'project')).href}/`;
  const never = () => {
    throw new Error('nextLoad was called');
  };
  const entries = (cache: string) => (existsSync(cache) ? readdirSync(cache) : []);

  it("gives a project module stripped as Node strips it, and the next load the cache's copy", () => {
    const dir = testDir('cached');
    const url = project(dir, 'a.ts', SOURCE);
    const cache = join(dir, 'cache');
    const first = stripCacheLoad(rootUrl(dir), cache)(url, context, never);
    expect(first).toEqual({
      format: 'module',
      source: stripTypeScriptTypes(SOURCE, { mode: 'strip' }),
      shortCircuit: true,
    });
    const [entry] = entries(cache);
    expect(entries(cache)).toHaveLength(1);
    // A later process reads the entry instead of stripping again.
    writeFileSync(join(cache, entry as string), 'export const answer = 7;\n');
    expect(stripCacheLoad(rootUrl(dir), cache)(url, context, never).source).toBe(
      'export const answer = 7;\n',
    );
    // An edited module is a new entry.
    writeFileSync(fileURLToPath(url), `${SOURCE}export const more = 1;\n`);
    expect(stripCacheLoad(rootUrl(dir), cache)(url, context, never).source).toContain('more = 1');
    expect(entries(cache)).toHaveLength(2);
  });

  it('leaves other modules to Node: outside the project, under node_modules, not TypeScript', () => {
    const dir = testDir('others');
    const load = stripCacheLoad(rootUrl(dir), join(dir, 'cache'));
    const loaded: LoadFnOutput = { format: 'module', source: 'export {};', shortCircuit: true };
    const next = vi.fn((_url: string) => loaded);
    const urls = [
      pathToFileURL(join(dir, 'elsewhere.ts')).href,
      pathToFileURL(join(dir, 'project', 'node_modules', 'x', 'index.ts')).href,
      pathToFileURL(join(dir, 'project', 'src', 'plain.js')).href,
    ];
    for (const url of urls) expect(load(url, context, next)).toBe(loaded);
    expect(next.mock.calls.map(([url]) => url)).toEqual(urls);
  });

  it('strips without a cache it cannot write', () => {
    const dir = testDir('unwritable');
    const url = project(dir, 'b.ts', SOURCE);
    const blocked = join(dir, 'a-file');
    writeFileSync(blocked, '');
    const out = stripCacheLoad(rootUrl(dir), join(blocked, 'cache'))(url, context, never);
    expect(out.source).toBe(stripTypeScriptTypes(SOURCE, { mode: 'strip' }));
  });
});

describe('the CLI with the cache', () => {
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
    const withCache = testDir('on');
    const withoutCache = testDir('off');
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
