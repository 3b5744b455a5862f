/**
 * What a Parquet reader over S3 fetches for one query, from the file's footer alone: the row
 * groups whose min/max statistics can match the query's predicate, the bloom filters of those
 * groups' equality-predicate columns (read before any data, and able to rule a group out), and the
 * byte ranges of the column chunks it needs in the groups left. hyparquet's query planner decides
 * all three (its row-group skipping on statistics and bloom filters, and its coalescing of the
 * selected chunks of a row group into ranges, merging gaps up to 8 KiB as Arrow's readers do);
 * this file adds only the footer bytes and the time order. DuckDB's Parquet reader checks a row
 * group's statistics and then its bloom filters before it reads the group's data
 * (https://motherduck.com/glossary/predicate-pushdown/): a sparse copy without the bloom filters'
 * bytes fails its Thrift decoding.
 */

import type { FileMetaData, ParquetQueryFilter } from 'hyparquet';
import { parquetMetadata } from 'hyparquet';
import { bloomEligibleColumns } from 'hyparquet/src/bloom.js';
import { parquetPlan, prefetchBloomFilters } from 'hyparquet/src/plan.js';
import type { BloomFilter } from 'hyparquet/src/types.js';

/**
 * The first read of a file: its last 64 KiB, one suffix-range GET, which also tells the object's
 * size (a larger footer takes a second GET). DuckDB's Parquet reader reads the footer first too.
 */
export const FOOTER_FETCH_BYTES = 64 * 1024;

export interface ByteRange {
  /** First byte. */
  readonly start: number;
  /** One past the last byte. */
  readonly end: number;
}

export interface ReadPlan {
  readonly rowGroups: number;
  /** Row groups whose statistics can match the filter: the ones the reader fetches. */
  readonly matched: number;
  /** The column-chunk ranges to fetch, one GET each. */
  readonly fetches: readonly ByteRange[];
}

/** The bytes a footer takes at the end of the file (metadata, its length, the magic); from any tail of 8+ bytes. */
export function footerBytes(tail: Uint8Array): number {
  if (tail.length < 8) throw new RangeError(`a Parquet tail needs 8 bytes, got ${tail.length}`);
  const view = new DataView(tail.buffer, tail.byteOffset, tail.length);
  if (view.getUint32(tail.length - 4, true) !== 0x31524150)
    throw new Error('not a Parquet file: no PAR1 at the end');
  return view.getUint32(tail.length - 8, true) + 8;
}

/** The footer's metadata, from a tail of the file holding at least footerBytes(tail). */
export function footerMetadata(tail: Uint8Array): FileMetaData {
  const copy = tail.slice();
  return parquetMetadata(copy.buffer);
}

/** Bloom filters by row group (by column), as readBloomFilters gives them. */
export type BloomFilters = Record<string, BloomFilter>[];

/** Reads the file's bytes [start, end): from what is already fetched, or with one ranged GET. */
export type RangeReader = (range: ByteRange) => Promise<Uint8Array>;

/**
 * The bloom filters a query with `filter` reads before any data: for each column of an equality
 * predicate, its bloom filter in every row group whose statistics for that column do not rule the
 * predicate out. Column by column, as DuckDB does: traced, DuckDB 1.5 read a tag's bloom filter in
 * all 20 row groups of a time-sorted file while a time range it also filtered on kept two of them.
 * `read` fetches each filter's bytes.
 */
export async function readBloomFilters(
  metadata: FileMetaData,
  filter: ParquetQueryFilter | undefined,
  byteLength: number,
  read: RangeReader,
): Promise<BloomFilters> {
  const blooms: BloomFilters = metadata.row_groups.map(() => ({}));
  if (filter === undefined) return blooms;
  const file = {
    byteLength,
    slice: async (start: number, end?: number) => {
      const bytes = await read({ start, end: end ?? byteLength });
      return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
    },
  };
  const record = filter as Record<string, unknown>;
  for (const column of bloomEligibleColumns(filter)) {
    // A column's own predicate, where the filter names it at the top; else the whole filter.
    const own = column in record ? ({ [column]: record[column] } as ParquetQueryFilter) : filter;
    const found = await prefetchBloomFilters({ file, metadata, filter: own });
    found.forEach((group, i) => {
      const bloom = group[column];
      if (bloom !== undefined) (blooms[i] as Record<string, BloomFilter>)[column] = bloom;
    });
  }
  return blooms;
}

/**
 * The row groups and column-chunk ranges a query over `columns` with `filter` reads, given the
 * bloom filters it read (readBloomFilters; none: statistics alone decide).
 */
export function planRead(
  metadata: FileMetaData,
  columns: readonly string[],
  filter: ParquetQueryFilter | undefined,
  bloomFilters?: BloomFilters,
): ReadPlan {
  const plan = parquetPlan({
    metadata,
    columns: [...columns],
    ...(filter ? { filter } : {}),
    ...(bloomFilters ? { bloomFiltersByGroup: bloomFilters } : {}),
  } as Parameters<typeof parquetPlan>[0]);
  return {
    rowGroups: metadata.row_groups.length,
    matched: new Set(plan.groups.map((g) => g.rowGroup)).size,
    fetches: plan.fetches.map((f) => ({ start: f.startByte, end: f.endByte })),
  };
}

/**
 * The parts of `ranges` before `tailStart`: bytes the footer's read already brought are not
 * fetched again (a range wholly inside the tail costs no GET).
 */
export function beforeTail(ranges: readonly ByteRange[], tailStart: number): ByteRange[] {
  return ranges
    .map((r) => ({ start: r.start, end: Math.min(r.end, tailStart) }))
    .filter((r) => r.start < r.end);
}

/**
 * Whether the row groups' `column` ranges follow one another (each group's max <= the next
 * group's min), as an output sorted by that column has: a range predicate then matches only the
 * groups it overlaps. False when a row group has no statistics for the column.
 */
export function rowGroupsOrderedBy(metadata: FileMetaData, column: string): boolean {
  let previousMax: unknown;
  for (const group of metadata.row_groups) {
    const chunk = group.columns.find((c) => c.meta_data?.path_in_schema.join('.') === column);
    const stats = chunk?.meta_data?.statistics;
    const min = stats?.min_value ?? stats?.min;
    const max = stats?.max_value ?? stats?.max;
    if (min === undefined || max === undefined) return false;
    if (previousMax !== undefined && (previousMax as number) > (min as number)) return false;
    previousMax = max;
  }
  return true;
}
