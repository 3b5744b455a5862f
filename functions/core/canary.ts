/**
 * The canary: a tiny table of its own under the data root, named so no one mistakes it for data
 * (`_compactor_doctor/canary-<id>/` in arc), written as raw (L0) files of one hour that the
 * hourly tier will take, compacted by an execution scoped to it (execution input `only`), checked
 * row by row through the visible view, and removed. `compactor doctor` runs it once; the stack's
 * canary state machine (cdk/constructs/canary.ts) runs it on a schedule, each step a Lambda
 * (functions/canary-*.ts) calling one function here. It lives for the minutes a run takes; a
 * reader globbing the whole data root in that time sees its rows (ids 1..n of its own table).
 */

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CompactorConfig } from './config.ts';
import { parquetPath, quoteIdentifier, readAll } from './duckdb-sql.ts';
import { CanaryFailedError, ConfigError } from './errors.ts';
import { readExclusions } from './exclusions.ts';
import { readFailures } from './failures.ts';
import { HOURLY_SUFFIX, type Layout, levelOf } from './layout.ts';
import { jobIdOfOutput, receiptKey, receiptsRoot, stagingPrefix } from './manifest/manifest.ts';
import { MAX_DELETE_BATCH, type ObjectStore, type ObjectSummary } from './object-store.ts';
import { visibleFiles } from './visible.ts';

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
async function writeCanary(
  store: ObjectStore,
  config: CompactorConfig,
  sql: Sql,
  id: string,
  now: number,
): Promise<Canary> {
  const canary = canaryOf(config, id, canaryHour(config, now));
  const scratch = await mkdtemp(join(tmpdir(), 'compactor-canary-'));
  try {
    for (const [i, key] of canary.keys.entries()) {
      const path = join(scratch, `${i}.parquet`);
      const first = i * ROWS_PER_FILE + 1;
      const columns = [
        `(${first} + r)::BIGINT AS id`,
        `make_timestamp(${canary.hourStart * 1000}::BIGINT + (r * 60000000)::BIGINT) AS ${quoteIdentifier(config.timeColumn)}`,
        ...config.sortKeys
          .filter((k) => k !== 'id' && k !== config.timeColumn)
          .map((k) => `'canary' AS ${quoteIdentifier(k)}`),
      ];
      await sql.query(
        `COPY (SELECT ${columns.join(', ')} FROM range(${ROWS_PER_FILE}) t(r)) TO ${parquetPath(path)} (FORMAT parquet)`,
      );
      // A fresh id: the key cannot exist, and if it somehow does, nothing of it is overwritten.
      await store.put(key, { file: path }, { ifNoneMatch: '*' });
    }
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
  return canary;
}

/** The canary the stack's state machine and the doctor draw: the first group of a UUID, or random hex. */
const CANARY_ID = /^[0-9a-f]{1,32}$/;

function checkedId(id: string): string {
  if (!CANARY_ID.test(id)) throw new ConfigError(`a canary id is lowercase hex, got ${JSON.stringify(id)}`);
  return id;
}

/**
 * The canary of this id written in this hour, whole: its place, its raw files' keys and rows.
 * The id and hour determine it, so each step of the scheduled canary needs only those.
 */
export function canaryOf(config: CompactorConfig, id: string, hourStart: number): Canary {
  const place = canaryPlace(config.layout, checkedId(id), hourStart);
  const files = canaryFileCount(config);
  return {
    table: place.table,
    prefix: place.prefix,
    partition: place.partition,
    hourStart,
    keys: Array.from({ length: files }, (_, i) => place.fileKey(i + 1)),
    rows: files * ROWS_PER_FILE,
  };
}

/**
 * The key prefix every canary of this layout starts with, up to its id (`lake/_compactor_doctor/canary-`
 * in arc): the canary's role may write and delete under it and nowhere else.
 */
export function canaryKeyPrefix(layout: Layout): string {
  const probe = 'f00d';
  const { prefix } = canaryPlace(layout, probe, 0);
  return prefix.slice(0, prefix.lastIndexOf(`canary-${probe}`) + 'canary-'.length);
}

export interface SeededCanary extends Canary {
  /**
   * The execution input's `now` (ISO): planning as if the canary's files were already quiet (the
   * writer is done), by the store's own clock (LastModified), so it need not sit out quietSeconds.
   */
  readonly planAt: string;
}

/** Writes the canary table of this id and says when an execution scoped to it should plan. */
export async function seedCanary(
  store: ObjectStore,
  config: CompactorConfig,
  sql: Sql,
  id: string,
  now: number,
): Promise<SeededCanary> {
  const canary = await writeCanary(store, config, sql, id, now);
  const newest = Math.max(...(await listCanary(store, canary)).map((o) => o.lastModified.getTime()));
  const planAt = Math.max(now, newest + config.quietSeconds * 1000 + 1000);
  return { ...canary, planAt: new Date(planAt).toISOString() };
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
  if (found.length > 0) return { ok: false, detail: `left: ${found.join('; ')}` };
  return {
    ok: true,
    detail: `no manifest, staging object, quarantine or failure record of the canary, and its receipt (job ${[...jobIds].join(', ') || '?'})`,
  };
}

/**
 * The scheduled canary's check after its execution: its rows exact and no state of it left, or a
 * CanaryFailedError naming what was found.
 */
export async function verifyCanary(
  store: ObjectStore,
  config: CompactorConfig,
  sql: Sql,
  canary: Canary,
): Promise<{ readonly rows: string; readonly state: string }> {
  const rows = await checkCanaryRows(store, config, sql, canary, undefined);
  const state = await checkCanaryState(store, config, canary, rows.files);
  if (!rows.ok || !state.ok) {
    const found = [rows, state].filter((c) => !c.ok).map((c) => c.detail);
    throw new CanaryFailedError(`canary ${canary.table}: ${found.join('; ')}`);
  }
  return { rows: rows.detail, state: state.detail };
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

export interface Removal {
  readonly ok: boolean;
  readonly detail: string;
  /** A live manifest still names the canary: it was kept, since removing it would make recovery quarantine the job. */
  readonly held: boolean;
}

/**
 * Removes the canary, unless a live manifest still names it (its job has not ended, or ended
 * without recovery yet): removing its files then would make recovery quarantine the job, so it
 * is kept and the result says so.
 */
export async function releaseCanary(
  store: ObjectStore,
  config: CompactorConfig,
  canary: Pick<Canary, 'prefix'>,
): Promise<Removal> {
  const live = (await readExclusions(store, config)).liveManifests.filter((m) =>
    m.partition.startsWith(canary.prefix),
  );
  if (live.length > 0) {
    return {
      ok: false,
      held: true,
      detail: `kept under ${canary.prefix}: ${live.length} live manifest(s) name it (removing it would make recovery quarantine it)`,
    };
  }
  return { ...(await removeCanary(store, config, canary)), held: false };
}

/**
 * Deletes every object under the canary's table and its jobs' receipts (conditioned on the ETag
 * listed) and lists both again.
 */
async function removeCanary(
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
  return receiptsUnder(config.layout, canary.prefix);
}

/** The receipts of the jobs under a data key prefix: the same path under the receipts folder. */
function receiptsUnder(layout: Layout, dataKeyPrefix: string): string {
  return `${receiptsRoot(layout)}${dataKeyPrefix.slice(layout.dataPrefix.length)}`;
}

/** Where every canary's receipts begin (canaryKeyPrefix under the receipts folder): its grants' scope. */
export function canaryReceiptsKeyPrefix(layout: Layout): string {
  return receiptsUnder(layout, canaryKeyPrefix(layout));
}
