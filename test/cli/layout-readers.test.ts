/**
 * Each layout's readers see every row exactly once after the tiers its layout lets run, on the
 * real engine and the real CLI over a local folder store:
 * - hive: `run --tier hourly` keeps every output inside its (dt, hour) partition, so DuckDB's
 *   hive_partitioning over `dt=*\/hour=*\/` and a plain `**\/*.parquet` glob both read all rows; `run
 *   --tier daily` is refused with the reason (its output would sit in `dt=…/`, outside every
 *   `hour=` partition: 0 rows for a partitioned reader).
 * - firehose: objects named as Firehose names them
 *   (https://docs.aws.amazon.com/firehose/latest/dev/s3-object-name.html), with and without an
 *   extension, INT96 times as its Parquet SerDe may write, compact exactly; the INT96 column comes
 *   out as a TIMESTAMP; non-Parquet objects beside them stay byte for byte; daily is refused
 *   (Athena's partition projection for Firehose maps yyyy/MM/dd/HH to one partition column:
 *   https://docs.aws.amazon.com/athena/latest/ug/partition-projection-kinesis-firehose-example.html).
 */

import { mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { cli, listAll } from '../support/cli-lake.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { int96ParquetBytes } from '../support/int96-parquet.ts';

let engine: DuckDbEngine;
let scratch: string;

useEngineAndDir('layout-readers-', (e, dir) => {
  engine = e;
  scratch = dir;
});

const DAY = Date.UTC(2026, 10, 1);
const HOUR = 3_600_000;
const pad = (n: number) => String(n).padStart(2, '0');

async function count(sql: string): Promise<{ rows: number; distinct: number }> {
  const [row] = await engine.query(
    `SELECT count(*)::INTEGER AS n, count(DISTINCT id)::INTEGER AS d FROM ${sql}`,
  );
  return { rows: Number(row?.n), distinct: Number(row?.d) };
}

describe('hive layout: hourly only, exact through partitioned and glob readers', () => {
  const FILES_PER_HOUR = 3;
  const ROWS_PER_FILE = 50;
  const TOTAL = 24 * FILES_PER_HOUR * ROWS_PER_FILE;

  async function hiveLake(): Promise<string> {
    const dir = await mkdtemp(join(scratch, 'hive-'));
    let id = 0;
    for (let h = 0; h < 24; h++) {
      const folder = join(dir, `events/dt=2026-11-01/hour=${pad(h)}`);
      await mkdir(folder, { recursive: true });
      for (let f = 0; f < FILES_PER_HOUR; f++) {
        const start = new Date(DAY + h * HOUR).toISOString();
        await engine.query(
          `COPY (SELECT (${id} + i + 1)::BIGINT AS id, TIMESTAMPTZ '${start}' + to_seconds(i * 60 + ${f}) AS time FROM range(${ROWS_PER_FILE}) t(i)) TO '${folder}/part-${f}.parquet' (FORMAT parquet)`,
        );
        id += ROWS_PER_FILE;
      }
    }
    return dir;
  }

  const partitioned = (dir: string) =>
    `read_parquet('${dir}/events/dt=*/hour=*/*.parquet', hive_partitioning = true)`;
  const glob = (dir: string) => `read_parquet('${dir}/events/**/*.parquet', hive_partitioning = false)`;

  it('plan and run without --layout hive find nothing to do and say which layout the lake reads as', async () => {
    const dir = await hiveLake();
    const before = await listAll(dir);
    const hint = 'is data in the arc layout; they read as hive: did you mean --layout hive?';
    const plan = await cli('plan', '--tier', 'hourly', '--store', dir, '--quiet', '0');
    expect(plan.code).toBe(0);
    expect(plan.text).toContain('nothing to do');
    expect(plan.err.join('\n')).toContain(hint);
    const run = await cli('run', '--tier', 'hourly', '--store', dir, '--quiet', '0');
    expect(run.code).toBe(0);
    expect(run.err.join('\n')).toContain(hint);
    expect(await listAll(dir)).toEqual(before);
    // With the right layout, no hint.
    const right = await cli('plan', '--tier', 'hourly', '--store', dir, '--layout', 'hive', '--quiet', '0');
    expect(right.err.join('\n')).not.toContain('did you mean --layout');
    // A store one folder too deep (the table's folder) is told to go up, not to change layout.
    const deep = await cli(
      'plan',
      '--tier',
      'hourly',
      '--store',
      join(dir, 'events'),
      '--layout',
      'hive',
      '--quiet',
      '0',
    );
    expect(deep.err.join('\n')).toContain(
      'but they are one folder down: --store names a folder inside the lake',
    );
    expect(deep.err.join('\n')).not.toContain('did you mean --layout');
  });

  it('run --tier hourly then --tier daily: the daily run is refused, every row is read once by both readers', async () => {
    const dir = await hiveLake();
    expect(await count(partitioned(dir))).toEqual({ rows: TOTAL, distinct: TOTAL });

    const hourly = await cli(
      'run',
      '--tier',
      'hourly',
      '--store',
      dir,
      '--layout',
      'hive',
      '--min-files',
      '2',
      '--quiet',
      '0',
    );
    expect(hourly.code, hourly.err.join('\n')).toBe(0);
    const data = (await listAll(dir)).filter((k) => k.endsWith('.parquet'));
    expect(data).toHaveLength(24);
    for (const key of data)
      expect(key).toMatch(/^events\/dt=2026-11-01\/hour=\d\d\/[^/]+_compacted\.parquet$/);

    const daily = await cli('run', '--tier', 'daily', '--store', dir, '--layout', 'hive', '--quiet', '0');
    expect(daily.code).not.toBe(0);
    const message = daily.err.join('\n');
    expect(message).toContain('tiers.daily');
    expect(message).toContain('layout "hive"');
    expect(message).toContain('hour={HH}');
    expect(message).toMatch(/never see its rows/);
    // Refused before anything ran: the lake is as the hourly run left it.
    expect((await listAll(dir)).filter((k) => k.endsWith('.parquet'))).toEqual(data);

    expect(await count(partitioned(dir))).toEqual({ rows: TOTAL, distinct: TOTAL });
    expect(await count(glob(dir))).toEqual({ rows: TOTAL, distinct: TOTAL });
    // The partition columns a (dt, hour) reader derives hold each hour's rows.
    const [hours] = await engine.query(
      `SELECT count(DISTINCT hour)::INTEGER AS h, count(DISTINCT dt)::INTEGER AS d FROM ${partitioned(dir)}`,
    );
    expect({ h: Number(hours?.h), d: Number(hours?.d) }).toEqual({ h: 24, d: 1 });
  }, 120_000);
});

describe('firehose layout: Firehose-named objects with and without an extension', () => {
  const STREAM = 'clicks.stream-prod';
  const uuid = (n: number) => `${pad(n)}aa0f6e-1b2c-4d3e-8f90-a1b2c3d4e5f6`.slice(0, 36);
  /** `<stream>-<version>-<YYYY>-<MM>-<DD>-<HH>-<mm>-<ss>-<uuid><extension>`. */
  const firehoseName = (hour: number, minute: number, n: number, extension: string) =>
    `${STREAM}-1-2026-11-01-${pad(hour)}-${pad(minute)}-00-${uuid(n)}${extension}`;

  it('compact exactly, INT96 time reads back as TIMESTAMP, non-Parquet objects are left alone, daily is refused', async () => {
    const dir = await mkdtemp(join(scratch, 'firehose-'));
    const objects: Record<string, Buffer> = {};
    let id = 0;
    const parquet = (hour: number, minute: number, n: number, extension: string) => {
      const rows = Array.from({ length: 40 }, (_, i) => ({
        id: BigInt(++id),
        timeMicros: BigInt(DAY + hour * HOUR + minute * 60_000 + i * 1000) * 1000n,
      }));
      objects[`events/2026/11/01/${pad(hour)}/${firehoseName(hour, minute, n, extension)}`] =
        int96ParquetBytes(rows);
    };
    parquet(5, 1, 1, '');
    parquet(5, 7, 2, '');
    parquet(5, 13, 3, '.parquet');
    parquet(6, 2, 4, '');
    parquet(6, 9, 5, '');
    const total = id;
    // Beside them: what a stream, Spark or a copy tool may also leave in an hour folder.
    const others: Record<string, Buffer> = {
      // A JSON delivery named like Firehose, no extension: only its content says it is no Parquet.
      [`events/2026/11/01/05/${firehoseName(5, 20, 6, '')}`]: Buffer.from('{"id": 999}\n{"id": 1000}\n'),
      'events/2026/11/01/05/_SUCCESS': Buffer.alloc(0),
      'events/2026/11/01/05/.part-0.crc': Buffer.from('crc'),
      'events/2026/11/01/06/upload.tmp': Buffer.from('PAR1 not yet'),
      // Ends like Parquet, is not: the compact step's footer check handles those (bad-inputs tests).
    };
    for (const [key, body] of Object.entries({ ...objects, ...others })) {
      await mkdir(dirname(join(dir, key)), { recursive: true });
      await writeFile(join(dir, key), body);
    }
    const [before] = await engine.query(
      `DESCRIBE SELECT time FROM read_parquet('${join(dir, Object.keys(objects)[0] as string)}')`,
    );
    expect(before?.column_type).toBe('TIMESTAMP');

    // Readers given the visible files get the Parquet objects only, before and after compaction.
    const visible = await cli('visible', '--store', dir, '--layout', 'firehose');
    expect(visible.code, visible.err.join('\n')).toBe(0);
    expect(visible.out.join('\n').split('\n').sort()).toEqual(
      Object.keys(objects)
        .map((k) => join(dir, k))
        .sort(),
    );

    const run = await cli(
      'run',
      '--tier',
      'hourly',
      '--store',
      dir,
      '--layout',
      'firehose',
      '--min-files',
      '2',
      '--quiet',
      '0',
    );
    expect(run.code, run.err.join('\n')).toBe(0);

    const keys = await listAll(dir);
    const outputs = keys.filter((k) => k.endsWith('_compacted.parquet'));
    expect(outputs).toHaveLength(2);
    for (const key of Object.keys(objects)) expect(keys).not.toContain(key);
    for (const [key, body] of Object.entries(others)) {
      expect(await readFile(join(dir, key))).toEqual(body);
    }
    // An hour-partitioned reader (the projection's yyyy/MM/dd/HH folders) and a glob alike.
    expect(await count(`read_parquet('${dir}/events/*/*/*/*/*.parquet')`)).toEqual({
      rows: total,
      distinct: total,
    });
    expect(await count(`read_parquet('${dir}/**/*.parquet')`)).toEqual({ rows: total, distinct: total });
    // The INT96 input column is a TIMESTAMP in the output (INT64 micros with the TIMESTAMP logical
    // type, not INT96), with the same instants.
    for (const key of outputs) {
      const [described] = await engine.query(`DESCRIBE SELECT time FROM read_parquet('${join(dir, key)}')`);
      expect(described?.column_type).toBe('TIMESTAMP');
      const [schema] = await engine.query(
        `SELECT type, logical_type::VARCHAR AS logical FROM parquet_schema('${join(dir, key)}') WHERE name = 'time'`,
      );
      expect(schema?.type).toBe('INT64');
      expect(String(schema?.logical)).toContain('TimestampType');
    }
    const after = await cli('visible', '--store', dir, '--layout', 'firehose');
    expect(after.out.join('\n').split('\n').sort()).toEqual(outputs.map((k) => join(dir, k)).sort());
    const [range] = await engine.query(
      `SELECT min(time)::VARCHAR AS lo, max(time)::VARCHAR AS hi FROM read_parquet('${dir}/**/*.parquet')`,
    );
    expect(range).toEqual({ lo: '2026-11-01 05:01:00', hi: '2026-11-01 06:09:39' });

    const daily = await cli('run', '--tier', 'daily', '--store', dir, '--layout', 'firehose', '--quiet', '0');
    expect(daily.code).not.toBe(0);
    expect(daily.err.join('\n')).toContain('layout "firehose"');
  }, 120_000);
});
