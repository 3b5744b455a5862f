/**
 * Engine.columnStats for DuckDbEngine: each top-level column's nulls and min/max over every row
 * group, from the footer alone (parquet_metadata), cast back to the column's type so that min and
 * max compare as the type orders its values (not as text).
 */

import { parquetPath, quoteString } from '../../core/duckdb-sql.ts';
import type { ColumnStats } from '../../core/engine.ts';
import { describe, type WithConnection } from './duckdb-engine-sql.ts';

/** Types whose values a footer keeps per leaf field, not per column: no statistics of the column. */
const NESTED = /STRUCT|MAP|UNION|\[\]|\[\d+\]/i;

export async function columnStats(withConnection: WithConnection, file: string): Promise<ColumnStats[]> {
  const path = parquetPath(file);
  return withConnection(undefined, async (connection) => {
    const columns = await describe(connection, `read_parquet(${path}, hive_partitioning = false)`);
    const flat = columns.filter((c) => !NESTED.test(c.type));
    const byName = new Map<string, ColumnStats>();
    if (flat.length > 0) {
      // A row group of NULLs only has no min/max and needs none; any other missing one makes the range unknown.
      const unknown =
        'stats_min_value IS NULL AND (stats_null_count IS NULL OR stats_null_count < num_values)';
      const selects = flat.map((c) => {
        const typed = (field: string) => `TRY_CAST(${field} AS ${c.type})`;
        return `SELECT ${quoteString(c.name)} AS name,
            CASE WHEN count(*) = count(stats_null_count) THEN sum(stats_null_count) END AS nulls,
            CASE WHEN count(*) FILTER (WHERE ${unknown}) = 0 THEN CAST(min(${typed('stats_min_value')}) AS VARCHAR) END AS min,
            CASE WHEN count(*) FILTER (WHERE ${unknown}) = 0 THEN CAST(max(${typed('stats_max_value')}) AS VARCHAR) END AS max
          FROM m WHERE path_in_schema = ${quoteString(c.name)}`;
      });
      const rows = (
        await connection.runAndReadAll(
          `WITH m AS (SELECT path_in_schema, stats_min_value, stats_max_value, stats_null_count, num_values FROM parquet_metadata(${path}))
           ${selects.join(' UNION ALL ')}`,
        )
      ).getRowObjectsJS();
      for (const row of rows) {
        const name = String(row.name);
        byName.set(name, {
          name,
          nulls: row.nulls === null ? null : Number(row.nulls),
          min: row.min === null ? null : String(row.min),
          max: row.max === null ? null : String(row.max),
        });
      }
    }
    return columns.map((c) => byName.get(c.name) ?? { name: c.name, nulls: null, min: null, max: null });
  });
}
