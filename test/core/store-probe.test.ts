/**
 * The store probe over the real local folder store: it passes every guarantee and leaves nothing
 * behind; a store that ignores any one guarantee (a condition dropped before it reaches the real
 * store, or checksums dropped from its heads) fails exactly that check; assertStoreGuarantees
 * refuses with one error naming each missing guarantee, keeps the verdict for a short while, and
 * the single-writer opt-out skips the probe only with a warning on every call.
 */

import { readdir, utimes } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { LocalFolderStore } from '../../functions/adapters/local-store/local-store.ts';
import { parseConfig } from '../../functions/core/config.ts';
import { ConfigError, StoreGuaranteesError, TransientStoreError } from '../../functions/core/errors.ts';
import { type CopyOptions, ForwardingStore, type ObjectStore } from '../../functions/core/object-store.ts';
import {
  ABANDONED_PROBE_MS,
  assertStoreGuarantees,
  PROBE_TTL_MS,
  ProbeCache,
  probeRoot,
  probeStore,
  STORE_GUARANTEES,
} from '../../functions/core/store-probe/store-probe.ts';
import { useTempDir } from '../support/engine-fixture.ts';
import { FaultStore } from '../support/fault-store.ts';
import { ALL_CONDITIONS, IgnoringStore } from '../support/ignoring-store.ts';
import { testStore } from '../support/test-store.ts';

const STATE_ROOT = 'lake/_compaction/';
let root: string;
let n = 0;

useTempDir('store-probe-', (dir) => {
  root = dir;
});

async function freshStore(): Promise<{ store: LocalFolderStore; dir: string }> {
  const dir = join(root, `store-${++n}`);
  const store = testStore(dir);
  // An object the probe must leave alone.
  await store.put('lake/db/cpu/2025/01/15/10/cpu_20250115_100000_1.parquet', Buffer.from('data'));
  return { store, dir };
}

async function keys(store: ObjectStore, prefix = ''): Promise<string[]> {
  const out: string[] = [];
  for await (const o of store.list(prefix)) out.push(o.key);
  return out;
}

const randomHex = () => `${Date.now().toString(16)}${(++n).toString(16)}`;

function clockAt(start: number) {
  let t = start;
  return { now: () => new Date(t), advance: (ms: number) => (t += ms) };
}

describe('probeStore over the real local folder store', () => {
  it('passes every guarantee and leaves nothing behind', async () => {
    const { store, dir } = await freshStore();
    const before = await keys(store);
    const report = await probeStore({ store, stateRoot: STATE_ROOT, randomHex });
    expect(report.location).toBe(store.location);
    expect(report.checks.map((c) => c.guarantee)).toEqual(STORE_GUARANTEES);
    expect(report.checks.filter((c) => !c.ok)).toEqual([]);
    expect(report.ok).toBe(true);
    expect(await keys(store)).toEqual(before);
    // Not even an empty folder or a metadata sidecar of the probe stays on disk.
    const files = (await readdir(dir, { recursive: true })).filter((f) => f.includes('probe'));
    expect(files).toEqual([]);
  });

  it("removes what a probe cut short left once it is clearly old, never a concurrent probe's objects", async () => {
    const { store, dir } = await freshStore();
    const probes = probeRoot(STATE_ROOT);
    await store.put(`${probes}crashed/object`, Buffer.from('left by a probe that was killed'));
    await store.put(`${probes}concurrent/object`, Buffer.from('a probe still running elsewhere'));
    const longAgo = new Date(Date.now() - ABANDONED_PROBE_MS - 60_000);
    await utimes(join(dir, `${probes}crashed/object`), longAgo, longAgo);
    const report = await probeStore({ store, stateRoot: STATE_ROOT, randomHex });
    expect(report.ok).toBe(true);
    expect(await keys(store, probes)).toEqual([`${probes}concurrent/object`]);
  });

  it.each(STORE_GUARANTEES)(
    'a store that ignores %s fails exactly that check, and is left clean',
    async (g) => {
      const { store: inner } = await freshStore();
      const before = await keys(inner);
      const report = await probeStore({
        store: new IgnoringStore(inner, [g]),
        stateRoot: STATE_ROOT,
        randomHex,
      });
      expect(report.ok).toBe(false);
      expect(report.checks.filter((c) => !c.ok).map((c) => c.guarantee)).toEqual([g]);
      expect(await keys(inner)).toEqual(before);
    },
  );

  it('a store ignoring every condition (as fauxqs does) fails the four conditional checks', async () => {
    const { store: inner } = await freshStore();
    const report = await probeStore({
      store: new IgnoringStore(inner, ALL_CONDITIONS),
      stateRoot: STATE_ROOT,
      randomHex,
    });
    expect(Object.fromEntries(report.checks.map((c) => [c.guarantee, c.ok]))).toEqual({
      'put-if-absent': false,
      'compare-and-swap': false,
      'conditional-copy': false,
      'conditional-delete': false,
      checksums: true,
    });
    expect(report.checks.find((c) => c.guarantee === 'conditional-delete')?.detail).toMatch(
      /wrong ETag deleted the object/,
    );
    expect(await keys(inner, probeRoot(STATE_ROOT))).toEqual([]);
  });

  it('a store whose copies lose the checksum fails the checksums check (verify compares the copy)', async () => {
    const { store: inner } = await freshStore();
    class CopyWithoutChecksum extends ForwardingStore {
      override async copy(source: string, target: string, options: CopyOptions = {}) {
        const { body } = await this.inner.getBytes(source);
        return this.inner.put(target, body, options.ifNoneMatch ? { ifNoneMatch: options.ifNoneMatch } : {});
      }
    }
    const report = await probeStore({
      store: new CopyWithoutChecksum(inner),
      stateRoot: STATE_ROOT,
      randomHex,
    });
    expect(report.checks.filter((c) => !c.ok)).toEqual([
      { guarantee: 'checksums', ok: false, detail: expect.stringContaining('a head of a server-side copy') },
    ]);
  });

  it('a store that rejects a condition outright (e.g. NotImplemented) fails that check naming the error', async () => {
    const { store: inner } = await freshStore();
    class RejectsCopyCondition extends ForwardingStore {
      override copy(source: string, target: string, options: CopyOptions = {}) {
        if (options.ifNoneMatch !== undefined) {
          const error = new Error('A header you provided implies functionality that is not implemented');
          error.name = 'NotImplemented';
          return Promise.reject(error);
        }
        return super.copy(source, target, options);
      }
    }
    const report = await probeStore({
      store: new RejectsCopyCondition(inner),
      stateRoot: STATE_ROOT,
      randomHex,
    });
    expect(report.checks.filter((c) => !c.ok)).toEqual([
      {
        guarantee: 'conditional-copy',
        ok: false,
        detail: expect.stringContaining('NotImplemented: A header you provided'),
      },
    ]);
    expect(await keys(inner, probeRoot(STATE_ROOT))).toEqual([]);
  });
});

describe('assertStoreGuarantees', () => {
  it('refuses with one error naming the store, each missing guarantee and the fix', async () => {
    const { store: inner } = await freshStore();
    const store = new IgnoringStore(inner, ALL_CONDITIONS);
    const clock = clockAt(Date.parse('2025-01-15T12:00:00Z'));
    const error = await assertStoreGuarantees({ store, stateRoot: STATE_ROOT, randomHex, clock }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(StoreGuaranteesError);
    const refusal = error as StoreGuaranteesError;
    expect(refusal.name).toBe('StoreGuaranteesError');
    expect(refusal.location).toBe(inner.location);
    expect(refusal.missing.map((m) => m.guarantee)).toEqual(ALL_CONDITIONS);
    for (const guarantee of ALL_CONDITIONS) expect(refusal.message).toContain(guarantee);
    expect(refusal.message).toContain(inner.location);
    expect(refusal.message).toContain('use Amazon S3');
    expect(refusal.message).toContain('--unsafe-single-writer-store');
    expect(refusal.message).not.toContain('checksums (');
  });

  it('keeps the verdict for the TTL (no store call), then probes again', async () => {
    const { store: inner } = await freshStore();
    const counted = new FaultStore(inner);
    const clock = clockAt(Date.parse('2025-01-15T12:00:00Z'));
    const cache = new ProbeCache();
    const deps = { store: counted, stateRoot: STATE_ROOT, randomHex, clock, cache };
    await assertStoreGuarantees(deps);
    const probeCalls = counted.calls.length;
    expect(probeCalls).toBeGreaterThan(0);
    expect(probeCalls).toBeLessThanOrEqual(12); // a handful of requests per cycle
    clock.advance(PROBE_TTL_MS - 1);
    await assertStoreGuarantees(deps);
    expect(counted.calls.length).toBe(probeCalls);
    clock.advance(1);
    await assertStoreGuarantees(deps);
    expect(counted.calls.length).toBe(2 * probeCalls);
  });

  it('keeps a refusal too, so a failing store is not probed on every partition', async () => {
    const { store: inner } = await freshStore();
    const counted = new FaultStore(new IgnoringStore(inner, ['checksums']));
    const clock = clockAt(0);
    const deps = { store: counted, stateRoot: STATE_ROOT, randomHex, clock, cache: new ProbeCache() };
    await expect(assertStoreGuarantees(deps)).rejects.toBeInstanceOf(StoreGuaranteesError);
    const calls = counted.calls.length;
    await expect(assertStoreGuarantees(deps)).rejects.toMatchObject({
      name: 'StoreGuaranteesError',
      missing: [{ guarantee: 'checksums', detail: expect.stringContaining('no full-object checksum') }],
    });
    expect(counted.calls.length).toBe(calls);
  });

  it('a transient error is no verdict: it propagates and nothing is kept', async () => {
    const { store: inner } = await freshStore();
    const cache = new ProbeCache();
    const flaky = new FaultStore(inner, {
      beforeCall: async (call) => {
        if (call.op === 'copy') throw new TransientStoreError('SlowDown (injected)');
      },
    });
    const clock = clockAt(0);
    await expect(
      assertStoreGuarantees({ store: flaky, stateRoot: STATE_ROOT, randomHex, clock, cache }),
    ).rejects.toBeInstanceOf(TransientStoreError);
    expect(cache.get(inner.location, clock.now())).toBeUndefined();
  });

  it('the single-writer opt-out probes nothing and warns on every call; it needs a warning sink', async () => {
    const { store: inner } = await freshStore();
    const counted = new FaultStore(new IgnoringStore(inner, ALL_CONDITIONS));
    const warnings: string[] = [];
    const deps = {
      store: counted,
      stateRoot: STATE_ROOT,
      randomHex,
      clock: clockAt(0),
      cache: new ProbeCache(),
      optOut: true,
      onWarning: (m: string) => warnings.push(m),
    };
    await assertStoreGuarantees(deps);
    await assertStoreGuarantees(deps);
    expect(counted.calls).toEqual([]);
    expect(warnings).toHaveLength(2);
    expect(warnings[0]).toMatch(/^UNSAFE: the store .* is not probed/);
    expect(warnings[0]).toContain(inner.location);
    expect(warnings[0]).toContain('rows can be lost or duplicated');
    const { onWarning: _none, ...silent } = deps;
    await expect(assertStoreGuarantees(silent)).rejects.toBeInstanceOf(ConfigError);
  });
});

describe('the opt-out setting (COMPACTOR_CONFIG unsafeSingleWriterStore)', () => {
  it('is off by default, on only for an explicit true', () => {
    expect(parseConfig({}).unsafeSingleWriterStore).toBe(false);
    expect(parseConfig({ unsafeSingleWriterStore: true }).unsafeSingleWriterStore).toBe(true);
    for (const value of ['true', 1, 'yes']) {
      expect(() => parseConfig({ unsafeSingleWriterStore: value as unknown as boolean })).toThrow(
        /unsafeSingleWriterStore must be true or false/,
      );
    }
  });
});
