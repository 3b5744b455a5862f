/**
 * Generates a realistic Arc-layout lake of small files: several measurements, whole UTC days,
 * many files an hour, each file's rows unsorted in time (as writers flush them), ids unique
 * across the lake so row counts can be checked exactly.
 */

import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DuckDbEngine } from '../adapters/duckdb-engine/duckdb-engine.ts';
import { writeSampleParquet } from '../adapters/sample-data.ts';
import type { ObjectStore } from '../core/object-store.ts';

export interface DemoLakeSpec {
  readonly database: string;
  readonly measurements: readonly string[];
  /** First day (UTC midnight) and number of days. */
  readonly firstDay: Date;
  readonly days: number;
  /** Files in hour h of a day: varies so both the minFiles rule and straggler flush show. */
  readonly filesPerHour: (hour: number) => number;
  readonly rowsPerFile: number;
  /** Key prefix of the data root ('' or ending in '/'). */
  readonly dataPrefix: string;
}

export interface DemoLakeSummary {
  readonly files: number;
  readonly rows: number;
  readonly bytes: number;
}

const HOUR_MS = 3_600_000;

export async function generateDemoLake(
  engine: DuckDbEngine,
  store: ObjectStore,
  spec: DemoLakeSpec,
  onProgress?: (written: number, total: number) => void,
): Promise<DemoLakeSummary> {
  const scratch = await mkdtemp(join(tmpdir(), 'compactor-demo-'));
  let nextId = 1;
  let files = 0;
  let bytes = 0;
  const total =
    spec.measurements.length *
    spec.days *
    Array.from({ length: 24 }, (_, h) => spec.filesPerHour(h)).reduce((a, b) => a + b, 0);
  try {
    for (const measurement of spec.measurements) {
      for (let d = 0; d < spec.days; d++) {
        for (let h = 0; h < 24; h++) {
          const hourStart = spec.firstDay.getTime() + d * 24 * HOUR_MS + h * HOUR_MS;
          const at = new Date(hourStart);
          const folder = `${spec.dataPrefix}${spec.database}/${measurement}/${at.toISOString().slice(0, 4)}/${at.toISOString().slice(5, 7)}/${at.toISOString().slice(8, 10)}/${at.toISOString().slice(11, 13)}/`;
          const count = spec.filesPerHour(h);
          for (let f = 0; f < count; f++) {
            // Arc's name: {measurement}_{YYYYMMDD}_{HHMMSS}_{nanos}.parquet
            const flushAt = new Date(hourStart + Math.floor(((f + 1) * HOUR_MS) / (count + 1)));
            const stamp = flushAt.toISOString();
            const name = `${measurement}_${stamp.slice(0, 10).replaceAll('-', '')}_${stamp.slice(11, 19).replaceAll(':', '')}_${String(flushAt.getTime() * 1_000_000 + f)}.parquet`;
            const local = join(scratch, name);
            await writeSampleParquet(engine, local, {
              rows: spec.rowsPerFile,
              firstId: nextId,
              startTimeMs: hourStart,
              spanMs: HOUR_MS,
            });
            const { size } = await stat(local);
            await store.put(
              `${folder}${name}`,
              { file: local },
              { contentType: 'application/vnd.apache.parquet' },
            );
            await rm(local);
            nextId += spec.rowsPerFile;
            files++;
            bytes += size;
            onProgress?.(files, total);
          }
        }
      }
    }
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
  return { files, rows: nextId - 1, bytes };
}
