/**
 * `compactor doctor`'s canary: a tiny table of its own under the data root, named so no one
 * mistakes it for data (`_compactor_doctor/canary-<id>/` in arc), written as raw (L0) files of
 * one hour that the hourly tier will take, compacted by an execution scoped to it, checked row by
 * row through the visible view, and removed. It lives for the minutes the doctor runs; a reader
 * globbing the whole data root in that time sees its rows (they are ids 1..n of its own table).
 */

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parquetPath, quoteIdentifier, readAll } from '../../../adapters/duckdb-engine/duckdb-engine.ts';
import type { CompactorConfig } from '../../../core/config.ts';
import { ConfigError } from '../../../core/errors.ts';
import { readExclusions } from '../../../core/exclusions.ts';
import { readFailures } from '../../../core/failures.ts';
import { HOURLY_SUFFIX, type Layout, levelOf } from '../../../core/layout.ts';
import { jobIdOfOutput, receiptKey, receiptsRoot, stagingPrefix } from '../../../core/manifest/manifest.ts';
import { MAX_DELETE_BATCH, type ObjectStore, type ObjectSummary } from '../../../core/object-store.ts';
import { visibleFiles } from '../../../core/visible.ts';

const HOUR = 3_600_000;
const ROWS_PER_FILE = 10;
/** The first table segment of every canary: what an operator sees in a listing. */
export const CANARY_ROOT = '_compactor_doctor';

/** Runs SQL in the product's DuckDB engine (DuckDbEngine.query). */
export interface Sql {
  query(sql: string): Promise<Record<string, unknown>[]>;
}

export interface Canary {
  /** Table path without the data prefix: the execution input's `only`. */
  readonly table: string;
  /** Key prefix of the table (data prefix included). */
  readonly prefix: string;
  /** The hour folder (a partition of the hourly tier). */
  readonly partition: string;
  readonly hourStart: number;
  readonly keys: readonly string[];
  readonly rows: number;
}

/** Fills a template segment's tokens: `{YYYY}` etc. from the hour, every other token with `value`. */
function fill(segment: string, value: string, hour: Date): string {
  const iso = hour.toISOString();
  const dates: Record<string, string> = {
    YYYY: iso.slice(0, 4),
    MM: iso.slice(5, 7),
    DD: iso.slice(8, 10),
    HH: iso.slice(11, 13),
  };
  return segment.replace(/\{([^}]*)\}/g, (_, token: string) => dates[token] ?? value);
}

/**
 * The canary's table path for this layout (as many segments as it names tables with) and its
 * hour folder, checked with the layout itself: a layout whose table segments cannot hold such a
 * name is a ConfigError.
 */
export function canaryPlace(
  layout: Layout,
  id: string,
  hourStart: number,
): { table: string; prefix: string; partition: string; fileKey: (i: number) => string } {
  const segments = layout.template.slice(0, -1).split('/');
  const hour = new Date(hourStart);
  const depth = layout.tableDepth;
  const names =
    depth === 1
      ? [`${CANARY_ROOT}-canary-${id}`]
      : Array.from({ length: depth }, (_, i) => (i === 0 ? CANARY_ROOT : `canary-${id}`));
  const table = `${segments
    .slice(0, depth)
    .map((s, i) => fill(s, names[i] ?? '', hour))
    .join('/')}/`;
  const rest = segments.slice(depth).map((s) => fill(s, 'canary', hour));
  const partition = `${layout.dataPrefix}${table}${rest.join('/')}/`;
  const stamp = `${hour.toISOString().slice(0, 10).replaceAll('-', '')}_${hour.toISOString().slice(11, 13)}0000`;
  const fileKey = (i: number) => `${partition}canary_${stamp}_${String(i).padStart(4, '0')}.parquet`;
  const parsed = layout.parse(fileKey(1));
  if (
    !layout.isTablePath(table) ||
    parsed === undefined ||
    parsed.table !== `${layout.dataPrefix}${table}` ||
    parsed.hourFolder !== partition ||
    parsed.level !== 0
  ) {
    throw new ConfigError(
      `cannot name a canary table in the layout ${layout.template}: ${fileKey(1)} is not a raw file of table ${table}`,
    );
  }
  return { table, prefix: `${layout.dataPrefix}${table}`, partition, fileKey };
}

/**
 * The hour the canary is written in: the latest whole hour that ended at least the hourly tier's
 * minAge before `now`, so the planner takes it as soon as its files are quiet.
 */
export function canaryHour(config: CompactorConfig, now: number): number {
  return Math.floor((now - config.tiers.hourly.minAgeSeconds * 1000) / HOUR) * HOUR - HOUR;
}

/** Enough raw files for the hourly tier's minFiles (and at least two, so there is something to merge). */
export function canaryFileCount(config: CompactorConfig): number {
  return Math.max(2, config.tiers.hourly.minFiles);
}

/**
 * Writes the canary's files: ids 1..rows (unique, so the check is exact), the time column inside
 * the hour, and each sort key (as text) so the product's sort finds the columns it is configured with.
 */
export async function writeCanary(
  store: ObjectStore,
  config: CompactorConfig,
  sql: Sql,
  id: string,
  now: number,
): Promise<Canary> {
  const hourStart = canaryHour(config, now);
  const place = canaryPlace(config.layout, id, hourStart);
  const files = canaryFileCount(config);
  const scratch = await mkdtemp(join(tmpdir(), 'compactor-canary-'));
  const keys: string[] = [];
  try {
    for (let i = 1; i <= files; i++) {
      const path = join(scratch, `${i}.parquet`);
      const first = (i - 1) * ROWS_PER_FILE + 1;
      const columns = [
        `(${first} + r)::BIGINT AS id`,
        `make_timestamp(${hourStart * 1000}::BIGINT + (r * 60000000)::BIGINT) AS ${quoteIdentifier(config.timeColumn)}`,
        ...config.sortKeys
          .filter((k) => k !== 'id' && k !== config.timeColumn)
          .map((k) => `'canary' AS ${quoteIdentifier(k)}`),
      ];
      await sql.query(
        `COPY (SELECT ${columns.join(', ')} FROM range(${ROWS_PER_FILE}) t(r)) TO ${parquetPath(path)} (FORMAT parquet)`,
      );
      const key = place.fileKey(i);
      // A fresh id: the key cannot exist, and if it somehow does, nothing of it is overwritten.
      await store.put(key, { file: path }, { ifNoneMatch: '*' });
      keys.push(key);
    }
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
  return {
    table: place.table,
    prefix: place.prefix,
    partition: place.partition,
    hourStart,
    keys,
    rows: files * ROWS_PER_FILE,
  };
}

/** Every object under the canary's table, data or not. */
export async function listCanary(
  store: ObjectStore,
  canary: Pick<Canary, 'prefix'>,
): Promise<ObjectSummary[]> {
  const out: ObjectSummary[] = [];
  for await (const object of store.list(canary.prefix)) out.push(object);
  return out;
}

export interface RowCheck {
  readonly ok: boolean;
  readonly detail: string;
  /** The visible files' keys (the outputs, when the job went through). */
  readonly files: readonly string[];
}

/**
 * Reads the canary's visible files with DuckDB: exactly ids 1..rows, once each, all in hourly
 * outputs (no raw file left: the inputs were deleted).
 */
export async function checkCanaryRows(
  store: ObjectStore,
  config: CompactorConfig,
  sql: Sql,
  canary: Canary,
  localRoot: string | undefined,
): Promise<RowCheck> {
  const view = await visibleFiles(store, config, { under: canary.prefix });
  const files = view.files.map((f) => f.key);
  if (files.length === 0) return { ok: false, detail: 'no visible file under the canary table', files };
  const scratch = localRoot ? undefined : await mkdtemp(join(tmpdir(), 'compactor-canary-read-'));
  try {
    const paths: string[] = [];
    for (const [i, file] of view.files.entries()) {
      if (localRoot) {
        paths.push(join(localRoot, file.key));
        continue;
      }
      const path = join(scratch ?? '', `${i}.parquet`);
      await store.getToFile(file.key, path, { ifMatch: file.etag });
      paths.push(path);
    }
    const [row] = await sql.query(
      `SELECT count(*) AS n, count(DISTINCT id) AS d, min(id) AS lo, max(id) AS hi FROM ${readAll(paths)}`,
    );
    const n = Number(row?.n ?? 0);
    const distinct = Number(row?.d ?? 0);
    const lo = Number(row?.lo ?? 0);
    const hi = Number(row?.hi ?? 0);
    const raw = files.filter((k) => levelOf(k.slice(k.lastIndexOf('/') + 1)) === 0);
    const outputs = files.filter((k) => k.endsWith(HOURLY_SUFFIX));
    const exact = n === canary.rows && distinct === canary.rows && lo === 1 && hi === canary.rows;
    if (!exact) {
      return {
        ok: false,
        detail: `visible rows ${n} (${distinct} distinct ids, ${lo}..${hi}); written ${canary.rows} (ids 1..${canary.rows}): ${n > canary.rows ? 'rows duplicated' : 'rows lost'}`,
        files,
      };
    }
    if (raw.length > 0 || outputs.length === 0) {
      return {
        ok: false,
        detail: `rows exact, but ${raw.length} raw file(s) and ${outputs.length} hourly output(s) are visible: the job did not finish`,
        files,
      };
    }
    return {
      ok: true,
      detail: `${n} rows, ids 1..${canary.rows} once each, in ${outputs.length} hourly output(s); ${canary.keys.length} raw files deleted`,
      files,
    };
  } finally {
    if (scratch) await rm(scratch, { recursive: true, force: true });
  }
}

export interface StateCheck {
  readonly ok: boolean;
  readonly detail: string;
  /** A live manifest still holds the canary: removing its files would make recovery quarantine it. */
  readonly held: boolean;
}

/** No live or quarantined manifest, quarantined input, failure record or staging object of the canary. */
export async function checkCanaryState(
  store: ObjectStore,
  config: CompactorConfig,
  canary: Canary,
  outputs: readonly string[],
): Promise<StateCheck> {
  const inCanary = (key: string) => key.startsWith(canary.prefix);
  const exclusions = await readExclusions(store, config);
  const live = exclusions.liveManifests.filter((m) => inCanary(m.partition));
  const quarantined = exclusions.quarantinedManifests.filter((m) => inCanary(m.partition));
  const inputs = [...exclusions.quarantinedInputs].filter(inCanary);
  const unreadable = exclusions.unreadable.filter(
    (u) => u.inputKeys.some(inCanary) || u.outputKeys.some(inCanary),
  );
  const failures = [...(await readFailures(store, config)).values()].filter((f) => inCanary(f.partition));
  const jobIds = new Set(outputs.map(jobIdOfOutput).filter((j): j is string => j !== undefined));
  let staging = 0;
  for (const jobId of jobIds) {
    for await (const _ of store.list(stagingPrefix(config.layout, jobId))) staging++;
  }
  const found = [
    live.length > 0 ? `${live.length} live manifest(s) (${live.map((m) => m.state).join(', ')})` : '',
    quarantined.length > 0 ? `${quarantined.length} quarantined manifest(s)` : '',
    inputs.length > 0 ? `${inputs.length} quarantined input(s)` : '',
    unreadable.length > 0 ? `${unreadable.length} unreadable manifest(s)` : '',
    failures.length > 0 ? `a failure record (${failures[0]?.lastError.split('\n')[0]})` : '',
    staging > 0 ? `${staging} staging object(s)` : '',
    ...(await missingReceipts(store, config, canary, jobIds)),
  ].filter(Boolean);
  if (found.length > 0) return { ok: false, detail: `left: ${found.join('; ')}`, held: live.length > 0 };
  return {
    ok: true,
    detail: `no manifest, staging object, quarantine or failure record of the canary, and its receipt (job ${[...jobIds].join(', ') || '?'})`,
    held: false,
  };
}

/** The canary jobs that cleared without their receipt (each committed job leaves one). */
async function missingReceipts(
  store: ObjectStore,
  config: CompactorConfig,
  canary: Canary,
  jobIds: ReadonlySet<string>,
): Promise<string[]> {
  const missing: string[] = [];
  for (const jobId of jobIds) {
    const key = receiptKey(config.layout, 'hourly', canary.partition, jobId);
    if ((await store.head(key)) === undefined) missing.push(`no receipt of job ${jobId} (${key})`);
  }
  return missing;
}

/**
 * Deletes every object under the canary's table and its jobs' receipts (conditioned on the ETag
 * listed) and lists both again.
 */
export async function removeCanary(
  store: ObjectStore,
  config: CompactorConfig,
  canary: Pick<Canary, 'prefix'>,
): Promise<{ ok: boolean; detail: string }> {
  const receipts = { prefix: canaryReceipts(config, canary) };
  const objects = [...(await listCanary(store, canary)), ...(await listCanary(store, receipts))];
  let deleted = 0;
  const problems: string[] = [];
  for (let i = 0; i < objects.length; i += MAX_DELETE_BATCH) {
    const batch = objects.slice(i, i + MAX_DELETE_BATCH).map((o) => ({ key: o.key, etag: o.etag }));
    for (const outcome of await store.deleteMany(batch)) {
      if (outcome.status === 'deleted' || outcome.status === 'not-found') deleted++;
      else problems.push(`${outcome.key}: ${outcome.status === 'error' ? outcome.code : outcome.status}`);
    }
  }
  const left = [...(await listCanary(store, canary)), ...(await listCanary(store, receipts))];
  if (left.length > 0 || problems.length > 0) {
    return {
      ok: false,
      detail: `${left.length} object(s) left under ${canary.prefix}${problems.length > 0 ? `: ${problems.slice(0, 3).join('; ')}` : ''}`,
    };
  }
  return {
    ok: true,
    detail: `${deleted} object(s) deleted (its files and its jobs' receipts); nothing left under ${canary.prefix}`,
  };
}

/** Where the receipts of the canary's jobs are: its table's folder under the receipts. */
function canaryReceipts(config: CompactorConfig, canary: Pick<Canary, 'prefix'>): string {
  return `${receiptsRoot(config.layout)}${canary.prefix.slice(config.layout.dataPrefix.length)}`;
}
