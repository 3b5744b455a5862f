/**
 * DuckDB SQL text: identifiers, string literals and file paths, quoted once for every caller (the
 * engine's queries and the statements `compactor visible --format duckdb` prints).
 * https://duckdb.org/docs/stable/sql/data_types/literal_types#string-literals
 */

/** `"name"` with embedded quotes doubled: any column name is safe in SQL. */
export function quoteIdentifier(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/** `'text'` with embedded quotes doubled (DuckDB strings have no backslash escapes). */
export function quoteString(text: string): string {
  return `'${text.replaceAll("'", "''")}'`;
}

/**
 * Escapes the glob characters DuckDB's file readers expand (`*`, `?`, `[` and `]`), each bracketed
 * to match only itself, so the path names exactly one file.
 */
export function escapeGlob(path: string): string {
  return path.replace(/[*?[\]]/g, (c) => `[${c}]`);
}

/** A file path as a read_parquet / parquet_metadata argument: one file, whatever its name. */
export function parquetPath(path: string): string {
  return quoteString(escapeGlob(path));
}

/** Every row of these local files, read as compact reads them: columns matched by name, no hive columns. */
export function readAll(files: readonly string[]): string {
  return `read_parquet([${files.map(parquetPath).join(', ')}], union_by_name = true, hive_partitioning = false)`;
}
