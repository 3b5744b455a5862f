/**
 * DuckDbEngine.compact: the merge SQL (casts to the unified schema, the sort, dedup, footer
 * metadata) and its outputs. Inputs that fit the target are one order-preserving COPY; larger
 * jobs sort once into a temp table and COPY one rowid range per output, sized by the bytes per
 * row measured so far. A failed statement is mapped to the input it could not read.
 */

import { mkdirSync, statSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { DuckDBConnection, JS } from '@duckdb/node-api';
import { escapeGlob, parquetPath, quoteIdentifier, quoteString } from '../../core/duckdb-sql.ts';
import type { CompactOutput, CompactRequest, MergeWriter } from '../../core/engine.ts';
import { InputUnreadableError } from '../../core/errors.ts';
import { writeSplit } from '../../core/output-split.ts';
import { readFooter } from '../parquet-footer.ts';
import { dedupColumns, dedupSelect, FILE_INDEX } from './duckdb-engine-dedup.ts';
import { enumTypes } from './duckdb-engine-enums.ts';
import { describe, readAll, shortReason, type WithConnection } from './duckdb-engine-sql.ts';

/** The inputs' bytes: stat is a metadata call, made synchronously (cheaper than a thread-pool hop each). */
function totalBytes(inputs: readonly string[]): number {
  return inputs.reduce((sum, input) => sum + statSync(input).size, 0);
}

/** The request's own checks, whichever engine writes it. */
function checkRequest({ inputs, columns, targetFileBytes, rowGroupSize, dedup }: CompactRequest): void {
  if (inputs.length === 0) throw new RangeError('compact needs at least one input');
  if (columns.length === 0) throw new RangeError('compact needs at least one column');
  if (dedup) dedupColumns(columns, dedup);
  if (!Number.isSafeInteger(rowGroupSize) || rowGroupSize < 1) {
    throw new RangeError(`rowGroupSize must be a positive integer, got ${rowGroupSize}`);
  }
  if (!(targetFileBytes > 0)) {
    throw new RangeError(`targetFileBytes must be positive, got ${targetFileBytes}`);
  }
}

export async function compact(
  withConnection: WithConnection,
  request: CompactRequest,
): Promise<CompactOutput[]> {
  checkRequest(request);
  const { inputs, columns, outputDir, targetFileBytes, rowGroupSize, signal, dedup } = request;

  const names = new Set(columns.map((c) => c.name.toLowerCase()));
  const sortKeys = request.sortBy.filter((key) => names.has(key.toLowerCase()));
  const orderBy = sortKeys.map((key) => `${quoteIdentifier(key)} ASC NULLS LAST`);
  // Equal sort keys keep the inputs' order (DuckDB's parallel sort alone does not): rows that
  // arrived together stay together, which makes the output deterministic and much smaller.
  if (orderBy.length > 0 && !names.has(FILE_INDEX)) orderBy.push(FILE_INDEX);
  const source = readAll(inputs);
  const copyOptions = `FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE ${rowGroupSize}${kvMetadataOption(request.metadata)}`;
  const outputPath = (index: number) => join(outputDir, `part-${String(index).padStart(5, '0')}.parquet`);

  const inputBytes = totalBytes(inputs);
  mkdirSync(outputDir, { recursive: true });

  return withConnection(signal, async (connection) => {
    const classify = async (error: unknown) => classifyCompactError(connection, error, inputs, signal);
    const run = async (sql: string) => {
      signal?.throwIfAborted();
      try {
        await connection.run(sql);
      } catch (error) {
        throw await classify(error);
      }
    };
    const read = async (sql: string): Promise<Record<string, JS>[]> => {
      signal?.throwIfAborted();
      try {
        return (await connection.runAndReadAll(sql)).getRowObjectsJS();
      } catch (error) {
        throw await classify(error);
      }
    };
    const enums = await enumTypes(read, source, columns, sortKeys, inputBytes);
    const casts = columns
      .map(
        (c) =>
          `CAST(${quoteIdentifier(c.name)} AS ${enums.get(c.name) ?? c.type}) AS ${quoteIdentifier(c.name)}`,
      )
      .join(', ');
    const plain = `SELECT ${casts} FROM ${source}`;
    const sorted = orderBy.length > 0 ? `${plain} ORDER BY ${orderBy.join(', ')}` : plain;
    const select = dedup ? dedupSelect(casts, columns, source, sortKeys, dedup) : sorted;
    const paths: string[] = [];
    // Outputs are usually no larger than the inputs (same data, sorted, ZSTD): when the inputs fit
    // the target, one direct COPY is the whole job and costs what a raw DuckDB COPY costs.
    if (inputBytes <= targetFileBytes) {
      paths.push(outputPath(0));
      await run(`COPY (${select}) TO ${quoteString(outputPath(0))} (${copyOptions})`);
    } else {
      await run(`CREATE TEMP TABLE compact_sorted AS ${select}`);
      const total = Number(
        (await connection.runAndReadAll('SELECT count(*) FROM compact_sorted')).getRows()[0]?.[0],
      );
      await writeSplit({ total, inputBytes, targetFileBytes, rowGroupSize }, async (index, offset, rows) => {
        const path = outputPath(index);
        paths.push(path);
        await run(
          `COPY (SELECT * FROM compact_sorted WHERE rowid >= ${offset} AND rowid < ${offset + rows}) ` +
            `TO ${quoteString(path)} (${copyOptions})`,
        );
        return (await stat(path)).size;
      });
      // The connection outlives the call (it goes back to the engine's idle ones): the sorted
      // rows' memory is freed now, and the next compact on it can make the table again.
      await run('DROP TABLE compact_sorted');
    }
    return outputsOf(connection, paths);
  });
}

/**
 * The outputs with their footers' row counts (what the core verifies) and sizes. A footer is read
 * in JS (parquet-footer.ts: a tenth of a DuckDB metadata query, and a reader other than the
 * writer), by DuckDB where it does not decode there.
 */
async function outputsOf(connection: DuckDBConnection, paths: readonly string[]): Promise<CompactOutput[]> {
  const outputs: CompactOutput[] = [];
  for (const path of paths) {
    const footer = await readFooter(path);
    if (footer !== undefined) {
      outputs.push({ path, rows: footer.rows, bytes: footer.fileBytes });
      continue;
    }
    const rows = (
      await connection.runAndReadAll(`SELECT num_rows FROM parquet_file_metadata(${parquetPath(path)})`)
    ).getRows()[0]?.[0];
    outputs.push({ path, rows: Number(rows), bytes: (await stat(path)).size });
  }
  return outputs;
}

/**
 * compact written by another engine: its outputs' row counts come from their footers, read as
 * DuckDB's own outputs' are (outputsOf), and their columns must read back in DuckDB as exactly the
 * requested names and types, or the job fails. A failed write is mapped to the input DuckDB
 * cannot read, if any, as a failed COPY is.
 */
export async function compactWith(
  withConnection: WithConnection,
  writer: MergeWriter,
  request: CompactRequest,
): Promise<CompactOutput[]> {
  checkRequest(request);
  const { inputs, columns, signal } = request;
  let paths: string[];
  try {
    paths = await writer.write(request, totalBytes(inputs));
  } catch (error) {
    if (signal?.aborted) throw signal.reason;
    throw await withConnection(signal, (connection) => unreadableInput(connection, inputs, signal, error));
  }
  signal?.throwIfAborted();
  return withConnection(signal, async (connection) => {
    for (const path of paths) {
      const found = await describe(connection, readAll([path]));
      const wanted = columns.map((c) => `${c.name} ${c.type}`).join(', ');
      const got = found.map((c) => `${c.name} ${c.type}`).join(', ');
      if (got !== wanted) {
        throw new Error(
          `the ${writer.name} merge wrote ${path} with columns (${got}), not the requested (${wanted}); nothing was staged`,
        );
      }
    }
    return outputsOf(connection, paths);
  });
}

/**
 * Maps a failed compact statement to the error the caller can act on. A damaged data page only
 * shows when it is read (inspect reads footers); the core quarantines an InputUnreadableError.
 */
async function classifyCompactError(
  connection: DuckDBConnection,
  error: unknown,
  inputs: readonly string[],
  signal: AbortSignal | undefined,
): Promise<unknown> {
  if (signal?.aborted) return signal.reason;
  const message = error instanceof Error ? error.message : String(error);
  if (!isCorruptionError(error)) return error;
  const named = inputs.filter((input) => message.includes(input) || message.includes(escapeGlob(input)));
  const [only] = named;
  if (only !== undefined && named.length === 1) {
    return new InputUnreadableError(only, shortReason(error), { cause: error });
  }
  // Page-header damage fails without a file name: read each input in full to find the culprit.
  // Only on this failure path, so the extra read costs nothing on success.
  return unreadableInput(connection, inputs, signal, error);
}

/**
 * The InputUnreadableError of the first input DuckDB cannot read in full, or `error` when every
 * input reads (or one fails for another reason than its bytes).
 */
async function unreadableInput(
  connection: DuckDBConnection,
  inputs: readonly string[],
  signal: AbortSignal | undefined,
  error: unknown,
): Promise<unknown> {
  for (const input of inputs) {
    signal?.throwIfAborted();
    try {
      await connection.run(
        `SELECT sum(hash(COLUMNS(*))) FROM read_parquet(${parquetPath(input)}, hive_partitioning = false)`,
      );
    } catch (readError) {
      if (signal?.aborted) return signal.reason;
      if (!isCorruptionError(readError)) return error;
      return new InputUnreadableError(input, shortReason(readError), { cause: readError });
    }
  }
  return error;
}

/** DuckDB's error classes for bytes it cannot decode (not memory, interrupts or binder errors). */
function isCorruptionError(error: unknown): boolean {
  const message = error instanceof Error ? error.message : String(error);
  return /^(Invalid Input|Invalid|Serialization|IO) Error/.test(message);
}

/**
 * The COPY option that writes footer key-value metadata (KV_METADATA, a struct of key: value;
 * https://duckdb.org/docs/current/data/parquet/overview, "Writing to Parquet Files"), or ''.
 */
function kvMetadataOption(metadata: Readonly<Record<string, string>> | undefined): string {
  const entries = Object.entries(metadata ?? {});
  if (entries.length === 0) return '';
  return `, KV_METADATA {${entries.map(([k, v]) => `${quoteIdentifier(k)}: ${quoteString(v)}`).join(', ')}}`;
}
