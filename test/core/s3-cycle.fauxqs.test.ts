/**
 * A whole compaction cycle (hourly, then daily) over the real S3Store and the real SDK against
 * fauxqs, an in-process S3 server: the lake is generated locally, uploaded with S3Store.put,
 * compacted with a local owner and execution id as the CLI does it, then every data object is
 * downloaded and its row ids counted exactly.
 *
 * fauxqs ignores If-None-Match / If-Match on writes and the ETags of DeleteObjects entries; a
 * single sequential run never depends on a condition failing, so it is a fair end-to-end check
 * of the adapter and the protocol together (the conditions are covered by the mocked tests).
 */

import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { LocalOwners, newLocalExecutionId } from '../../functions/adapters/local-owner.ts';
import { S3Store } from '../../functions/adapters/s3-store/s3-store.ts';
import { readIds, writeSampleParquet } from '../../functions/adapters/sample-data.ts';
import { runCli } from '../../functions/cli/compactor.ts';
import { type CompactorConfig, parseConfig, type TierName } from '../../functions/core/config.ts';
import { type CycleReport, runCycle } from '../../functions/core/cycle.ts';
import { systemClock } from '../../functions/core/engine.ts';
import { receiptKey } from '../../functions/core/manifest/manifest.ts';
import type { ObjectSummary } from '../../functions/core/object-store.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { type FauxqsS3, startFauxqsS3 } from '../support/fauxqs-server.ts';
import { type LakeFile, writeLake } from '../support/lake-harness.ts';

const MiB = 1024 * 1024;
const PREFIX = 'lake/';

/** Day 14: three full hours. Day 15: two hours of two files and a one-file hour (a straggler). */
const FILES: readonly LakeFile[] = [
  { key: 'db/cpu/2025/01/14/01/cpu_20250114_010500_1.parquet', rows: 31 },
  { key: 'db/cpu/2025/01/14/01/cpu_20250114_012000_2.parquet', rows: 32 },
  { key: 'db/cpu/2025/01/14/01/cpu_20250114_014000_3.parquet', rows: 33 },
  { key: 'db/cpu/2025/01/14/02/cpu_20250114_020500_4.parquet', rows: 34 },
  { key: 'db/cpu/2025/01/14/02/cpu_20250114_022000_5.parquet', rows: 35 },
  { key: 'db/cpu/2025/01/14/02/cpu_20250114_024000_6.parquet', rows: 36 },
  { key: 'db/cpu/2025/01/14/03/cpu_20250114_030500_7.parquet', rows: 37 },
  { key: 'db/cpu/2025/01/14/03/cpu_20250114_032000_8.parquet', rows: 38 },
  { key: 'db/cpu/2025/01/14/03/cpu_20250114_034000_9.parquet', rows: 39 },
  { key: 'db/mem/2025/01/15/10/mem_20250115_100500_10.parquet', rows: 40 },
  { key: 'db/mem/2025/01/15/10/mem_20250115_103000_11.parquet', rows: 41 },
  { key: 'db/mem/2025/01/15/11/mem_20250115_110500_12.parquet', rows: 42 },
  { key: 'db/mem/2025/01/15/11/mem_20250115_113000_13.parquet', rows: 43 },
  { key: 'db/mem/2025/01/15/12/mem_20250115_120500_14.parquet', rows: 44 },
];
/** Objects that are never data: they must be left exactly as they are. */
const NOT_DATA = [`${PREFIX}db/cpu/2025/01/14/01/_SUCCESS`, `${PREFIX}db/cpu/2025/01/14/01/notes.txt`];
/** A Parquet file outside the data prefix: not this lake's. */
const OUTSIDE = 'other/db/cpu/2025/01/14/01/cpu_20250114_010500_99.parquet';

let s3: FauxqsS3;
let store: S3Store;
let engine: DuckDbEngine;
let root: string;
let total: number;
let config: CompactorConfig;

async function list(prefix: string): Promise<ObjectSummary[]> {
  const out: ObjectSummary[] = [];
  for await (const o of store.list(prefix)) out.push(o);
  return out;
}

async function dataObjects(): Promise<ObjectSummary[]> {
  return (await list(PREFIX)).filter((o) => config.layout.isDataKey(o.key));
}

/** Downloads every data object and returns all row ids, ascending. */
async function downloadedIds(): Promise<bigint[]> {
  const scratch = await mkdtemp(join(root, 'download-'));
  try {
    const paths: string[] = [];
    for (const [i, o] of (await dataObjects()).entries()) {
      const path = join(scratch, `${i}.parquet`);
      const { size } = await store.getToFile(o.key, path, { ifMatch: o.etag });
      expect(size).toBe(o.size);
      paths.push(path);
    }
    return await readIds(engine, paths);
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

function expectExact(ids: readonly bigint[]): void {
  expect(ids.length).toBe(total);
  const wrong = ids.findIndex((id, i) => id !== BigInt(i + 1));
  expect(wrong, `row id ${wrong + 1} missing or duplicated`).toBe(-1);
}

async function cycle(tier: TierName, cycleConfig = config): Promise<CycleReport> {
  // As the CLI does it: a local execution id owned by this process for the cycle's duration.
  const owners = new LocalOwners();
  const executionId = newLocalExecutionId();
  const end = owners.begin(executionId);
  try {
    return await runCycle(
      {
        store,
        config: cycleConfig,
        clock: systemClock,
        engine,
        workDir: join(root, 'work', executionId.replaceAll(':', '-')),
        executionId,
        isOwnerAlive: owners.isAlive,
        concurrency: 2,
        randomHex: () => randomBytes(8).toString('hex'),
      },
      tier,
    );
  } finally {
    end();
  }
}

/** The receipt keys a cycle's jobs left, sorted. */
function receiptsOf(report: CycleReport, cycleConfig = config): string[] {
  return report.jobs
    .map(({ job }) => receiptKey(cycleConfig.layout, job.tier, job.partition, job.jobId))
    .sort();
}

async function stateKeys(prefix: string): Promise<string[]> {
  return (await list(prefix)).map((o) => o.key);
}

function outcomes(report: CycleReport): string[][] {
  return report.jobs.map(({ job, outcome }) => [
    job.partition,
    String(job.inputs.length),
    outcome.status === 'failed' ? `failed: ${outcome.error.name}: ${outcome.error.message}` : outcome.status,
  ]);
}

useEngineAndDir('s3-cycle-', (e, dir) => {
  engine = e;
  root = dir;
});

beforeAll(async () => {
  s3 = await startFauxqsS3('compaction-lake');
  // fauxqs caps a part at about 10 MiB; these files are far smaller (one PutObject each).
  store = new S3Store({ client: s3.client, bucket: s3.bucket, partSizeBytes: 5 * MiB });
  config = parseConfig({
    dataPrefix: PREFIX,
    quietSeconds: 0,
    tiers: { hourly: { minFiles: 2 } },
  });
  const local = join(root, 'generated');
  total = await writeLake(engine, local, FILES);
  for (const file of FILES) {
    await store.put(`${PREFIX}${file.key}`, { file: join(local, file.key) });
  }
  await store.put(OUTSIDE, { file: join(local, FILES[0]?.key ?? '') });
  for (const key of NOT_DATA) await store.put(key, Buffer.from(`not data: ${key}`));
}, 60_000);

afterAll(async () => {
  await s3?.stop();
});

describe('runCycle over S3Store against fauxqs (in-process S3 server, real SDK)', () => {
  it('uploaded the generated lake intact', async () => {
    expect(await dataObjects()).toHaveLength(FILES.length);
    expectExact(await downloadedIds());
  });

  it('hourly then daily compact the lake with exact row ids and leave only their receipts in _compaction/', async () => {
    const notData = await Promise.all(NOT_DATA.map((k) => store.head(k)));
    const outside = await store.head(OUTSIDE);

    const hourly = await cycle('hourly');
    expect(hourly.recovery.entries).toEqual([]);
    expect(outcomes(hourly)).toEqual([
      ['lake/db/cpu/2025/01/14/01/', '3', 'compacted'],
      ['lake/db/cpu/2025/01/14/02/', '3', 'compacted'],
      ['lake/db/cpu/2025/01/14/03/', '3', 'compacted'],
      ['lake/db/mem/2025/01/15/10/', '2', 'compacted'],
      ['lake/db/mem/2025/01/15/11/', '2', 'compacted'],
      // One file, below minFiles 2, but its day is old: the straggler flush takes it.
      ['lake/db/mem/2025/01/15/12/', '1', 'compacted'],
    ]);
    let data = await dataObjects();
    expect(data).toHaveLength(6);
    expect(data.every((o) => o.key.endsWith('_compacted.parquet'))).toBe(true);
    expectExact(await downloadedIds());
    expect(await stateKeys(`${PREFIX}_compaction/`)).toEqual(receiptsOf(hourly));

    const daily = await cycle('daily');
    expect(outcomes(daily)).toEqual([
      ['lake/db/cpu/2025/01/14/', '3', 'compacted'],
      ['lake/db/mem/2025/01/15/', '3', 'compacted'],
    ]);
    data = await dataObjects();
    expect(data.map((o) => o.key.replace(/_[^/]*$/, ''))).toEqual([
      'lake/db/cpu/2025/01/14/cpu',
      'lake/db/mem/2025/01/15/mem',
    ]);
    expect(data.every((o) => o.key.endsWith('_daily.parquet'))).toBe(true);
    expectExact(await downloadedIds());

    // Nothing left in the state root, anywhere in the bucket, but each job's receipt.
    expect((await list('')).filter((o) => o.key.includes('_compaction/')).map((o) => o.key)).toEqual(
      [...receiptsOf(hourly), ...receiptsOf(daily)].sort(),
    );
    // Outputs carry the job id as metadata and a CRC32 S3 keeps.
    for (const o of data) {
      const head = await store.head(o.key);
      expect(head?.checksum?.algorithm).toBe('CRC32');
      expect(Object.values(head?.metadata ?? {}).some((v) => /^\d{8}T\d{6}Z-[0-9a-f]+$/.test(v))).toBe(true);
    }
    // Non-data objects and files outside the prefix are untouched.
    expect(await Promise.all(NOT_DATA.map((k) => store.head(k)))).toEqual(notData);
    expect(await store.head(OUTSIDE)).toEqual(outside);

    // Running the cycles again changes nothing.
    const before = await list('');
    for (const tier of ['hourly', 'daily'] as const) {
      const again = await cycle(tier);
      expect(again.jobs).toEqual([]);
    }
    expect(await list('')).toEqual(before);
  });

  it('the CLI reads the compacted S3 lake: verify and visible --sql', async () => {
    const saved = { id: process.env.AWS_ACCESS_KEY_ID, secret: process.env.AWS_SECRET_ACCESS_KEY };
    process.env.AWS_ACCESS_KEY_ID = 'test';
    process.env.AWS_SECRET_ACCESS_KEY = 'test';
    try {
      const run = async (...argv: string[]) => {
        const out: string[] = [];
        const err: string[] = [];
        const code = await runCli(
          [
            ...argv,
            '--store',
            `s3://${s3.bucket}/${PREFIX}`,
            '--endpoint',
            s3.endpoint,
            '--region',
            'us-east-1',
          ],
          { out: (l) => out.push(l), err: (l) => err.push(l) },
        );
        return { code, text: out.join('\n'), err: err.join('\n') };
      };
      const verify = await run('verify');
      expect(verify.code, verify.err).toBe(0);
      expect(verify.text).toContain(`total: ${total} visible rows in 2 files`);
      const status = await run('status');
      expect(status.code, status.err).toBe(0);
      expect(status.text).toMatch(/^live manifests: 0$/m);
      const visible = await run('visible');
      expect(visible.code, visible.err).toBe(0);
      expect(visible.text.split('\n')).toEqual(
        (await dataObjects()).map((o) => `s3://${s3.bucket}/${o.key}`),
      );
      // --format athena writes its SymlinkTextInputFormat manifests through the S3 store, under
      // the state root only, each listing exactly its table's visible files.
      const athena = await run('visible', '--format', 'athena');
      expect(athena.code, athena.err).toBe(0);
      expect(athena.text).toContain(`LOCATION 's3://${s3.bucket}/${PREFIX}_compaction/views/athena/db/cpu/'`);
      const manifests = await list(`${PREFIX}_compaction/views/athena/`);
      expect(manifests.map((o) => o.key)).toEqual([
        `${PREFIX}_compaction/views/athena/db/cpu/symlink.txt`,
        `${PREFIX}_compaction/views/athena/db/mem/symlink.txt`,
      ]);
      const listed: string[] = [];
      for (const m of manifests)
        listed.push(...(await store.getBytes(m.key)).body.toString('utf8').split('\n').filter(Boolean));
      expect(listed).toEqual((await dataObjects()).map((o) => `s3://${s3.bucket}/${o.key}`));
    } finally {
      for (const [name, value] of [
        ['AWS_ACCESS_KEY_ID', saved.id],
        ['AWS_SECRET_ACCESS_KEY', saved.secret],
      ] as const) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
  });
});

describe('publish over S3Store against fauxqs: an output larger than one part', () => {
  it('is copied to its final key in parts (UploadPartCopy), and the hour keeps exactly its rows', async () => {
    const prefix = 'wide/';
    const wide = parseConfig({ dataPrefix: prefix, quietSeconds: 0, tiers: { hourly: { minFiles: 2 } } });
    const hour = 'db/wide/2025/01/16/05/';
    const rows = 60_000;
    const local = join(root, 'wide');
    await mkdir(local, { recursive: true });
    for (const k of [0, 1, 2]) {
      const file = join(local, `${k}.parquet`);
      // 30 columns of many distinct values: about 3.4 MB a file, so the output passes the 5 MiB part.
      await writeSampleParquet(engine, file, {
        rows,
        firstId: 1 + k * rows,
        startTimeMs: Date.UTC(2025, 0, 16, 5),
        spanMs: 3_600_000,
        extraColumns: 30,
        compression: 'zstd',
      });
      await store.put(`${prefix}${hour}wide_2025011605_${k}.parquet`, { file });
    }

    const report = await cycle('hourly', wide);
    expect(outcomes(report)).toEqual([[`${prefix}${hour}`, '3', 'compacted']]);
    const outputs = (await list(prefix)).filter((o) => wide.layout.isDataKey(o.key));
    expect(outputs).toHaveLength(1);
    const [output] = outputs;
    expect(output?.size).toBeGreaterThan(5 * MiB);
    // A multipart object's ETag: MD5 of the parts' MD5s, then "-" and the part count.
    expect(output?.etag).toMatch(/^[0-9a-f]{32}-[2-9]$/);
    const head = await store.head(output?.key ?? '');
    expect(Object.values(head?.metadata ?? {}).some((v) => /^\d{8}T\d{6}Z-[0-9a-f]+$/.test(v))).toBe(true);
    const path = join(local, 'out.parquet');
    await store.getToFile(output?.key ?? '', path);
    const ids = await readIds(engine, [path]);
    expect(ids.length).toBe(3 * rows);
    expect(ids.findIndex((id, i) => id !== BigInt(i + 1))).toBe(-1);
    expect(await stateKeys(`${prefix}_compaction/`)).toEqual(receiptsOf(report, wide));
  }, 120_000);
});
