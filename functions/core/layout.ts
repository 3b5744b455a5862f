/**
 * Partition layouts: where hour and day folders are, and which level a file is.
 *
 * A layout is a template of '/'-separated segments, e.g. `{db}/{measurement}/{YYYY}/{MM}/{DD}/{HH}/`
 * (arc) or `{table}/dt={YYYY}-{MM}-{DD}/hour={HH}/` (hive). Segments before the first date token
 * name the table; the last segment holds the hour (`{HH}`); the segments before it are the day
 * folder, where daily outputs go.
 */

import { ConfigError } from './errors.ts';
import { stateRootOf } from './state-root.ts';

export const LAYOUT_PRESETS = {
  arc: '{db}/{measurement}/{YYYY}/{MM}/{DD}/{HH}/',
  hive: '{table}/dt={YYYY}-{MM}-{DD}/hour={HH}/',
  // Firehose's default time prefix YYYY/MM/dd/HH after the stream's prefix, which names the table
  // (https://docs.aws.amazon.com/firehose/latest/dev/s3-object-name.html).
  firehose: '{table}/{YYYY}/{MM}/{DD}/{HH}/',
} as const;

export type LayoutPreset = keyof typeof LAYOUT_PRESETS;

/**
 * The segments each preset's readers map to partition columns. hive: its `k=v` segments (Athena
 * and Glue tables, Spark partition discovery, DuckDB hive_partitioning). firehose: the whole time
 * prefix, as Athena's partition projection for Firehose reads it (`datehour`, format
 * `yyyy/MM/dd/HH`: https://docs.aws.amazon.com/athena/latest/ug/partition-projection-kinesis-firehose-example.html).
 * arc: none (Arc and glob readers read every file under the table).
 */
const PRESET_PARTITIONS: Readonly<Record<LayoutPreset, readonly string[]>> = {
  arc: [],
  hive: ['dt={YYYY}-{MM}-{DD}', 'hour={HH}'],
  firehose: ['{YYYY}', '{MM}', '{DD}', '{HH}'],
};

/** Input names per preset: Firehose's file extension is whatever the stream sets, often none. */
const PRESET_SUFFIX: Readonly<Record<LayoutPreset, string>> = {
  arc: '.parquet',
  hive: '.parquet',
  firehose: '',
};

export interface LayoutOptions {
  /**
   * Template segments (exactly as written in it) that readers map to partition columns. Default:
   * the preset's, or every `name=...` segment of a custom template. A tier that would write above
   * the deepest of them is refused (`tierRefusal`).
   */
  readonly partitionSegments?: readonly string[];
  /**
   * The suffix raw input files end with (default `.parquet`). '' means inputs may have any name,
   * e.g. Firehose objects without an extension: each is then read (`isParquetObject`) before it
   * is treated as data, and names that are never data (`_SUCCESS`, `.crc`, folder markers, temp
   * files) are left out by name.
   */
  readonly dataSuffix?: string;
}

/** L0 = raw input, L1 = hourly output, L2 = daily output, L3 = monthly output. */
export type Level = 0 | 1 | 2 | 3;

/** Arc's suffixes, which we also use, so an existing Arc bucket can be handed over. */
export const HOURLY_SUFFIX = '_compacted.parquet';
export const DAILY_SUFFIX = '_daily.parquet';
export const MONTHLY_SUFFIX = '_monthly.parquet';

export function levelOf(fileName: string): Level {
  if (fileName.endsWith(MONTHLY_SUFFIX)) return 3;
  if (fileName.endsWith(DAILY_SUFFIX)) return 2;
  if (fileName.endsWith(HOURLY_SUFFIX)) return 1;
  return 0;
}

export interface DataFile {
  /** Full object key. */
  readonly key: string;
  /** Table path, e.g. `mydb/cpu/` (arc) or `events/` (hive), starting with the data prefix. */
  readonly table: string;
  /**
   * Month folder key prefix (ends with '/'), where monthly outputs go; undefined when the layout
   * has none (the day segment also names the month, as hive's `dt=YYYY-MM-DD`).
   */
  readonly monthFolder: string | undefined;
  /** Start of the month (UTC). */
  readonly month: Date;
  /** Day folder key prefix (ends with '/'); undefined for files in the month folder. */
  readonly dayFolder: string | undefined;
  /** Hour folder key prefix (ends with '/'); undefined for files directly in the day folder. */
  readonly hourFolder: string | undefined;
  /** Start of the day (UTC); undefined for files in the month folder. */
  readonly day: Date | undefined;
  /** Start of the hour (UTC); undefined for files in the day folder. */
  readonly hour: Date | undefined;
  readonly level: Level;
  readonly fileName: string;
}

interface SegmentMatcher {
  readonly regex: RegExp;
  readonly tokens: readonly string[];
}

const DATE_TOKENS = new Set(['YYYY', 'MM', 'DD', 'HH']);
const TOKEN_PATTERN: Record<string, string> = {
  YYYY: '(\\d{4})',
  MM: '(\\d{2})',
  DD: '(\\d{2})',
  HH: '(\\d{2})',
};

function compileSegment(segment: string): SegmentMatcher {
  const tokens: string[] = [];
  let pattern = '';
  let rest = segment;
  while (rest.length > 0) {
    const open = rest.indexOf('{');
    if (open < 0) {
      pattern += escapeRegex(rest);
      break;
    }
    const close = rest.indexOf('}', open);
    if (close < 0) throw new ConfigError(`layout segment "${segment}" has an unclosed "{"`);
    pattern += escapeRegex(rest.slice(0, open));
    const token = rest.slice(open + 1, close);
    tokens.push(token);
    pattern += TOKEN_PATTERN[token] ?? '([^/]+)';
    rest = rest.slice(close + 1);
  }
  return { regex: new RegExp(`^${pattern}$`), tokens };
}

function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

export class Layout {
  readonly template: string;
  /** Data root, '' or ending with '/'. */
  readonly dataPrefix: string;
  /** State root `PREFIX/_compaction/`: never read as data. */
  readonly stateRoot: string;
  readonly #segments: readonly SegmentMatcher[];
  readonly #tableDepth: number;
  /** Whether the segments before the day segment name one month: then monthly outputs have a folder. */
  readonly hasMonthFolder: boolean;
  /** The preset name, or the template. */
  readonly name: string;
  /** Segments readers map to partition columns (see LayoutOptions). */
  readonly partitionSegments: readonly string[];
  /** How many leading segments a reader's partitions span: 0 when none are declared. */
  readonly partitionDepth: number;
  readonly dataSuffix: string;

  constructor(template: string, dataPrefix = '', options: LayoutOptions & { name?: string } = {}) {
    if (dataPrefix !== '' && !dataPrefix.endsWith('/')) dataPrefix += '/';
    this.dataPrefix = dataPrefix;
    this.stateRoot = stateRootOf(dataPrefix);
    this.template = template.endsWith('/') ? template : `${template}/`;
    const raw = this.template.slice(0, -1).split('/');
    if (raw.some((s) => s === '')) throw new ConfigError(`layout "${template}" has an empty segment`);
    this.#segments = raw.map(compileSegment);
    const tokenOrder = this.#segments.flatMap((s) => s.tokens);
    for (const token of ['YYYY', 'MM', 'DD', 'HH']) {
      if (tokenOrder.filter((t) => t === token).length !== 1) {
        throw new ConfigError(`layout "${template}" must contain {${token}} exactly once`);
      }
    }
    const last = this.#segments[this.#segments.length - 1];
    if (!last?.tokens.includes('HH') || this.#segments.slice(0, -1).some((s) => s.tokens.includes('HH'))) {
      throw new ConfigError(`layout "${template}" must end with the hour segment ({HH})`);
    }
    // The day folder (every segment but the last) must name one day, or a daily job would span days.
    if (last.tokens.some((t) => t !== 'HH' && DATE_TOKENS.has(t))) {
      throw new ConfigError(`layout "${template}": {YYYY}, {MM} and {DD} must come before the hour segment`);
    }
    this.#tableDepth = this.#segments.findIndex((s) => s.tokens.some((t) => DATE_TOKENS.has(t)));
    if (this.#tableDepth < 1)
      throw new ConfigError(`layout "${template}" needs a table segment before the date`);
    if (this.#segments.slice(0, this.#tableDepth).some((s) => s.tokens.some((t) => DATE_TOKENS.has(t)))) {
      throw new ConfigError(`layout "${template}": table segments cannot hold date tokens`);
    }
    const daySegment = this.#segments[this.#segments.length - 2];
    this.hasMonthFolder =
      daySegment?.tokens.includes('DD') === true &&
      !daySegment.tokens.some((t) => t === 'YYYY' || t === 'MM');
    this.name = options.name ?? this.template;
    const segments = raw;
    const declared =
      options.partitionSegments ?? segments.filter((s) => /^[^{}=/]+=/.test(s) && s.includes('{'));
    let depth = 0;
    for (const segment of declared) {
      const at = segments.indexOf(segment);
      if (at < 0 || segments.lastIndexOf(segment) !== at) {
        throw new ConfigError(
          `partitionSegments: "${segment}" is not ${at < 0 ? 'a' : 'a unique'} segment of layout "${this.template}"; list segments exactly as the template writes them, e.g. ${JSON.stringify(segments.slice(this.#tableDepth))}`,
        );
      }
      depth = Math.max(depth, at + 1);
    }
    this.partitionSegments = [...declared];
    this.partitionDepth = depth;
    const suffix = options.dataSuffix ?? '.parquet';
    if (suffix.includes('/')) throw new ConfigError(`dataSuffix "${suffix}" must not contain "/"`);
    this.dataSuffix = suffix;
  }

  /**
   * Why `tier` may not run on this layout, or undefined when it may. A tier writes its outputs in
   * its folder (hourly: the hour folder, daily: the day folder, monthly: the month folder); a
   * reader that maps segments to partition columns reads only files inside its deepest partition
   * folders, so an output above them is one no such reader ever sees (Athena/Glue partitions,
   * DuckDB hive_partitioning over every level), and Spark's partition discovery refuses a table
   * whose files sit at mixed depths.
   */
  tierRefusal(tier: 'hourly' | 'daily' | 'monthly'): string | undefined {
    const n = this.#segments.length;
    const writeDepth = tier === 'hourly' ? n : tier === 'daily' ? n - 1 : n - 2;
    if (writeDepth >= this.partitionDepth) return undefined;
    const finest = this.template.slice(0, -1).split('/')[this.partitionDepth - 1] ?? '';
    const folder = tier === 'daily' ? 'day' : 'month';
    return (
      `the ${tier} tier would write its outputs in the ${folder} folder, above the partition segment "${finest}" of layout "${this.name}": ` +
      `readers that map ${JSON.stringify(this.partitionSegments)} to partition columns (Athena/Glue tables, partition projection, Spark partition discovery, DuckDB hive_partitioning) read only files inside "${finest}" folders, so they would never see its rows and Spark refuses the mixed depths; ` +
      `only the tiers whose outputs stay inside the finest partition can run (hourly here). Leave tiers.${tier}.enabled unset (off), or, if no reader maps these segments to partition columns, set partitionSegments to the segments they do map (e.g. [])`
    );
  }

  /** Segments of the table path (`{db}/{measurement}`: 2). */
  get tableDepth(): number {
    return this.#tableDepth;
  }

  static fromName(nameOrTemplate: string, dataPrefix = ''): Layout {
    return Layout.create(nameOrTemplate, dataPrefix);
  }

  /** A preset (with its partition segments and input suffix as defaults) or a template. */
  static create(nameOrTemplate: string, dataPrefix = '', options: LayoutOptions = {}): Layout {
    const name = nameOrTemplate as LayoutPreset;
    const preset = Object.hasOwn(LAYOUT_PRESETS, name) ? name : undefined;
    if (preset === undefined) return new Layout(nameOrTemplate, dataPrefix, options);
    return new Layout(LAYOUT_PRESETS[preset], dataPrefix, {
      name: preset,
      partitionSegments: options.partitionSegments ?? PRESET_PARTITIONS[preset],
      dataSuffix: options.dataSuffix ?? PRESET_SUFFIX[preset],
    });
  }

  /**
   * True for keys the compactor may ever treat as data, outside the state root: our outputs
   * (`*.parquet`) and inputs ending with the data suffix. With an empty suffix (any name), names
   * that are never data are left out: hidden or marker names (`_SUCCESS`, `.crc` files, which
   * Hive/Spark/Athena skip too), `*_$folder$` and `/`-ended folder markers, and temp files.
   */
  isDataKey(key: string): boolean {
    if (!key.startsWith(this.dataPrefix) || key.startsWith(this.stateRoot)) return false;
    if (key.endsWith('.parquet')) return true;
    if (this.dataSuffix !== '') return key.endsWith(this.dataSuffix);
    const name = key.slice(key.lastIndexOf('/') + 1);
    return !(
      name === '' ||
      name.startsWith('_') ||
      name.startsWith('.') ||
      name.endsWith('$folder$') ||
      /\.(crc|tmp|temp|inprogress|json|csv|gz|txt)$/i.test(name)
    );
  }

  /**
   * Whether a data key must be read before it is treated as data: an input whose name does not
   * say Parquet (dataSuffix ''), checked with `isParquetObject`.
   */
  needsContentCheck(key: string): boolean {
    return this.dataSuffix === '' && !key.endsWith('.parquet');
  }

  /** Parses a key into its partition coordinates, or undefined when it is not a data file of this layout. */
  parse(key: string): DataFile | undefined {
    if (!this.isDataKey(key)) return undefined;
    const parts = key.slice(this.dataPrefix.length).split('/');
    // '.', '..' and empty segments are never plain keys: no manifest could name such a file.
    if (parts.some((p) => p === '' || p === '.' || p === '..')) return undefined;
    const fileName = parts.pop();
    if (
      fileName === undefined ||
      fileName === '.parquet' ||
      fileName === this.dataSuffix ||
      fileName.startsWith('.')
    )
      return undefined;
    const n = this.#segments.length;
    // In the hour folder (n segments), directly in the day folder (n - 1) or in the month folder (n - 2).
    const inMonth = this.hasMonthFolder && parts.length === n - 2;
    if (parts.length !== n && parts.length !== n - 1 && !inMonth) return undefined;
    const values: Record<string, string> = {};
    for (let i = 0; i < parts.length; i++) {
      const matcher = this.#segments[i];
      const part = parts[i];
      if (matcher === undefined || part === undefined) return undefined;
      const match = matcher.regex.exec(part);
      if (!match) return undefined;
      matcher.tokens.forEach((token, j) => {
        values[token] = match[j + 1] ?? '';
      });
    }
    const year = Number(values.YYYY);
    const month = Number(values.MM);
    const dayOfMonth = inMonth ? 1 : Number(values.DD);
    const day = new Date(Date.UTC(year, month - 1, dayOfMonth));
    if (day.getUTCFullYear() !== year || day.getUTCMonth() !== month - 1 || day.getUTCDate() !== dayOfMonth) {
      return undefined;
    }
    const prefix = this.dataPrefix;
    const table = `${prefix}${parts.slice(0, this.#tableDepth).join('/')}/`;
    const monthFolder = this.hasMonthFolder ? `${prefix}${parts.slice(0, n - 2).join('/')}/` : undefined;
    const level = levelOf(fileName);
    if (inMonth) {
      // Monthly outputs live in the month folder and only there; anything else there is not ours.
      if (level !== 3) return undefined;
      return {
        key,
        table,
        monthFolder,
        month: day,
        dayFolder: undefined,
        hourFolder: undefined,
        day: undefined,
        hour: undefined,
        level,
        fileName,
      };
    }
    const inHour = parts.length === n;
    const hourValue = Number(values.HH);
    if (inHour && !(hourValue >= 0 && hourValue <= 23)) return undefined;
    const dayFolder = `${prefix}${parts.slice(0, n - 1).join('/')}/`;
    // Daily outputs live in the day folder and only there; anything else there is not ours to touch.
    if (!inHour && level !== 2) return undefined;
    return {
      key,
      table,
      monthFolder,
      month: new Date(Date.UTC(year, month - 1, 1)),
      dayFolder,
      hourFolder: inHour ? `${dayFolder}${parts[n - 1]}/` : undefined,
      day,
      hour: inHour ? new Date(day.getTime() + hourValue * 3_600_000) : undefined,
      level,
      fileName,
    };
  }

  /**
   * True when `path` is a table of this layout as `DataFile.table` names it, without the data
   * prefix: the segments before the date, each matching the template, ending in '/'.
   */
  isTablePath(path: string): boolean {
    if (!path.endsWith('/')) return false;
    const parts = path.slice(0, -1).split('/');
    if (parts.length !== this.#tableDepth) return false;
    return parts.every(
      (part, i) => part !== '.' && part !== '..' && this.#segments[i]?.regex.test(part) === true,
    );
  }

  /**
   * The table a partition folder (an hour, day or month folder of any tier) belongs to, as
   * `DataFile.table` names it: the data prefix and the segments before the date.
   */
  tableOfFolder(folder: string): string {
    const parts = folder.slice(this.dataPrefix.length).split('/');
    return `${this.dataPrefix}${parts.slice(0, this.#tableDepth).join('/')}/`;
  }

  /** Last non-empty segment before the date: the measurement (arc) or table (hive), used in output names. */
  tableName(file: Pick<DataFile, 'table'>): string {
    const segments = file.table.slice(this.dataPrefix.length).split('/').filter(Boolean);
    return segments[segments.length - 1] ?? 'data';
  }
}

/**
 * The end of a file's period: its hour for a file in an hour folder, its day for a daily output
 * in the day folder, its month for a monthly output in the month folder. The layout guarantees
 * the rows of a folder lie in its period, so no row of the file is newer than this (what
 * retention relies on; it never reads a file to decide).
 */
export function periodEnd(file: Pick<DataFile, 'day' | 'hour' | 'month'>): Date {
  if (file.hour) return new Date(file.hour.getTime() + 3_600_000);
  if (file.day) return new Date(file.day.getTime() + 86_400_000);
  return new Date(Date.UTC(file.month.getUTCFullYear(), file.month.getUTCMonth() + 1, 1));
}

/** `YYYYMMDD` of a UTC date. */
export function compactDate(date: Date): string {
  return date.toISOString().slice(0, 10).replaceAll('-', '');
}
