/**
 * Deterministic benchmark datasets, generated on the fly into a temp dir. Every dataset is one
 * hour partition of an Arc-layout lake (`db/cpu/2025/01/15/10/`), so the product compacts it as
 * the hourly compact Lambda would. Rows come from the project's sample generator (ids are
 * consecutive across files, times are a permutation spread over the hour, snappy inputs).
 */

import { mkdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { DuckDbEngine } from '../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { quoteString } from '../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { writeSampleParquet } from '../functions/adapters/sample-data.ts';
import { forEachLimit } from '../functions/core/limit.ts';

export const PARTITION = 'db/cpu/2025/01/15/10/';
export const HOUR_START_MS = Date.UTC(2025, 0, 15, 10);
const HOUR_MS = 3_600_000;

export interface DatasetSpec {
  readonly id: string;
  readonly title: string;
  readonly files: number;
  readonly rowsPerFile: number;
  /** Extra DOUBLE columns c0..cN on top of the sample's six (id, time, host, region, value, count). */
  readonly extraColumns: number;
}

export interface Dataset extends DatasetSpec {
  /** LocalFolderStore root holding the lake. */
  readonly storeRoot: string;
  readonly partition: string;
  /** Absolute paths of the inputs, in key order (the order the product reads them in). */
  readonly paths: readonly string[];
  readonly keys: readonly string[];
  readonly rows: number;
  readonly bytes: number;
  readonly columns: number;
}

export const DATASETS: readonly DatasetSpec[] = [
  { id: 'i', title: '(i) 200 files x 50,000 rows', files: 200, rowsPerFile: 50_000, extraColumns: 0 },
  { id: 'ii', title: '(ii) 2,000 files x 500 rows', files: 2_000, rowsPerFile: 500, extraColumns: 0 },
  {
    id: 'iii',
    title: '(iii) 50 columns, 100 files x 5,000 rows',
    files: 100,
    rowsPerFile: 5_000,
    extraColumns: 44,
  },
];

export function inputKey(index: number): string {
  return `${PARTITION}cpu_20250115_100000_${String(index).padStart(9, '0')}.parquet`;
}

/** Writes the dataset's files with a few DuckDB connections at once (generation is not measured). */
export async function generateDataset(
  engine: DuckDbEngine,
  root: string,
  spec: DatasetSpec,
): Promise<Dataset> {
  const storeRoot = join(root, spec.id);
  await mkdir(join(storeRoot, ...PARTITION.split('/')), { recursive: true });
  const keys = Array.from({ length: spec.files }, (_, i) => inputKey(i));
  const paths = keys.map((key) => join(storeRoot, ...key.split('/')));
  await forEachLimit(paths, 4, async (path, i) => {
    await writeSampleParquet(engine, path, {
      rows: spec.rowsPerFile,
      firstId: i * spec.rowsPerFile + 1,
      startTimeMs: HOUR_START_MS,
      spanMs: HOUR_MS,
      extraColumns: spec.extraColumns,
    });
  });
  let bytes = 0;
  for (const path of paths) bytes += (await stat(path)).size;
  return {
    ...spec,
    storeRoot,
    partition: PARTITION,
    paths,
    keys,
    rows: spec.files * spec.rowsPerFile,
    bytes,
    columns: 6 + spec.extraColumns,
  };
}

/**
 * The memory case: wide rows of incompressible doubles (hash-derived, so deterministic), fast to
 * generate, about `targetBytes` of Parquet in one partition.
 */
export async function generateSpillDataset(
  engine: DuckDbEngine,
  root: string,
  options: { readonly files: number; readonly rowsPerFile: number; readonly doubles: number },
): Promise<Dataset> {
  const storeRoot = join(root, 'spill');
  await mkdir(join(storeRoot, ...PARTITION.split('/')), { recursive: true });
  const keys = Array.from({ length: options.files }, (_, i) => inputKey(i));
  const paths = keys.map((key) => join(storeRoot, ...key.split('/')));
  const doubles = Array.from(
    { length: options.doubles },
    (_, k) => `(hash(id * ${k + 7}) % 1000000007)::DOUBLE / ${k + 3} AS c${k}`,
  );
  await forEachLimit(paths, 2, async (path, i) => {
    const first = i * options.rowsPerFile + 1;
    await engine.query(
      `COPY (SELECT id, make_timestamp(${HOUR_START_MS * 1000}::BIGINT + (hash(id) % ${HOUR_MS * 1000})::BIGINT) AS time,
          ['web-01', 'web-02', 'db-01'][1 + id % 3] AS host, ${doubles.join(', ')}
        FROM (SELECT ${first}::BIGINT + range AS id FROM range(${options.rowsPerFile})))
       TO ${quoteString(path)} (FORMAT parquet, COMPRESSION snappy)`,
    );
  });
  let bytes = 0;
  for (const path of paths) bytes += (await stat(path)).size;
  return {
    id: 'spill',
    title: 'memory: one partition about 2x the engine memory limit',
    files: options.files,
    rowsPerFile: options.rowsPerFile,
    extraColumns: options.doubles,
    storeRoot,
    partition: PARTITION,
    paths,
    keys,
    rows: options.files * options.rowsPerFile,
    bytes,
    columns: 3 + options.doubles,
  };
}
