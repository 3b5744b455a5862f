/**
 * `compactor run --store s3://bucket/prefix --endpoint …`, as a new user runs it against an
 * S3-protocol server (fauxqs in-process, the real SDK): the Map's ItemReader and ResultWriter
 * work under the store's data root, so Summary finds the results and the run succeeds with exact
 * rows. (It used to compact every partition, then fail in Summary with "Map results
 * _compaction/results/… are outside data/_compaction/results/".) Its two tables are two Map items,
 * so on more than one core the second runs in `run`'s helper thread, which opens the same store
 * from the same options. fauxqs ignores conditional writes, so the run passes the single-writer
 * opt-out: this test has one writer.
 */

import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { LocalFolderStore } from '../../functions/adapters/local-store/local-store.ts';
import { S3Store } from '../../functions/adapters/s3-store/s3-store.ts';
import { readIds } from '../../functions/adapters/sample-data.ts';
import { runCli } from '../../functions/cli/compactor.ts';
import { SPAN_CHANNEL, type SpanContext } from '../../functions/local-runner/timing-spans.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { type FauxqsS3, startFauxqsS3 } from '../support/fauxqs-server.ts';
import { writeLake } from '../support/lake-harness.ts';

const PREFIX = 'data/';
let s3: FauxqsS3;
let engine: DuckDbEngine;
let root: string;
let total: number;
const savedEnv = { ...process.env };

useEngineAndDir('prefixed-store-', (e, dir) => {
  engine = e;
  root = dir;
});

beforeAll(async () => {
  s3 = await startFauxqsS3('prefixed-lake');
  const lake = join(root, 'lake');
  total = await writeLake(engine, lake, [
    { key: 'db/cpu/2025/01/14/01/cpu_20250114_010500_1.parquet', rows: 21 },
    { key: 'db/cpu/2025/01/14/01/cpu_20250114_012000_2.parquet', rows: 22 },
    { key: 'db/cpu/2025/01/14/02/cpu_20250114_020500_3.parquet', rows: 23 },
    { key: 'db/cpu/2025/01/14/02/cpu_20250114_022000_4.parquet', rows: 24 },
    { key: 'db/mem/2025/01/14/01/mem_20250114_010500_5.parquet', rows: 25 },
    { key: 'db/mem/2025/01/14/01/mem_20250114_012000_6.parquet', rows: 26 },
    { key: 'db/mem/2025/01/14/02/mem_20250114_020500_7.parquet', rows: 27 },
    { key: 'db/mem/2025/01/14/02/mem_20250114_022000_8.parquet', rows: 28 },
  ]);
  const store = new S3Store({ client: s3.client, bucket: s3.bucket });
  for await (const o of new LocalFolderStore(lake).list('')) {
    await store.put(`${PREFIX}${o.key}`, { file: join(lake, o.key) });
  }
  // The CLI builds its own S3 client from the default credential chain.
  process.env.AWS_ACCESS_KEY_ID = 'test';
  process.env.AWS_SECRET_ACCESS_KEY = 'test';
});

afterAll(async () => {
  process.env = savedEnv;
  await s3.stop();
});

describe('compactor run on an s3:// store with a key prefix', () => {
  it('compacts, and Summary reads the Map results under the prefix: exit 0, exact rows', async () => {
    const out: string[] = [];
    const err: string[] = [];
    const spans: string[] = [];
    const onStart = (message: unknown) => spans.push((message as SpanContext).name);
    subscribe(`tracing:${SPAN_CHANNEL}:start`, onStart);
    const code = await runCli(
      [
        'run',
        '--tier',
        'hourly',
        '--store',
        `s3://${s3.bucket}/${PREFIX}`,
        '--endpoint',
        s3.endpoint,
        '--quiet',
        '0',
        '--min-files',
        '2',
        '--work-dir',
        join(root, 'work'),
        '--unsafe-single-writer-store',
        '--concurrency',
        '2',
        '--json',
      ],
      { out: (l) => out.push(l), err: (l) => err.push(l) },
    ).finally(() => unsubscribe(`tracing:${SPAN_CHANNEL}:start`, onStart));
    const result = JSON.parse(out.join('\n')) as Record<string, unknown>;
    expect(code, `${err.join('\n')}\n${out.join('\n')}`).toBe(0);
    expect(result).toMatchObject({ summary: { partitions: 4, compacted: 4, failed: 0, rows: total } });
    if (availableParallelism() > 1) expect(spans).toContain('run: child thread');

    const store = new S3Store({ client: s3.client, bucket: s3.bucket });
    const keys: string[] = [];
    for await (const o of store.list('')) keys.push(o.key);
    // Everything the run wrote is under the data root; results and plans were cleaned up.
    expect(keys.filter((k) => !k.startsWith(PREFIX))).toEqual([]);
    const data = keys.filter((k) => k.endsWith('.parquet') && !k.includes('_compaction/'));
    expect(data).toHaveLength(4);
    const paths: string[] = [];
    for (const key of data) {
      const path = join(root, `${paths.length}.parquet`);
      await store.getToFile(key, path);
      paths.push(path);
    }
    const ids = await readIds(engine, paths);
    expect(ids).toEqual(Array.from({ length: total }, (_, i) => BigInt(i + 1)));
  });
});
