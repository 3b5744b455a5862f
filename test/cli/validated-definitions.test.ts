import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { markValidated, validatedKey, wasValidated } from '../../functions/local-runner/definition-cache.ts';
import { executeDefinition } from '../../functions/local-runner/workflow.ts';
import { testStore } from '../support/test-store.ts';

const REPO = fileURLToPath(new URL('../../', import.meta.url));
const VALID = { StartAt: 'A', States: { A: { Type: 'Pass', Result: { ok: true }, End: true } } };
// StartAt names no state: asl-validator refuses it.
const INVALID = { StartAt: 'Missing', States: { A: { Type: 'Pass', End: true } } };

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'validated-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

function run(definition: object, cache?: { dir: string; root: string }) {
  return executeDefinition(
    definition as Parameters<typeof executeDefinition>[0],
    {
      store: testStore(join(dir, 'lake')),
      bucket: 'b',
      invoke: async () => {
        throw new Error('no task here');
      },
    },
    { input: {}, executionId: 'e', executionName: 'e', ...(cache ? { validatedCache: cache } : {}) },
  );
}

describe('validated definitions (the local runner skips re-validating a definition it validated)', () => {
  const cacheOf = () => ({ dir: join(dir, 'cache'), root: REPO });

  it('marks a definition once the validator accepted it, under a key of its text and the options', async () => {
    const key = validatedKey(REPO, VALID, { checkArn: false, checkPaths: true });
    expect(key).not.toBe(validatedKey(REPO, INVALID, { checkArn: false, checkPaths: true }));
    expect(key).not.toBe(validatedKey(REPO, VALID, { checkArn: true, checkPaths: true }));
    expect(await wasValidated(cacheOf().dir, key)).toBe(false);
    await run(VALID, cacheOf());
    expect(await wasValidated(cacheOf().dir, key)).toBe(true);
  });

  it('never marks a definition the validator refused, and refuses it again on every run', async () => {
    for (let i = 0; i < 2; i++)
      await expect(run(INVALID, cacheOf())).rejects.toThrow(/definition is invalid/);
    const marked = await readdir(join(cacheOf().dir, 'validated')).catch(() => []);
    expect(marked).toEqual([]);
  });

  // What the marker buys: a marked definition is not validated again (here a refused one, marked
  // by hand as the runner never would, gets past construction and fails only when it runs).
  it('a marked definition is built without validating it', async () => {
    await markValidated(cacheOf().dir, validatedKey(REPO, INVALID, { checkArn: false, checkPaths: true }));
    const outcome = await run(INVALID, cacheOf()).then(
      () => 'ran',
      (error: Error) => error.message,
    );
    expect(outcome).not.toMatch(/definition is invalid/);
  });

  it('without a cache every definition is validated', async () => {
    await expect(run(INVALID)).rejects.toThrow(/definition is invalid/);
  });
});
