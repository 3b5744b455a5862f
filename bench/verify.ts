/**
 * Checks a tool's output: the row count, that rows are sorted by time across the output files in
 * order, and (when the inputs hold ids 1..N) that the ids are exactly 1..N: count, min, max, sum
 * and sum of squares all match, so a lost row and a duplicated one cannot cancel out.
 */

import type { DuckDbEngine } from '../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { parquetPath } from '../functions/adapters/duckdb-engine/duckdb-engine.ts';

export interface Verification {
  readonly rows: number;
  readonly unsorted: number;
  readonly idsExact: boolean | undefined;
}

export class VerificationError extends Error {
  override readonly name = 'VerificationError';
}

export async function verifyOutputs(
  engine: DuckDbEngine,
  label: string,
  outputs: readonly string[],
  expectedRows: number,
  checkIds: boolean,
): Promise<Verification> {
  if (outputs.length === 0) throw new VerificationError(`${label}: no output`);
  const source = `read_parquet([${outputs.map(parquetPath).join(', ')}], file_row_number = true, hive_partitioning = false)`;
  const [order] = await engine.query(
    `SELECT count(*)::BIGINT AS n, count(*) FILTER (WHERE time < prev)::BIGINT AS unsorted
       FROM (SELECT time, lag(time) OVER (ORDER BY file_index, file_row_number) AS prev FROM ${source})`,
  );
  const rows = Number(order?.n ?? -1);
  const unsorted = Number(order?.unsorted ?? -1);
  let idsExact: boolean | undefined;
  if (checkIds) {
    const [ids] = await engine.query(
      `SELECT min(id)::BIGINT AS lo, max(id)::BIGINT AS hi, sum(id::HUGEINT)::VARCHAR AS s,
              sum(id::HUGEINT * id::HUGEINT)::VARCHAR AS s2 FROM ${source}`,
    );
    const n = BigInt(expectedRows);
    idsExact =
      ids !== undefined &&
      BigInt(ids.lo as bigint) === 1n &&
      BigInt(ids.hi as bigint) === n &&
      BigInt(ids.s as string) === (n * (n + 1n)) / 2n &&
      BigInt(ids.s2 as string) === (n * (n + 1n) * (2n * n + 1n)) / 6n;
  }
  if (rows !== expectedRows) {
    throw new VerificationError(`${label}: output holds ${rows} rows, the inputs ${expectedRows}`);
  }
  if (unsorted !== 0) throw new VerificationError(`${label}: ${unsorted} rows are out of time order`);
  if (idsExact === false)
    throw new VerificationError(`${label}: the output's ids are not exactly 1..${rows}`);
  return { rows, unsorted, idsExact };
}
