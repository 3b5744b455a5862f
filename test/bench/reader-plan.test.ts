/**
 * The readers section's plan (bench/reader-plan.ts) on generated Parquet with known row groups:
 * 20 row groups of 2,048 rows, one row every 50 ms. Sorted by time, a range predicate matches
 * exactly the groups it overlaps; shuffled, every group spans the range and none is pruned. Real
 * DuckDB then answers from the planned bytes alone as it does from the whole file.
 */

import { open, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { FileMetaData, ParquetQueryFilter } from 'hyparquet';
import { describe, expect, it } from 'vitest';
import {
  beforeTail,
  FOOTER_FETCH_BYTES,
  footerBytes,
  footerMetadata,
  planRead,
  readBloomFilters,
  rowGroupsOrderedBy,
} from '../../bench/reader-plan.ts';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { writeSampleParquet } from '../../functions/adapters/sample-data.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';

const GROUP_ROWS = 2048;
const GROUPS = 20;
const ROWS = GROUP_ROWS * GROUPS;
const STEP_MS = 50;
const START_MS = Date.UTC(2025, 0, 15, 10);
/** Rows 4,096 .. 8,191 in time order: row groups 2 and 3 when sorted. */
const FROM_MS = START_MS + 2 * GROUP_ROWS * STEP_MS;
const TO_MS = START_MS + 4 * GROUP_ROWS * STEP_MS;
const RANGE: ParquetQueryFilter = { time: { $gte: new Date(FROM_MS), $lt: new Date(TO_MS) } };

let engine: DuckDbEngine;
let sorted: string;
let shuffled: string;

async function metadataOf(path: string): Promise<FileMetaData> {
  const bytes = await readFile(path);
  return footerMetadata(bytes.subarray(Math.max(0, bytes.length - FOOTER_FETCH_BYTES)));
}

describe('reader plan', () => {
  useEngineAndDir('reader-plan-', async (e, dir) => {
    engine = e;
    const sample = join(dir, 'sample.parquet');
    await writeSampleParquet(engine, sample, {
      rows: ROWS,
      firstId: 1,
      startTimeMs: START_MS,
      spanMs: ROWS * STEP_MS,
    });
    sorted = join(dir, 'sorted.parquet');
    shuffled = join(dir, 'shuffled.parquet');
    for (const [path, order] of [
      [sorted, 'time'],
      [shuffled, 'id'],
    ] as const) {
      await engine.query(
        `COPY (SELECT * FROM '${sample}' ORDER BY ${order}) TO '${path}' (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE ${GROUP_ROWS})`,
      );
    }
  });

  it('a time range prunes to the row groups it overlaps when the file is sorted by time', async () => {
    const metadata = await metadataOf(sorted);
    expect(metadata.row_groups).toHaveLength(GROUPS);
    expect(rowGroupsOrderedBy(metadata, 'time')).toBe(true);
    const plan = planRead(metadata, ['time', 'value'], RANGE);
    expect(plan).toMatchObject({ rowGroups: GROUPS, matched: 2 });
    // Only the two groups' chunks: every fetch lies inside row groups 2 and 3.
    const groups = metadata.row_groups.slice(2, 4).flatMap((g) => g.columns);
    const chunkStart = (c: (typeof groups)[number]) =>
      Number(c.meta_data?.dictionary_page_offset || c.meta_data?.data_page_offset);
    const first = Math.min(...groups.map(chunkStart));
    const last = Math.max(...groups.map((c) => chunkStart(c) + Number(c.meta_data?.total_compressed_size)));
    expect(plan.fetches.length).toBeGreaterThan(0);
    for (const f of plan.fetches) {
      expect(f.start).toBeGreaterThanOrEqual(first);
      expect(f.end).toBeLessThanOrEqual(last);
    }
  });

  it("prunes nothing when every row group spans the hour, and everything for a tag past every group's max", async () => {
    const metadata = await metadataOf(shuffled);
    expect(rowGroupsOrderedBy(metadata, 'time')).toBe(false);
    expect(planRead(metadata, ['time', 'value'], RANGE).matched).toBe(GROUPS);
    expect(planRead(metadata, ['host'], { host: { $eq: 'zz-no-such-host' } })).toMatchObject({
      matched: 0,
      fetches: [],
    });
    expect(planRead(metadata, ['host', 'value'], undefined).matched).toBe(GROUPS);
  });

  it('DuckDB answers from the planned bytes alone as from the whole file', async () => {
    const bytes = await readFile(sorted);
    const tail = bytes.subarray(Math.max(0, bytes.length - FOOTER_FETCH_BYTES));
    expect(footerBytes(tail)).toBeLessThan(FOOTER_FETCH_BYTES);
    const plan = planRead(footerMetadata(tail), ['time', 'host', 'value'], {
      ...RANGE,
      host: { $eq: 'web-01' },
    });
    const sparse = sorted.replace('.parquet', '-sparse.parquet');
    const handle = await open(sparse, 'w');
    await handle.truncate(bytes.length);
    await handle.write(tail, 0, tail.length, bytes.length - tail.length);
    for (const f of plan.fetches) await handle.write(bytes, f.start, f.end - f.start, f.start);
    await handle.close();
    const sql = (path: string) =>
      `SELECT count(*)::INTEGER AS n, sum(value) AS v FROM '${path}' WHERE host = 'web-01' ` +
      `AND time >= make_timestamp(${FROM_MS * 1000}::BIGINT) AND time < make_timestamp(${TO_MS * 1000}::BIGINT)`;
    const whole = await engine.query(sql(sorted));
    expect(whole[0]?.n).toBeGreaterThan(0);
    expect(await engine.query(sql(sparse))).toEqual(whole);
  });

  it('reads the bloom filters outside the footer, without which DuckDB cannot answer', async () => {
    const bytes = await readFile(sorted);
    const whole = bytes.subarray(bytes.length - FOOTER_FETCH_BYTES);
    // The footer alone: every bloom filter lies before it.
    const tail = whole.subarray(whole.length - footerBytes(whole));
    const tailStart = bytes.length - tail.length;
    const metadata = footerMetadata(tail);
    const filter: ParquetQueryFilter = { ...RANGE, host: { $eq: 'web-01' } };
    const read: { start: number; end: number }[] = [];
    const blooms = await readBloomFilters(metadata, filter, bytes.length, async (range) => {
      read.push(range);
      return bytes.subarray(range.start, range.end);
    });
    // host's bloom filter in every row group (DuckDB checks it whatever the time range keeps),
    // and nothing else.
    expect(read).toHaveLength(GROUPS);
    for (const range of read) expect(range.end).toBeLessThanOrEqual(tailStart);
    expect(blooms.filter((g) => g.host !== undefined)).toHaveLength(GROUPS);
    const plan = planRead(metadata, ['time', 'host', 'value'], filter, blooms);
    expect(plan.matched).toBe(2);
    // A tag no row holds, inside every group's min/max: the bloom filters rule the groups out.
    const absent: ParquetQueryFilter = { ...RANGE, host: { $eq: 'web-00' } };
    const none = await readBloomFilters(metadata, absent, bytes.length, async (r) =>
      bytes.subarray(r.start, r.end),
    );
    expect(planRead(metadata, ['time', 'host', 'value'], absent, none)).toMatchObject({
      matched: 0,
      fetches: [],
    });

    const sparseOf = async (name: string, ranges: readonly { start: number; end: number }[]) => {
      const path = sorted.replace('.parquet', `-${name}.parquet`);
      const handle = await open(path, 'w');
      await handle.truncate(bytes.length);
      await handle.write(tail, 0, tail.length, tailStart);
      for (const f of ranges) await handle.write(bytes, f.start, f.end - f.start, f.start);
      await handle.close();
      return path;
    };
    const sql = (path: string) =>
      `SELECT count(*)::INTEGER AS n, sum(value) AS v FROM '${path}' WHERE host = 'web-01' ` +
      `AND time >= make_timestamp(${FROM_MS * 1000}::BIGINT) AND time < make_timestamp(${TO_MS * 1000}::BIGINT)`;
    const answer = await engine.query(sql(sorted));
    expect(await engine.query(sql(await sparseOf('blooms', [...read, ...plan.fetches])))).toEqual(answer);
    await expect(engine.query(sql(await sparseOf('no-blooms', plan.fetches)))).rejects.toThrow();
  });

  it('fetches again no byte the footer read brought', () => {
    const ranges = [
      { start: 10, end: 50 },
      { start: 60, end: 120 },
      { start: 130, end: 150 },
    ];
    expect(beforeTail(ranges, 100)).toEqual([
      { start: 10, end: 50 },
      { start: 60, end: 100 },
    ]);
    expect(beforeTail(ranges, 0)).toEqual([]);
  });

  it('refuses a tail that is not Parquet', () => {
    expect(() => footerBytes(new Uint8Array(16))).toThrow(/PAR1/);
  });
});
