/**
 * Statements that make another engine read exactly the visible files (`compactor visible
 * --format`). Each engine gets the explicit file list in its own language, so no listing,
 * glob or partition discovery on the reader's side can add a file the view hides.
 *
 * One quoting helper per language; every path goes through it.
 */

import { parquetPath } from './duckdb-sql.ts';
import type { Column } from './engine.ts';
import { ConfigError } from './errors.ts';
import { compareKeys, type ObjectStore } from './object-store.ts';

export const VIEW_FORMATS = ['duckdb', 'clickhouse', 'polars', 'spark', 'athena'] as const;
export type ViewFormat = (typeof VIEW_FORMATS)[number];

/** Where the lake lives, as each engine must be told. */
export type ViewTarget =
  | {
      readonly kind: 's3';
      readonly bucket: string;
      readonly region: string;
      /** A path-style S3-compatible endpoint (`--endpoint`), else AWS's virtual-hosted one. */
      readonly endpoint?: string;
      readonly dataPrefix: string;
      readonly stateRoot: string;
    }
  | {
      readonly kind: 'local';
      /** Absolute folder of the store. */
      readonly root: string;
      readonly dataPrefix: string;
      readonly stateRoot: string;
    };

// ---- quoting, one helper per language ----

/**
 * A ClickHouse string literal: backslash is an escape character, so both it and the quote are
 * backslash-escaped. https://clickhouse.com/docs/sql-reference/syntax#string
 */
export function clickhouseString(value: string): string {
  return `'${value.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`;
}

/**
 * A Python string literal (single-quoted): backslash and quote escaped, control characters as
 * \xNN / \uNNNN escapes; everything else, non-ASCII included, as is (Python 3 source is UTF-8).
 * https://docs.python.org/3/reference/lexical_analysis.html#string-and-bytes-literals
 */
export function pythonString(value: string): string {
  let out = "'";
  for (const ch of value) {
    const code = ch.codePointAt(0) ?? 0;
    if (ch === '\\') out += '\\\\';
    else if (ch === "'") out += "\\'";
    else if (code < 0x20 || code === 0x7f) out += `\\x${code.toString(16).padStart(2, '0')}`;
    else if (code === 0x2028 || code === 0x2029) out += `\\u${code.toString(16)}`;
    else out += ch;
  }
  return `${out}'`;
}

/**
 * A Hive DDL identifier (Athena CREATE EXTERNAL TABLE): backticks, doubled inside.
 * https://docs.aws.amazon.com/athena/latest/ug/tables-databases-columns-names.html
 */
export function hiveIdentifier(name: string): string {
  return `\`${name.replaceAll('`', '``')}\``;
}

/**
 * Spark expands Hadoop glob characters in `read.parquet` paths; a backslash makes each match
 * only itself (Hadoop FileSystem.globStatus: `\c` "removes (escapes) any special meaning of
 * character c").
 * https://hadoop.apache.org/docs/stable/api/org/apache/hadoop/fs/FileSystem.html#globStatus-org.apache.hadoop.fs.Path-
 */
export function hadoopGlobLiteral(path: string): string {
  return path.replace(/[\\{}[\]*?]/g, '\\$&');
}

// ---- paths ----

/** The URL each engine reads a key at: s3://bucket/key (s3a:// for Spark), or an absolute local path. */
export function pathOf(target: ViewTarget, key: string, scheme: 's3' | 's3a' = 's3'): string {
  return target.kind === 's3' ? `${scheme}://${target.bucket}/${key}` : `${target.root}/${key}`;
}

function noLineBreaks(keys: readonly string[], format: string): void {
  const bad = keys.find((k) => /[\r\n]/.test(k));
  if (bad !== undefined) {
    throw new ConfigError(`--format ${format}: key ${JSON.stringify(bad)} holds a line break`);
  }
}

// ---- statements ----

/** DuckDB: a view over exactly these files (an empty view when there are none). */
export function duckdbStatement(paths: readonly string[], name = 'lake'): string {
  if (paths.length === 0) return `CREATE OR REPLACE VIEW ${name} AS SELECT NULL AS "time" WHERE false;`;
  const list = paths.map(parquetPath).join(',\n  ');
  return `CREATE OR REPLACE VIEW ${name} AS\nSELECT * FROM read_parquet([\n  ${list}\n], union_by_name = true);`;
}

/**
 * ClickHouse. A local folder: `file()` of the visible files themselves, as an array (a glob over
 * the folder would infer the schema from any file it matches, so one non-Parquet `.parquet`, a
 * quarantined input, fails the query; chDB reads this form in test/cli/reader-formats.test.ts,
 * glob characters in names included). S3: `s3()` over a glob of the data root, narrowed by the
 * `_path` virtual column to exactly the visible files; ClickHouse applies `_path` filters to the
 * file list before it opens a file. `_path` is `bucket/key` (no scheme, no host: scripts strip the
 * bucket from it, or prepend only the endpoint to get a URL back). The S3 text is pinned by the
 * test, not run.
 * https://clickhouse.com/docs/sql-reference/table-functions/file (path: an Array(String) for SELECT)
 * https://clickhouse.com/docs/sql-reference/table-functions/s3 (Virtual columns: `_path`)
 */
export function clickhouseStatement(target: ViewTarget, keys: readonly string[]): string {
  if (keys.length === 0) return 'SELECT NULL AS time WHERE 0;';
  if (target.kind === 'local') {
    const files = keys.map((k) => clickhouseString(`${target.root}/${k}`));
    return `SELECT *\nFROM file([\n  ${files.join(',\n  ')}\n], 'Parquet');`;
  }
  // The glob is only a superset; the root itself must hold no glob character.
  if (/[*?{}\\']/.test(target.dataPrefix)) {
    throw new ConfigError(
      `--format clickhouse: the data prefix "${target.dataPrefix}" holds a ClickHouse glob or quote character`,
    );
  }
  const base = target.endpoint
    ? `${target.endpoint.replace(/\/+$/, '')}/${target.bucket}/`
    : `https://${target.bucket}.s3.${target.region}.amazonaws.com/`;
  const source = `s3(${clickhouseString(`${base}${target.dataPrefix}**.parquet`)}, 'Parquet')`;
  const paths = keys.map((k) => clickhouseString(`${target.bucket}/${k}`));
  return `SELECT *\nFROM ${source}\nWHERE _path IN (\n  ${paths.join(',\n  ')}\n);`;
}

/**
 * Polars (Python): `scan_parquet` of the explicit list with globbing off, so a name holding
 * `*`, `?` or `[` is read as itself. https://docs.pola.rs/api/python/stable/reference/api/polars.scan_parquet.html
 */
export function polarsStatement(paths: readonly string[]): string {
  if (paths.length === 0) return 'import polars as pl\n\nlake = pl.LazyFrame()';
  return [
    'import polars as pl',
    '',
    'paths = [',
    ...paths.map((p) => `    ${pythonString(p)},`),
    ']',
    '# Files whose columns differ: pl.concat([pl.scan_parquet(p, glob=False) for p in paths], how="diagonal_relaxed")',
    'lake = pl.scan_parquet(paths, glob=False)',
  ].join('\n');
}

/**
 * Spark (PySpark): `read.parquet(*paths)` with schema merging (files may differ in columns).
 * S3 through Apache Hadoop's S3A connector is `s3a://` (https://spark.apache.org/docs/latest/cloud-integration.html);
 * Amazon EMR's EMRFS reads `s3://` (https://docs.aws.amazon.com/emr/latest/ManagementGuide/emr-plan-file-systems.html).
 * https://spark.apache.org/docs/latest/sql-data-sources-parquet.html#schema-merging
 */
export function sparkStatement(target: ViewTarget, keys: readonly string[]): string {
  if (keys.length === 0) return 'lake = spark.createDataFrame([], "time timestamp")';
  const paths = keys.map((k) =>
    target.kind === 's3' ? pathOf(target, k, 's3a') : `file://${pathOf(target, k)}`,
  );
  return [
    ...(target.kind === 's3' ? ['# Amazon EMR (EMRFS): use s3:// instead of s3a://'] : []),
    'paths = [',
    ...paths.map((p) => `    ${pythonString(hadoopGlobLiteral(p))},`),
    ']',
    'lake = spark.read.option("mergeSchema", "true").parquet(*paths)',
  ].join('\n');
}

// ---- Athena / Trino / Redshift Spectrum: SymlinkTextInputFormat manifests ----

export interface AthenaTable {
  /** The lake's table path, e.g. `mydb/cpu/`. */
  readonly table: string;
  readonly name: string;
  readonly manifestKey: string;
  /** The folder the external table's LOCATION names. */
  readonly location: string;
  readonly manifest: string;
  readonly files: readonly string[];
}

/** Where a table's manifest goes: `<stateRoot>views/athena/<table path>/symlink.txt`. */
export function athenaViewsRoot(stateRoot: string): string {
  return `${stateRoot}views/athena/`;
}

/** Longest Glue table name: "not less than 1 or more than 255 bytes" (tables-databases-columns-names.html). */
export const ATHENA_NAME_MAX_BYTES = 255;

/**
 * A table's Athena name, from its path under the data root: Athena names hold lowercase letters,
 * digits and underscores (https://docs.aws.amazon.com/athena/latest/ug/tables-databases-columns-names.html),
 * so each path level is kept, lowercased, and levels are joined by `__`; any other character is
 * escaped as `_x` and its UTF-8 bytes in hex (`mem-x` is `mem_x2dx`). `mydb/cpu_load/` is
 * `mydb__cpu_load`, `mydb_cpu/load/` is `mydb_cpu__load`. The rare paths that still meet (by case,
 * or a level that already spells an escape) are refused by athenaTables, naming both.
 */
export function athenaTableName(table: string, dataPrefix: string): string {
  const path = table.slice(dataPrefix.length).replace(/\/+$/, '');
  if (path === '') return 'lake';
  const level = (part: string) =>
    [...part.toLowerCase()]
      .map((ch) =>
        /[a-z0-9_]/.test(ch)
          ? ch
          : [...Buffer.from(ch, 'utf8')].map((b) => `_x${b.toString(16).padStart(2, '0')}`).join(''),
      )
      .join('');
  return path.split('/').map(level).join('__');
}

/**
 * One manifest per table (tables differ in columns): a text file listing one data file URL a
 * line, which SymlinkTextInputFormat reads instead of listing LOCATION.
 * https://docs.aws.amazon.com/AmazonS3/latest/userguide/storage-inventory-athena-query.html
 * (Athena reads Parquet through ParquetHiveSerDe with SymlinkTextInputFormat manifests);
 * https://docs.delta.io/latest/presto-integration.html (the same manifests for Athena, Presto
 * and Trino; Redshift Spectrum: https://docs.delta.io/latest/redshift-spectrum-integration.html)
 */
export interface AthenaTables {
  readonly tables: AthenaTable[];
  /** Tables that cannot be declared, each with why and the fix: the others are still written. */
  readonly skipped: SkippedAthenaTable[];
}

export interface SkippedAthenaTable {
  /** The lake's table path, e.g. `mydb/it's/`. */
  readonly table: string;
  readonly reason: string;
  readonly fix: string;
}

/**
 * The formats that read a table Athena cannot declare: they list its files with each path quoted
 * in their own language, and are read back over such a table in test/cli/reader-formats.test.ts.
 */
const QUOTING_FORMATS = '--format duckdb or --format polars, which quote every path';

export function athenaTables(
  target: ViewTarget,
  files: readonly { readonly key: string; readonly table: string }[],
): AthenaTables {
  noLineBreaks(
    files.map((f) => f.key),
    'athena',
  );
  const byTable = new Map<string, string[]>();
  for (const f of files) byTable.set(f.table, [...(byTable.get(f.table) ?? []), f.key]);
  const root = athenaViewsRoot(target.stateRoot);
  const tables: AthenaTable[] = [];
  const skipped: SkippedAthenaTable[] = [];
  const named = new Map<string, string>();
  for (const [table, keys] of [...byTable.entries()].sort(([a], [b]) => compareKeys(a, b))) {
    const path = table.slice(target.dataPrefix.length);
    const folder = `${root}${path}`;
    const location = pathOf(target, folder);
    const name = athenaTableName(table, target.dataPrefix);
    // The manifest folder mirrors the table path, and the DDL names it in a single-quoted literal.
    if (/['\\]/.test(location)) {
      skipped.push({
        table,
        reason: `its manifest folder ${location} holds a quote or backslash, which the single-quoted LOCATION '...' of a CREATE EXTERNAL TABLE cannot carry unescaped`,
        fix: /['\\]/.test(path)
          ? `rename the folder ${table} to one without ' or \\, or read this table with ${QUOTING_FORMATS}`
          : `move the lake to a ${target.kind === 'local' ? 'folder' : 'data prefix'} without ' or \\, or read the lake with ${QUOTING_FORMATS}`,
      });
      continue;
    }
    const bytes = Buffer.byteLength(name, 'utf8');
    if (bytes > ATHENA_NAME_MAX_BYTES) {
      skipped.push({
        table,
        reason: `its Athena name would be ${bytes} bytes, longer than Athena's ${ATHENA_NAME_MAX_BYTES}`,
        fix: `shorten the folder path ${table}, or read this table with ${QUOTING_FORMATS}`,
      });
      continue;
    }
    const other = named.get(name);
    if (other !== undefined) {
      throw new ConfigError(
        `--format athena: tables ${other} and ${table} would both be named ${name}; rename one of the folders, or read them with --format duckdb`,
      );
    }
    named.set(name, table);
    tables.push({
      table,
      name,
      manifestKey: `${folder}symlink.txt`,
      location,
      manifest: keys.map((k) => `${pathOf(target, k)}\n`).join(''),
      files: keys,
    });
  }
  return { tables, skipped };
}

/**
 * Hive DDL type names Athena uses in CREATE TABLE, from DuckDB's names for the files' types.
 * https://docs.aws.amazon.com/athena/latest/ug/data-types.html
 */
export function hiveType(column: Column): string {
  const t = column.type.toUpperCase();
  const simple: Record<string, string> = {
    BOOLEAN: 'boolean',
    TINYINT: 'tinyint',
    SMALLINT: 'smallint',
    INTEGER: 'int',
    BIGINT: 'bigint',
    FLOAT: 'float',
    DOUBLE: 'double',
    VARCHAR: 'string',
    BLOB: 'binary',
    DATE: 'date',
    TIMESTAMP: 'timestamp',
    TIMESTAMP_MS: 'timestamp',
    TIMESTAMP_NS: 'timestamp',
    TIMESTAMP_S: 'timestamp',
    'TIMESTAMP WITH TIME ZONE': 'timestamp',
  };
  const mapped = simple[t];
  if (mapped) return mapped;
  const decimal = /^DECIMAL\((\d+),\s*(\d+)\)$/.exec(t);
  if (decimal) return `decimal(${decimal[1]},${decimal[2]})`;
  throw new ConfigError(
    `--format athena: column ${JSON.stringify(column.name)} has type ${column.type}, which has no Athena DDL type here; declare the table by hand`,
  );
}

/** Columns of a table over files that may differ: the union by name, in first-seen order. */
export function unionColumns(perFile: readonly (readonly Column[])[]): Column[] {
  const out = new Map<string, Column>();
  for (const columns of perFile) {
    for (const c of columns) {
      const seen = out.get(c.name);
      if (!seen) out.set(c.name, c);
      else if (hiveTypeOrUndefined(seen) !== hiveTypeOrUndefined(c)) {
        throw new ConfigError(
          `--format athena: column ${JSON.stringify(c.name)} is ${seen.type} in one file and ${c.type} in another`,
        );
      }
    }
  }
  return [...out.values()];
}

function hiveTypeOrUndefined(c: Column): string | undefined {
  try {
    return hiveType(c);
  } catch (error) {
    if (error instanceof ConfigError) return c.type;
    throw error;
  }
}

/** The CREATE EXTERNAL TABLE over a table's manifest folder. */
export function athenaStatement(table: AthenaTable, columns: readonly Column[]): string {
  const cols = columns.map((c) => `  ${hiveIdentifier(c.name)} ${hiveType(c)}`).join(',\n');
  return [
    `CREATE EXTERNAL TABLE ${hiveIdentifier(table.name)} (`,
    cols,
    ')',
    "ROW FORMAT SERDE 'org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe'",
    "STORED AS INPUTFORMAT 'org.apache.hadoop.hive.ql.io.SymlinkTextInputFormat'",
    "OUTPUTFORMAT 'org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat'",
    `LOCATION '${table.location}';`,
  ].join('\n');
}

/**
 * Writes each table's manifest (one PUT each: a reader sees the old list or the new one) and
 * removes manifests of tables that no longer have visible files. Only under the views root.
 */
export async function writeAthenaManifests(
  store: ObjectStore,
  stateRoot: string,
  tables: readonly AthenaTable[],
): Promise<{ written: string[]; removed: string[] }> {
  const root = athenaViewsRoot(stateRoot);
  const written: string[] = [];
  for (const t of tables) {
    if (!t.manifestKey.startsWith(root)) throw new Error(`manifest ${t.manifestKey} outside ${root}`);
    await store.put(t.manifestKey, Buffer.from(t.manifest, 'utf8'), { contentType: 'text/plain' });
    written.push(t.manifestKey);
  }
  const keep = new Set(written);
  const stale: { key: string; etag: string }[] = [];
  for await (const o of store.list(root)) if (!keep.has(o.key)) stale.push({ key: o.key, etag: o.etag });
  const removed: string[] = [];
  if (stale.length > 0) {
    for (const outcome of await store.deleteMany(stale)) {
      if (outcome.status === 'deleted' || outcome.status === 'not-found') removed.push(outcome.key);
      else throw new Error(`could not remove stale manifest ${outcome.key}: ${outcome.status}`);
    }
  }
  return { written, removed };
}
