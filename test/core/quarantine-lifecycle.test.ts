/**
 * The quarantine lifecycle over a real LocalFolderStore: which records release and prune remove,
 * that each removal is conditioned on the record read (a record rewritten meanwhile stays), and
 * that a quarantined job's record goes only once every object it names is gone.
 */

import { randomBytes } from 'node:crypto';
import { mkdtemp } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import type { LocalFolderStore } from '../../functions/adapters/local-store/local-store.ts';
import { writeSampleParquet } from '../../functions/adapters/sample-data.ts';
import { parseConfig } from '../../functions/core/config.ts';
import { quarantinedInputKey, quarantineRoot } from '../../functions/core/manifest/manifest.ts';
import type { DeleteOutcome, ObjectStore } from '../../functions/core/object-store.ts';
import {
  listQuarantinedInputs,
  pruneQuarantine,
  type ReleaseSelection,
  releaseInputs,
  selects,
} from '../../functions/core/quarantine-lifecycle.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { SWEEP_CONFIG } from '../support/lake-harness.ts';
import { testStore } from '../support/test-store.ts';

const config = parseConfig(SWEEP_CONFIG);
const HOUR_10 = 'db/cpu/2025/01/15/10/';
const HOUR_11 = 'db/cpu/2025/01/15/11/';
let engine: DuckDbEngine;
let root: string;

useEngineAndDir('quarantine-lifecycle-', (e, dir) => {
  engine = e;
  root = dir;
});

async function lake(): Promise<LocalFolderStore> {
  return testStore(await mkdtemp(join(root, 'lake-')));
}

function recheckDeps(store: ObjectStore, cfg = config) {
  return { store, config: cfg, engine, workDir: join(root, 'work') };
}

/** Writes a readable Parquet file with the sample columns (time, id, host, ...) at `key`. */
async function putGood(store: ObjectStore, key: string): Promise<void> {
  const local = join(root, `${randomBytes(6).toString('hex')}.parquet`);
  await writeSampleParquet(engine, local, {
    rows: 3,
    firstId: 1,
    startTimeMs: Date.UTC(2025, 0, 15, 10),
    spanMs: 1000,
  });
  await store.put(key, { file: local });
}

/** A data object (readable, corrupt or absent) and its quarantine record, as quarantineInput writes it. */
async function quarantined(
  store: ObjectStore,
  key: string,
  partition: string,
  content: 'good' | 'corrupt' | 'gone' = 'good',
): Promise<string> {
  if (content === 'good') await putGood(store, key);
  if (content === 'corrupt') await store.put(key, Buffer.from('PAR1 not parquet PAR1'));
  const recordKey = quarantinedInputKey(config.layout, key);
  await store.put(
    recordKey,
    Buffer.from(JSON.stringify({ key, partition, reason: 'not readable as Parquet' })),
  );
  return recordKey;
}

/** releaseInputs over the records of `selection`, as `compactor release` chooses them. */
async function release(
  deps: ReturnType<typeof recheckDeps>,
  selection: ReleaseSelection,
  options: { readonly dryRun: boolean },
) {
  const records = (await listQuarantinedInputs(deps)).filter((r) => selects(selection, r.key));
  return releaseInputs(deps, records, options);
}

async function keysUnder(store: ObjectStore, prefix: string): Promise<string[]> {
  const out: string[] = [];
  for await (const object of store.list(prefix)) out.push(object.key);
  return out.sort();
}

describe('releaseInputs', () => {
  it('removes the records of the selected partition only, pruning one whose input is gone', async () => {
    const store = await lake();
    const a = await quarantined(store, `${HOUR_10}a.parquet`, HOUR_10);
    const gone = await quarantined(store, `${HOUR_10}gone.parquet`, HOUR_10, 'gone');
    const other = await quarantined(store, `${HOUR_11}b.parquet`, HOUR_11);
    const deps = recheckDeps(store);

    const dry = await release(deps, { partition: HOUR_10 }, { dryRun: true });
    expect(dry.map((c) => [c.recordKey, c.action])).toEqual([
      [a, 'released'],
      [gone, 'pruned'],
    ]);
    expect(await keysUnder(store, quarantineRoot(config.layout))).toEqual([a, gone, other].sort());

    await release(deps, { partition: HOUR_10 }, { dryRun: false });
    expect(await keysUnder(store, quarantineRoot(config.layout))).toEqual([other]);
    // The data objects themselves are never touched.
    expect(await store.head(`${HOUR_10}a.parquet`)).toBeDefined();
    await release(deps, { all: true }, { dryRun: false });
    expect(await listQuarantinedInputs(deps)).toEqual([]);
  });

  it('keeps a record rewritten after it was read (a new quarantine of the same input)', async () => {
    const inner = await lake();
    const recordKey = await quarantined(inner, `${HOUR_10}a.parquet`, HOUR_10);
    // A compact step quarantines the input again between the read and the delete.
    const store = new Proxy(inner, {
      get(target, name) {
        if (name !== 'deleteMany') {
          const value: unknown = Reflect.get(target, name, target);
          return typeof value === 'function' ? value.bind(target) : value;
        }
        return async (...args: Parameters<ObjectStore['deleteMany']>): Promise<DeleteOutcome[]> => {
          await target.put(
            recordKey,
            Buffer.from(JSON.stringify({ key: `${HOUR_10}a.parquet`, reason: 'again' })),
          );
          return target.deleteMany(...args);
        };
      },
    });
    const [change] = await release(recheckDeps(store), { all: true }, { dryRun: false });
    expect(change?.action).toBe('changed-meanwhile');
    expect(await inner.head(recordKey)).toBeDefined();
  });
  it("keeps the record of an input that still fails the compact step's checks, saying why", async () => {
    const store = await lake();
    const corrupt = await quarantined(store, `${HOUR_10}bad.parquet`, HOUR_10, 'corrupt');
    // Foreign under a time column the table does not have; released once timeColumns names it.
    const foreign = await quarantined(store, `${HOUR_11}b.parquet`, HOUR_11);
    const wrong = parseConfig({ ...SWEEP_CONFIG, timeColumn: 'ts' });
    const changes = await release(recheckDeps(store, wrong), { all: true }, { dryRun: false });
    expect(changes.map((c) => [c.recordKey, c.action])).toEqual([
      [corrupt, 'still-bad'],
      [foreign, 'still-bad'],
    ]);
    expect(changes[0]?.reason).toMatch(/^still unreadable: .*bad\.parquet/);
    expect(changes[1]?.reason).toMatch(/^still foreign to its partition: no time column "ts"/);
    expect(await keysUnder(store, quarantineRoot(config.layout))).toEqual([corrupt, foreign].sort());

    const fixed = parseConfig({ ...SWEEP_CONFIG, timeColumn: 'ts', timeColumns: { 'db/cpu/': 'time' } });
    const again = await release(recheckDeps(store, fixed), { partition: HOUR_11 }, { dryRun: false });
    expect(again.map((c) => [c.recordKey, c.action])).toEqual([[foreign, 'released']]);
    expect(await keysUnder(store, quarantineRoot(config.layout))).toEqual([corrupt]);
  });
});

describe('pruneQuarantine', () => {
  it("removes an input's record once the input is gone, and keeps the others", async () => {
    const store = await lake();
    const kept = await quarantined(store, `${HOUR_10}a.parquet`, HOUR_10);
    const gone = await quarantined(store, `${HOUR_10}gone.parquet`, HOUR_10, 'gone');
    const changes = await pruneQuarantine({ store, config });
    expect(changes.map((c) => [c.recordKey, c.action])).toEqual([[gone, 'pruned']]);
    expect(await keysUnder(store, quarantineRoot(config.layout))).toEqual([kept]);
  });

  it("removes a job's record only when every input and output it names is gone; one naming nothing stays", async () => {
    const store = await lake();
    const root = `${quarantineRoot(config.layout)}manifests/hourly/db/cpu/2025/01/15/10/`;
    const input = `${HOUR_10}in.parquet`;
    const output = `${HOUR_10}out_compacted.parquet`;
    // A manifest that no longer validates: the keys it seems to name still hold.
    const job = `${root}a.json`;
    await store.put(
      job,
      Buffer.from(
        JSON.stringify({
          manifestKey: `${config.layout.stateRoot}manifests/hourly/db/cpu/2025/01/15/10.json`,
          manifest: JSON.stringify({ inputs: [{ key: input }], outputs: [{ finalKey: output }] }),
        }),
      ),
    );
    const empty = `${root}b.json`;
    await store.put(empty, Buffer.from('{"reason": "unreadable"}'));
    await store.put(input, Buffer.from('x'));
    await store.put(output, Buffer.from('y'));

    expect(await pruneQuarantine({ store, config })).toEqual([]);
    await store.deleteMany([{ key: input }]);
    expect(await pruneQuarantine({ store, config })).toEqual([]);
    await store.deleteMany([{ key: output }]);
    const changes = await pruneQuarantine({ store, config });
    expect(changes.map((c) => [c.recordKey, c.action])).toEqual([[job, 'pruned']]);
    expect(await keysUnder(store, quarantineRoot(config.layout))).toEqual([empty]);
  });
});
