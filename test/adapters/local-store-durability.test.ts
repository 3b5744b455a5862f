import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import { mkdtemp, open, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { LocalFolderStore } from '../../functions/adapters/local-store/local-store.ts';

let root: string;
beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'durability-'));
});
afterEach(async () => {
  vi.restoreAllMocks();
  await rm(root, { recursive: true, force: true });
});

/** fsync calls made while `work` runs: FileHandle.sync (files) and fs.fsync (folders). */
async function fsyncsDuring(work: () => Promise<void>): Promise<number> {
  const probe = await open(join(root, '.probe'), 'w');
  const proto = Object.getPrototypeOf(probe) as { sync: () => Promise<void> };
  await probe.close();
  const spies = [vi.spyOn(proto, 'sync'), vi.spyOn(fs, 'fsync')];
  await work();
  const calls = spies.reduce((sum, spy) => sum + spy.mock.calls.length, 0);
  for (const spy of spies) spy.mockRestore();
  return calls;
}

describe('the local folder store: durability', () => {
  it.each([
    ['machine', true],
    ['process', false],
  ] as const)('%s: puts (bytes, file, with metadata) and deletes fsync: %s', async (durability, syncs) => {
    const store = new LocalFolderStore(join(root, 'lake'), { durability });
    const source = join(root, 'source.bin');
    await writeFile(source, 'from a file');
    const calls = await fsyncsDuring(async () => {
      await store.put('a/one', Buffer.from('one'));
      await store.put('a/two', { file: source }, { metadata: { k: 'v' } });
      await store.deleteMany([{ key: 'a/one' }]);
    });
    if (syncs) expect(calls).toBeGreaterThanOrEqual(6);
    else expect(calls).toBe(0);
    // Either way the store's contract holds: what was put reads back with its ETag and metadata.
    const head = await store.head('a/two');
    expect(head?.metadata).toEqual({ k: 'v' });
    expect((await store.getBytes('a/two')).etag).toBe(head?.etag);
    expect(await store.head('a/one')).toBeUndefined();
  });

  it('machine: a batch of deletes fsyncs each folder it empties of a file once, then drops the sidecars', async () => {
    const store = new LocalFolderStore(join(root, 'lake'));
    for (let i = 0; i < 5; i++)
      await store.put(`t/h/00/${i}`, Buffer.from('x'), { metadata: { i: String(i) } });
    await store.put('t/h/01/a', Buffer.from('y'));
    const calls = await fsyncsDuring(async () => {
      const outcomes = await store.deleteMany([
        ...Array.from({ length: 5 }, (_, i) => ({ key: `t/h/00/${i}` })),
        { key: 't/h/01/a' },
      ]);
      expect(outcomes.every((o) => o.status === 'deleted')).toBe(true);
    });
    // Two folders lost files: two fsyncs, not six.
    expect(calls).toBe(2);
    for (let i = 0; i < 5; i++) expect(await store.head(`t/h/00/${i}`)).toBeUndefined();
    // The sidecars went with the data (and their folder with them).
    await store.put('t/h/00/0', Buffer.from('again'));
    expect((await store.head('t/h/00/0'))?.metadata).toEqual({});
  });

  // Without fsync a write still outlives its process: the page cache is the kernel's.
  it('process: a put whose process is killed (SIGKILL) right after it returned is there, whole, with its ETag', async () => {
    const lake = join(root, 'lake');
    const script = [
      `import { LocalFolderStore } from ${JSON.stringify(new URL('../../functions/adapters/local-store/local-store.ts', import.meta.url).href)};`,
      `const store = new LocalFolderStore(${JSON.stringify(lake)}, { durability: 'process' });`,
      `const { etag } = await store.put('k/v', Buffer.alloc(1 << 20, 7), { metadata: { n: '1' } });`,
      'process.stdout.write(etag);',
      "process.kill(process.pid, 'SIGKILL');",
    ].join('\n');
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
    });
    const [, signal] = (await once(child, 'exit')) as [number | null, NodeJS.Signals | null];
    expect(signal).toBe('SIGKILL');
    const store = new LocalFolderStore(lake);
    const { body, etag } = await store.getBytes('k/v');
    expect(etag).toBe(out);
    expect(body.equals(Buffer.alloc(1 << 20, 7))).toBe(true);
    expect((await store.head('k/v'))?.metadata).toEqual({ n: '1' });
  });
});
