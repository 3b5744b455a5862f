/**
 * The synthesized definition's cache (definition-cache.ts, run.ts in functions/local-runner/): its key changes with
 * everything the synthesis reads, so a stale entry cannot be used, and an entry is read only under
 * its own key. The key is computed over a copy of the project's sources, which the tests edit.
 */

import { cp, mkdir, readdir, readFile, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { synthesizeWorkflow, workflowCacheKey } from '../../functions/local-runner/run.ts';
import { useTempDir } from '../support/engine-fixture.ts';

const REPO = fileURLToPath(new URL('../../', import.meta.url));

let scratch: string;

useTempDir('definition-cache-', (dir) => {
  scratch = dir;
});

/**
 * A copy of what the synthesis reads (cdk/, functions/core/, cdk.json, the runner, package.json and
 * the lock file); node_modules links to the real packages, except cdk-nag, a stand-in whose
 * version the test sets.
 */
async function projectCopy(name: string): Promise<string> {
  const root = join(scratch, name);
  for (const file of [
    'cdk',
    'functions/core',
    'functions/local-runner/run.ts',
    'cdk.json',
    'package.json',
    'package-lock.json',
  ]) {
    await cp(join(REPO, file), join(root, file), { recursive: true });
  }
  await mkdir(join(root, 'node_modules'));
  for (const name of await readdir(join(REPO, 'node_modules'))) {
    if (name !== 'cdk-nag') await symlink(join(REPO, 'node_modules', name), join(root, 'node_modules', name));
  }
  await setPackageVersion(root, 'cdk-nag', '3.0.0');
  return root;
}

async function setPackageVersion(root: string, pkg: string, version: string): Promise<void> {
  await mkdir(join(root, 'node_modules', pkg), { recursive: true });
  await writeFile(join(root, 'node_modules', pkg, 'package.json'), JSON.stringify({ name: pkg, version }));
}

async function edit(root: string, file: string, change: (text: string) => string): Promise<void> {
  const path = join(root, file);
  await writeFile(path, change(await readFile(path, 'utf8')));
}

describe('definition cache key', () => {
  it('is the same for the same inputs wherever the project lies', async () => {
    const a = await projectCopy('same-a');
    const b = await projectCopy('same-b');
    expect(await workflowCacheKey({ map: { maxConcurrency: 2 } }, a)).toBe(
      await workflowCacheKey({ map: { maxConcurrency: 2 } }, b),
    );
  });

  it('changes with the context, cdk.json, every source the synthesis runs, the runner, the packages and CDK_ variables', async () => {
    const root = await projectCopy('changes');
    const keys: [string, string][] = [];
    const record = async (what: string, context: Record<string, unknown> = {}) => {
      keys.push([what, await workflowCacheKey(context, root)]);
    };
    await record('baseline');
    await record('--context', { map: { maxConcurrency: 3 } });
    await record('dataPrefix', { dataPrefix: 'lake/' });
    await edit(root, 'cdk.json', (t) => t.replace('"context": {', '"context": {\n    "compactor:test": 1,'));
    await record('cdk.json');
    // A construct the app imports through compactor-stack.ts.
    await edit(root, 'cdk/constructs/compaction-workflow.ts', (t) => `${t}\n// edited\n`);
    await record('a cdk construct');
    // Outside cdk/: a core module the stack's config imports.
    await edit(root, 'functions/core/layout.ts', (t) => `${t}\n// edited\n`);
    await record('functions/core/layout.ts');
    // A file the stack starts to import, then that file itself.
    await writeFile(join(root, 'functions/core/new-limit.ts'), 'export const LIMIT = 1;\n');
    await edit(root, 'cdk/config.ts', (t) => `import '../functions/core/new-limit.ts';\n${t}`);
    await record('a new import');
    await writeFile(join(root, 'functions/core/new-limit.ts'), 'export const LIMIT = 2;\n');
    await record('the newly imported file');
    await edit(root, 'functions/local-runner/run.ts', (t) => `${t}\n// edited\n`);
    await record('the runner');
    await setPackageVersion(root, 'cdk-nag', '3.0.1');
    await record('an imported package version');
    await edit(root, 'package-lock.json', (t) =>
      t.replace('"lockfileVersion"', '"x-test": 1, "lockfileVersion"'),
    );
    await record('package-lock.json');
    const saved = process.env.CDK_CONTEXT_JSON;
    process.env.CDK_CONTEXT_JSON = '{"compactor":{"map":{"maxConcurrency":9}}}';
    try {
      await record('CDK_CONTEXT_JSON');
    } finally {
      if (saved === undefined) delete process.env.CDK_CONTEXT_JSON;
      else process.env.CDK_CONTEXT_JSON = saved;
    }
    const seen = new Map<string, string>();
    for (const [what, key] of keys) {
      expect(seen.get(key), `${what} gave the key of ${seen.get(key)}`).toBeUndefined();
      seen.set(key, what);
    }
    // What the synthesis does not read leaves the key as it was.
    const before = await workflowCacheKey({}, root);
    await edit(root, 'functions/core/protocol.ts', (t) => `${t}\n// edited\n`);
    expect(await workflowCacheKey({}, root)).toBe(before);
  });
});

describe('synthesizeWorkflow cache', () => {
  it('stores a synthesis under its key, reads it back only under that key, and replaces an unreadable entry', async () => {
    const cacheDir = join(scratch, 'cache');
    const context = { map: { maxConcurrency: 2 } };
    const first = await synthesizeWorkflow(context, { cacheDir });
    const key = await workflowCacheKey(context);
    expect(await readdir(cacheDir)).toEqual([`${key}.json`]);
    const again = await synthesizeWorkflow(context, { cacheDir });
    expect(again.definition).toEqual(first.definition);
    expect([...again.functionSteps]).toEqual([...first.functionSteps]);

    // The entry is what is read: a marked one comes back under its key, and only there.
    const path = join(cacheDir, `${key}.json`);
    const entry = JSON.parse(await readFile(path, 'utf8')) as { key: string; value: { bucket: string } };
    entry.value.bucket = 'marked-bucket';
    await writeFile(path, JSON.stringify(entry));
    expect((await synthesizeWorkflow(context, { cacheDir })).bucket).toBe('marked-bucket');
    const other = await synthesizeWorkflow({ map: { maxConcurrency: 3 } }, { cacheDir });
    expect(other.bucket).toBe(first.bucket);
    // An entry claiming another key is not used.
    await writeFile(path, JSON.stringify({ ...entry, key: 'another' }));
    expect((await synthesizeWorkflow(context, { cacheDir })).bucket).toBe(first.bucket);

    await writeFile(path, '{"key": "cut sho');
    expect((await synthesizeWorkflow(context, { cacheDir })).definition).toEqual(first.definition);
    expect(JSON.parse(await readFile(path, 'utf8'))).toMatchObject({ key });
  }, 120_000);
});
