/**
 * Which segments a layout's readers map to partition columns, which tiers may then run (a tier
 * may write only where those readers look), how inputs are recognised when their names do not
 * say Parquet (Firehose objects without an extension), and the settings' errors.
 */

import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { parseConfig } from '../../functions/core/config.ts';
import { Layout } from '../../functions/core/layout.ts';
import { ForwardingStore, type ObjectStore } from '../../functions/core/object-store.ts';
import { isParquetObject, parseDataObject } from '../../functions/core/parquet-sniff.ts';
import { planTier } from '../../functions/core/planner/planner.ts';
import { configError } from '../support/config-error.ts';
import { int96ParquetBytes } from '../support/int96-parquet.ts';
import { testStore } from '../support/test-store.ts';

describe('partition segments and the tiers they allow', () => {
  it('hive: both k=v segments are partition columns; hourly only', () => {
    const hive = Layout.fromName('hive');
    expect(hive.partitionSegments).toEqual(['dt={YYYY}-{MM}-{DD}', 'hour={HH}']);
    expect(hive.tierRefusal('hourly')).toBeUndefined();
    expect(hive.tierRefusal('daily')).toMatch(
      /^the daily tier would write its outputs in the day folder, above the partition segment "hour=\{HH\}" of layout "hive"/,
    );
    expect(hive.tierRefusal('monthly')).toContain('the monthly tier');
  });

  it('firehose: the time prefix is the projected partition (yyyy/MM/dd/HH); hourly only', () => {
    const firehose = Layout.fromName('firehose');
    expect(firehose.template).toBe('{table}/{YYYY}/{MM}/{DD}/{HH}/');
    expect(firehose.tierRefusal('hourly')).toBeUndefined();
    expect(firehose.tierRefusal('daily')).toContain('"{HH}" of layout "firehose"');
    expect(firehose.tierRefusal('monthly')).toBeDefined();
  });

  it('arc: no partition columns by default, every tier; declared projection segments refuse what writes above them', () => {
    const arc = Layout.fromName('arc');
    expect(arc.partitionSegments).toEqual([]);
    for (const tier of ['hourly', 'daily', 'monthly'] as const) expect(arc.tierRefusal(tier)).toBeUndefined();
    const projected = Layout.create('arc', '', { partitionSegments: ['{YYYY}', '{MM}', '{DD}', '{HH}'] });
    expect(projected.tierRefusal('daily')).toContain('"{HH}"');
    // Partitions down to the day: daily outputs sit in the day folder, inside them; monthly does not.
    const byDay = Layout.create('arc', '', { partitionSegments: ['{YYYY}', '{MM}', '{DD}'] });
    expect(byDay.tierRefusal('daily')).toBeUndefined();
    expect(byDay.tierRefusal('monthly')).toContain(
      'the monthly tier would write its outputs in the month folder, above the partition segment "{DD}"',
    );
  });

  it('a custom template: its k=v segments are partition columns unless declared otherwise', () => {
    const t = '{db}/{table}/year={YYYY}/month={MM}/{DD}/{HH}/';
    expect(new Layout(t).partitionSegments).toEqual(['year={YYYY}', 'month={MM}']);
    expect(new Layout(t).tierRefusal('daily')).toBeUndefined();
    expect(new Layout(t).tierRefusal('monthly')).toBeUndefined();
    expect(Layout.create('hive', '', { partitionSegments: [] }).tierRefusal('daily')).toBeUndefined();
  });

  it('a declared segment the template does not have is a ConfigError naming the segments', () => {
    expect(configError(() => Layout.create('arc', '', { partitionSegments: ['{HOUR}'] })).message).toContain(
      'partitionSegments: "{HOUR}" is not a segment of layout "{db}/{measurement}/{YYYY}/{MM}/{DD}/{HH}/"; list segments exactly as the template writes them, e.g. ["{YYYY}","{MM}","{DD}","{HH}"]',
    );
  });
});

describe('config: tiers a layout refuses', () => {
  it('hive: the daily tier is off by default, and turning it on is a ConfigError naming the tier, the layout and the reason', () => {
    expect(parseConfig({ layout: 'hive' }).tiers.daily.enabled).toBe(false);
    expect(parseConfig({ layout: 'arc' }).tiers.daily.enabled).toBe(true);
    const error = configError(() => parseConfig({ layout: 'hive', tiers: { daily: { enabled: true } } }));
    expect(error.message).toMatch(
      /^tiers\.daily\.enabled: the daily tier would write its outputs in the day folder/,
    );
    expect(error.message).toContain('layout "hive"');
    expect(error.message).toContain('never see its rows');
    // Explicitly off is what hive has anyway.
    expect(parseConfig({ layout: 'hive', tiers: { daily: { enabled: false } } }).tiers.daily.enabled).toBe(
      false,
    );
  });

  it('arc with Athena partition projection declared on YYYY/MM/DD/HH: daily and monthly refused', () => {
    const segments = ['{YYYY}', '{MM}', '{DD}', '{HH}'];
    expect(parseConfig({ layout: 'arc', partitionSegments: segments }).tiers.daily.enabled).toBe(false);
    expect(
      configError(() =>
        parseConfig({ layout: 'arc', partitionSegments: segments, tiers: { monthly: { enabled: true } } }),
      ).message,
    ).toMatch(/^tiers\.monthly\.enabled: the monthly tier would write/);
  });

  it('hive with partitionSegments [] (readers that only glob): daily runs as on arc', () => {
    expect(parseConfig({ layout: 'hive', partitionSegments: [] }).tiers.daily.enabled).toBe(true);
  });

  it('rejects partitionSegments and dataSuffix of the wrong shape', () => {
    expect(
      configError(() => parseConfig({ partitionSegments: 'hour={HH}' as unknown as string[] })).message,
    ).toMatch(/^partitionSegments must be a list/);
    expect(configError(() => parseConfig({ dataSuffix: 1 as unknown as string })).message).toMatch(
      /^dataSuffix must be a string/,
    );
  });
});

describe('planning a refused tier', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'layout-partitions-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('planTier daily on hive throws the reason before listing anything', async () => {
    let listed = 0;
    const store: ObjectStore = new (class extends ForwardingStore {
      override list(prefix: string) {
        listed++;
        return super.list(prefix);
      }
    })(testStore(dir));
    const config = parseConfig({ layout: 'hive' });
    await expect(planTier(store, config, { now: () => new Date() }, 'daily')).rejects.toThrow(
      /^tiers\.daily: the daily tier would write its outputs in the day folder, above the partition segment "hour=\{HH\}"/,
    );
    expect(listed).toBe(0);
  });
});

describe('recognising inputs whose name does not say Parquet (dataSuffix "")', () => {
  const firehose = Layout.fromName('firehose');
  const hour = 'events/2026/11/01/05/';

  it('isDataKey keeps marker, hidden, checksum and temp names out by name', () => {
    expect(firehose.dataSuffix).toBe('');
    expect(
      firehose.isDataKey(`${hour}stream-1-2026-11-01-05-10-00-0f6e1b2c-4d3e-8f90-a1b2-c3d4e5f6a7b8`),
    ).toBe(true);
    expect(
      firehose.isDataKey(`${hour}stream-1-2026-11-01-05-10-00-0f6e1b2c-4d3e-8f90-a1b2-c3d4e5f6a7b8.parquet`),
    ).toBe(true);
    for (const name of [
      '_SUCCESS',
      '.part-0.crc',
      'part-0.crc',
      'x.tmp',
      '05_$folder$',
      '_temporary',
      'x.json',
    ]) {
      expect(firehose.isDataKey(`${hour}${name}`), name).toBe(false);
    }
    expect(firehose.needsContentCheck(`${hour}stream-1`)).toBe(true);
    expect(firehose.needsContentCheck(`${hour}stream-1.parquet`)).toBe(false);
    // A configured suffix: only names ending with it (and our own outputs) are data.
    const suffixed = Layout.create('firehose', '', { dataSuffix: '.parq' });
    expect(suffixed.isDataKey(`${hour}stream-1.parq`)).toBe(true);
    expect(suffixed.isDataKey(`${hour}stream-1`)).toBe(false);
    expect(suffixed.needsContentCheck(`${hour}stream-1.parq`)).toBe(false);
    // hive and arc keep *.parquet only.
    expect(Layout.fromName('hive').isDataKey('events/dt=2026-11-01/hour=05/part-0')).toBe(false);
  });

  it('isParquetObject: PAR1 at both ends and a FileMetaData footer; anything else is not', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'layout-sniff-'));
    const engine = await DuckDbEngine.create({ threads: 1 });
    try {
      const store = testStore(dir);
      const parquet = int96ParquetBytes([{ id: 1n, timeMicros: 0n }]);
      // DuckDB's own (large) file: its head is read by a second ranged read.
      await engine.query(
        `COPY (SELECT i AS id, md5(i::VARCHAR) AS pad FROM range(20000) t(i)) TO '${join(dir, 'big')}' (FORMAT parquet)`,
      );
      const bodies: Record<string, Buffer> = {
        int96: parquet,
        json: Buffer.from('{"a": 1}\n'),
        empty: Buffer.alloc(0),
        // Magic at the end only, e.g. a truncated upload's tail copied elsewhere.
        tailOnly: Buffer.concat([Buffer.from('XXXX'), parquet.subarray(4)]),
        // Magic at both ends, footer length pointing outside the object.
        badLength: Buffer.concat([
          Buffer.from('PAR1'),
          Buffer.alloc(8),
          Buffer.from([0xff, 0xff, 0, 0]),
          Buffer.from('PAR1'),
        ]),
        // Magic and a fitting length, but the footer is not a FileMetaData.
        badFooter: Buffer.concat([
          Buffer.from('PAR1'),
          Buffer.from([0x99, 0, 0, 0]),
          Buffer.from([4, 0, 0, 0]),
          Buffer.from('PAR1'),
        ]),
      };
      for (const [name, body] of Object.entries(bodies)) await writeFile(join(dir, name), body);
      const verdicts: Record<string, boolean> = {};
      for await (const object of store.list('')) verdicts[object.key] = await isParquetObject(store, object);
      expect(verdicts).toEqual({
        badFooter: false,
        badLength: false,
        big: true,
        empty: false,
        int96: true,
        json: false,
        tailOnly: false,
      });
    } finally {
      await engine.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('parseDataObject: a non-Parquet object named like a Firehose delivery is no data file', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'layout-sniff-'));
    try {
      const store = testStore(dir);
      const { mkdir } = await import('node:fs/promises');
      await mkdir(join(dir, hour), { recursive: true });
      await writeFile(
        join(dir, `${hour}s-1-2026-11-01-05-00-00-a`),
        int96ParquetBytes([{ id: 1n, timeMicros: 0n }]),
      );
      await writeFile(join(dir, `${hour}s-1-2026-11-01-05-00-00-b`), Buffer.from('not parquet, long enough'));
      const parsed: Record<string, number | undefined> = {};
      for await (const object of store.list('')) {
        parsed[object.key] = (await parseDataObject(store, firehose, object))?.level;
      }
      expect(parsed).toEqual({
        [`${hour}s-1-2026-11-01-05-00-00-a`]: 0,
        [`${hour}s-1-2026-11-01-05-00-00-b`]: undefined,
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
