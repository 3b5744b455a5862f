/**
 * How a merge over the target size splits into files, whichever engine writes it: the rows of the
 * next file from what was written so far, on row-group boundaries, so both engines' outputs are
 * sized alike.
 */

/** DuckDB's vector size: it rounds ROW_GROUP_SIZE up to a multiple of it. */
const VECTOR_SIZE = 2048;

/** The rows of a full row group as DuckDB writes it for a requested size (and polars is asked to). */
export function rowGroupRows(rowGroupSize: number): number {
  return Math.ceil(rowGroupSize / VECTOR_SIZE) * VECTOR_SIZE;
}

export interface SplitSoFar {
  /** Rows of the whole merge. */
  readonly total: number;
  /** Rows and bytes of the files written so far. */
  readonly written: number;
  readonly writtenBytes: number;
  readonly inputBytes: number;
  readonly targetFileBytes: number;
  readonly rowGroupSize: number;
}

/** The rows of the next file. */
export function nextFileRows(s: SplitSoFar): number {
  const remaining = s.total - s.written;
  // Bytes per row: the inputs' until the first output is measured, then the outputs' so far.
  const bytesPerRow = s.written === 0 ? s.inputBytes / Math.max(s.total, 1) : s.writtenBytes / s.written;
  const files = Math.max(1, Math.ceil((remaining * bytesPerRow) / s.targetFileBytes));
  const rows = Math.ceil(remaining / files);
  // Files end on row-group boundaries so only the last row group of each file is short.
  const step = rowGroupRows(s.rowGroupSize);
  return files > 1 && rows > step ? Math.min(remaining, Math.round(rows / step) * step) : rows;
}

/**
 * Writes a merge of `total` rows as files of nextFileRows each, in order: `writeFile` writes the
 * rows from `offset` and returns the file's bytes, which size the next file.
 */
export async function writeSplit(
  sizes: Omit<SplitSoFar, 'written' | 'writtenBytes'>,
  writeFile: (index: number, offset: number, rows: number) => Promise<number>,
): Promise<void> {
  let written = 0;
  let writtenBytes = 0;
  for (let index = 0; written < sizes.total || index === 0; index++) {
    const rows = nextFileRows({ ...sizes, written, writtenBytes });
    writtenBytes += await writeFile(index, written, rows);
    written += rows;
  }
}
