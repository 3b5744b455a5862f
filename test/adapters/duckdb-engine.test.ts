import { existsSync } from 'node:fs';
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  DuckDbEngine,
  parquetPath,
  quoteString,
} from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import type { SampleSpec } from '../../functions/adapters/sample-data.ts';
import { readIds, summarizeIds, writeSampleParquet } from '../../functions/adapters/sample-data.ts';
import type { CompactOutput, CompactRequest } from '../../functions/core/engine.ts';
import { InputUnreadableError } from '../../functions/core/errors.ts';
import { unifySchemas } from '../../functions/core/schema.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { stripStatistics } from '../support/strip-statistics.ts';

const HOUR_MS = 3_600_000;
const START_MS = Date.UTC(2024, 0, 15, 10);

let dir: string;
let engine: DuckDbEngine;
let fileCounter = 0;

useEngineAndDir(
  'duckdb-engine-test-',
  (e, d) => {
    engine = e;
    dir = d;
  },
  { engine: (d) => ({ threads: 2, tempDirectory: join(d, 'spill') }) },
);

describe('the instance', () => {
  it("keeps no external file cache: one job's inputs never hold memory through the next job", async () => {
    const rows = await engine.query(`SELECT current_setting('enable_external_file_cache') AS cached`);
    expect(rows).toEqual([{ cached: false }]);
  });

  it('closes once its calls in flight have ended, for every caller of close', async () => {
    const own = await DuckDbEngine.create({ threads: 1 });
    const running = own.query('SELECT count(*) FROM range(100000000000)').then(
      () => 'ended',
      () => 'ended',
    );
    void own.close();
    // The second caller waits for the same close: the call has ended when it returns.
    await own.close();
    const state = await Promise.race([
      running,
      new Promise((resolve) => setImmediate(() => resolve('running'))),
    ]);
    expect(state).toBe('ended');
  });
});

/** Writes `count` sample files of `rows` rows each with consecutive id ranges. */
async function sampleFiles(
  count: number,
  rows: number,
  extra: Partial<SampleSpec> | ((index: number) => Partial<SampleSpec>) = {},
): Promise<string[]> {
  const files: string[] = [];
  for (let i = 0; i < count; i++) {
    const path = join(dir, `in-${fileCounter++}.parquet`);
    const overrides = typeof extra === 'function' ? extra(i) : extra;
    await writeSampleParquet(engine, path, {
      rows,
      firstId: i * rows,
      startTimeMs: START_MS,
      spanMs: HOUR_MS,
      ...overrides,
    });
    files.push(path);
  }
  return files;
}

async function compactAll(
  inputs: string[],
  options: Partial<Omit<CompactRequest, 'inputs' | 'columns'>> = {},
  using: DuckDbEngine = engine,
): Promise<CompactOutput[]> {
  const infos = await Promise.all(inputs.map((file) => using.inspect(file)));
  const columns = unifySchemas(
    'test',
    inputs.map((key, i) => ({ key, columns: infos[i]?.columns ?? [] })),
  );
  return using.compact({
    inputs,
    columns,
    sortBy: ['time'],
    outputDir: join(dir, `out-${fileCounter++}`),
    targetFileBytes: 512 * 1024 * 1024,
    rowGroupSize: 122_880,
    ...options,
  });
}

/** Rows out of order when the files are read one after the other, each in its stored order. */
async function timeInversions(files: readonly string[]): Promise<number> {
  const [row] = await engine.query(`
    SELECT count(*) AS bad FROM (
      SELECT time, lag(time) OVER (ORDER BY file_index, file_row_number) AS previous FROM (
        SELECT time, file_row_number, list_position([${files.map(quoteString).join(', ')}], filename) AS file_index
        FROM read_parquet([${files.map(parquetPath).join(', ')}], filename = true, file_row_number = true)))
    WHERE time < previous`);
  return Number(row?.bad);
}

async function expectUnreadable(file: string, reason?: RegExp): Promise<void> {
  const error = await engine.inspect(file).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(InputUnreadableError);
  const unreadable = error as InputUnreadableError;
  expect(unreadable.file).toBe(file);
  expect(unreadable.message).toContain(file);
  expect(unreadable.reason).not.toContain('\n');
  if (reason !== undefined) expect(unreadable.reason).toMatch(reason);
}

describe('DuckDbEngine.inspect', () => {
  it('returns footer rows and DuckDB column types', async () => {
    const [file] = await sampleFiles(1, 5_000, { extraColumns: 2 });
    expect(await engine.inspect(file as string)).toEqual({
      rows: 5_000,
      columns: [
        { name: 'id', type: 'BIGINT' },
        { name: 'time', type: 'TIMESTAMP' },
        { name: 'host', type: 'VARCHAR' },
        { name: 'region', type: 'VARCHAR' },
        { name: 'value', type: 'DOUBLE' },
        { name: 'count', type: 'INTEGER' },
        { name: 'c0', type: 'DOUBLE' },
        { name: 'c1', type: 'DOUBLE' },
      ],
      metadata: {},
    });
  });

  it("returns the footer's key-value metadata, the same from the JS footer and from DuckDB's per-file check", async () => {
    const file = join(dir, 'kv-inspect.parquet');
    await engine.query(
      `COPY (SELECT 1 AS x, TIMESTAMPTZ '2024-01-15 10:00:00+00' AS time) TO ${parquetPath(file)} (FORMAT parquet, KV_METADATA {"arc:tags": 'host', other: 'ü'})`,
    );
    const expected = { 'arc:tags': 'host', other: 'ü' };
    expect((await engine.inspect(file)).metadata).toEqual(expected);
    // The per-file check (for files the JS decoder does not vouch for) is private; call it as such.
    const perFile = engine as unknown as { inspectOne(file: string): Promise<{ metadata?: unknown }> };
    expect((await perFile.inspectOne(file)).metadata).toEqual(expected);
  });

  it('does not add hive partition columns from the path', async () => {
    const file = join(dir, 'dt=2024-01-15', 'hour=10', 'x.parquet');
    await mkdir(join(dir, 'dt=2024-01-15', 'hour=10'), { recursive: true });
    await writeSampleParquet(engine, file, { rows: 10, firstId: 0, startTimeMs: START_MS, spanMs: HOUR_MS });
    const info = await engine.inspect(file);
    expect(info.columns.map((c) => c.name)).toEqual(['id', 'time', 'host', 'region', 'value', 'count']);
  });

  it('reads paths with quotes, spaces, unicode and glob characters literally', async () => {
    const file = join(dir, `it's "odd" [1]*? é 日本.parquet`);
    await writeSampleParquet(engine, file, { rows: 100, firstId: 0, startTimeMs: START_MS, spanMs: HOUR_MS });
    // A sibling the unescaped glob `[1]*?` would also match.
    await writeSampleParquet(engine, join(dir, `it's "odd" 1xy é 日本.parquet`), {
      rows: 7,
      firstId: 0,
      startTimeMs: START_MS,
      spanMs: HOUR_MS,
    });
    expect((await engine.inspect(file)).rows).toBe(100);
    const [output] = await compactAll([file]);
    expect(output?.rows).toBe(100);
  });

  describe('rejects unreadable files with InputUnreadableError naming the file', () => {
    let good: Buffer;
    beforeAll(async () => {
      const [file] = await sampleFiles(1, 20_000);
      good = await readFile(file as string);
    });

    it('zero bytes', async () => {
      const file = join(dir, 'zero.parquet');
      await writeFile(file, '');
      await expectUnreadable(file, /too small/);
    });

    it('truncated', async () => {
      const file = join(dir, 'truncated.parquet');
      await writeFile(file, good.subarray(0, Math.floor(good.length / 2)));
      await expectUnreadable(file, /magic/);
    });

    it('a text file named .parquet', async () => {
      const file = join(dir, 'text.parquet');
      await writeFile(file, 'time,host,value\n2024-01-15T10:00:00Z,web-01,1.5\n'.repeat(20));
      await expectUnreadable(file);
    });

    it('a corrupt footer length', async () => {
      const file = join(dir, 'footer-length.parquet');
      const bytes = Buffer.from(good);
      // The 4-byte footer length sits just before the trailing PAR1.
      bytes.writeUInt32LE(bytes.length * 2, bytes.length - 8);
      await writeFile(file, bytes);
      await expectUnreadable(file, /[Ff]ooter/);
    });

    it('corrupt footer metadata', async () => {
      const file = join(dir, 'footer-bytes.parquet');
      const bytes = Buffer.from(good);
      const footerLength = bytes.readUInt32LE(bytes.length - 8);
      const footerStart = bytes.length - 8 - footerLength;
      // Garbage over the whole Thrift footer; length and magic intact.
      for (let i = footerStart; i < bytes.length - 8; i++) bytes[i] = 0xff;
      await writeFile(file, bytes);
      await expectUnreadable(file);
    });

    it('a footer whose row count disagrees with its row groups', async () => {
      const file = join(dir, 'row-count.parquet');
      const bytes = await readFile((await sampleFiles(1, 500))[0] as string);
      // FileMetaData.num_rows follows the schema list: field header 0x16 (delta 1, i64), then
      // 500 as a zigzag varint (0xe8 0x07); 501 (0xea 0x07) keeps the footer's length.
      const footerStart = bytes.length - 8 - bytes.readUInt32LE(bytes.length - 8);
      const at = bytes.indexOf(Buffer.from([0x16, 0xe8, 0x07]), footerStart);
      expect(at).toBeGreaterThan(footerStart);
      bytes[at + 1] = 0xea;
      await writeFile(file, bytes);
      await expectUnreadable(file, /footer says 501 rows but its row groups hold 500/);
    });

    it('column chunks that end past the file (bytes cut from the middle)', async () => {
      const file = join(dir, 'cut.parquet');
      // More than the footer and page indexes after the last chunk: its recorded end lies past the end.
      const cut = 20_000;
      expect(good.length - 8 - good.readUInt32LE(good.length - 8)).toBeGreaterThan(4 + cut);
      await writeFile(file, Buffer.concat([good.subarray(0, 4), good.subarray(4 + cut)]));
      await expectUnreadable(file, /past the file size/);
    });

    it('a bad trailing magic', async () => {
      const file = join(dir, 'magic.parquet');
      const bytes = Buffer.from(good);
      bytes[bytes.length - 1] = 0;
      await writeFile(file, bytes);
      await expectUnreadable(file, /magic/);
    });
  });
});

describe('DuckDbEngine.inspect, many files at once', () => {
  it('gives each file what DuckDB reads for it alone: rows, its own schema, or the error naming it', async () => {
    const narrow = await sampleFiles(6, 300);
    const wide = await sampleFiles(6, 200, { extraColumns: 3 });
    const bigints = [join(dir, 'bigint-count.parquet')];
    await engine.query(
      `COPY (SELECT range::BIGINT AS id, TIMESTAMP '2024-01-15 10:00:00' AS time, range::BIGINT AS count FROM range(50)) TO ${parquetPath(bigints[0] as string)} (FORMAT parquet)`,
    );
    const bad = join(dir, 'many-bad.parquet');
    const bytes = await readFile(narrow[0] as string);
    await writeFile(bad, bytes.subarray(0, bytes.length - 1));
    const files = [...narrow, bad, ...wide, ...bigints];
    const outcomes = await Promise.all(
      files.map((file) =>
        engine.inspect(file).then(
          (info) => ({ info }),
          (error: unknown) => ({ error }),
        ),
      ),
    );
    for (const [i, file] of files.entries()) {
      const outcome = outcomes[i];
      if (file === bad) {
        expect(outcome && 'error' in outcome && outcome.error).toBeInstanceOf(InputUnreadableError);
        expect((outcome as { error: InputUnreadableError }).error.file).toBe(file);
        continue;
      }
      const described = await engine.query(`DESCRIBE SELECT * FROM read_parquet(${parquetPath(file)})`);
      const [footer] = await engine.query(`SELECT num_rows FROM parquet_file_metadata(${parquetPath(file)})`);
      expect(outcome).toEqual({
        info: {
          rows: Number(footer?.num_rows),
          columns: described.map((row) => ({ name: String(row.column_name), type: String(row.column_type) })),
          metadata: {},
        },
      });
    }
    const types = (info: unknown) => (info as { info: { columns: { type: string }[] } }).info.columns;
    expect(types(outcomes.at(-1)).at(-1)?.type).toBe('BIGINT');
    expect(types(outcomes[0]).at(-1)?.type).toBe('INTEGER');
    expect(types(outcomes[narrow.length + 1])).toHaveLength(9);
  });
});

describe('DuckDbEngine.integerBounds', () => {
  it("reads an integer column's range over every row group from the footer; NULL-only chunks need none; a file without statistics or without the column proves nothing", async () => {
    const file = join(dir, 'bounds.parquet');
    await engine.query(
      `COPY (SELECT range AS i, CASE WHEN range < 2048 THEN NULL ELSE (range - 3000) * 1000000000000 END::BIGINT AS v FROM range(5000)) TO ${parquetPath(file)} (FORMAT parquet, ROW_GROUP_SIZE 2048)`,
    );
    expect(await engine.integerBounds(file, 'V')).toEqual({
      min: -952n * 10n ** 12n,
      max: 1999n * 10n ** 12n,
    });
    const nulls = join(dir, 'bounds-null.parquet');
    await engine.query(
      `COPY (SELECT NULL::BIGINT AS v FROM range(10)) TO ${parquetPath(nulls)} (FORMAT parquet)`,
    );
    expect(await engine.integerBounds(nulls, 'v')).toEqual({ min: null, max: null });
    expect(await engine.integerBounds(file, 'missing')).toEqual({
      unproved: 'row group 0 has no column chunk for it',
    });
    expect(await stripStatistics(file)).toBe(6);
    expect(await engine.integerBounds(file, 'v')).toEqual({
      unproved: 'row group 0 has no min/max statistics',
    });
  });
});

describe('DuckDbEngine.columnStats', () => {
  it('gives each top-level column its nulls and min/max over every row group, compared in its type; nested or stat-less columns are unknown', async () => {
    const file = join(dir, 'stats.parquet');
    // Row groups of 2,048 rows: the smallest and largest values sit in different groups, and a
    // number's text order ('9' > '10') would pick the wrong ones.
    await engine.query(
      `COPY (SELECT range AS id, TIMESTAMP '2026-01-01' + INTERVAL (range) SECOND AS time,
                    CASE WHEN range % 3 = 0 THEN NULL ELSE 'h' || range END AS host, {'a': range} AS s,
                    CASE WHEN range < 5000 THEN NULL ELSE range END AS half, NULL::INTEGER AS none,
                    (range * 1000 - 3)::DECIMAL(18, 2) AS amount
             FROM range(10000)) TO ${parquetPath(file)} (FORMAT parquet, ROW_GROUP_SIZE 2048)`,
    );
    expect(await engine.columnStats(file)).toEqual([
      { name: 'id', nulls: 0, min: '0', max: '9999' },
      { name: 'time', nulls: 0, min: '2026-01-01 00:00:00', max: '2026-01-01 02:46:39' },
      { name: 'host', nulls: 3334, min: 'h1', max: 'h9998' },
      { name: 's', nulls: null, min: null, max: null },
      { name: 'half', nulls: 5000, min: '5000', max: '9999' },
      { name: 'none', nulls: 10000, min: null, max: null },
      { name: 'amount', nulls: 0, min: '-3.00', max: '9998997.00' },
    ]);
    expect(await stripStatistics(file)).toBeGreaterThan(0);
    const stripped = await engine.columnStats(file);
    expect(stripped.find((c) => c.name === 'id')).toEqual({ name: 'id', nulls: null, min: null, max: null });
  });
});

describe('DuckDbEngine.compact', () => {
  it('merges, sorts by time, writes ZSTD with the requested row group size, loses and duplicates nothing', async () => {
    const inputs = await sampleFiles(3, 10_000);
    const outputs = await compactAll(inputs, { rowGroupSize: 4096 });

    expect(outputs).toHaveLength(1);
    const [output] = outputs;
    expect(output?.path).toBe(join(output?.path ?? '', '..', 'part-00000.parquet'));
    expect(output?.rows).toBe(30_000);
    expect(output?.bytes).toBe((await stat(output?.path ?? '')).size);

    const paths = outputs.map((o) => o.path);
    expect(await readIds(engine, paths)).toEqual(await readIds(engine, inputs));
    expect(await timeInversions(paths)).toBe(0);

    const chunks = await engine.query(
      `SELECT DISTINCT compression FROM parquet_metadata(${parquetPath(output?.path ?? '')})`,
    );
    expect(chunks).toEqual([{ compression: 'ZSTD' }]);
    const groups = await engine.query(
      `SELECT DISTINCT row_group_id, row_group_num_rows FROM parquet_metadata(${parquetPath(output?.path ?? '')}) ORDER BY row_group_id`,
    );
    const sizes = groups.map((g) => Number(g.row_group_num_rows));
    expect(sizes.slice(0, -1).every((n) => n === 4096)).toBe(true);
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(30_000);
  });

  it('writes the requested footer key-value metadata into every output, split or not, and none when not asked', async () => {
    const inputs = await sampleFiles(3, 10_000);
    const metadata = { 'arc:tags': 'host,region', "it's": 'a "b" \'c\'' };
    const kv = async (path: string) =>
      Object.fromEntries(
        (
          await engine.query(
            `SELECT decode(key) AS k, decode(value) AS v FROM parquet_kv_metadata(${parquetPath(path)})`,
          )
        ).map((r) => [String(r.k), String(r.v)]),
      );
    const whole = await compactAll(inputs, { metadata });
    const split = await compactAll(inputs, { metadata, targetFileBytes: 100_000, rowGroupSize: 2048 });
    expect(split.length).toBeGreaterThan(1);
    for (const output of [...whole, ...split]) expect(await kv(output.path)).toEqual(metadata);
    const [plain] = await compactAll(inputs);
    expect(await kv(plain?.path ?? '')).toEqual({});
  });

  it('sorts by the further keys within equal times and skips keys that are not columns', async () => {
    // A span of 10 ms over 5000 rows: many rows share a time.
    const inputs = await sampleFiles(2, 5_000, { spanMs: 10 });
    const outputs = await compactAll(inputs, { sortBy: ['time', 'host', 'no_such_column'] });
    const [row] = await engine.query(`
      SELECT count(*) AS bad FROM (
        SELECT time, host, lag(time) OVER w AS pt, lag(host) OVER w AS ph
        FROM read_parquet(${parquetPath(outputs[0]?.path ?? '')}, file_row_number = true)
        WINDOW w AS (ORDER BY file_row_number))
      WHERE time < pt OR (time = pt AND host < ph)`);
    expect(Number(row?.bad)).toBe(0);
  });

  it('fills columns missing from some inputs with NULL and widens INTEGER to BIGINT', async () => {
    const inputs = await sampleFiles(3, 4_000, (i) =>
      i === 0 ? { countType: 'BIGINT' } : i === 1 ? { omitColumns: ['region'] } : {},
    );
    const outputs = await compactAll(inputs);
    const path = parquetPath(outputs[0]?.path ?? '');
    const described = await engine.query(`DESCRIBE SELECT * FROM read_parquet(${path})`);
    expect(described.map((d) => [d.column_name, d.column_type])).toEqual([
      ['id', 'BIGINT'],
      ['time', 'TIMESTAMP'],
      ['host', 'VARCHAR'],
      ['region', 'VARCHAR'],
      ['value', 'DOUBLE'],
      ['count', 'BIGINT'],
    ]);
    const [stats] = await engine.query(
      `SELECT count(*) AS n, count(*) FILTER (WHERE region IS NULL) AS null_regions,
              count(*) FILTER (WHERE region IS NULL AND id BETWEEN 4000 AND 7999) AS null_in_second,
              sum("count") AS count_sum
       FROM read_parquet(${path})`,
    );
    const [inputSum] = await engine.query(
      `SELECT sum("count") AS count_sum FROM read_parquet([${inputs.map(parquetPath).join(', ')}], union_by_name = true)`,
    );
    expect(Number(stats?.n)).toBe(12_000);
    expect(Number(stats?.null_regions)).toBe(4_000);
    expect(Number(stats?.null_in_second)).toBe(4_000);
    expect(stats?.count_sum).toBe(inputSum?.count_sum);
  });

  it("splits twice in a row on one engine: a call's connection, reused by the next, keeps none of its tables", async () => {
    const own = await DuckDbEngine.create({ threads: 1 });
    try {
      for (let round = 0; round < 2; round++) {
        const inputs = await sampleFiles(2, 20_000);
        const outputs = await compactAll(inputs, { targetFileBytes: 200_000, rowGroupSize: 4096 }, own);
        expect(outputs.length).toBeGreaterThanOrEqual(2);
        expect(outputs.reduce((sum, o) => sum + o.rows, 0)).toBe(40_000);
      }
    } finally {
      await own.close();
    }
  });

  it('splits at the target size into files that are sorted within and across files', async () => {
    const inputs = await sampleFiles(4, 50_000, { extraColumns: 2 });
    const outputs = await compactAll(inputs, { targetFileBytes: 600_000, rowGroupSize: 8192 });

    expect(outputs.length).toBeGreaterThanOrEqual(3);
    expect(outputs.map((o) => o.path.slice(-18))).toEqual(
      outputs.map((_, i) => `part-${String(i).padStart(5, '0')}.parquet`),
    );
    expect(outputs.reduce((sum, o) => sum + o.rows, 0)).toBe(200_000);
    for (const output of outputs) {
      expect(output.bytes).toBe((await stat(output.path)).size);
      // "About" the target: one row group of slack either way.
      expect(output.bytes).toBeLessThan(600_000 * 1.5);
    }
    const paths = outputs.map((o) => o.path);
    expect(await timeInversions(paths)).toBe(0);
    expect(await summarizeIds(engine, paths)).toEqual({
      rows: 200_000n,
      distinct: 200_000n,
      min: 0n,
      max: 199_999n,
    });
    for (const output of outputs) {
      const [row] = await engine.query(
        `SELECT num_rows FROM parquet_file_metadata(${parquetPath(output.path)})`,
      );
      expect(Number(row?.num_rows)).toBe(output.rows);
    }
  });

  describe('on a larger input', () => {
    let inputs: string[];
    beforeAll(async () => {
      inputs = await sampleFiles(4, 125_000, { extraColumns: 2 });
    });

    it('completes with a small memory limit by spilling to the temp directory', async () => {
      const spill = join(dir, 'spill-small');
      const small = await DuckDbEngine.create({ memoryLimit: '64MB', threads: 2, tempDirectory: spill });
      try {
        // DuckDB creates the temp directory when it first spills.
        expect(existsSync(spill)).toBe(false);
        const direct = await compactAll(inputs, {}, small);
        expect(existsSync(spill)).toBe(true);
        expect(direct.reduce((sum, o) => sum + o.rows, 0)).toBe(500_000);
        expect(await timeInversions(direct.map((o) => o.path))).toBe(0);
        const split = await compactAll(inputs, { targetFileBytes: 4_000_000 }, small);
        expect(split.length).toBeGreaterThan(1);
        expect(
          await summarizeIds(
            engine,
            split.map((o) => o.path),
          ),
        ).toEqual({
          rows: 500_000n,
          distinct: 500_000n,
          min: 0n,
          max: 499_999n,
        });
        expect(await timeInversions(split.map((o) => o.path))).toBe(0);
      } finally {
        await small.close();
      }
    });

    it('stops when the signal aborts and stays usable', async () => {
      const infos = await Promise.all(inputs.map((file) => engine.inspect(file)));
      const request = {
        inputs,
        columns: unifySchemas(
          'test',
          inputs.map((key, i) => ({ key, columns: infos[i]?.columns ?? [] })),
        ),
        sortBy: ['time'],
        targetFileBytes: 512 * 1024 * 1024,
        rowGroupSize: 122_880,
      };
      const before = new AbortController();
      before.abort();
      await expect(
        engine.compact({ ...request, outputDir: join(dir, 'aborted-before'), signal: before.signal }),
      ).rejects.toMatchObject({ name: 'AbortError' });

      // Aborted while the COPY runs: it would take far longer than 100 ms to finish.
      const during = new AbortController();
      const running = engine.compact({
        ...request,
        outputDir: join(dir, 'aborted-during'),
        signal: during.signal,
      });
      setTimeout(() => during.abort(), 100);
      await expect(running).rejects.toMatchObject({ name: 'AbortError' });

      expect((await engine.query('SELECT 42 AS answer'))[0]).toEqual({ answer: 42 });
    });
  });

  it('names the input whose data pages are damaged', async () => {
    const inputs = await sampleFiles(3, 20_000);
    const victim = inputs[1] as string;
    const [chunk] = await engine.query(
      `SELECT data_page_offset FROM parquet_metadata(${parquetPath(victim)}) WHERE path_in_schema = 'time'`,
    );
    const bytes = await readFile(victim);
    // Garbage over the first page header of the time column: the footer stays valid.
    const offset = Number(chunk?.data_page_offset);
    for (let i = offset; i < offset + 32; i++) bytes[i] = 0xff;
    await writeFile(victim, bytes);
    await engine.inspect(victim);

    const error = await compactAll(inputs).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(InputUnreadableError);
    expect((error as InputUnreadableError).file).toBe(victim);
  });
});
