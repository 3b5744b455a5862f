/**
 * What readers gain: two DuckDB queries over one Arc hour on the latency-true S3 path (fauxqs
 * behind bench/s3-shaper.ts), before and after the product compacts it.
 *
 * DuckDB's httpfs extension cannot be installed here, so the reader is modelled in two measured
 * parts. The fetch: as DuckDB over httpfs does, one GET per file for its footer (a suffix range
 * of 64 KiB), then, for the row groups whose statistics can match the query, one ranged GET per
 * run of the column chunks it needs (reader-plan.ts; hyparquet's planner), less what the footer's
 * read already brought; READER_CONCURRENCY in flight, through the AWS SDK against the shaped
 * server. httpfs sends a HEAD per file first unless a glob's LIST gave the sizes
 * (https://github.com/duckdb/duckdb-httpfs/pull/45, /pull/376): neither side pays a HEAD here,
 * and a glob's one LIST is not counted. The query: DuckDB (@duckdb/node-api) runs it on local
 * sparse copies holding only the fetched bytes (zeros elsewhere), and its answer must equal the
 * answer over the whole files, so the fetch cannot have left out a byte DuckDB reads.
 * A query's time is the fetch's wall time plus DuckDB's; a real scan overlaps the two.
 *
 * The compaction is the product's own chain over the same S3 path (bench/s3-worker.ts, as the s3
 * section runs it), and its outputs are verified as there.
 */

import { mkdir, open, readFile, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { GetObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import type { ParquetQueryFilter } from 'hyparquet';
import type { DuckDbEngine } from '../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { quoteString } from '../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { createS3Client } from '../functions/adapters/s3-store/s3-store.ts';
import { DEFAULT_HOSTS } from '../functions/adapters/sample-data.ts';
import { forEachLimit } from '../functions/core/limit.ts';
import type { InputRef } from '../functions/core/manifest/manifest.ts';
import { generateDataset, HOUR_START_MS } from './datasets.ts';
import {
  type ByteRange,
  beforeTail,
  FOOTER_FETCH_BYTES,
  footerBytes,
  footerMetadata,
  planRead,
  readBloomFilters,
  rowGroupsOrderedBy,
} from './reader-plan.ts';
import { f1, f2, int, MIB, table } from './report-format.ts';
import {
  arcHourCase,
  deleteAll,
  type LatencyTrueS3,
  runChain,
  S3_BYTES_PER_SECOND,
  S3_FIRST_BYTE_LATENCY_MS,
  startLatencyTrueS3,
} from './s3-latency.ts';
import { verifyOutputs } from './verify.ts';

/**
 * GETs in flight at once: DuckDB scans with one thread per core and each thread waits on its own
 * read, so a reader on an 8-vCPU machine has about 8. More in flight helps the many small inputs
 * most, so this does not favour the compacted side.
 */
export const READER_CONCURRENCY = 8;

/** The gain the issue asks of an Arc hour, per query. */
export const READERS_GAIN_TARGET = 10;

/** Where the reader finds the inputs before compaction (the partition itself is compacted away). */
const BEFORE_PREFIX = 'readers-before/';

export interface ReaderQuery {
  readonly id: string;
  readonly title: string;
  /** The columns the query reads. */
  readonly columns: readonly string[];
  /** The predicate as the planner prunes on it; the SQL's WHERE says the same. */
  readonly filter?: ParquetQueryFilter;
  readonly sql: (paths: readonly string[]) => string;
}

/** The two queries: five minutes of one host, and a per-host aggregate over the whole hour. */
export function readerQueries(): ReaderQuery[] {
  const from = HOUR_START_MS + 20 * 60_000;
  const to = from + 5 * 60_000;
  const host = DEFAULT_HOSTS[0] as string;
  const source = (paths: readonly string[]) => `read_parquet([${paths.map(quoteString).join(', ')}])`;
  const micros = (ms: number) => `make_timestamp(${ms * 1000}::BIGINT)`;
  return [
    {
      id: 'range-tag',
      title: `time range + tag: 5 minutes of host ${host}`,
      columns: ['time', 'host', 'value'],
      filter: { time: { $gte: new Date(from), $lt: new Date(to) }, host: { $eq: host } },
      sql: (paths) =>
        `SELECT count(*)::INTEGER AS rows, round(sum(value), 4) AS value FROM ${source(paths)} ` +
        `WHERE time >= ${micros(from)} AND time < ${micros(to)} AND host = ${quoteString(host)}`,
    },
    {
      id: 'full-scan',
      title: 'full-scan aggregate: rows and sum(value) per host',
      columns: ['host', 'value'],
      sql: (paths) =>
        `SELECT host::VARCHAR AS host, count(*)::INTEGER AS rows, round(sum(value), 4) AS value ` +
        `FROM ${source(paths)} GROUP BY ALL ORDER BY host`,
    },
  ];
}

/** What one read of one layout by one query took. */
interface ReadMeasure {
  readonly rowGroups: number;
  /** Row groups whose statistics and bloom filters can match the query: the ones fetched. */
  readonly rowGroupsRead: number;
  readonly requests: number;
  readonly footerRequests: number;
  /** GETs of bloom filters outside the footer's read (part of `requests`). */
  readonly bloomRequests: number;
  /** Response body bytes. */
  readonly bytesFetched: number;
  readonly fetchMs: number;
  /**
   * The fetch's floor on the shaped path: per phase (footers, bloom filters, then data), a
   * first-byte latency for every READER_CONCURRENCY GETs and the bytes at that many connections'
   * bandwidth. The fetch above it is the SDK, fauxqs and the file writes on this machine.
   */
  readonly s3FloorMs: number;
  readonly queryMs: number;
}

/** One layout (the inputs, or the outputs) read by one query: the median run, and every run's total. */
export interface ReaderSide extends ReadMeasure {
  readonly files: number;
  readonly objectBytes: number;
  readonly totalMs: number;
  readonly totalsMs: readonly number[];
}

export interface ReaderQueryResult {
  readonly id: string;
  readonly title: string;
  readonly before: ReaderSide;
  readonly after: ReaderSide;
  /** Before's total over after's. */
  readonly gain: number;
  /** The query's answer, the same before and after. */
  readonly answer: string;
}

export interface ReadersResult {
  readonly dataset: {
    readonly title: string;
    readonly files: number;
    readonly bytes: number;
    readonly rows: number;
  };
  readonly outputs: {
    readonly files: number;
    readonly bytes: number;
    readonly rowGroups: number;
    /** Each output's row groups follow one another in time (their min/max do not overlap). */
    readonly timeOrdered: boolean;
  };
  readonly concurrency: number;
  readonly firstByteLatencyMs: number;
  readonly bytesPerSecond: number;
  readonly runs: number;
  readonly threads: number;
  readonly queries: readonly ReaderQueryResult[];
}

interface ReadOnce extends ReadMeasure {
  readonly answer: string;
}

/** Objects a reader reads: the key, and where the bench keeps a whole local copy. */
interface ReadTarget {
  readonly key: string;
  readonly localPath: string;
}

async function getRange(
  client: S3Client,
  bucket: string,
  key: string,
  range: string,
): Promise<{ bytes: Uint8Array; size: number }> {
  // One range per GET (https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html: "Amazon
  // S3 doesn't support retrieving multiple ranges of data per GET request"); a suffix range
  // (RFC 9110 14.1.1, bytes=-N) reads the last N bytes, and Content-Range gives the object's size.
  const response = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key, Range: range }));
  const bytes = await (
    response.Body as { transformToByteArray(): Promise<Uint8Array> }
  ).transformToByteArray();
  const size = Number(response.ContentRange?.split('/')[1]);
  if (!Number.isSafeInteger(size)) throw new Error(`GET ${key} ${range}: no object size in Content-Range`);
  return { bytes, size };
}

/** One query over `targets` as the modelled reader runs it; sparse copies go under `dir`. */
async function readOnce(
  engine: DuckDbEngine,
  client: S3Client,
  bucket: string,
  targets: readonly ReadTarget[],
  query: ReaderQuery,
  dir: string,
): Promise<ReadOnce> {
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  const paths = targets.map((_, i) => join(dir, `${i}.parquet`));
  let requests = 0;
  let footerRequests = 0;
  let bloomRequests = 0;
  let bloomBytes = 0;
  let bytesFetched = 0;
  let dataBytes = 0;
  let rowGroups = 0;
  let rowGroupsRead = 0;
  const fetches: { index: number; range: ByteRange }[] = [];
  const start = performance.now();
  await forEachLimit([...targets], READER_CONCURRENCY, async (target, index) => {
    let { bytes: tail, size } = await getRange(client, bucket, target.key, `bytes=-${FOOTER_FETCH_BYTES}`);
    requests++;
    footerRequests++;
    const footer = footerBytes(tail);
    if (footer > tail.length) {
      tail = (await getRange(client, bucket, target.key, `bytes=${size - footer}-${size - 1}`)).bytes;
      requests++;
      footerRequests++;
    }
    bytesFetched += tail.length;
    const tailStart = size - tail.length;
    const handle = await open(paths[index] as string, 'w');
    try {
      await handle.truncate(size);
      await handle.write(tail, 0, tail.length, tailStart);
      const metadata = footerMetadata(tail);
      // The bloom filters outside the tail: one GET each, after the footer and before any data.
      const blooms = await readBloomFilters(metadata, query.filter, size, async (range) => {
        if (range.start >= tailStart) return tail.subarray(range.start - tailStart, range.end - tailStart);
        const { bytes } = await getRange(client, bucket, target.key, `bytes=${range.start}-${range.end - 1}`);
        requests++;
        bloomRequests++;
        bytesFetched += bytes.length;
        bloomBytes += bytes.length;
        await handle.write(bytes, 0, bytes.length, range.start);
        return bytes;
      });
      const plan = planRead(metadata, query.columns, query.filter, blooms);
      rowGroups += plan.rowGroups;
      rowGroupsRead += plan.matched;
      for (const range of beforeTail(plan.fetches, tailStart)) fetches.push({ index, range });
    } finally {
      await handle.close();
    }
  });
  await forEachLimit(fetches, READER_CONCURRENCY, async ({ index, range }) => {
    const target = targets[index] as ReadTarget;
    const { bytes } = await getRange(client, bucket, target.key, `bytes=${range.start}-${range.end - 1}`);
    requests++;
    bytesFetched += bytes.length;
    dataBytes += bytes.length;
    const handle = await open(paths[index] as string, 'r+');
    try {
      await handle.write(bytes, 0, bytes.length, range.start);
    } finally {
      await handle.close();
    }
  });
  const fetched = performance.now();
  const footerBytesFetched = bytesFetched - dataBytes - bloomBytes;
  const phase = (gets: number, bytes: number) =>
    Math.ceil(gets / READER_CONCURRENCY) * S3_FIRST_BYTE_LATENCY_MS +
    (bytes / (READER_CONCURRENCY * S3_BYTES_PER_SECOND)) * 1000;
  const rows = await engine.query(query.sql(paths));
  const queryMs = performance.now() - fetched;
  await rm(dir, { recursive: true, force: true });
  return {
    rowGroups,
    rowGroupsRead,
    requests,
    footerRequests,
    bloomRequests,
    bytesFetched,
    fetchMs: fetched - start,
    s3FloorMs:
      phase(footerRequests, footerBytesFetched) +
      phase(bloomRequests, bloomBytes) +
      phase(requests - footerRequests - bloomRequests, dataBytes),
    queryMs,
    answer: JSON.stringify(rows),
  };
}

function side(targets: readonly ReadTarget[], objectBytes: number, runs: readonly ReadOnce[]): ReaderSide {
  const total = (r: ReadOnce) => r.fetchMs + r.queryMs;
  // The middle run (the lower of the two middles for an even count), all its counts with it.
  const chosen = [...runs].sort((a, b) => total(a) - total(b))[Math.floor((runs.length - 1) / 2)];
  if (!chosen) throw new Error('readers: no measured run');
  const { answer: _, ...measure } = chosen;
  return {
    ...measure,
    files: targets.length,
    objectBytes,
    totalMs: total(chosen),
    totalsMs: runs.map(total),
  };
}

export async function runReaders(
  engine: DuckDbEngine,
  dir: string,
  options: {
    readonly runs: number;
    readonly threads: number;
    readonly memoryLimit: string;
    readonly log: (line: string) => void;
  },
): Promise<ReadersResult> {
  const s3: LatencyTrueS3 = await startLatencyTrueS3(dir);
  const reader = createS3Client({
    endpoint: s3.shaper.endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
  });
  try {
    const spec = await arcHourCase(engine, dir);
    const ds = await generateDataset(engine, join(dir, 'data'), spec);
    options.log(`readers: ${spec.title}, ${ds.files} files, ${f1(ds.bytes / 1e6)} MB, ${int(ds.rows)} rows`);
    const inputs: InputRef[] = new Array(ds.keys.length);
    await forEachLimit([...ds.keys], 16, async (key, i) => {
      const file = ds.paths[i] as string;
      const { etag } = await s3.direct.put(key, { file });
      inputs[i] = { key, size: (await stat(file)).size, etag };
      await s3.direct.put(`${BEFORE_PREFIX}${key}`, { file });
    });
    const before = ds.keys.map((key, i) => ({
      key: `${BEFORE_PREFIX}${key}`,
      localPath: ds.paths[i] as string,
    }));

    // The product's chain over the shaped path, as the s3 section runs it.
    const runDir = join(dir, 'compact');
    const run = await runChain(s3.shaper.endpoint, ds.partition, inputs, runDir, options);
    const after: ReadTarget[] = [];
    let outputBytes = 0;
    for (const key of run.outputKeys) {
      const localPath = join(runDir, `out-${after.length}.parquet`);
      outputBytes += (await s3.direct.getToFile(key, localPath)).size;
      after.push({ key, localPath });
    }
    await verifyOutputs(
      engine,
      'readers',
      after.map((t) => t.localPath),
      ds.rows,
      true,
    );
    let outputRowGroups = 0;
    let timeOrdered = true;
    for (const target of after) {
      const metadata = footerMetadata(await readFile(target.localPath));
      outputRowGroups += metadata.row_groups.length;
      timeOrdered &&= rowGroupsOrderedBy(metadata, 'time');
    }
    options.log(
      `  compacted by the product: ${after.length} output(s), ${f1(outputBytes / 1e6)} MB, ${outputRowGroups} row groups, time-ordered: ${timeOrdered}`,
    );

    const queries = readerQueries();
    const measured: Record<string, { before: ReadOnce[]; after: ReadOnce[] }> = {};
    const expected: Record<string, string> = {};
    for (const query of queries) {
      measured[query.id] = { before: [], after: [] };
      const whole = JSON.stringify(await engine.query(query.sql(ds.paths)));
      const compacted = JSON.stringify(await engine.query(query.sql(after.map((t) => t.localPath))));
      if (whole !== compacted) {
        throw new Error(`readers ${query.id}: the compacted hour answers ${compacted}, the inputs ${whole}`);
      }
      expected[query.id] = whole;
    }
    // Round 0 warms the connections and DuckDB; sides alternate so the machine's load hits both.
    for (let round = 0; round <= options.runs; round++) {
      for (const query of queries) {
        for (const [name, targets] of [
          ['before', before],
          ['after', after],
        ] as const) {
          s3.shaper.resetStats();
          const once = await readOnce(engine, reader, s3.bucket, targets, query, join(dir, 'sparse'));
          const responses = s3.shaper.stats().responses;
          if (responses !== once.requests) {
            throw new Error(
              `readers ${query.id} ${name}: ${once.requests} GETs sent, the shaper saw ${responses}`,
            );
          }
          if (once.answer !== expected[query.id]) {
            throw new Error(
              `readers ${query.id} ${name}: DuckDB on the fetched bytes answers ${once.answer}, on whole files ${expected[query.id]}: the fetch missed bytes DuckDB reads`,
            );
          }
          if (round > 0) measured[query.id]?.[name].push(once);
        }
      }
    }
    const results = queries.map((query): ReaderQueryResult => {
      const m = measured[query.id] as { before: ReadOnce[]; after: ReadOnce[] };
      const b = side(before, ds.bytes, m.before);
      const a = side(after, outputBytes, m.after);
      return {
        id: query.id,
        title: query.title,
        before: b,
        after: a,
        gain: b.totalMs / a.totalMs,
        answer: expected[query.id] as string,
      };
    });
    for (const q of results) for (const line of readerLines(q)) options.log(`  ${line}`);
    await deleteAll(s3.direct);
    return {
      dataset: { title: spec.title, files: ds.files, bytes: ds.bytes, rows: ds.rows },
      outputs: { files: after.length, bytes: outputBytes, rowGroups: outputRowGroups, timeOrdered },
      concurrency: READER_CONCURRENCY,
      firstByteLatencyMs: S3_FIRST_BYTE_LATENCY_MS,
      bytesPerSecond: S3_BYTES_PER_SECOND,
      runs: options.runs,
      threads: options.threads,
      queries: results,
    };
  } finally {
    reader.destroy();
    await s3.close();
  }
}

function sideText(s: ReaderSide): string {
  return (
    `${f2(s.totalMs / 1000)} s (fetch ${f2(s.fetchMs / 1000)}, S3 floor ${f2(s.s3FloorMs / 1000)}; DuckDB ${f2(s.queryMs / 1000)}), ` +
    `${int(s.requests)} GETs, ${f2(s.bytesFetched / MIB)} MiB, row groups ${int(s.rowGroupsRead)}/${int(s.rowGroups)}`
  );
}

/** One line per side, for the log. */
export function readerLines(q: ReaderQueryResult): string[] {
  return [
    `${q.id} before: ${sideText(q.before)}`,
    `${q.id} after:  ${sideText(q.after)}; gain ${f1(q.gain)}x`,
  ];
}

/** The gain with each side's fetch at its S3 floor: what the shaped latency alone allows. */
function floorGain(q: ReaderQueryResult): number {
  return (q.before.s3FloorMs + q.before.queryMs) / (q.after.s3FloorMs + q.after.queryMs);
}

export function readersTargets(
  r: ReadersResult,
): { name: string; value: string; met: boolean; cause?: string }[] {
  return r.queries.map((q) => {
    const met = q.gain >= READERS_GAIN_TARGET;
    return {
      name: `readers' gain, Arc hour, ${q.id}: >= ${READERS_GAIN_TARGET}x`,
      value: `${f1(q.gain)}x (${f2(q.before.totalMs / 1000)} s -> ${f2(q.after.totalMs / 1000)} s)`,
      met,
      ...(met
        ? {}
        : {
            cause:
              `at the S3 floor with the same DuckDB times the gain would be ${f1(floorGain(q))}x; ` +
              `after compaction: ${int(q.after.requests)} GETs (${f2(q.after.fetchMs / 1000)} s fetching ${f2(q.after.bytesFetched / MIB)} MiB) ` +
              `and DuckDB ${f2(q.after.queryMs / 1000)} s; before: ${int(q.before.requests)} GETs in ${f2(q.before.fetchMs / 1000)} s, DuckDB ${f2(q.before.queryMs / 1000)} s`,
          }),
    };
  });
}

export function readersMarkdown(r: ReadersResult): string[] {
  return [
    '## What readers gain: DuckDB queries over S3 before and after compaction',
    '',
    `${r.dataset.title}: ${int(r.dataset.files)} files, ${f1(r.dataset.bytes / 1e6)} MB, ${int(r.dataset.rows)} rows, compacted by the product's chain over the ` +
      `latency-true S3 path into ${int(r.outputs.files)} output(s) of ${f1(r.outputs.bytes / 1e6)} MB with ${int(r.outputs.rowGroups)} row groups ` +
      `(row groups in time order: ${r.outputs.timeOrdered ? 'yes' : '**no**'}). ` +
      `The reader is modelled: per file one GET for the footer (its last 64 KiB), then one ranged GET per run of needed column chunks ` +
      `in the row groups whose min/max statistics can match (hyparquet's planner), less what the footer's GET brought; ${r.concurrency} GETs in flight, through the AWS SDK ` +
      `against fauxqs behind the shaper (${r.firstByteLatencyMs} ms to first byte, ${f1(r.bytesPerSecond / 1e6)} MB/s per connection); ` +
      `then DuckDB (${r.threads} threads) runs the query on local copies holding only the fetched bytes, its answer checked against the whole files. ` +
      `Time = fetch wall + DuckDB wall (a real scan overlaps them), median of ${r.runs} runs after a warm-up, before and after alternating. ` +
      `S3 floor: what the shaped S3 alone costs those GETs (a first-byte latency per ${r.concurrency} GETs in each phase, the bytes at ${r.concurrency} connections' bandwidth); ` +
      `the fetch above it is the SDK, fauxqs and the file writes on this shared machine.`,
    '',
    table(
      [
        'query',
        'layout',
        'total s',
        'fetch s',
        'S3 floor s',
        'DuckDB s',
        'GETs (footer)',
        'MiB fetched',
        'row groups read / present',
        'gain',
      ],
      r.queries.flatMap((q) =>
        (['before', 'after'] as const).map((name) => {
          const s = q[name];
          return [
            name === 'before' ? q.title : '',
            `${name}: ${int(s.files)} file(s)`,
            f2(s.totalMs / 1000),
            f2(s.fetchMs / 1000),
            f2(s.s3FloorMs / 1000),
            f2(s.queryMs / 1000),
            `${int(s.requests)} (${int(s.footerRequests)})`,
            f2(s.bytesFetched / MIB),
            `${int(s.rowGroupsRead)} / ${int(s.rowGroups)}`,
            name === 'after' ? `${f1(q.gain)}x` : '',
          ];
        }),
      ),
    ),
    '',
  ];
}
