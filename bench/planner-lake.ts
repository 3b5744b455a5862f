/**
 * A synthetic lake at scale for the planner (issue 14 item 6): 500 tables (Arc layout, 10
 * databases x 50 measurements) over five years, generated on the fly in key order, never held in
 * memory, behind the ObjectStore interface with S3's LIST semantics: pages of at most 1,000 keys
 * (or folders), Prefix, StartAfter and Delimiter '/'
 * (https://docs.aws.amazon.com/AmazonS3/latest/API/API_ListObjectsV2.html).
 *
 * Each LIST request (one page) is counted and waits a stated latency before it answers:
 * LIST_LATENCY_MS, 75 ms, from a public measurement: `aws s3api` listed a 15-million-object bucket
 * in 1,110 s, i.e. 15,000 sequential pages at 74 ms each (J. B. Thomas, "Fast S3 listing for
 * buckets with millions/billions of Objects", 2023:
 * https://jboothomas.medium.com/fast-listing-s3-objects-from-buckets-with-millions-billions-of-items-380052fb6faf).
 * Pages can be far slower: a Lambda's ListObjectsV2 pages of 1,000 keys took 1.9 to 7 s each in
 * https://mizuame.works/blog/en/2025-12-05 ; the bench states the milder figure.
 *
 * The lake at `now` (mostly compacted history):
 * - every day from five years back to two days ago: DAILY_FILES daily outputs of 400 MB (final:
 *   above half the target size, so no tier takes them);
 * - yesterday: 24 hourly outputs (the daily tier's candidates, one job per table);
 * - today: an hourly output for each hour before the last two, 120 raw files in the hour that
 *   ended more than minAge ago (the hourly tier's job per table), 120 in the hour not yet due;
 * - late data: one raw file per table in an hour folder LATE_DAYS_AGO days back (only a sweep
 *   lists it; the straggler flush then plans it).
 * No manifests, quarantine or failures.
 */

import { setTimeout as sleep } from 'node:timers/promises';
import type { ListOptions, ObjectSummary } from '../functions/core/object-store.ts';
import { ReadOnlyListingStore } from './read-only-store.ts';

export const LIST_LATENCY_MS = 75;
export const DAILY_FILES = 11;
export const RAW_PER_HOUR = 120;
export const LATE_DAYS_AGO = 200;
const DATABASES = 10;
const MEASUREMENTS_PER_DB = 50;
const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const PAGE = 1000;

export interface LakeShape {
  /** Tables (at most 500): the first `tables` of 10 databases x 50 measurements. */
  readonly tables: number;
  readonly years: number;
  /** The plan's clock (ms); must be 12:10 UTC or later on its day for the hours above. */
  readonly now: number;
  readonly latencyMs: number;
}

function pad(n: number, width: number): string {
  return String(n).padStart(width, '0');
}

function ymd(ms: number): { y: string; m: string; d: string; compact: string } {
  const date = new Date(ms);
  const y = pad(date.getUTCFullYear(), 4);
  const m = pad(date.getUTCMonth() + 1, 2);
  const d = pad(date.getUTCDate(), 2);
  return { y, m, d, compact: `${y}${m}${d}` };
}

/** The lake's tables, in key order: `db00/m00/` ... */
export function lakeTables(shape: LakeShape): string[] {
  const out: string[] = [];
  for (let db = 0; db < DATABASES; db++) {
    for (let m = 0; m < MEASUREMENTS_PER_DB; m++) {
      if (out.length < shape.tables) out.push(`db${pad(db, 2)}/m${pad(m, 2)}/`);
    }
  }
  return out;
}

/** Objects of one table in key order, lazily. */
function* tableObjects(
  shape: LakeShape,
  table: string,
  startAfter: string | undefined,
  prefix = '',
): Generator<ObjectSummary> {
  const name = table.split('/')[1] as string;
  const today = Math.floor(shape.now / DAY) * DAY;
  const dueHour = Math.floor(shape.now / HOUR) * HOUR - 2 * HOUR;
  const first = today - Math.round(shape.years * 365) * DAY;
  const lateHour = today - LATE_DAYS_AGO * DAY + 7 * HOUR;
  let n = 0;
  let day = 0;
  const object = (key: string, size: number, modified: number): ObjectSummary => ({
    key,
    size,
    // Counted within the day, so an object's ETag is the same whichever listing skipped which days.
    etag: `${table}${day}-${(n++).toString(16)}`,
    lastModified: new Date(modified),
  });
  for (day = first; day <= today; day += DAY) {
    n = 0;
    const { y, m, d, compact } = ymd(day);
    const folder = `${table}${y}/${m}/${d}/`;
    // Skip whole days at or before StartAfter cheaply: every key of the day starts with its folder.
    if (startAfter !== undefined && folder < startAfter && !startAfter.startsWith(folder)) continue;
    // Days wholly before or after the prefix hold none of its keys; S3 answers from its index
    // without reading them, so the generator skips them too and stops past the prefix's end.
    if (!folder.startsWith(prefix) && !prefix.startsWith(folder)) {
      if (folder < prefix) continue;
      return;
    }
    const keys: ObjectSummary[] = [];
    // Hour folders ('00/'..'23/') sort before the day's files ('m..').
    for (let h = 0; h < 24; h++) {
      const hour = day + h * HOUR;
      const hh = pad(h, 2);
      const hourFolder = `${folder}${hh}/`;
      if (hour === lateHour) {
        keys.push(
          object(`${hourFolder}${name}_${compact}_${hh}1500_000000001.parquet`, 50_000, shape.now - 2 * DAY),
        );
      }
      if (day >= today - DAY && hour < dueHour) {
        keys.push(
          object(
            `${hourFolder}${name}_${compact}_${hh}_20260101T000000Z-00000000_compacted.parquet`,
            30e6,
            hour + HOUR + 20 * 60_000,
          ),
        );
      }
      if (hour === dueHour || hour === dueHour + HOUR) {
        for (let i = 0; i < RAW_PER_HOUR; i++) {
          keys.push(
            object(
              `${hourFolder}${name}_${compact}_${hh}${pad(Math.floor(i / 2), 2)}00_${pad(i, 9)}.parquet`,
              200_000,
              hour + (i * HOUR) / RAW_PER_HOUR,
            ),
          );
        }
      }
    }
    if (day < today - DAY) {
      for (let i = 0; i < DAILY_FILES; i++) {
        keys.push(
          object(
            `${folder}${name}_${compact}_${pad(i, 2)}_20200101T000000Z-00000000_daily.parquet`,
            400e6,
            day + DAY + 4 * HOUR,
          ),
        );
      }
    }
    for (const key of keys) if (startAfter === undefined || key.key > startAfter) yield key;
  }
}

/** The lake as an ObjectStore: lists, and lists folders; everything else is absent or refused. */
export class LakeStore extends ReadOnlyListingStore {
  readonly location = 'synthetic://lake';
  readonly #shape: LakeShape;
  readonly #tables: readonly string[];
  /** LIST requests made (pages), by object and folder listings. */
  listRequests = 0;
  objectsListed = 0;

  constructor(shape: LakeShape) {
    super();
    this.#shape = shape;
    this.#tables = lakeTables(shape);
  }

  async *list(prefix: string, options: ListOptions = {}): AsyncIterable<ObjectSummary> {
    const { startAfter } = options;
    const tables = this.#tables.filter((t) => t.startsWith(prefix) || prefix.startsWith(t));
    let page: ObjectSummary[] = [];
    let requests = 0;
    const flush = async () => {
      requests++;
      this.listRequests++;
      await sleep(this.#shape.latencyMs);
      const out = page;
      page = [];
      return out;
    };
    for (const table of tables) {
      for (const object of tableObjects(this.#shape, table, startAfter, prefix)) {
        if (!object.key.startsWith(prefix)) continue;
        page.push(object);
        if (page.length === PAGE) {
          const out = await flush();
          this.objectsListed += out.length;
          yield* out;
        }
      }
    }
    // The last page, or the one empty answer of a listing that found nothing.
    if (page.length > 0 || requests === 0) {
      const out = await flush();
      this.objectsListed += out.length;
      yield* out;
    }
  }

  async *listFolders(prefix: string): AsyncIterable<string> {
    const depth = prefix === '' ? 0 : prefix.split('/').length - 1;
    const folders = [
      ...new Set(
        this.#tables
          .filter((t) => t.startsWith(prefix) && t.split('/').length - 1 > depth)
          .map(
            (t) =>
              `${t
                .split('/')
                .slice(0, depth + 1)
                .join('/')}/`,
          ),
      ),
    ];
    for (let i = 0; i === 0 || i < folders.length; i += PAGE) {
      this.listRequests++;
      await sleep(this.#shape.latencyMs);
      yield* folders.slice(i, i + PAGE);
    }
  }
}

/** Objects in the lake (counted without listing it). */
export function lakeObjectCount(shape: LakeShape): number {
  const days = Math.round(shape.years * 365) + 1;
  const dueHour = Math.floor(shape.now / HOUR) * HOUR - 2 * HOUR;
  const yesterday = Math.floor(shape.now / DAY) * DAY - DAY;
  const hourlyOutputs = (dueHour - yesterday) / HOUR;
  const perTable = (days - 2) * DAILY_FILES + hourlyOutputs + 2 * RAW_PER_HOUR + 1;
  return perTable * Math.min(shape.tables, DATABASES * MEASUREMENTS_PER_DB);
}
