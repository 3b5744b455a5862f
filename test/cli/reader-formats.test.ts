/**
 * `compactor visible --format duckdb|clickhouse|polars|spark|athena`: each prints a statement
 * that reads exactly the visible files.
 * - Engines that run here (DuckDB, nodejs-polars, ClickHouse as chDB for a local folder) read
 *   through the printed statement / file list
 *   after every single store call of an hourly and a daily job (the job paused there: what a crash
 *   at that point leaves), and see every row id exactly once. So does a read of the Athena
 *   symlink manifest's file list, which must equal the visible files. They are read again at
 *   every crash point (a crash before store call N), after each store call of the recovery that
 *   follows, and after the next cycle.
 * - Engines that cannot run here (ClickHouse's s3(), Spark, Athena) have their text pinned for a small
 *   fixed lake.
 * - Every quoting helper is checked on a key holding a quote, a space and non-ASCII; the Python
 *   literal by Python's own parser, the DuckDB one by DuckDB, and such a file is read back whole.
 */

import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { query as clickhouseQuery } from 'chdb';
import pl from 'nodejs-polars';
import { describe, expect, it } from 'vitest';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { LocalFolderStore } from '../../functions/adapters/local-store/local-store.ts';
import { runCli } from '../../functions/cli/compactor.ts';
import type { TierName } from '../../functions/core/config.ts';
import { runCycle } from '../../functions/core/cycle.ts';
import { parquetPath } from '../../functions/core/duckdb-sql.ts';
import { Layout } from '../../functions/core/layout.ts';
import { stagingRoot } from '../../functions/core/manifest/manifest.ts';
import {
  athenaStatement,
  athenaTables,
  clickhouseStatement,
  clickhouseString,
  duckdbStatement,
  hadoopGlobLiteral,
  hiveIdentifier,
  pathOf,
  polarsStatement,
  pythonString,
  sparkStatement,
  type ViewTarget,
} from '../../functions/core/reader-views.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { type CallRecord, FaultStore } from '../support/fault-store.ts';
import { HANG_GUARD_MS } from '../support/hang-guard.ts';
import {
  copyLake,
  dailyTemplate,
  hourlyTemplate,
  recoverUntilQuiet,
  sweepDeps,
  type TemplateLake,
  writeLake,
} from '../support/lake-harness.ts';

let engine: DuckDbEngine;
let workDir: string;

useEngineAndDir('reader-formats-', (e, dir) => {
  engine = e;
  workDir = dir;
});

async function cli(...args: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(args, { out: (l) => out.push(l), err: (l) => err.push(l) });
  return { code, out: out.join('\n'), err: err.join('\n') };
}

/** Row ids read through the printed DuckDB view. */
async function duckdbIds(dir: string): Promise<number[]> {
  const { code, out } = await cli('visible', '--format', 'duckdb', '--store', dir, '--layout', 'arc');
  expect(code).toBe(0);
  const name = `v${Math.random().toString(36).slice(2)}`;
  const sql = out.replace('CREATE OR REPLACE VIEW lake', `CREATE OR REPLACE TEMP VIEW ${name}`);
  const rows = await engine.query(`${sql}\nSELECT id::BIGINT AS id FROM ${name} ORDER BY id`);
  return rows.map((r) => Number(r.id));
}

/**
 * Row ids read by nodejs-polars from the polars format's file list. nodejs-polars' scanParquet
 * takes one path, so the list is scanned path by path (glob off, as the printed Python) and
 * concatenated vertically: what `scan_parquet(paths, glob=False)` reads.
 */
async function polarsIds(dir: string): Promise<number[]> {
  const { code, out } = await cli(
    'visible',
    '--format',
    'polars',
    '--json',
    '--store',
    dir,
    '--layout',
    'arc',
  );
  expect(code).toBe(0);
  const { paths, statement } = JSON.parse(out) as { paths: string[]; statement: string };
  for (const p of paths) expect(statement).toContain(pythonString(p));
  if (paths.length === 0) return [];
  const frame = pl
    .concat(
      paths.map((p) => pl.scanParquet(p, { glob: false }).select('id')),
      { how: 'vertical' },
    )
    .collectSync();
  return (frame.getColumn('id').toArray() as (number | bigint)[]).map(Number).sort((a, b) => a - b);
}

/** Row ids read by ClickHouse (chDB, ClickHouse in-process) through the printed statement. */
async function clickhouseIds(dir: string): Promise<number[]> {
  const { code, out } = await cli('visible', '--format', 'clickhouse', '--store', dir, '--layout', 'arc');
  expect(code).toBe(0);
  // An empty lake's statement has no id column: it reads nothing.
  if (out.startsWith('SELECT NULL')) return [];
  const text = clickhouseQuery(
    `SELECT toInt64(id) AS id FROM (${out.replace(/;\s*$/, '')}) ORDER BY id`,
    'CSV',
  );
  return text.split('\n').filter(Boolean).map(Number);
}

/** The Athena manifest's files (it is written by the command) and the ids read from them. */
async function athenaIds(dir: string): Promise<{ listed: string[]; visible: string[]; ids: number[] }> {
  const visible = await cli('visible', '--json', '--store', dir, '--layout', 'arc');
  const a = await cli('visible', '--format', 'athena', '--json', '--store', dir, '--layout', 'arc');
  expect(a.code, a.err).toBe(0);
  expect(a.err).toMatch(/wrote \d+ manifest\(s\) under _compaction\/views\/athena\//);
  const { tables } = JSON.parse(a.out) as { tables: { manifest: string }[] };
  const listed: string[] = [];
  for (const t of tables) {
    const text = await readFile(join(dir, t.manifest), 'utf8');
    listed.push(...text.split('\n').filter(Boolean));
  }
  const ids =
    listed.length === 0
      ? []
      : (
          await engine.query(
            `SELECT id::BIGINT AS id FROM read_parquet([${listed.map(parquetPath).join(', ')}], union_by_name = true) ORDER BY id`,
          )
        ).map((r) => Number(r.id));
  const files = (JSON.parse(visible.out) as { files: { key: string }[] }).files.map((f) => join(dir, f.key));
  return { listed: listed.sort(), visible: files.sort(), ids };
}

const range = (n: number) => Array.from({ length: n }, (_, i) => i + 1);

describe.each(['hourly', 'daily'] as const)('every --format during a %s job', (tier: TierName) => {
  it(
    'reads every row exactly once after each of the job’s store calls (DuckDB, nodejs-polars, ClickHouse, the Athena manifest)',
    async () => {
      const template: TemplateLake =
        tier === 'hourly' ? await hourlyTemplate(engine) : await dailyTemplate(engine);
      const dir = await copyLake(template);
      const want = range(template.totalRows);
      let checked = 0;
      const afterCall = async (call: CallRecord) => {
        const where = `after call ${call.n} ${call.op} ${call.key}`;
        expect(await duckdbIds(dir), `duckdb ${where}`).toEqual(want);
        expect(await polarsIds(dir), `polars ${where}`).toEqual(want);
        expect(await clickhouseIds(dir), `clickhouse ${where}`).toEqual(want);
        const athena = await athenaIds(dir);
        expect(athena.listed, `athena manifest ${where}`).toEqual(athena.visible);
        expect(athena.ids, `athena ${where}`).toEqual(want);
        checked++;
      };
      const store = new FaultStore(new LocalFolderStore(dir), { afterCall });
      const report = await runCycle(
        sweepDeps(store, template.config, engine, workDir, `formats-${tier}`, new Set()),
        tier,
      );
      expect(report.jobs.every((j) => j.outcome.status === 'compacted')).toBe(true);
      expect(checked).toBe(store.calls.length);
      expect(checked).toBeGreaterThan(20);
      await rm(dir, { recursive: true, force: true });
    },
    HANG_GUARD_MS,
  );
});

/**
 * Every crash point: the job crashes before store call N (it never calls again), then recovery
 * runs until nothing changes, then a new cycle. The formats are read after the crash, after
 * every store call of recovery, and after the new cycle.
 */
describe.each(['hourly', 'daily'] as const)(
  'every --format across crashes of a %s job and their recovery',
  (tier: TierName) => {
    it(
      'reads every row exactly once at every crash point and every recovery call',
      async () => {
        const template: TemplateLake =
          tier === 'hourly' ? await hourlyTemplate(engine) : await dailyTemplate(engine);
        const want = range(template.totalRows);
        const readAll = async (dir: string, where: string, withAthena = true) => {
          expect(await duckdbIds(dir), `duckdb ${where}`).toEqual(want);
          expect(await polarsIds(dir), `polars ${where}`).toEqual(want);
          expect(await clickhouseIds(dir), `clickhouse ${where}`).toEqual(want);
          // The Athena manifest (a write, and a footer read per file) at crash points and ends only.
          if (!withAthena) return;
          const athena = await athenaIds(dir);
          expect(athena.listed, `athena manifest ${where}`).toEqual(athena.visible);
          expect(athena.ids, `athena ${where}`).toEqual(want);
        };
        const probe = await copyLake(template);
        const clean = new FaultStore(new LocalFolderStore(probe));
        await runCycle(
          sweepDeps(clean, template.config, engine, workDir, `crash-${tier}-clean`, new Set()),
          tier,
        );
        await rm(probe, { recursive: true, force: true });
        expect(clean.calls.length).toBeGreaterThan(10);
        let reads = 0;
        for (let at = 1; at <= clean.calls.length; at++) {
          const dir = await copyLake(template);
          try {
            const inner = new LocalFolderStore(dir);
            const crashing = new FaultStore(inner, { fault: { at, kind: 'crash' } });
            await runCycle(
              sweepDeps(crashing, template.config, engine, workDir, `crash-${tier}-${at}`, new Set()),
              tier,
            ).catch((error: Error) => {
              expect(['CrashedError', 'TransientStoreError', 'RecoveryIncompleteError']).toContain(
                error.name,
              );
            });
            await readAll(dir, `after a crash before call ${at}`);
            reads++;
            const observed = new FaultStore(inner, {
              afterCall: async (call) => {
                await readAll(
                  dir,
                  `crash at ${at}, then recovery's call ${call.n} ${call.op} ${call.key}`,
                  false,
                );
                reads++;
              },
            });
            const base = sweepDeps(observed, template.config, engine, workDir, 'unused', new Set());
            await recoverUntilQuiet(base, `crash-${tier}-${at}-recover`);
            // The next cycle's calls are the clean run's states, read call by call above; here its end.
            await runCycle(
              sweepDeps(inner, template.config, engine, workDir, `crash-${tier}-${at}-again`, new Set()),
              tier,
            );
            await readAll(dir, `crash at ${at}, recovery and the next cycle done`);
            reads++;
          } finally {
            await rm(dir, { recursive: true, force: true });
          }
        }
        console.log(
          `${tier}: ${clean.calls.length} crash points, ${reads} reads (DuckDB and polars at each, the Athena manifest at crash points and ends), all exact`,
        );
      },
      HANG_GUARD_MS,
    );
  },
);

const ODD = "it's a ü file [1]*.parquet";

describe('quoting: a key with a quote, a space, non-ASCII and glob characters', () => {
  const path = `/lake/db/cpu/2025/01/15/10/${ODD}`;

  it('DuckDB: the literal parses back to the path, glob characters bracketed', async () => {
    expect(parquetPath(path)).toBe("'/lake/db/cpu/2025/01/15/10/it''s a ü file [[]1[]][*].parquet'");
    const [row] = await engine.query(`SELECT ${parquetPath(path)} AS p`);
    expect(row?.p).toBe("/lake/db/cpu/2025/01/15/10/it's a ü file [[]1[]][*].parquet");
  });

  it('Python (polars, spark): Python’s own parser reads the literal back as the path', () => {
    const tricky = `${path}\\x\n"`;
    const parsed = execFileSync(
      'python3',
      ['-c', 'import ast,sys; sys.stdout.write(ast.literal_eval(sys.argv[1]))', pythonString(tricky)],
      {
        encoding: 'utf8',
      },
    );
    expect(parsed).toBe(tricky);
    expect(pythonString(path)).toBe("'/lake/db/cpu/2025/01/15/10/it\\'s a ü file [1]*.parquet'");
  });

  it('ClickHouse: backslash and quote are backslash-escaped', () => {
    expect(clickhouseString("a'b\\c ü")).toBe("'a\\'b\\\\c ü'");
    expect(clickhouseString(path)).toBe("'/lake/db/cpu/2025/01/15/10/it\\'s a ü file [1]*.parquet'");
  });

  it('Spark: Hadoop glob characters are backslash-escaped inside the Python literal', () => {
    expect(hadoopGlobLiteral(path)).toBe("/lake/db/cpu/2025/01/15/10/it's a ü file \\[1\\]\\*.parquet");
    expect(pythonString(hadoopGlobLiteral(path))).toBe(
      "'/lake/db/cpu/2025/01/15/10/it\\'s a ü file \\\\[1\\\\]\\\\*.parquet'",
    );
  });

  it('Hive identifiers: backticks doubled', () => {
    expect(hiveIdentifier('we`ird ü')).toBe('`we``ird ü`');
  });

  it('such a file is read whole through the DuckDB view, the polars list and the Athena manifest', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'odd-lake-'));
    try {
      const total = await writeLake(engine, dir, [
        { key: `db/cpu/2025/01/15/10/${ODD}`, rows: 7 },
        { key: 'db/cpu/2025/01/15/10/plain.parquet', rows: 5 },
        // Would match the odd name's glob if the brackets and star were not escaped.
        { key: "db/cpu/2025/01/15/10/it's a ü file 1x.parquet", rows: 3 },
      ]);
      const want = range(total);
      expect(await duckdbIds(dir)).toEqual(want);
      expect(await polarsIds(dir)).toEqual(want);
      const athena = await athenaIds(dir);
      expect(athena.listed).toEqual(athena.visible);
      expect(athena.ids).toEqual(want);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('pinned statements for a small fixed lake (engines that cannot run here)', () => {
  const s3: ViewTarget = {
    kind: 's3',
    bucket: 'my-lake',
    region: 'eu-west-1',
    dataPrefix: 'data/',
    stateRoot: 'data/_compaction/',
  };
  const keys = ['data/db/cpu/2025/01/15/10/a.parquet', "data/db/cpu/2025/01/15/cpu_20250115_it's.parquet"];

  it('ClickHouse: s3() over a glob of the data root, _path IN the bucket/key of each visible file', () => {
    expect(clickhouseStatement(s3, keys)).toBe(
      [
        'SELECT *',
        "FROM s3('https://my-lake.s3.eu-west-1.amazonaws.com/data/**.parquet', 'Parquet')",
        'WHERE _path IN (',
        "  'my-lake/data/db/cpu/2025/01/15/10/a.parquet',",
        "  'my-lake/data/db/cpu/2025/01/15/cpu_20250115_it\\'s.parquet'",
        ');',
      ].join('\n'),
    );
    expect(clickhouseStatement({ ...s3, endpoint: 'http://localhost:9000/' }, keys.slice(0, 1))).toBe(
      [
        'SELECT *',
        "FROM s3('http://localhost:9000/my-lake/data/**.parquet', 'Parquet')",
        'WHERE _path IN (',
        "  'my-lake/data/db/cpu/2025/01/15/10/a.parquet'",
        ');',
      ].join('\n'),
    );
    expect(
      clickhouseStatement({ kind: 'local', root: '/srv/lake', dataPrefix: '', stateRoot: '_compaction/' }, [
        'db/cpu/2025/01/15/10/a.parquet',
      ]),
    ).toBe(
      ['SELECT *', 'FROM file([', "  '/srv/lake/db/cpu/2025/01/15/10/a.parquet'", "], 'Parquet');"].join(
        '\n',
      ),
    );
  });

  it('Spark: read.parquet(*paths) over s3a:// URLs, mergeSchema on', () => {
    expect(sparkStatement(s3, keys)).toBe(
      [
        '# Amazon EMR (EMRFS): use s3:// instead of s3a://',
        'paths = [',
        "    's3a://my-lake/data/db/cpu/2025/01/15/10/a.parquet',",
        "    's3a://my-lake/data/db/cpu/2025/01/15/cpu_20250115_it\\'s.parquet',",
        ']',
        'lake = spark.read.option("mergeSchema", "true").parquet(*paths)',
      ].join('\n'),
    );
  });

  it('Polars: scan_parquet of the s3:// list, glob off', () => {
    expect(polarsStatement(keys.map((k) => pathOf(s3, k)))).toBe(
      [
        'import polars as pl',
        '',
        'paths = [',
        "    's3://my-lake/data/db/cpu/2025/01/15/10/a.parquet',",
        "    's3://my-lake/data/db/cpu/2025/01/15/cpu_20250115_it\\'s.parquet',",
        ']',
        '# Files whose columns differ: pl.concat([pl.scan_parquet(p, glob=False) for p in paths], how="diagonal_relaxed")',
        'lake = pl.scan_parquet(paths, glob=False)',
      ].join('\n'),
    );
  });

  it('DuckDB: read_parquet of the s3:// list', () => {
    expect(duckdbStatement(keys.map((k) => pathOf(s3, k)))).toBe(
      [
        'CREATE OR REPLACE VIEW lake AS',
        'SELECT * FROM read_parquet([',
        "  's3://my-lake/data/db/cpu/2025/01/15/10/a.parquet',",
        "  's3://my-lake/data/db/cpu/2025/01/15/cpu_20250115_it''s.parquet'",
        '], union_by_name = true);',
      ].join('\n'),
    );
  });

  it('Athena: one symlink manifest per table under the state root, and its CREATE EXTERNAL TABLE', () => {
    const { tables, skipped } = athenaTables(s3, [
      { key: keys[0] as string, table: 'data/db/cpu/' },
      { key: keys[1] as string, table: 'data/db/cpu/' },
      { key: 'data/db/mem-x/2025/01/15/10/m.parquet', table: 'data/db/mem-x/' },
    ]);
    expect(skipped).toEqual([]);
    expect(tables.map((t) => [t.name, t.manifestKey, t.location, t.manifest])).toEqual([
      [
        'db__cpu',
        'data/_compaction/views/athena/db/cpu/symlink.txt',
        's3://my-lake/data/_compaction/views/athena/db/cpu/',
        "s3://my-lake/data/db/cpu/2025/01/15/10/a.parquet\ns3://my-lake/data/db/cpu/2025/01/15/cpu_20250115_it's.parquet\n",
      ],
      [
        'db__mem_x2dx',
        'data/_compaction/views/athena/db/mem-x/symlink.txt',
        's3://my-lake/data/_compaction/views/athena/db/mem-x/',
        's3://my-lake/data/db/mem-x/2025/01/15/10/m.parquet\n',
      ],
    ]);
    expect(
      athenaStatement(tables[0] as (typeof tables)[number], [
        { name: 'id', type: 'BIGINT' },
        { name: 'time', type: 'TIMESTAMP WITH TIME ZONE' },
        { name: 'host', type: 'VARCHAR' },
        { name: 'value', type: 'DOUBLE' },
        { name: 'count', type: 'INTEGER' },
        { name: 'price', type: 'DECIMAL(18,3)' },
      ]),
    ).toBe(
      [
        'CREATE EXTERNAL TABLE `db__cpu` (',
        '  `id` bigint,',
        '  `time` timestamp,',
        '  `host` string,',
        '  `value` double,',
        '  `count` int,',
        '  `price` decimal(18,3)',
        ')',
        "ROW FORMAT SERDE 'org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe'",
        "STORED AS INPUTFORMAT 'org.apache.hadoop.hive.ql.io.SymlinkTextInputFormat'",
        "OUTPUTFORMAT 'org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat'",
        "LOCATION 's3://my-lake/data/_compaction/views/athena/db/cpu/';",
      ].join('\n'),
    );
  });

  it('Athena names are escaped, not collapsed: tables whose names used to meet get their own', () => {
    const table = (path: string) => ({ key: `data/${path}2025/01/15/10/a.parquet`, table: `data/${path}` });
    const { tables } = athenaTables(s3, [
      table('mydb/cpu_load/'),
      table('mydb_cpu/load/'),
      table('mydb/température/'),
      table('mydb/temp_rature/'),
      table('mydb/温度/'),
    ]);
    expect(Object.fromEntries(tables.map((t) => [t.table.slice('data/'.length), t.name]))).toEqual({
      'mydb/cpu_load/': 'mydb__cpu_load',
      'mydb_cpu/load/': 'mydb_cpu__load',
      'mydb/température/': 'mydb__temp_xc3_xa9rature',
      'mydb/temp_rature/': 'mydb__temp_rature',
      'mydb/温度/': 'mydb___xe6_xb8_xa9_xe5_xba_xa6',
    });
    expect(new Set(tables.map((t) => t.name)).size).toBe(5);
  });

  it('Athena refuses two tables that still meet in one name, naming both paths', () => {
    const table = (path: string) => ({ key: `data/${path}a.parquet`, table: `data/${path}` });
    expect(() => athenaTables(s3, [table('db/CPU/'), table('db/cpu/')])).toThrow(
      '--format athena: tables data/db/CPU/ and data/db/cpu/ would both be named db__cpu; rename one of the folders, or read them with --format duckdb',
    );
  });

  it('Athena skips a table it cannot declare (a quote in its LOCATION, a long name), with the reason and the fix, and declares the rest', () => {
    const table = (path: string) => ({ key: `data/${path}a.parquet`, table: `data/${path}` });
    const { tables, skipped } = athenaTables(s3, [
      table("db/it's/"),
      table('db/cpu/'),
      table(`db/${'x'.repeat(300)}/`),
    ]);
    expect(tables.map((t) => t.table)).toEqual(['data/db/cpu/']);
    expect(skipped).toEqual([
      {
        table: "data/db/it's/",
        reason:
          "its manifest folder s3://my-lake/data/_compaction/views/athena/db/it's/ holds a quote or backslash, which the single-quoted LOCATION '...' of a CREATE EXTERNAL TABLE cannot carry unescaped",
        fix: "rename the folder data/db/it's/ to one without ' or \\, or read this table with --format duckdb or --format polars, which quote every path",
      },
      {
        table: `data/db/${'x'.repeat(300)}/`,
        reason: "its Athena name would be 304 bytes, longer than Athena's 255",
        fix: `shorten the folder path data/db/${'x'.repeat(300)}/, or read this table with --format duckdb or --format polars, which quote every path`,
      },
    ]);
  });

  it('Athena: a quote in the lake’s own folder, not a table’s, names moving the lake as the fix', () => {
    const quoted: ViewTarget = {
      kind: 'local',
      root: "/srv/o'brien",
      dataPrefix: '',
      stateRoot: '_compaction/',
    };
    const { tables, skipped } = athenaTables(quoted, [{ key: 'db/cpu/a.parquet', table: 'db/cpu/' }]);
    expect(tables).toEqual([]);
    expect(skipped.map((s) => s.fix)).toEqual([
      "move the lake to a folder without ' or \\, or read the lake with --format duckdb or --format polars, which quote every path",
    ]);
  });

  it('Athena refuses a key with a line break (it would split a manifest line)', () => {
    expect(() => athenaTables(s3, [{ key: 'data/db/cpu/a\nb.parquet', table: 'data/db/cpu/' }])).toThrow(
      /line break/,
    );
  });
});

describe('an empty lake', () => {
  const local: ViewTarget = { kind: 'local', root: '/srv/lake', dataPrefix: '', stateRoot: '_compaction/' };

  it('prints statements that read nothing, and athena refuses (no columns to declare)', async () => {
    expect(clickhouseStatement(local, [])).toBe('SELECT NULL AS time WHERE 0;');
    expect(polarsStatement([])).toBe('import polars as pl\n\nlake = pl.LazyFrame()');
    expect(sparkStatement(local, [])).toBe('lake = spark.createDataFrame([], "time timestamp")');
    const dir = await mkdtemp(join(tmpdir(), 'empty-lake-'));
    try {
      const duck = await cli('visible', '--format', 'duckdb', '--store', dir);
      // The printed view, then a count through it, in one DuckDB call (a temp view lives in its connection).
      const sql = duck.out.replace('CREATE OR REPLACE VIEW lake', 'CREATE OR REPLACE TEMP VIEW empty_lake');
      expect(await engine.query(`${sql}\nSELECT count(*)::INTEGER AS n FROM empty_lake`)).toEqual([{ n: 0 }]);
      const athena = await cli('visible', '--format', 'athena', '--store', dir);
      expect(athena.code).toBe(2);
      expect(athena.err).toMatch(/no visible files/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('the visible command', () => {
  it('--sql prints what --format duckdb prints; an unknown or conflicting format is a usage error', async () => {
    const template = await hourlyTemplate(engine);
    const dir = await copyLake(template);
    try {
      const sql = await cli('visible', '--sql', '--store', dir);
      const duck = await cli('visible', '--format', 'duckdb', '--store', dir);
      expect(sql.code).toBe(0);
      expect(sql.out).toBe(duck.out);
      expect((await cli('visible', '--format', 'oracle', '--store', dir)).code).toBe(2);
      const both = await cli('visible', '--sql', '--format', 'spark', '--store', dir);
      expect(both.code).toBe(2);
      expect(both.err).toMatch(/--sql is --format duckdb/);
    } finally {
      await rm(dir, { recursive: true, force: true });
      await rm(template.dir, { recursive: true, force: true });
    }
  });

  it('--format athena skips a table whose path holds a quote, naming it, why and the fix, declares the rest, and exits 1', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'quoted-table-lake-'));
    try {
      const total = await writeLake(engine, dir, [
        { key: 'mydb/cpu/2025/01/15/10/cpu_20250115_100500_1.parquet', rows: 4 },
        { key: "mydb/it's/2025/01/15/10/its_20250115_100500_2.parquet", rows: 3 },
      ]);
      const a = await cli('visible', '--format', 'athena', '--store', dir, '--layout', 'arc');
      expect(a.code, a.err).toBe(1);
      expect(a.err).toContain(
        `warning: --format athena skips table mydb/it's/: its manifest folder ${dir}/_compaction/views/athena/mydb/it's/ holds a quote or backslash, which the single-quoted LOCATION '...' of a CREATE EXTERNAL TABLE cannot carry unescaped; rename the folder mydb/it's/ to one without ' or \\, or read this table with --format duckdb or --format polars, which quote every path`,
      );
      expect(a.out).toMatch(/^CREATE EXTERNAL TABLE `mydb__cpu` \(\n {2}`id` bigint,/);
      expect(a.out).not.toContain("it's");
      expect(a.out).not.toContain('mydb__it');
      const json = await cli('visible', '--format', 'athena', '--json', '--store', dir, '--layout', 'arc');
      expect(json.code, json.err).toBe(1);
      const parsed = JSON.parse(json.out) as {
        tables: { table: string; manifest: string }[];
        skipped: { table: string; fix: string }[];
      };
      expect(parsed.tables.map((t) => t.table)).toEqual(['mydb/cpu/']);
      expect(parsed.skipped.map((s) => s.table)).toEqual(["mydb/it's/"]);
      expect(parsed.skipped[0]?.fix).toMatch(/^rename the folder mydb\/it's\/ to one without ' or \\/);
      const manifest = await readFile(join(dir, parsed.tables[0]?.manifest ?? ''), 'utf8');
      expect(manifest).toBe(`${dir}/mydb/cpu/2025/01/15/10/cpu_20250115_100500_1.parquet\n`);
      // The formats the fix names read the skipped table's rows too.
      expect(await duckdbIds(dir)).toEqual(range(total));
      expect(await polarsIds(dir)).toEqual(range(total));
      expect(await clickhouseIds(dir)).toEqual(range(total));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('ClickHouse reads exactly the visible files beside a cut-off `.parquet` in staging', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'staging-garbage-lake-'));
    try {
      const total = await writeLake(engine, dir, [
        { key: 'mydb/cpu/2025/01/15/10/cpu_20250115_100500_1.parquet', rows: 4 },
        { key: 'mydb/cpu/2025/01/15/10/cpu_20250115_101500_2.parquet', rows: 3 },
      ]);
      // What a crash mid-upload leaves: not visible, and not Parquet. A glob over the lake would
      // try it for the schema and fail the whole query.
      const staged = join(dir, stagingRoot(Layout.fromName('arc')), 'job/cut.parquet');
      await mkdir(dirname(staged), { recursive: true });
      await writeFile(staged, 'PAR1 cut off');
      expect(await clickhouseIds(dir)).toEqual(range(total));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('only --format athena writes, and only under <stateRoot>views/athena/; a vanished table’s manifest is removed', async () => {
    const template = await hourlyTemplate(engine);
    const dir = await copyLake(template);
    const store = new LocalFolderStore(dir);
    const listAll = async () => {
      const keys: string[] = [];
      for await (const o of store.list('')) keys.push(`${o.key}\0${o.etag}`);
      return keys;
    };
    try {
      const before = await listAll();
      for (const format of ['duckdb', 'clickhouse', 'polars', 'spark']) {
        const r = await cli('visible', '--format', format, '--store', dir);
        expect(r.code, r.err).toBe(0);
        expect(r.err).toBe('');
      }
      expect(await listAll()).toEqual(before);
      await store.put('_compaction/views/athena/db/gone/symlink.txt', Buffer.from('s3://x/y.parquet\n'));
      const a = await cli('visible', '--format', 'athena', '--store', dir);
      expect(a.code, a.err).toBe(0);
      expect(a.err).toMatch(
        /wrote 1 manifest\(s\) under _compaction\/views\/athena\/ and removed 1 stale one/,
      );
      const after = await listAll();
      const added = after.filter((k) => !before.includes(k)).map((k) => k.split('\0')[0]);
      expect(added).toEqual(['_compaction/views/athena/db/cpu/symlink.txt']);
      expect(before.filter((k) => !after.includes(k))).toEqual([]);
      expect(a.out).toMatch(/^CREATE EXTERNAL TABLE `db__cpu` \(\n {2}`id` bigint,\n {2}`time` timestamp/);
    } finally {
      await rm(dir, { recursive: true, force: true });
      await rm(template.dir, { recursive: true, force: true });
    }
  });
});
