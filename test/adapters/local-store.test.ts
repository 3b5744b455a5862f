import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import fs, { existsSync, statSync } from 'node:fs';
import {
  lstat,
  mkdir,
  mkdtemp,
  open,
  readdir,
  readFile,
  readlink,
  realpath,
  rm,
  stat,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { crc32 } from 'node:zlib';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { LocalFolderStore, RESERVED_DIR } from '../../functions/adapters/local-store/local-store.ts';
import { KeyLocks, lockFileName } from '../../functions/adapters/local-store/local-store-lock.ts';
import { parseConfig } from '../../functions/core/config.ts';
import { assignJobs } from '../../functions/core/cycle.ts';
import { type CompactRequest, type Engine, systemClock } from '../../functions/core/engine.ts';
import { NotFoundError, PreconditionFailedError, TransientStoreError } from '../../functions/core/errors.ts';
import type { ObjectStore, ObjectSummary } from '../../functions/core/object-store.ts';
import { planTier } from '../../functions/core/planner/planner.ts';
import { compactStep, deleteInputsStep, publishStep, verifyStep } from '../../functions/core/protocol.ts';
import { SWEEP_CONFIG, writeLake } from '../support/lake-harness.ts';

const CHILD = fileURLToPath(new URL('../support/local-store-race-child.ts', import.meta.url));
// A tmpfs on Linux: another file system than the temp folder's, so link(2) fails with EXDEV there.
const SHM = '/dev/shm';

function crossDevice(): boolean {
  const shm = statSync(SHM, { throwIfNoEntry: false });
  return shm?.isDirectory() === true && shm.dev !== statSync(tmpdir()).dev;
}

let root: string;
let store: LocalFolderStore;

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'local-store-'));
  store = new LocalFolderStore(root);
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

/** S3's ChecksumCRC32, computed independently of the store. */
function s3Crc32(body: Buffer): string {
  const bytes = Buffer.alloc(4);
  bytes.writeUInt32BE(crc32(body));
  return bytes.toString('base64');
}

async function listAll(s: ObjectStore, prefix: string): Promise<ObjectSummary[]> {
  const out: ObjectSummary[] = [];
  for await (const item of s.list(prefix)) out.push(item);
  return out;
}

async function keys(prefix = ''): Promise<string[]> {
  return (await listAll(store, prefix)).map((o) => o.key);
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a rejection');
}

describe('LocalFolderStore basics', () => {
  it('reports its location as a file URL of the absolute root', () => {
    expect(store.location).toBe(`file://${resolve(root)}`);
    expect(new LocalFolderStore('relative/dir').location).toBe(`file://${resolve('relative/dir')}`);
  });

  it('round-trips put, head, getBytes and list with metadata and checksum', async () => {
    const body = Buffer.from('hello parquet');
    const checksum = { algorithm: 'CRC32' as const, value: s3Crc32(body) };
    const { etag } = await store.put('db/m/2024/01/01/00/a.parquet', body, {
      metadata: { 'Job-Id': 'job-1' },
      checksum,
      contentType: 'application/vnd.apache.parquet',
    });

    // The object is a plain file at the key's path, so the folder is a globbable lake.
    expect(await readFile(join(root, 'db/m/2024/01/01/00/a.parquet'), 'utf8')).toBe('hello parquet');

    const head = await store.head('db/m/2024/01/01/00/a.parquet');
    expect(head).toMatchObject({ key: 'db/m/2024/01/01/00/a.parquet', size: body.length, etag, checksum });
    expect(head?.metadata).toEqual({ 'job-id': 'job-1' });
    expect(head?.lastModified).toBeInstanceOf(Date);

    expect(await store.getBytes('db/m/2024/01/01/00/a.parquet')).toEqual({ body, etag });
    expect(await store.getBytes('db/m/2024/01/01/00/a.parquet', { ifMatch: `"${etag}"` })).toEqual({
      body,
      etag,
    });

    const listed = await listAll(store, '');
    expect(listed).toHaveLength(1);
    expect(listed[0]).toMatchObject({ key: 'db/m/2024/01/01/00/a.parquet', size: body.length, etag });
    expect(listed[0]?.lastModified.getTime()).toBe(head?.lastModified.getTime());

    const dest = join(root, '..', `${root.split('/').pop()}-download`);
    try {
      expect(await store.getToFile('db/m/2024/01/01/00/a.parquet', dest, { ifMatch: etag })).toEqual({
        etag,
        size: body.length,
      });
      expect(await readFile(dest)).toEqual(body);
    } finally {
      await rm(dest, { force: true });
    }
  });

  it("keeps its ETag format: a version's device, inode, size and mtime, hashed", async () => {
    // Manifests in flight hold inputs' ETags; a store that named the same version differently
    // after an upgrade would fail their If-Match conditions.
    const { etag } = await store.put('db/m/2024/01/01/00/e.parquet', Buffer.from('etag'));
    const st = statSync(join(root, 'db/m/2024/01/01/00/e.parquet'), { bigint: true });
    const expected = createHash('sha256')
      .update(`${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}`)
      .digest('hex')
      .slice(0, 32);
    expect(etag).toBe(expected);
    expect((await store.head('db/m/2024/01/01/00/e.parquet'))?.etag).toBe(etag);
  });

  it('puts from a file, streaming, with its checksum', async () => {
    const src = join(root, '..', `${root.split('/').pop()}-src.bin`);
    const body = Buffer.alloc(3 * 1024 * 1024 + 17);
    for (let i = 0; i < body.length; i++) body[i] = (i * 31 + 7) & 0xff;
    await writeFile(src, body);
    try {
      const checksum = { algorithm: 'CRC32' as const, value: s3Crc32(body) };
      const { etag } = await store.put('big.bin', { file: src }, { checksum });
      expect(await store.head('big.bin')).toMatchObject({ size: body.length, etag, checksum });
      expect((await store.getBytes('big.bin')).body.equals(body)).toBe(true);
    } finally {
      await rm(src, { force: true });
    }
  });

  it('reports missing objects as such', async () => {
    expect(await store.head('nope')).toBeUndefined();
    expect(await rejection(store.getBytes('nope'))).toBeInstanceOf(NotFoundError);
    expect(await rejection(store.getToFile('nope', join(root, 'x')))).toBeInstanceOf(NotFoundError);
    expect(existsSync(join(root, 'x'))).toBe(false);
    await store.put('a/b', Buffer.from('x'));
    // A folder is not an object, and nothing lies under an object.
    expect(await store.head('a')).toBeUndefined();
    expect(await store.head('a/b/c')).toBeUndefined();
    expect(await rejection(store.getBytes('a'))).toBeInstanceOf(NotFoundError);
  });

  it('lists in UTF-8 binary order, not JS string order, with folders sorted as "name/"', async () => {
    // UTF-16 puts the emoji (surrogates D83D..) before U+FF5A; UTF-8 (F0.. vs EF..) does not.
    const all = ['a/B', 'a/a', 'a/é', 'a/~', 'a/ｚ', 'a/😀', 'a-c', 'a0', 'a/b/c', 'a/b-', 'a/b0'];
    for (const key of all) await store.put(key, Buffer.from(key));
    const expected = [...all].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y)));
    expect(expected).not.toEqual([...all].sort());
    expect(await keys()).toEqual(expected);
    expect(await keys('a/')).toEqual(expected.filter((k) => k.startsWith('a/')));
  });

  it('treats the prefix as a plain string prefix and walks only what can match', async () => {
    for (const key of [
      'logs/2024-01/a',
      'logs/2024-02/b',
      'logs/2024-10/c',
      'logs/2025/d',
      'logsx/e',
      'other/f',
    ]) {
      await store.put(key, Buffer.from(key));
    }
    expect(await keys('logs/2024-0')).toEqual(['logs/2024-01/a', 'logs/2024-02/b']);
    expect(await keys('logs/2024')).toEqual(['logs/2024-01/a', 'logs/2024-02/b', 'logs/2024-10/c']);
    expect(await keys('logs')).toEqual([
      'logs/2024-01/a',
      'logs/2024-02/b',
      'logs/2024-10/c',
      'logs/2025/d',
      'logsx/e',
    ]);
    expect(await keys('logs/2024-01/a')).toEqual(['logs/2024-01/a']);
    expect(await keys('missing/')).toEqual([]);
    expect(await keys('logs/2024-01/a/')).toEqual([]);
    // Prefixes no valid key can have yield nothing (and never escape the root).
    expect(await keys('../')).toEqual([]);
    expect(await keys('logs//')).toEqual([]);
    expect(await keys('logs/./')).toEqual([]);
  });

  it('lets other work run while it walks a big folder (its calls are synchronous, in bursts)', async () => {
    // 1,000 files written straight to the folder (the store's own puts would take far longer).
    await mkdir(join(root, 'big'));
    await Promise.all(
      Array.from({ length: 1000 }, (_, i) =>
        writeFile(join(root, 'big', `f${String(i).padStart(4, '0')}`), 'x'),
      ),
    );
    let turns = 0;
    let walking = true;
    const tick = (): void => {
      if (!walking) return;
      turns++;
      setImmediate(tick);
    };
    setImmediate(tick);
    const listed = await keys('big/');
    walking = false;
    expect(listed).toHaveLength(1000);
    // One turn at least every 32 calls (sync-calls.ts): 1,001 calls give 31 or more.
    expect(turns).toBeGreaterThanOrEqual(31);
  });

  it('never lists the reserved folder, nor folders, and rejects reserved and malformed keys', async () => {
    await store.put('x/y', Buffer.from('1'), { metadata: { a: 'b' } });
    await mkdir(join(root, 'empty/folder'), { recursive: true });
    await writeFile(join(root, '.compactor-notes'), 'a user file that merely looks similar');
    expect(existsSync(join(root, RESERVED_DIR, 'meta', 'x', 'y.json'))).toBe(true);
    expect(await keys()).toEqual(['.compactor-notes', 'x/y']);
    expect(await keys('.compactor')).toEqual(['.compactor-notes']);
    expect(await keys(`${RESERVED_DIR}/`)).toEqual([]);
    expect(await keys(RESERVED_DIR)).toEqual([]);
    expect(await keys('empty/')).toEqual([]);

    const bad = [
      `${RESERVED_DIR}/meta/x`,
      RESERVED_DIR,
      '',
      '/abs',
      'a//b',
      'a/',
      'a/../b',
      './a',
      'a/.',
      'nul\0byte',
      'x'.repeat(1025),
      `${'y'.repeat(256)}/z`,
      'z'.repeat(251),
      'lone\uD800surrogate',
    ];
    for (const key of bad) {
      await expect(store.put(key, Buffer.from('no')), key).rejects.toThrow(/invalid object key/);
      await expect(store.head(key), key).rejects.toThrow(/invalid object key/);
    }
    await expect(store.deleteMany([{ key: 'x/y' }, { key: '../x' }])).rejects.toThrow(/invalid object key/);
    expect(await keys()).toEqual(['.compactor-notes', 'x/y']);
  });

  it('stores keys with spaces, URL and glob characters, unicode, and ~1000 bytes', async () => {
    const long = ['é'.repeat(120), 's'.repeat(240), 'ü'.repeat(120), `${'t'.repeat(230)}.parquet`].join('/');
    expect(Buffer.byteLength(long)).toBeGreaterThan(960);
    expect(Buffer.byteLength(long)).toBeLessThanOrEqual(1024);
    const weird = [
      'dir with space/file name.parquet',
      'plus+sign/a+b',
      'percent%2F/100%',
      'hash#/frag#ment',
      'question?/a?b=c',
      'bracket[/[0-9]*',
      'hive/dt=2024-01-01/hour=00/part=1.parquet',
      'unicode/日本語/😀/naïve',
      long,
    ];
    for (const key of weird) {
      const { etag } = await store.put(key, Buffer.from(`body of ${key}`), { metadata: { k: key } });
      const head = await store.head(key);
      expect(head?.etag).toBe(etag);
      expect(head?.metadata).toEqual({ k: key });
      expect((await store.getBytes(key)).body.toString()).toBe(`body of ${key}`);
    }
    const sorted = [...weird].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
    expect(await keys()).toEqual(sorted);
    expect(await keys('bracket[/')).toEqual(['bracket[/[0-9]*']);
    expect(await keys('percent%')).toEqual(['percent%2F/100%']);
    const outcomes = await store.deleteMany(weird.map((key) => ({ key })));
    expect(outcomes.every((o) => o.status === 'deleted')).toBe(true);
    expect(await keys()).toEqual([]);
  });
});

describe('LocalFolderStore conditional writes', () => {
  it('put with ifNoneMatch creates once, then fails with PreconditionFailedError', async () => {
    const first = await store.put('m.json', Buffer.from('one'), { ifNoneMatch: '*' });
    const error = await rejection(store.put('m.json', Buffer.from('two'), { ifNoneMatch: '*' }));
    expect(error).toBeInstanceOf(PreconditionFailedError);
    expect((error as PreconditionFailedError).key).toBe('m.json');
    expect(await store.getBytes('m.json')).toEqual({ body: Buffer.from('one'), etag: first.etag });
    expect(await store.listIncompleteUploads('')).toEqual([]);
  });

  it('put with ifMatch is a compare-and-swap', async () => {
    const v1 = await store.put('m.json', Buffer.from('v1'));
    const v2 = await store.put('m.json', Buffer.from('v2'), { ifMatch: v1.etag });
    expect(v2.etag).not.toBe(v1.etag);
    await expect(store.put('m.json', Buffer.from('v3'), { ifMatch: v1.etag })).rejects.toBeInstanceOf(
      PreconditionFailedError,
    );
    expect((await store.getBytes('m.json')).body.toString()).toBe('v2');
    await expect(store.put('absent.json', Buffer.from('x'), { ifMatch: v1.etag })).rejects.toBeInstanceOf(
      PreconditionFailedError,
    );
    expect(await store.head('absent.json')).toBeUndefined();
  });

  it('changes the ETag on every overwrite, even with identical bytes', async () => {
    const etags = new Set<string>();
    for (let i = 0; i < 5; i++) etags.add((await store.put('same', Buffer.from('same bytes'))).etag);
    expect(etags.size).toBe(5);
    expect((await store.head('same'))?.etag).toBe([...etags].at(-1));
  });

  it('copy carries metadata and checksum, honours ifNoneMatch, and reports a missing source', async () => {
    const body = Buffer.from('staged output');
    const checksum = { algorithm: 'CRC32' as const, value: s3Crc32(body) };
    await store.put('_compaction/staging/j1/out.parquet', body, { metadata: { 'job-id': 'j1' }, checksum });

    const { etag } = await store.copy('_compaction/staging/j1/out.parquet', 'db/m/out.parquet', {
      ifNoneMatch: '*',
    });
    const head = await store.head('db/m/out.parquet');
    expect(head).toMatchObject({ etag, size: body.length, checksum, metadata: { 'job-id': 'j1' } });

    await store.put('other', Buffer.from('plain'));
    await expect(store.copy('other', 'db/m/out.parquet', { ifNoneMatch: '*' })).rejects.toBeInstanceOf(
      PreconditionFailedError,
    );
    expect((await store.getBytes('db/m/out.parquet')).body).toEqual(body);

    const missing = await rejection(store.copy('no/such', 'db/m/x.parquet'));
    expect(missing).toBeInstanceOf(NotFoundError);
    expect((missing as NotFoundError).key).toBe('no/such');

    // An unconditional copy replaces, and a source without attributes leaves none behind.
    await store.copy('other', 'db/m/out.parquet');
    expect(await store.head('db/m/out.parquet')).toMatchObject({ size: 5, metadata: {} });
    expect((await store.head('db/m/out.parquet'))?.checksum).toBeUndefined();
    expect(await store.listIncompleteUploads('')).toEqual([]);
  });

  it('a put of a handed-off file takes the file itself, still checking its declared CRC32', async () => {
    const file = join(root, '..', `${basename(root)}-handed.parquet`);
    const body = Buffer.from('merged output');
    await writeFile(file, body);
    try {
      const wrong = { algorithm: 'CRC32' as const, value: s3Crc32(Buffer.from('other bytes')) };
      await expect(store.put('db/m/h.parquet', { file, handOff: true }, { checksum: wrong })).rejects.toThrow(
        /CRC32/,
      );
      expect(await store.head('db/m/h.parquet')).toBeUndefined();
      expect(await store.listIncompleteUploads('')).toEqual([]);

      const checksum = { algorithm: 'CRC32' as const, value: s3Crc32(body) };
      await store.put('db/m/h.parquet', { file, handOff: true }, { checksum });
      expect((await stat(join(root, 'db/m/h.parquet'))).ino).toBe((await stat(file)).ino);
      expect(await store.head('db/m/h.parquet')).toMatchObject({ size: body.length, checksum });
      // Its writer removes it afterwards: the object stays.
      await rm(file);
      expect((await store.getBytes('db/m/h.parquet')).body).toEqual(body);
      // Without handOff the bytes are copied.
      await writeFile(file, body);
      await store.put('db/m/c.parquet', { file });
      expect((await stat(join(root, 'db/m/c.parquet'))).ino).not.toBe((await stat(file)).ino);
    } finally {
      await rm(file, { force: true });
    }
  });

  it('copy links a version the store wrote: same bytes and ETag, none copied; later changes of either key stay apart', async () => {
    const body = Buffer.from('staged output');
    const checksum = { algorithm: 'CRC32' as const, value: s3Crc32(body) };
    const source = '_compaction/staging/j2/000.parquet';
    const staged = await store.put(source, body, { metadata: { 'job-id': 'j2' }, checksum });
    const copied = await store.copy(source, 'db/m/out.parquet');
    // One inode for both keys, as S3's copy of a single-part object keeps its ETag.
    expect((await stat(join(root, 'db/m/out.parquet'))).ino).toBe((await stat(join(root, source))).ino);
    expect(copied.etag).toBe(staged.etag);
    expect(await store.head('db/m/out.parquet')).toMatchObject({ checksum, metadata: { 'job-id': 'j2' } });
    // A conditional delete of the source by its ETag removes the source only.
    expect(await store.deleteMany([{ key: source, etag: staged.etag }])).toEqual([
      { key: source, status: 'deleted' },
    ]);
    expect((await store.getBytes('db/m/out.parquet')).body).toEqual(body);
    // Writing the copied key again replaces its file, never the shared inode's bytes.
    await store.put(source, body);
    const linked = await store.copy(source, 'db/m/again.parquet');
    await store.put(source, Buffer.from('new bytes'));
    expect((await store.getBytes('db/m/again.parquet')).body).toEqual(body);
    expect((await store.head('db/m/again.parquet'))?.etag).toBe(linked.etag);
    // A file written around the store (an input) is copied byte for byte: its producer may later
    // write it in place, and the copy (a quarantined input) must stay as it was.
    await writeFile(join(root, 'db/m/input.parquet'), 'written by a producer');
    await store.copy('db/m/input.parquet', 'db/m/kept.parquet');
    expect((await stat(join(root, 'db/m/kept.parquet'))).nlink).toBe(1);
    await writeFile(join(root, 'db/m/input.parquet'), 'rewritten in place');
    expect((await store.getBytes('db/m/kept.parquet')).body.toString()).toBe('written by a producer');
    expect(await store.listIncompleteUploads('')).toEqual([]);
  });

  it('getToFile and getBytes with a stale ETag fail and write nothing', async () => {
    const v1 = await store.put('obj', Buffer.from('v1'));
    await store.put('obj', Buffer.from('v2'));
    const dest = join(root, 'download.bin');
    await expect(store.getToFile('obj', dest, { ifMatch: v1.etag })).rejects.toBeInstanceOf(
      PreconditionFailedError,
    );
    expect(existsSync(dest)).toBe(false);
    await expect(store.getBytes('obj', { ifMatch: v1.etag })).rejects.toBeInstanceOf(PreconditionFailedError);
  });

  // mkdir -p makes the path a folder at a time, and checks a folder it finds there: a concurrent
  // delete's prune of an empty parent in between makes it fail with ENOENT, or with EEXIST when
  // the folder is gone by its check, as this stand-in does once. No object is in the path, so
  // the put makes the folder again.
  it.each([
    ['ENOENT', 'db/m/2024/01/01/00/new.parquet'],
    ['EEXIST', 'db/m/2024/01/02/00/new.parquet'],
  ])(
    'a put whose new folder another writer prunes while mkdir makes it (%s) is retried',
    async (code, key) => {
      const mkdir = vi.spyOn(fs.promises, 'mkdir').mockImplementationOnce(async () => {
        throw Object.assign(new Error(`${code}: mkdir`), { code });
      });
      try {
        await store.put(key, Buffer.from(code));
        expect(mkdir).toHaveBeenCalledTimes(2);
      } finally {
        mkdir.mockRestore();
      }
      expect((await store.getBytes(key)).body.toString()).toBe(code);
    },
  );

  it("a delete's prune in the same process leaves the folders a put is making and renaming into", async () => {
    await store.put('db/h/2024/01/01/01/old.parquet', Buffer.from('old'));
    const realMkdir = fs.promises.mkdir.bind(fs.promises);
    let making = () => {};
    const madeCalled = new Promise<void>((resolve) => {
      making = resolve;
    });
    let resume = () => {};
    const resumed = new Promise<void>((resolve) => {
      resume = resolve;
    });
    const mkdir = vi
      .spyOn(fs.promises, 'mkdir')
      .mockImplementationOnce(async (...args: Parameters<typeof fs.promises.mkdir>) => {
        making();
        await resumed;
        return realMkdir(...args);
      });
    try {
      const put = store.put('db/h/2024/01/01/00/new.parquet', Buffer.from('new'));
      await madeCalled;
      // The put's folder is missing and its mkdir has not run: the delete empties the day's only
      // other hour, and its prune stops at the day, which the put holds.
      await store.deleteMany([{ key: 'db/h/2024/01/01/01/old.parquet' }]);
      expect(existsSync(join(root, 'db/h/2024/01/01/01'))).toBe(false);
      expect(existsSync(join(root, 'db/h/2024/01/01'))).toBe(true);
      resume();
      await put;
    } finally {
      resume();
      mkdir.mockRestore();
    }
    expect((await store.getBytes('db/h/2024/01/01/00/new.parquet')).body.toString()).toBe('new');
  });

  it('a put under an object is the caller\'s error: a local folder cannot hold "a" and "a/b"', async () => {
    await store.put('db/m/file', Buffer.from('z'));
    await expect(store.put('db/m/file/under.parquet', Buffer.from('w'))).rejects.toThrow(/is an object/);
  });

  it('puts and deletes of one folder, all at once in one process, never fail on its prunes', async () => {
    // Each delete empties the folder chain and prunes it while the others' puts make it again;
    // as promise calls these interleave. Without fsyncs the calls come closest together.
    const churn = new LocalFolderStore(join(root, 'churn'), { durability: 'process' });
    const failures: string[] = [];
    await Promise.all(
      Array.from({ length: 8 }, async (_, w) => {
        const key = `a/b/c/k${w}.json`;
        for (let i = 0; i < 300; i++) {
          try {
            await churn.put(key, Buffer.from(String(i)));
            await churn.deleteMany([{ key }]);
          } catch (error) {
            failures.push(String(error));
          }
        }
      }),
    );
    expect(failures).toEqual([]);
    expect(existsSync(join(root, 'churn', 'a'))).toBe(false);
  });

  it("getToFile into a folder that is not there fails with the destination's error, not NotFound", async () => {
    await store.put('obj', Buffer.from('v1'));
    const error = await rejection(store.getToFile('obj', join(root, 'no-such-folder', 'download.bin')));
    expect(error).not.toBeInstanceOf(NotFoundError);
    expect((error as NodeJS.ErrnoException).code).toBe('ENOENT');
    await expect(store.getToFile('gone', join(root, 'no-such-folder', 'x'))).rejects.toBeInstanceOf(
      NotFoundError,
    );
  });

  it('getToFile writes exactly the version its ETag names while the object is being replaced', async () => {
    const bodies = new Map<string, string>();
    bodies.set((await store.put('obj', Buffer.from('v-0'))).etag, 'v-0');
    let writing = true;
    const writer = (async () => {
      for (let v = 1; writing; v++) {
        const body = `v-${v}`.padEnd(100 + (v % 50) * 100, '.');
        bodies.set((await store.put('obj', Buffer.from(body))).etag, body);
      }
    })();
    const seen: { etag: string; size: number; body: string; dest: string }[] = [];
    try {
      // Fetch until the writer has replaced the object many times (at least 300 fetches): on a
      // loaded machine 300 fetches can all land between two of its fsynced writes.
      const versions = () => new Set(seen.map((s) => s.etag)).size;
      for (let i = 0; i < 300 || (versions() <= 10 && i < 100_000); i++) {
        const dest = join(root, `download-${i}.bin`);
        const { etag, size } = await store.getToFile('obj', dest);
        seen.push({ etag, size, body: await readFile(dest, 'utf8'), dest });
      }
    } finally {
      writing = false;
      await writer;
    }
    expect(new Set(seen.map((s) => s.etag)).size).toBeGreaterThan(10);
    for (const { etag, size, body, dest } of seen) {
      expect(body).toBe(bodies.get(etag));
      expect(size).toBe(Buffer.byteLength(body));
      // Read again after every later overwrite: a fetched file (a link) keeps its version's bytes.
      expect(await readFile(dest, 'utf8')).toBe(body);
    }
  });

  it('getToFile of an object edited in place gives the edited bytes under a new ETag, never the old one', async () => {
    const v1 = await store.put('db/m/2024/01/01/00/a.parquet', Buffer.from('first'));
    const handle = await open(join(root, 'db/m/2024/01/01/00/a.parquet'), 'r+');
    await handle.write(Buffer.from('FIRST'), 0, 5, 0);
    await handle.close();
    const dest = join(root, 'download.bin');
    await expect(
      store.getToFile('db/m/2024/01/01/00/a.parquet', dest, { ifMatch: v1.etag }),
    ).rejects.toBeInstanceOf(PreconditionFailedError);
    expect(existsSync(dest)).toBe(false);
    const got = await store.getToFile('db/m/2024/01/01/00/a.parquet', dest);
    expect(got.etag).not.toBe(v1.etag);
    expect(await readFile(dest, 'utf8')).toBe('FIRST');
  });

  it('getToFile hard-links the version: a later overwrite or delete of the key leaves the fetched bytes as they were', async () => {
    const key = 'db/m/2024/01/01/00/a.parquet';
    const v1 = await store.put(key, Buffer.from('version one'));
    const dest = join(root, 'work', 'a.parquet');
    await mkdir(join(root, 'work'));
    expect(await store.getToFile(key, dest, { ifMatch: v1.etag })).toEqual({ etag: v1.etag, size: 11 });
    // The same inode as the object: a link, not a copy.
    expect((await stat(dest)).ino).toBe((await stat(join(root, key))).ino);
    const v2 = await store.put(key, Buffer.from('version two, longer'));
    expect(v2.etag).not.toBe(v1.etag);
    expect(await readFile(dest, 'utf8')).toBe('version one');
    expect((await store.getBytes(key)).body.toString()).toBe('version two, longer');
    // A server-side copy onto the key replaces it too.
    await store.put('db/m/2024/01/01/00/b.parquet', Buffer.from('bee'));
    await store.copy('db/m/2024/01/01/00/b.parquet', key);
    expect(await readFile(dest, 'utf8')).toBe('version one');
    expect(await store.deleteMany([{ key }])).toEqual([{ key, status: 'deleted' }]);
    expect(await readFile(dest, 'utf8')).toBe('version one');
  });

  it("removing a fetched file, or fetching another object into its path, never changes the store's object", async () => {
    const a = await store.put('db/m/a.parquet', Buffer.from('object a'));
    await store.put('db/m/b.parquet', Buffer.from('object b, other bytes'));
    const dest = join(root, 'work.bin');
    await store.getToFile('db/m/a.parquet', dest, { ifMatch: a.etag });
    // The path now shares a's inode: fetching b there must replace the name, not write a's inode.
    await store.getToFile('db/m/b.parquet', dest);
    expect(await readFile(dest, 'utf8')).toBe('object b, other bytes');
    expect(await store.getBytes('db/m/a.parquet', { ifMatch: a.etag })).toMatchObject({ etag: a.etag });
    expect((await store.getBytes('db/m/a.parquet')).body.toString()).toBe('object a');
    await store.getToFile('db/m/a.parquet', dest);
    await rm(dest);
    expect(await store.head('db/m/a.parquet')).toMatchObject({ etag: a.etag, size: 8 });
    expect((await store.getBytes('db/m/a.parquet')).body.toString()).toBe('object a');
  });

  it.skipIf(!crossDevice())(
    'getToFile copies where no hard link can be made (another file system), never through an existing file',
    async () => {
      const v1 = await store.put('obj', Buffer.from('on disk'));
      const other = await mkdtemp(join(SHM, 'local-store-xdev-'));
      try {
        const dest = join(other, 'obj.bin');
        await writeFile(dest, 'stale file that was there before');
        expect(await store.getToFile('obj', dest, { ifMatch: v1.etag })).toEqual({ etag: v1.etag, size: 7 });
        expect(await readFile(dest, 'utf8')).toBe('on disk');
        expect((await stat(dest)).ino).not.toBe((await stat(join(root, 'obj'))).ino);
        await store.put('obj', Buffer.from('replaced'));
        expect(await readFile(dest, 'utf8')).toBe('on disk');
      } finally {
        await rm(other, { recursive: true, force: true });
      }
    },
  );

  it('getToFile of a symlinked object gives a file holding what it points to, not the symlink', async () => {
    await mkdir(join(root, 'db/m/real'), { recursive: true });
    await writeFile(join(root, 'db/m/real/x.parquet'), 'target bytes');
    await symlink('real/x.parquet', join(root, 'db/m/x.parquet'));
    const [listed] = await listAll(store, 'db/m/x');
    expect(listed?.key).toBe('db/m/x.parquet');
    const dest = join(root, 'elsewhere.bin');
    expect(await store.getToFile('db/m/x.parquet', dest, { ifMatch: listed?.etag })).toMatchObject({
      size: 12,
    });
    expect((await lstat(dest)).isFile()).toBe(true);
    expect(await readFile(dest, 'utf8')).toBe('target bytes');
  });

  it('deleteMany reports deleted, not-found and precondition-failed, and prunes empty folders', async () => {
    const a = await store.put('p/h/00/a.parquet', Buffer.from('a'), { metadata: { x: '1' } });
    await store.put('p/h/00/b.parquet', Buffer.from('b'));
    await store.put('p/h/01/c.parquet', Buffer.from('c'));
    await store.put('p/keep/d.parquet', Buffer.from('d'));
    const outcomes = await store.deleteMany([
      { key: 'p/h/00/a.parquet', etag: a.etag },
      { key: 'p/h/00/b.parquet' },
      { key: 'p/h/01/c.parquet', etag: 'not-the-etag' },
      { key: 'p/h/02/gone.parquet' },
      { key: 'p/h/00/a.parquet' },
    ]);
    expect(outcomes).toEqual([
      { key: 'p/h/00/a.parquet', status: 'deleted' },
      { key: 'p/h/00/b.parquet', status: 'deleted' },
      { key: 'p/h/01/c.parquet', status: 'precondition-failed' },
      { key: 'p/h/02/gone.parquet', status: 'not-found' },
      { key: 'p/h/00/a.parquet', status: 'not-found' },
    ]);
    expect(await keys()).toEqual(['p/h/01/c.parquet', 'p/keep/d.parquet']);
    expect(existsSync(join(root, 'p/h/00'))).toBe(false);
    expect(existsSync(join(root, 'p/h/01'))).toBe(true);
    expect(existsSync(join(root, RESERVED_DIR, 'meta/p/h/00'))).toBe(false);

    await store.deleteMany([{ key: 'p/h/01/c.parquet' }, { key: 'p/keep/d.parquet' }]);
    expect(await readdir(root)).toEqual([RESERVED_DIR]);

    const tooMany = Array.from({ length: 1001 }, (_, i) => ({ key: `k${i}` }));
    await expect(store.deleteMany(tooMany)).rejects.toThrow(/at most 1000/);
    expect(await store.deleteMany([])).toEqual([]);
  });
});

describe('LocalFolderStore checksums and sidecars', () => {
  it('rejects a body whose checksum differs and writes nothing', async () => {
    const error = await rejection(
      store.put('bad', Buffer.from('payload'), {
        checksum: { algorithm: 'CRC32', value: s3Crc32(Buffer.from('other payload')) },
      }),
    );
    expect(error).toBeInstanceOf(Error);
    expect(String(error)).toMatch(/CRC32/);
    expect(await store.head('bad')).toBeUndefined();
    expect(await keys()).toEqual([]);
    expect(await store.listIncompleteUploads('')).toEqual([]);
    expect(await readdir(join(root, RESERVED_DIR, 'tmp'))).toEqual([]);
  });

  it('ignores a stale sidecar that belongs to an earlier version', async () => {
    await store.put('k/obj', Buffer.from('v1'), { metadata: { version: '1' } });
    const sidecar = join(root, RESERVED_DIR, 'meta', 'k', 'obj.json');
    const saved = await readFile(sidecar);
    const v2 = await store.put('k/obj', Buffer.from('v2'));
    expect(existsSync(sidecar)).toBe(false);
    // Simulate a crash that left the old sidecar behind (or a sidecar renamed in before its data).
    await mkdir(join(root, RESERVED_DIR, 'meta', 'k'), { recursive: true });
    await writeFile(sidecar, saved);
    const head = await store.head('k/obj');
    expect(head).toMatchObject({ etag: v2.etag, metadata: {} });
    expect(head?.checksum).toBeUndefined();
  });

  it('never shows one version with another version’s metadata while writers race', async () => {
    let stop = false;
    const writer = (async () => {
      for (let i = 0; i < 150; i++)
        await store.put('hot', Buffer.from(`v${i}`), { metadata: { v: `v${i}` } });
      stop = true;
    })();
    let checked = 0;
    while (!stop) {
      const head = await store.head('hot');
      if (head === undefined) continue;
      expect(head.metadata.v).toBeDefined();
      try {
        const { body } = await store.getBytes('hot', { ifMatch: head.etag });
        expect(body.toString()).toBe(head.metadata.v);
        checked++;
      } catch (error) {
        if (!(error instanceof PreconditionFailedError)) throw error;
      }
    }
    await writer;
    expect(checked).toBeGreaterThan(0);
  });
});

/** How many of this process's descriptors are open on `path`. */
async function descriptorsOf(path: string): Promise<number> {
  const wanted = await realpath(path);
  let count = 0;
  for (const fd of await readdir('/proc/self/fd')) {
    // A descriptor closed since readdir listed it is not open on the path.
    const target = await readlink(join('/proc/self/fd', fd)).catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return undefined;
      throw error;
    });
    if (target === wanted) count++;
  }
  return count;
}

async function until(condition: () => Promise<boolean>): Promise<void> {
  while (!(await condition())) await new Promise((r) => setTimeout(r, 10));
}

describe('LocalFolderStore incomplete uploads and aborts', () => {
  it('lists an upload in progress under its key and aborts it, failing the put', async () => {
    const fifo = join(root, '..', `${root.split('/').pop()}.fifo`);
    execFileSync('mkfifo', [fifo]);
    try {
      // Opened read-write, a FIFO never blocks its opener (Linux, fifo(7)), so the put can open it too.
      const writer = await open(fifo, 'r+');
      const put = store.put('db/m/slow.parquet', { file: fifo });
      const settled = put.then(
        () => 'resolved',
        (error: unknown) => error,
      );
      // Abort only once the put reads the FIFO: aborted earlier, it fails before opening it.
      await until(async () => (await descriptorsOf(fifo)) >= 2);
      const uploads = await store.listIncompleteUploads('db/');
      expect(uploads).toHaveLength(1);
      expect(uploads[0]).toMatchObject({ key: 'db/m/slow.parquet' });
      expect(uploads[0]?.initiated).toBeInstanceOf(Date);
      expect(await store.listIncompleteUploads('db/m/slow.parquet')).toHaveLength(1);
      expect(await store.listIncompleteUploads('other/')).toEqual([]);
      expect(await keys()).toEqual([]);

      // The upload is its data file in the temp folder, its id naming the key: no folder, no intent.
      const id = uploads[0]?.uploadId as string;
      expect(id.endsWith(`~${Buffer.from('db/m/slow.parquet').toString('base64url')}`)).toBe(true);
      expect(await readdir(join(root, RESERVED_DIR, 'tmp'))).toEqual([`${id}.data`]);
      await store.abortIncompleteUpload(uploads[0] as (typeof uploads)[number]);
      // Aborting twice is harmless.
      await store.abortIncompleteUpload(uploads[0] as (typeof uploads)[number]);
      expect(await store.listIncompleteUploads('')).toEqual([]);
      expect(await readdir(join(root, RESERVED_DIR, 'tmp'))).toEqual([]);

      await writer.write(Buffer.from('late bytes'));
      await writer.close();
      expect(await settled).toBeInstanceOf(Error);
      expect(await store.head('db/m/slow.parquet')).toBeUndefined();
    } finally {
      await rm(fifo, { force: true });
    }
  });

  it('an upload whose writer died before its intent was whole is abandoned, by the pid in its id', async () => {
    // A writer killed with SIGKILL between creating its folder and finishing intent.json.
    const dead = spawn(process.execPath, ['-e', '']);
    await once(dead, 'exit');
    const tmp = join(root, RESERVED_DIR, 'tmp');
    const ids = {
      none: `mx1-${dead.pid}-00000000000000a1`,
      empty: `mx1-${dead.pid}-00000000000000a2`,
      partial: `mx1-${dead.pid}-00000000000000a3`,
      live: `mx1-${process.ppid}-00000000000000a4`,
    };
    for (const id of Object.values(ids)) await mkdir(join(tmp, id), { recursive: true });
    await writeFile(join(tmp, ids.empty, 'intent.json'), '');
    await writeFile(join(tmp, ids.partial, 'intent.json'), '{"key":"db/m/x.parq');
    await writeFile(join(tmp, ids.live, 'intent.json'), '');
    const uploads = await store.listIncompleteUploads('');
    const abandoned = Object.fromEntries(uploads.map((u) => [u.uploadId, [u.key, u.abandoned]]));
    expect(abandoned).toEqual({
      [ids.none]: ['', true],
      [ids.empty]: ['', true],
      [ids.partial]: ['', true],
      // Its writer (our parent) is alive: maybe still writing its intent.
      [ids.live]: ['', false],
    });
    for (const upload of uploads) if (upload.abandoned) await store.abortIncompleteUpload(upload);
    expect((await store.listIncompleteUploads('')).map((u) => u.uploadId)).toEqual([ids.live]);
  });

  it('an upload a dead writer left as files is listed abandoned and aborted; a finished write leaves none', async () => {
    await store.put('k/done', Buffer.from('done'), { metadata: { a: 'b' } });
    const tmp = join(root, RESERVED_DIR, 'tmp');
    expect(await readdir(tmp)).toEqual([]);
    const dead = spawn(process.execPath, ['-e', '']);
    await once(dead, 'exit');
    const id = `mx3-${dead.pid}-00000000000000c1`;
    await writeFile(
      join(tmp, `${id}.intent.json`),
      JSON.stringify({ key: 'k/left', pid: dead.pid, host: hostname() }),
    );
    await writeFile(join(tmp, `${id}.data`), 'staged bytes');
    await writeFile(join(tmp, `${id}.meta.json`), '{}');
    const uploads = await store.listIncompleteUploads('k/');
    expect(uploads.map((u) => [u.uploadId, u.key, u.abandoned])).toEqual([[id, 'k/left', true]]);
    await store.abortIncompleteUpload(uploads[0] as (typeof uploads)[number]);
    expect(await readdir(tmp)).toEqual([]);
    expect((await store.getBytes('k/done')).body.toString()).toBe('done');
  });

  it('an upload named with its key is abandoned once its writer is gone, never for another host', async () => {
    const tmp = join(root, RESERVED_DIR, 'tmp');
    await mkdir(tmp, { recursive: true });
    const dead = spawn(process.execPath, ['-e', '']);
    await once(dead, 'exit');
    const tag = createHash('sha256').update(hostname(), 'utf8').digest('hex').slice(0, 8);
    const named = (writer: string, key: string) => `${writer}~${Buffer.from(key).toString('base64url')}`;
    const ids = {
      dead: named(`mx4-${dead.pid}-${tag}-00000000000000d1`, 'k/dead.parquet'),
      // A crashed abort removed its data and left its attributes.
      metaOnly: named(`mx4-${dead.pid}-${tag}-00000000000000d2`, 'k/meta-only'),
      live: named(`mx4-${process.ppid}-${tag}-00000000000000d3`, 'k/live'),
      elsewhere: named(`mx4-${dead.pid}-0000abcd-00000000000000d4`, 'k/elsewhere'),
      other: named(`mx4-${dead.pid}-${tag}-00000000000000d5`, 'other/x'),
    };
    await writeFile(join(tmp, `${ids.dead}.data`), 'staged');
    await writeFile(join(tmp, `${ids.dead}.meta.json`), '{}');
    await writeFile(join(tmp, `${ids.metaOnly}.meta.json`), '{}');
    await writeFile(join(tmp, `${ids.live}.data`), 'staged');
    await writeFile(join(tmp, `${ids.elsewhere}.data`), 'staged');
    await writeFile(join(tmp, `${ids.other}.data`), 'staged');
    const uploads = await store.listIncompleteUploads('k/');
    expect(Object.fromEntries(uploads.map((u) => [u.uploadId, [u.key, u.abandoned]]))).toEqual({
      [ids.dead]: ['k/dead.parquet', true],
      [ids.metaOnly]: ['k/meta-only', true],
      [ids.live]: ['k/live', false],
      [ids.elsewhere]: ['k/elsewhere', false],
    });
    for (const upload of uploads) if (upload.abandoned) await store.abortIncompleteUpload(upload);
    expect((await readdir(tmp)).sort()).toEqual(
      [`${ids.elsewhere}.data`, `${ids.live}.data`, `${ids.other}.data`].sort(),
    );
  });

  it('a key too long to name in a file name gets an intent file, removed once written', async () => {
    const key = `db/${'long-table-name/'.repeat(12)}x.parquet`;
    const fifo = join(root, '..', `${root.split('/').pop()}.long.fifo`);
    execFileSync('mkfifo', [fifo]);
    try {
      const writer = await open(fifo, 'r+');
      const put = store.put(key, { file: fifo });
      await until(async () => (await descriptorsOf(fifo)) >= 2);
      const tmp = join(root, RESERVED_DIR, 'tmp');
      const [upload] = await store.listIncompleteUploads('db/');
      expect(upload?.key).toBe(key);
      expect((await readdir(tmp)).sort()).toEqual([
        `${upload?.uploadId}.data`,
        `${upload?.uploadId}.intent.json`,
      ]);
      await writer.write(Buffer.from('bytes'));
      await writer.close();
      await put;
      expect((await store.getBytes(key)).body.toString()).toBe('bytes');
      expect(await readdir(tmp)).toEqual([]);
    } finally {
      await rm(fifo, { force: true });
    }
  });

  it('aborting an upload folder (a store written before uploads were files) removes it whatever it holds', async () => {
    const dead = spawn(process.execPath, ['-e', '']);
    await once(dead, 'exit');
    const tmp = join(root, RESERVED_DIR, 'tmp');
    const staged = `mx2-${dead.pid}-00000000000000b1`;
    const cluttered = `mx2-${dead.pid}-00000000000000b2`;
    for (const id of [staged, cluttered]) {
      await mkdir(join(tmp, id), { recursive: true });
      await writeFile(join(tmp, id, 'intent.json'), JSON.stringify({ key: `k/${id}`, pid: dead.pid }));
      await writeFile(join(tmp, id, 'data'), 'staged bytes');
      await writeFile(join(tmp, id, 'meta.json'), '{}');
    }
    await mkdir(join(tmp, cluttered, 'sub'));
    await writeFile(join(tmp, cluttered, 'sub', 'other'), 'x');
    const uploads = await store.listIncompleteUploads('k/');
    expect(uploads.map((u) => [u.uploadId, u.abandoned])).toEqual([
      [staged, true],
      [cluttered, true],
    ]);
    for (const upload of uploads) await store.abortIncompleteUpload(upload);
    expect(await readdir(tmp)).toEqual([]);
  });

  it('a write recreates the locks folder when it is gone', async () => {
    const first = await store.put('a', Buffer.from('1'));
    await rm(join(root, RESERVED_DIR, 'locks'), { recursive: true });
    await store.put('a', Buffer.from('2'), { ifMatch: first.etag });
    expect((await store.getBytes('a')).body.toString()).toBe('2');
  });

  it('an aborted put throws the signal reason and leaves no temp file', async () => {
    const before = new AbortController();
    before.abort(new Error('stop before'));
    await expect(store.put('a', Buffer.from('x'), { signal: before.signal })).rejects.toThrow('stop before');
    await expect(store.head('a', { signal: before.signal })).rejects.toThrow('stop before');

    const fifo = join(root, '..', `${root.split('/').pop()}.fifo2`);
    execFileSync('mkfifo', [fifo]);
    try {
      const during = new AbortController();
      const put = store.put('b', { file: fifo }, { signal: during.signal });
      const settled = put.then(
        () => 'resolved',
        (error: unknown) => error,
      );
      const writer = await open(fifo, 'w');
      await writer.write(Buffer.from('first chunk'));
      during.abort(new Error('stop during'));
      // The aborted put may already have closed its end of the pipe: then this write gets EPIPE.
      await writer.write(Buffer.from('second chunk')).catch((error: NodeJS.ErrnoException) => {
        if (error.code !== 'EPIPE') throw error;
      });
      await writer.close();
      expect(String(await settled)).toMatch(/stop during/);
      expect(await store.head('b')).toBeUndefined();
      expect(await store.listIncompleteUploads('')).toEqual([]);
    } finally {
      await rm(fifo, { force: true });
    }
  });

  it('rejects upload ids that would escape the temp folder', async () => {
    await expect(
      store.abortIncompleteUpload({ key: 'k', uploadId: '../meta', initiated: new Date() }),
    ).rejects.toThrow(/invalid upload id/);
  });
});

interface ChildOutcome {
  readonly ok: boolean;
  readonly etag?: string;
  readonly error?: string;
  readonly message?: string;
}

/**
 * Starts one contender process per body, releases them together; each tries a conditional put on
 * every key `${keyPrefix}${i}`. Returns outcomes[contender][key].
 */
async function race(
  keyPrefix: string,
  keyCount: number,
  bodies: readonly string[],
  mode: 'create' | 'cas',
  etags: readonly string[] = [],
): Promise<ChildOutcome[][]> {
  const children = bodies.map((body) => {
    const child = spawn(process.execPath, [CHILD, root, keyPrefix, String(keyCount), body, mode, ...etags], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      stdout += d;
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      stderr += d;
    });
    const exited = once(child, 'exit');
    const ready = (async () => {
      while (!stdout.includes('ready\n')) {
        if (child.exitCode !== null) throw new Error(`contender died: ${stderr}`);
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    return { child, ready, exited, out: () => stdout, err: () => stderr };
  });
  await Promise.all(children.map((c) => c.ready));
  for (const c of children) c.child.stdin.write('go\n');
  const outcomes: ChildOutcome[][] = [];
  for (const c of children) {
    const [code] = await c.exited;
    expect(code, c.err()).toBe(0);
    const line = c.out().trim().split('\n').at(-1) ?? '';
    outcomes.push(JSON.parse(line) as ChildOutcome[]);
  }
  return outcomes;
}

/** For each key: exactly one contender won, the others lost with PreconditionFailedError. */
async function expectOneWinnerPerKey(
  keyPrefix: string,
  keyCount: number,
  bodies: readonly string[],
  outcomes: ChildOutcome[][],
): Promise<void> {
  for (let i = 0; i < keyCount; i++) {
    const perKey = outcomes.map((o) => o[i] as ChildOutcome);
    const winners = perKey.flatMap((o, contender) => (o.ok ? [contender] : []));
    expect(winners, `winners on key ${i}`).toHaveLength(1);
    expect(perKey.filter((o) => !o.ok).map((o) => o.error)).toEqual(
      Array(bodies.length - 1).fill('PreconditionFailedError'),
    );
    const winner = winners[0] as number;
    const { body, etag } = await store.getBytes(`${keyPrefix}${i}`);
    expect(etag).toBe(perKey[winner]?.etag);
    expect(body.toString()).toBe(bodies[winner]);
  }
}

async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', '']);
  await once(child, 'exit');
  if (child.pid === undefined) throw new Error('no pid');
  return child.pid;
}

describe('LocalFolderStore across processes', () => {
  const CONTENDERS = 8;
  const KEYS = 16;
  const bodies = Array.from({ length: CONTENDERS }, (_, i) => `contender-${i}`);

  it('exactly one of N processes creates each key with ifNoneMatch', async () => {
    const outcomes = await race('manifests/hourly/p', KEYS, bodies, 'create');
    await expectOneWinnerPerKey('manifests/hourly/p', KEYS, bodies, outcomes);
    expect(await store.listIncompleteUploads('')).toEqual([]);
  });

  it('exactly one of N processes wins each compare-and-swap from the same ETag', async () => {
    const etags: string[] = [];
    for (let i = 0; i < KEYS; i++) {
      etags.push((await store.put(`manifests/daily/p${i}`, Buffer.from('claimed'))).etag);
    }
    const outcomes = await race('manifests/daily/p', KEYS, bodies, 'cas', etags);
    await expectOneWinnerPerKey('manifests/daily/p', KEYS, bodies, outcomes);
  });

  it('breaks a lock left by a dead process, even with N processes racing for it', async () => {
    const locks = join(root, RESERVED_DIR, 'locks');
    await mkdir(locks, { recursive: true });
    const pid = await deadPid();
    for (let i = 0; i < KEYS; i++) {
      const owner = { pid, host: hostname(), token: `dead${i}` };
      await writeFile(join(locks, lockFileName(`manifests/hourly/q${i}`)), JSON.stringify(owner));
    }
    const outcomes = await race('manifests/hourly/q', KEYS, bodies, 'create');
    await expectOneWinnerPerKey('manifests/hourly/q', KEYS, bodies, outcomes);
    // No lock or breaker is left (stray claim files of crashed processes would be harmless).
    expect((await readdir(locks)).filter((n) => !n.endsWith('.claim'))).toEqual([]);
  });

  it('waits for a live lock and gives up with TransientStoreError', async () => {
    const impatient = new LocalFolderStore(root, { lockTimeoutMs: 200 });
    const lockPath = join(root, RESERVED_DIR, 'locks', lockFileName('busy'));
    await mkdir(join(root, RESERVED_DIR, 'locks'), { recursive: true });
    // Held by this (live) process.
    await writeFile(lockPath, JSON.stringify({ pid: process.pid, host: hostname(), token: 'live' }));
    const started = Date.now();
    await expect(impatient.put('busy', Buffer.from('x'))).rejects.toBeInstanceOf(TransientStoreError);
    expect(Date.now() - started).toBeGreaterThanOrEqual(200);
    expect(await impatient.deleteMany([{ key: 'busy' }])).toEqual([
      { key: 'busy', status: 'error', code: 'TransientStoreError', message: expect.stringMatching(/lock/) },
    ]);
    expect(await store.head('busy')).toBeUndefined();

    // A lock older than staleLockMs is broken even if its pid looks alive (pid reuse, other host).
    await new Promise((r) => setTimeout(r, 20));
    const lenient = new LocalFolderStore(root, { staleLockMs: 10 });
    await lenient.put('busy', Buffer.from('y'));
    expect((await store.getBytes('busy')).body.toString()).toBe('y');
  });
});

describe('LocalFolderStore key locks', () => {
  const locksDir = () => join(root, RESERVED_DIR, 'locks');

  it('every lock links one claim file of the process: writes leave that claim and no lock', async () => {
    for (let i = 0; i < 20; i++) await store.put(`k${i}`, Buffer.from(`v${i}`));
    await store.deleteMany(Array.from({ length: 20 }, (_, i) => ({ key: `k${i}` })));
    const names = await readdir(locksDir());
    expect(names).toHaveLength(1);
    expect(names[0]).toMatch(/^[0-9a-f]{24}\.claim$/);
    const owner = JSON.parse(await readFile(join(locksDir(), names[0] as string), 'utf8'));
    expect(owner).toMatchObject({ pid: process.pid, host: hostname() });
  });

  it('a process that exits removes its claim; one killed leaves it for the next', async () => {
    const store = fileURLToPath(
      new URL('../../functions/adapters/local-store/local-store.ts', import.meta.url),
    );
    const putThen = (end: string) =>
      `import { LocalFolderStore } from ${JSON.stringify(store)};
       await new LocalFolderStore(${JSON.stringify(root)}).put('k', Buffer.from('x'));
       ${end}`;
    const run = async (code: string) => {
      const child = spawn(process.execPath, ['--input-type=module', '-e', code], { stdio: 'inherit' });
      const [exitCode, signal] = await once(child, 'exit');
      return { exitCode, signal };
    };
    expect(await run(putThen(''))).toEqual({ exitCode: 0, signal: null });
    expect(await readdir(locksDir())).toEqual([]);
    expect(await run(putThen("process.kill(process.pid, 'SIGKILL');"))).toEqual({
      exitCode: null,
      signal: 'SIGKILL',
    });
    expect((await readdir(locksDir())).filter((n) => n.endsWith('.claim'))).toHaveLength(1);
    expect((await new LocalFolderStore(root).getBytes('k')).body.toString()).toBe('x');
  });

  it("a store's first claim removes the claims of processes gone from this host, and no other", async () => {
    await mkdir(locksDir(), { recursive: true });
    const dead = join(locksDir(), 'aaaaaaaaaaaaaaaaaaaaaaaa.claim');
    const live = join(locksDir(), 'bbbbbbbbbbbbbbbbbbbbbbbb.claim');
    const remote = join(locksDir(), 'cccccccccccccccccccccccc.claim');
    await writeFile(dead, JSON.stringify({ pid: await deadPid(), host: hostname(), token: 'a'.repeat(24) }));
    await writeFile(live, JSON.stringify({ pid: process.ppid, host: hostname(), token: 'b'.repeat(24) }));
    await writeFile(
      remote,
      JSON.stringify({ pid: await deadPid(), host: `not-${hostname()}`, token: 'c'.repeat(24) }),
    );
    await new LocalFolderStore(root).put('x', Buffer.from('x'));
    expect(existsSync(dead)).toBe(false);
    expect(existsSync(live)).toBe(true);
    expect(existsSync(remote)).toBe(true);
  });

  it('a lock whose holder keeps taking and releasing others is not broken by age; once it stops, it is', async () => {
    const holder = new KeyLocks(locksDir(), 5000, 200);
    const release = await holder.lock('held', undefined);
    // Another store of this process: the holder's pid is alive, so only the lock's age could break it.
    const waiter = new KeyLocks(locksDir(), 600, 200);
    let working = true;
    const work = (async () => {
      while (working) (await holder.lock('other', undefined))();
    })();
    await expect(waiter.lock('held', undefined)).rejects.toBeInstanceOf(TransientStoreError);
    working = false;
    await work;
    // The holder is idle now: its claim's ctime ages past staleLockMs and the lock is broken.
    await new Promise((r) => setTimeout(r, 250));
    const taken = await waiter.lock('held', undefined);
    // The first holder's release leaves the new holder's lock in place.
    release();
    expect(existsSync(join(locksDir(), lockFileName('held')))).toBe(true);
    taken();
    expect(existsSync(join(locksDir(), lockFileName('held')))).toBe(false);
  });
});

describe('LocalFolderStore under the compact step', () => {
  let engine: DuckDbEngine;
  beforeAll(async () => {
    engine = await DuckDbEngine.create({ threads: 1 });
  });
  afterAll(async () => {
    await engine.close();
  });

  it('the step merges hard links of its inputs, and staging and removing them leaves every input as it was', async () => {
    const files = [1, 2, 3].map((n) => ({
      key: `db/cpu/2025/01/15/10/cpu_20250115_10${n}000_${n}.parquet`,
      rows: 40,
    }));
    await writeLake(engine, root, files);
    const config = parseConfig(SWEEP_CONFIG);
    const before = new Map<string, { etag: string; ino: number; body: Buffer }>();
    for (const { key } of files) {
      const { body, etag } = await store.getBytes(key);
      before.set(key, { etag, ino: (await stat(join(root, key))).ino, body });
    }
    // Observes (does not replace) the engine: which inodes the merge read.
    const merged: number[] = [];
    const observed: Engine = new Proxy(engine, {
      get(target, prop) {
        if (prop === 'compact') {
          return async (request: CompactRequest) => {
            for (const input of request.inputs) merged.push((await lstat(input)).ino);
            return target.compact(request);
          };
        }
        const value: unknown = Reflect.get(target, prop, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const workDir = join(root, '..', `${basename(root)}-work`);
    try {
      const planned = await planTier(store, config, systemClock, 'hourly');
      const [job] = assignJobs(planned, {
        clock: systemClock,
        randomHex: () => '0badc0de',
        executionId: 'exec-link',
      });
      if (!job) throw new Error('no hourly job planned');
      const deps = { store, config, clock: systemClock, engine: observed, workDir };
      expect(await compactStep(deps, job)).toMatchObject({ status: 'done', state: 'staged' });
      expect(merged.sort()).toEqual([...before.values()].map((b) => b.ino).sort());
      // The step removed its links (its emptied job folder is kept for the next job) and wrote
      // nothing into an input.
      const left = await readdir(workDir, { recursive: true, withFileTypes: true });
      expect(left.filter((e) => !e.isDirectory()).map((e) => e.name)).toEqual([]);
      for (const [key, was] of before) {
        const now = await store.getBytes(key, { ifMatch: was.etag });
        expect(now.body.equals(was.body)).toBe(true);
        expect((await stat(join(root, key))).nlink).toBe(1);
      }
      // The rest of the job deletes exactly those versions: their ETags still hold.
      expect(await publishStep(deps, job)).toMatchObject({ state: 'published' });
      expect(await verifyStep(deps, job)).toMatchObject({ state: 'verified' });
      expect(await deleteInputsStep(deps, job)).toMatchObject({ state: 'inputs-deleted' });
      for (const { key } of files) expect(await store.head(key)).toBeUndefined();
    } finally {
      await rm(workDir, { recursive: true, force: true });
    }
  });
});
