import { describe, expect, it } from 'vitest';
import { ForwardingStore, type PutFile, type WriteOptions } from '../../functions/core/object-store.ts';
import { ClosingStore, StoreClosedError } from '../../functions/local-runner/closing-store.ts';
import { useTempDir } from '../support/engine-fixture.ts';
import { testStore } from '../support/test-store.ts';

let root: string;
useTempDir('closing-store-', (dir) => {
  root = dir;
});

/** A local folder store whose puts wait until released, so a test can hold one in flight. */
class HeldPuts extends ForwardingStore {
  #release: () => void = () => undefined;
  readonly #held = new Promise<void>((resolve) => {
    this.#release = resolve;
  });
  started = 0;

  release(): void {
    this.#release();
  }

  override async put(key: string, body: Buffer | PutFile, options?: WriteOptions) {
    this.started++;
    await this.#held;
    return super.put(key, body, options);
  }
}

const REASON = new Error('a bug');

describe('ClosingStore', () => {
  it('closes once the calls in flight have ended, and refuses every call made after close, naming why', async () => {
    const inner = new HeldPuts(testStore(`${root}/a`));
    const store = new ClosingStore(inner);
    const writing = store.put('k', Buffer.from('v'));
    await new Promise((resolve) => setImmediate(resolve));
    expect(inner.started).toBe(1);

    let closed = false;
    const closing = store.close(REASON).then(() => {
      closed = true;
    });
    // A second close waits for the same calls.
    const again = store.close(new Error('another'));
    const refused = await store.head('k').catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(StoreClosedError);
    expect((refused as Error).cause).toBe(REASON);
    expect((refused as Error).message).toContain(REASON.message);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(closed).toBe(false);

    inner.release();
    await expect(writing).resolves.toMatchObject({ etag: expect.any(String) });
    await closing;
    await again;
    expect(closed).toBe(true);
    // The call that was in flight finished whole: its object is there.
    expect((await testStore(`${root}/a`).getBytes('k')).body.toString()).toBe('v');
    expect(inner.started).toBe(1);
  });

  it('closes at once when no call is in flight', async () => {
    const store = new ClosingStore(testStore(`${root}/b`));
    await store.put('k', Buffer.from('v'));
    await store.close(REASON);
    await expect(store.getBytes('k')).rejects.toBeInstanceOf(StoreClosedError);
  });

  it('counts a listing page by page: one left open does not hold close, its next page is refused, ending it is allowed', async () => {
    const inner = testStore(`${root}/c`);
    await inner.put('p/1', Buffer.from('1'));
    await inner.put('p/2', Buffer.from('2'));
    const store = new ClosingStore(inner);
    const listing = store.list('p/')[Symbol.asyncIterator]();
    expect((await listing.next()).value).toMatchObject({ key: 'p/1' });
    await store.close(REASON);
    await expect(listing.next()).rejects.toBeInstanceOf(StoreClosedError);
    await expect(listing.return?.()).resolves.toMatchObject({ done: true });
  });
});
