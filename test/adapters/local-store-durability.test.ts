import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import { mkdtemp, open, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DurableFolders, fsyncDirShared } from '../../functions/adapters/local-store/durable-fs.ts';
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

/** The paths fs.fsync is called on from now on (each still fsynced). */
function recordFsyncedPaths(): string[] {
  const real = fs.fsync.bind(fs);
  const synced: string[] = [];
  vi.spyOn(fs, 'fsync').mockImplementation(((fd: number, done: (e: Error | null) => void) => {
    synced.push(fs.readlinkSync(`/proc/self/fd/${fd}`));
    real(fd, done);
  }) as typeof fs.fsync);
  return synced;
}

describe('the local folder store: durability', () => {
  it('machine: a put into new folders fsyncs each new folder into its parent, and its own folder', async () => {
    const store = new LocalFolderStore(join(root, 'lake'));
    await store.put('seed', Buffer.from('s'));
    const synced = recordFsyncedPaths();
    await store.put('x/y/z/obj', Buffer.from('o'));
    const lake = join(root, 'lake');
    // x, x/y and x/y/z are new: each is durable once its parent is fsynced.
    expect(synced).toEqual(
      expect.arrayContaining([lake, join(lake, 'x'), join(lake, 'x/y'), join(lake, 'x/y/z')]),
    );
    synced.length = 0;
    await store.put('x/y/z/second', Buffer.from('o'));
    // No new folder: only its own.
    expect(synced.filter((path) => !path.endsWith('.data') && !path.includes('.compactor-store'))).toEqual([
      join(lake, 'x/y/z'),
    ]);
  });

  it('machine: a put into folders another process made fsyncs each into its parent, once per folder made', async () => {
    const lake = join(root, 'lake');
    const store = new LocalFolderStore(lake);
    await store.put('seed', Buffer.from('s'));
    const synced = recordFsyncedPaths();
    const folders = () =>
      synced.filter((path) => !path.endsWith('.data') && !path.includes('.compactor-store'));
    // Made by another process, whose fsync of their parents may still be to come.
    const made = () => fs.mkdirSync(join(lake, 'a/b'), { recursive: true });
    made();
    await store.put('a/b/first', Buffer.from('o'));
    expect(folders()).toEqual(expect.arrayContaining([lake, join(lake, 'a'), join(lake, 'a/b')]));
    synced.length = 0;
    await store.put('a/b/second', Buffer.from('o'));
    expect(folders()).toEqual([join(lake, 'a/b')]);
    // Removed and made again (by anyone): new again.
    fs.rmSync(join(lake, 'a'), { recursive: true });
    made();
    synced.length = 0;
    await store.put('a/b/third', Buffer.from('o'));
    expect(folders()).toEqual(expect.arrayContaining([lake, join(lake, 'a'), join(lake, 'a/b')]));
  });

  it('DurableFolders: walks up to the root (given with or without its separator), never remembers a folder without a birth time', () => {
    const lake = join(root, 'lake');
    fs.mkdirSync(join(lake, 'a/b'), { recursive: true });
    const folders = new DurableFolders();
    const found = folders.unknown(join(lake, 'a/b'), `${lake}/`);
    expect(found.map((f) => f.path)).toEqual([join(lake, 'a/b'), join(lake, 'a')]);
    folders.remember(found);
    expect(folders.unknown(join(lake, 'a/b'), lake)).toEqual([]);
    const unborn = new DurableFolders();
    unborn.remember([{ path: join(lake, 'a'), id: undefined }]);
    expect(unborn.unknown(join(lake, 'a'), lake).map((f) => f.path)).toEqual([join(lake, 'a')]);
  });

  it('callers of one folder share the next fsync; one begun before a caller came never answers it', async () => {
    // Each fs.fsync completes when the test says; the folder's own fsync waits in `pending`.
    const pending: ((error: NodeJS.ErrnoException | null) => void)[] = [];
    const fsync = vi.spyOn(fs, 'fsync').mockImplementation(((
      _fd: number,
      done: (e: Error | null) => void,
    ) => {
      pending.push(done);
    }) as typeof fs.fsync);
    const answered: string[] = [];
    const ask = (name: string) => fsyncDirShared(root).then(() => answered.push(name));
    const a = ask('a');
    const b = ask('b');
    const c = ask('c');
    await nextTurn();
    // a started one; b and c came while it ran, so they wait for the next.
    expect(fsync).toHaveBeenCalledTimes(1);
    pending.shift()?.(null);
    await a;
    await nextTurn();
    expect(answered).toEqual(['a']);
    expect(fsync).toHaveBeenCalledTimes(2);
    pending.shift()?.(null);
    await Promise.all([b, c]);
    expect(answered).toEqual(['a', 'b', 'c']);
    // A failed fsync fails every caller of its round, and the next caller starts afresh.
    const d = fsyncDirShared(root);
    const e = fsyncDirShared(root);
    await nextTurn();
    pending.shift()?.(Object.assign(new Error('EIO: i/o error, fsync'), { code: 'EIO' }));
    await expect(d).rejects.toMatchObject({ code: 'EIO' });
    await nextTurn();
    pending.shift()?.(null);
    await expect(e).resolves.toBeUndefined();
    const f = fsyncDirShared(root);
    await nextTurn();
    pending.shift()?.(null);
    await expect(f).resolves.toBeUndefined();
    expect(fsync).toHaveBeenCalledTimes(5);
  });

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
