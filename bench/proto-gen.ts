import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { DuckDbEngine } from '../functions/adapters/duckdb-engine.ts';
import { writeSampleParquet } from '../functions/adapters/sample-data.ts';
const [dir, filesS, rowsS, extraS] = process.argv.slice(2);
const files = Number(filesS), rows = Number(rowsS), extra = Number(extraS ?? 0);
const engine = await DuckDbEngine.create({ threads: 2 });
const part = join(dir as string, 'db/cpu/2025/01/15/10');
await mkdir(part, { recursive: true });
const t = performance.now();
for (let i = 0; i < files; i++) {
  await writeSampleParquet(engine, join(part, `cpu_20250115_10${String(i).padStart(4,'0')}_${i}.parquet`), {
    rows, firstId: i * rows + 1, startTimeMs: Date.UTC(2025,0,15,10), spanMs: 3600000, extraColumns: extra });
}
console.log('gen ms', performance.now() - t);
