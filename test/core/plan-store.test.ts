/**
 * The plan records the Map reads: each job's record, then one items file per wave; the records
 * are written several at once, and every one before any items file, so an item never names a
 * record that is not there.
 */

import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../functions/core/config.ts';
import {
  byWave,
  type JobItem,
  mapItems,
  PLAN_WRITE_CONCURRENCY,
  plansPrefix,
  readJob,
  type WaveJob,
  writePlan,
} from '../../functions/core/plan-store.ts';
import { useTempDir } from '../support/engine-fixture.ts';
import { FaultStore } from '../support/fault-store.ts';
import { testStore } from '../support/test-store.ts';

const config = parseConfig({});
let root: string;
useTempDir('plan-store-', (dir) => {
  root = dir;
});

function job(partition: string, wave: number, i: number): WaveJob {
  return {
    tier: 'hourly',
    partition,
    jobId: `20250115T100000Z-${String(i).padStart(8, '0')}`,
    executionId: 'local:1',
    inputs: [{ key: `${partition}f${i}.parquet`, size: 10 + i, etag: `"e${i}"` }],
    wave,
  };
}

describe('writePlan', () => {
  it('writes the records several at once, all before the items of each wave; each item reads back its job', async () => {
    const inner = testStore(root);
    let inFlight = 0;
    let most = 0;
    const store = new FaultStore(inner, {
      beforeCall: async () => {
        inFlight++;
        most = Math.max(most, inFlight);
        // Long enough for the next put to start while this one runs.
        await new Promise((resolve) => setTimeout(resolve, 2));
      },
      afterCall: async () => {
        inFlight--;
      },
    });
    const jobs = Array.from({ length: 40 }, (_, i) =>
      job(`db/cpu/2025/01/15/${String(i % 20).padStart(2, '0')}/`, i < 20 ? 0 : 1, i),
    );
    const { itemsKeys, items } = await writePlan(store, config.layout, 'hourly-test', jobs, {
      itemShape: 'job',
      smallJobsPerItem: 10,
    });
    expect(most).toBeGreaterThan(1);
    expect(most).toBeLessThanOrEqual(PLAN_WRITE_CONCURRENCY);
    const puts = store.calls.filter((c) => c.op === 'put').map((c) => c.key);
    const firstItems = puts.findIndex((k) => itemsKeys.includes(k));
    expect(puts.slice(0, firstItems)).toHaveLength(40);
    expect(puts.slice(firstItems)).toEqual(itemsKeys);
    expect(itemsKeys).toHaveLength(2);
    for (const [i, item] of items.entries()) {
      expect(item.wave).toBe(i < 20 ? 0 : 1);
      const { wave: _, ...expected } = jobs[i] as WaveJob;
      expect(await readJob(inner, config.layout, item)).toEqual(expected);
    }
  });

  it('sizes each item: the small compact function up to 64 MiB of input and for retention, else the large one', async () => {
    const MiB = 2 ** 20;
    const sized = (tier: WaveJob['tier'], size: number, i: number): WaveJob => ({
      ...job(`db/cpu/2025/01/15/${String(i).padStart(2, '0')}/`, 0, i),
      tier,
      inputs: [
        { key: `a${i}.parquet`, size: size / 2, etag: '"a"' },
        { key: `b${i}.parquet`, size: size / 2, etag: '"b"' },
      ],
    });
    const { items } = await writePlan(
      testStore(root),
      config.layout,
      'hourly-sized',
      [
        sized('hourly', 64 * MiB, 0),
        sized('hourly', 64 * MiB + 2, 1),
        sized('daily', 2048 * MiB, 2),
        sized('retention', 2048 * MiB, 3),
      ],
      { itemShape: 'job', smallJobsPerItem: 10 },
    );
    expect(items.map((item) => item.compactSize)).toEqual(['small', 'large', 'large', 'small']);
  });
});

async function listKeys(store: ReturnType<typeof testStore>, under: string): Promise<string[]> {
  const keys: string[] = [];
  for await (const o of store.list(`${plansPrefix(config.layout, 'x').slice(0, -2)}${under}`))
    keys.push(o.key);
  return keys;
}

describe('writePlan with small jobs per item', () => {
  it("writes each wave's Map items: one table's small jobs together, each job's record readable", async () => {
    const store = testStore(root);
    const jobs = Array.from({ length: 5 }, (_, i) =>
      job(`db/${i < 3 ? 'cpu' : 'mem'}/2025/01/15/0${i}/`, 0, i),
    );
    const written = await writePlan(store, config.layout, 'hourly-items', jobs, {
      itemShape: 'jobs',
      smallJobsPerItem: 10,
    });
    const onDisk = JSON.parse(
      (await store.getBytes(written.itemsKeys[0] as string)).body.toString('utf8'),
    ) as { table: string; jobs: JobItem[] }[];
    expect(onDisk).toEqual(written.mapItems[0]);
    expect(onDisk.map((i) => [i.table, i.jobs.length])).toEqual([
      ['db/cpu/', 3],
      ['db/mem/', 2],
    ]);
    // One record an item, which every job of the item reads its own inputs from.
    const records = (await listKeys(store, 'hourly-items/jobs/')).sort();
    expect(records).toHaveLength(2);
    expect(new Set(onDisk.flatMap((m) => m.jobs.map((j) => j.jobKey))).size).toBe(2);
    for (const [n, i] of onDisk.flatMap((m) => m.jobs).entries()) {
      const { wave: _, ...expected } = jobs[n] as WaveJob;
      expect(await readJob(store, config.layout, i)).toEqual(expected);
    }
    // An item naming a job its record does not hold is refused, not read as another job's.
    const first = onDisk[0]?.jobs[0] as JobItem;
    await expect(
      readJob(store, config.layout, { ...first, jobId: '20250115T100000Z-99999999' }),
    ).rejects.toThrow(/does not describe job 20250115T100000Z-99999999/);
    // A definition that does not ask for items of jobs (one deployed before them) gets one job an item.
    const legacy = await writePlan(store, config.layout, 'hourly-legacy', jobs, {
      itemShape: 'job',
      smallJobsPerItem: 10,
    });
    const legacyOnDisk = JSON.parse(
      (await store.getBytes(legacy.itemsKeys[0] as string)).body.toString('utf8'),
    ) as JobItem[];
    expect(legacyOnDisk).toEqual(legacy.items);
    expect(legacyOnDisk.map((i) => i.partition)).toEqual(jobs.map((j) => j.partition));
    expect(await listKeys(store, 'hourly-legacy/jobs/')).toHaveLength(5);
  });
});

describe('mapItems', () => {
  const item = (partition: string, compactSize: JobItem['compactSize'] = 'small') => ({
    partition,
    compactSize,
  });
  const partitionsOf = (items: ReturnType<typeof mapItems<ReturnType<typeof item>>>) =>
    items.map((i) => ({ table: i.table, partitions: i.jobs.map((j) => j.partition) }));

  it('groups small jobs by table, in plan order, up to the bound; a large job rides alone', () => {
    const jobs = [
      item('db/cpu/2025/01/15/00/'),
      item('db/mem/2025/01/15/00/'),
      item('db/cpu/2025/01/15/01/'),
      item('db/cpu/2025/01/15/02/', 'large'),
      item('db/cpu/2025/01/15/03/'),
      item('db/mem/2025/01/15/01/'),
      item('db/cpu/2025/01/15/04/'),
    ];
    expect(partitionsOf(mapItems(jobs, config.layout, 3))).toEqual([
      {
        table: 'db/cpu/',
        partitions: ['db/cpu/2025/01/15/00/', 'db/cpu/2025/01/15/01/', 'db/cpu/2025/01/15/03/'],
      },
      { table: 'db/mem/', partitions: ['db/mem/2025/01/15/00/', 'db/mem/2025/01/15/01/'] },
      { table: 'db/cpu/', partitions: ['db/cpu/2025/01/15/02/'] },
      { table: 'db/cpu/', partitions: ['db/cpu/2025/01/15/04/'] },
    ]);
    // Every job exactly once.
    const all = mapItems(jobs, config.layout, 3).flatMap((i) => i.jobs);
    expect(new Set(all).size).toBe(jobs.length);
    expect(all).toHaveLength(jobs.length);
  });

  it('gives every job its own item at a bound of 1; a day or month folder is of its table too', () => {
    const jobs = [item('db/cpu/2025/01/15/00/'), item('db/cpu/2025/01/15/01/')];
    expect(mapItems(jobs, config.layout, 1).map((i) => i.jobs.length)).toEqual([1, 1]);
    const days = [item('db/cpu/2025/01/14/'), item('db/cpu/2025/01/15/'), item('db/mem/2025/01/')];
    expect(partitionsOf(mapItems(days, config.layout, 10)).map((i) => i.table)).toEqual([
      'db/cpu/',
      'db/mem/',
    ]);
  });

  it('takes the table from the layout, with the data prefix', () => {
    const hive = parseConfig({ layout: 'hive', dataPrefix: 'lake/' });
    const jobs = [item('lake/cpu/dt=2025-01-15/hour=00/'), item('lake/cpu/dt=2025-01-15/hour=01/')];
    expect(partitionsOf(mapItems(jobs, hive.layout, 10))).toEqual([
      {
        table: 'lake/cpu/',
        partitions: ['lake/cpu/dt=2025-01-15/hour=00/', 'lake/cpu/dt=2025-01-15/hour=01/'],
      },
    ]);
  });
});

describe('byWave', () => {
  it('groups a plan of any size in one pass, waves in order, each in plan order', () => {
    // A sweep of a large lake plans hundreds of thousands of jobs: no spread into one call.
    const jobs = Array.from({ length: 250_000 }, (_, i) => ({ id: i, wave: i % 3 === 0 ? 1 : 0 }));
    const waves = byWave(jobs);
    expect(waves.map((w) => w.length)).toEqual([166_666, 83_334]);
    expect(waves[1]?.slice(0, 3).map((j) => j.id)).toEqual([0, 3, 6]);
    expect(byWave([])).toEqual([]);
    expect(byWave([{ wave: 2 }]).map((w) => w.length)).toEqual([0, 0, 1]);
  });
});
