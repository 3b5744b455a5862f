import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../functions/core/errors.ts';
import {
  compactDate,
  DAILY_SUFFIX,
  HOURLY_SUFFIX,
  LAYOUT_PRESETS,
  Layout,
  levelOf,
} from '../../functions/core/layout.ts';

const arc = Layout.fromName('arc');
const hive = Layout.fromName('hive');

const HOUR = new Date(Date.UTC(2025, 0, 15, 10));
const DAY = new Date(Date.UTC(2025, 0, 15));
const MONTH = new Date(Date.UTC(2025, 0, 1));

function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  throw new Error('expected a throw');
}

describe('presets and templates', () => {
  it('resolves preset names and keeps custom templates', () => {
    expect(arc.template).toBe(LAYOUT_PRESETS.arc);
    expect(hive.template).toBe(LAYOUT_PRESETS.hive);
    const custom = Layout.fromName('{tenant}/{table}/y={YYYY}/m={MM}/d={DD}/h={HH}');
    expect(custom.template).toBe('{tenant}/{table}/y={YYYY}/m={MM}/d={DD}/h={HH}/');
    expect(custom.dataPrefix).toBe('');
    expect(custom.stateRoot).toBe('_compaction/');
  });

  it('parses an arc hour-folder key', () => {
    expect(arc.parse('mydb/cpu/2025/01/15/10/cpu_20250115_100000_123456789.parquet')).toEqual({
      key: 'mydb/cpu/2025/01/15/10/cpu_20250115_100000_123456789.parquet',
      table: 'mydb/cpu/',
      monthFolder: 'mydb/cpu/2025/01/',
      month: MONTH,
      dayFolder: 'mydb/cpu/2025/01/15/',
      hourFolder: 'mydb/cpu/2025/01/15/10/',
      day: DAY,
      hour: HOUR,
      level: 0,
      fileName: 'cpu_20250115_100000_123456789.parquet',
    });
  });

  it('parses a hive hour-folder key', () => {
    expect(hive.parse('events/dt=2025-01-15/hour=10/part-00000.parquet')).toEqual({
      key: 'events/dt=2025-01-15/hour=10/part-00000.parquet',
      table: 'events/',
      monthFolder: undefined,
      month: MONTH,
      dayFolder: 'events/dt=2025-01-15/',
      hourFolder: 'events/dt=2025-01-15/hour=10/',
      day: DAY,
      hour: HOUR,
      level: 0,
      fileName: 'part-00000.parquet',
    });
  });

  it('parses a custom template with several table segments and packed date tokens', () => {
    const layout = new Layout('{tenant}/{table}/{YYYY}{MM}{DD}/{HH}/');
    const file = layout.parse('acme/orders/20250115/10/a.parquet');
    expect(file).toMatchObject({
      table: 'acme/orders/',
      dayFolder: 'acme/orders/20250115/',
      hourFolder: 'acme/orders/20250115/10/',
      day: DAY,
      hour: HOUR,
      level: 0,
    });
    expect(file && layout.tableName(file)).toBe('orders');
    // Literal text must match exactly.
    const literal = new Layout('{table}/year={YYYY}/month={MM}/day={DD}/hour={HH}/');
    expect(literal.parse('t/year=2025/month=01/day=15/hour=10/a.parquet')?.hour).toEqual(HOUR);
    expect(literal.parse('t/year=2025/month=01/day=15/hr=10/a.parquet')).toBeUndefined();
    expect(literal.parse('t/year=2025/month=1/day=15/hour=10/a.parquet')).toBeUndefined();
  });

  it('treats regex metacharacters in literal template text literally', () => {
    const layout = new Layout('{table}/d.{YYYY}-{MM}-{DD}+x/h({HH})/');
    expect(layout.parse('t/d.2025-01-15+x/h(10)/a.parquet')?.hour).toEqual(HOUR);
    expect(layout.parse('t/dX2025-01-15+x/h(10)/a.parquet')).toBeUndefined();
    expect(layout.parse('t/d.2025-01-15xx/h(10)/a.parquet')).toBeUndefined();
  });

  it('names the table by its last segment before the date', () => {
    const file = arc.parse('mydb/cpu/2025/01/15/10/a.parquet');
    expect(file && arc.tableName(file)).toBe('cpu');
    const hiveFile = hive.parse('events/dt=2025-01-15/hour=10/a.parquet');
    expect(hiveFile && hive.tableName(hiveFile)).toBe('events');
    const prefixed = Layout.fromName('arc', 'lake');
    const pf = prefixed.parse('lake/mydb/cpu/2025/01/15/10/a.parquet');
    expect(pf && prefixed.tableName(pf)).toBe('cpu');
  });

  it.each([
    ['{db}/{measurement}/{YYYY}/{MM}/{DD}/', 'no hour token'],
    ['{db}/{YYYY}/{MM}/{HH}/', 'no day token'],
    ['{db}/{YYYY}/{YYYY}/{MM}/{DD}/{HH}/', 'a token twice'],
    ['{db}/{YYYY}/{MM}/{DD}/{HH}/{minute}/', 'hour not the last segment'],
    ['{db}/{YYYY}/{MM}/{DD}/{HH}/x/', 'hour not the last segment (literal after)'],
    ['{YYYY}/{MM}/{DD}/{HH}/', 'no table segment'],
    ['{db}/{YYYY}/{MM}/{DD/{HH}/', 'unclosed brace'],
    ['{db}/{YYYY}/{MM}/{DD}{HH}/', 'day token in the hour segment'],
    ['{db}/dt={YYYY}-{MM}-{DD}-{HH}/', 'whole date in the hour segment'],
    ['/{db}/{YYYY}/{MM}/{DD}/{HH}/', 'leading slash (empty segment)'],
    ['{db}//{YYYY}/{MM}/{DD}/{HH}/', 'empty segment'],
    ['', 'empty template'],
  ])('rejects template %j (%s) with ConfigError', (template) => {
    expect(thrown(() => new Layout(template))).toBeInstanceOf(ConfigError);
    expect(thrown(() => Layout.fromName(template))).toBeInstanceOf(ConfigError);
  });
});

describe('levels', () => {
  it('recognises Arc suffixes and our own output names', () => {
    expect(levelOf('cpu_20250115_100000_123456789.parquet')).toBe(0);
    expect(levelOf('cpu_20250115_compacted.parquet')).toBe(1);
    expect(levelOf(`cpu_20250115_10_20250115T120000Z-0a1b2c3d_000${HOURLY_SUFFIX}`)).toBe(1);
    expect(levelOf('cpu_20250115_daily.parquet')).toBe(2);
    expect(levelOf(`cpu_20250115_20250116T030000Z-0a1b2c3d_000${DAILY_SUFFIX}`)).toBe(2);
    expect(levelOf('compacted.parquet')).toBe(0);
    expect(levelOf('daily.parquet')).toBe(0);
  });

  it('parses L0, L1 and L2 files with their levels', () => {
    expect(arc.parse('mydb/cpu/2025/01/15/10/cpu_20250115_100000_123456789.parquet')?.level).toBe(0);
    const l1 = arc.parse('mydb/cpu/2025/01/15/10/cpu_20250115_compacted.parquet');
    expect(l1).toMatchObject({ level: 1, hourFolder: 'mydb/cpu/2025/01/15/10/', hour: HOUR });
    const l2 = arc.parse('mydb/cpu/2025/01/15/cpu_20250115_daily.parquet');
    expect(l2).toMatchObject({
      level: 2,
      dayFolder: 'mydb/cpu/2025/01/15/',
      hourFolder: undefined,
      hour: undefined,
      day: DAY,
      table: 'mydb/cpu/',
    });
    expect(hive.parse('events/dt=2025-01-15/hour=10/events_compacted.parquet')?.level).toBe(1);
    expect(hive.parse('events/dt=2025-01-15/events_20250115_daily.parquet')).toMatchObject({
      level: 2,
      dayFolder: 'events/dt=2025-01-15/',
      hourFolder: undefined,
    });
  });

  it('counts a day-folder file only when it is L2', () => {
    expect(arc.parse('mydb/cpu/2025/01/15/cpu_20250115_100000_1.parquet')).toBeUndefined();
    expect(arc.parse('mydb/cpu/2025/01/15/cpu_20250115_compacted.parquet')).toBeUndefined();
    expect(arc.parse('mydb/cpu/2025/01/15/cpu_20250115_daily.parquet')?.level).toBe(2);
    expect(hive.parse('events/dt=2025-01-15/part-0.parquet')).toBeUndefined();
    expect(hive.parse('events/dt=2025-01-15/x_compacted.parquet')).toBeUndefined();
  });
});

describe('data prefix and state root', () => {
  const lake = Layout.fromName('arc', 'lake');

  it('normalises the prefix and puts the state root under it', () => {
    expect(lake.dataPrefix).toBe('lake/');
    expect(lake.stateRoot).toBe('lake/_compaction/');
    expect(Layout.fromName('arc', 'lake/').dataPrefix).toBe('lake/');
    expect(Layout.fromName('arc', 'a/b').stateRoot).toBe('a/b/_compaction/');
  });

  it('parses keys under the prefix with prefixed folders', () => {
    expect(lake.parse('lake/mydb/cpu/2025/01/15/10/a.parquet')).toMatchObject({
      table: 'lake/mydb/cpu/',
      dayFolder: 'lake/mydb/cpu/2025/01/15/',
      hourFolder: 'lake/mydb/cpu/2025/01/15/10/',
      hour: HOUR,
    });
    expect(lake.parse('lake/mydb/cpu/2025/01/15/cpu_daily.parquet')?.dayFolder).toBe(
      'lake/mydb/cpu/2025/01/15/',
    );
  });

  it('ignores keys outside the prefix', () => {
    expect(lake.parse('mydb/cpu/2025/01/15/10/a.parquet')).toBeUndefined();
    expect(lake.parse('lake2/mydb/cpu/2025/01/15/10/a.parquet')).toBeUndefined();
    expect(lake.parse('other/lake/mydb/cpu/2025/01/15/10/a.parquet')).toBeUndefined();
    expect(lake.isDataKey('lakemydb/cpu/2025/01/15/10/a.parquet')).toBe(false);
  });

  it('never treats anything under the state root as data, even when it fits the template', () => {
    // `_compaction/staging/...` would match arc as db=_compaction, measurement=staging.
    expect(arc.isDataKey('_compaction/staging/2025/01/15/10/a.parquet')).toBe(false);
    expect(arc.parse('_compaction/staging/2025/01/15/10/a.parquet')).toBeUndefined();
    expect(arc.parse('_compaction/cpu/2025/01/15/10/a_compacted.parquet')).toBeUndefined();
    expect(arc.parse('_compaction/cpu/2025/01/15/a_daily.parquet')).toBeUndefined();
    expect(lake.parse('lake/_compaction/staging/2025/01/15/10/a.parquet')).toBeUndefined();
    // Only the state root of this prefix is reserved.
    expect(lake.parse('lake/_compactionx/cpu/2025/01/15/10/a.parquet')?.level).toBe(0);
  });
});

describe('keys that are not inputs', () => {
  it.each([
    ['mydb/cpu/2025/01/15/10/_SUCCESS', 'marker file'],
    ['mydb/cpu/2025/01/15/10/.a.parquet.crc', 'checksum file'],
    ['mydb/cpu/2025/01/15/10/a.parquet.crc', 'checksum file'],
    ['mydb/cpu/2025/01/15/10/x.parquet.tmp', 'temp file'],
    ['mydb/cpu/2025/01/15/10/.x.parquet', 'hidden file'],
    ['mydb/cpu/2025/01/15/10/.parquet', 'no name'],
    ['mydb/cpu/2025/01/15/10/a.PARQUET', 'other case'],
    ['mydb/cpu/2025/01/15/10/a.json', 'other extension'],
    ['mydb/cpu/2025/01/15/10/', 'folder marker'],
    ['mydb/cpu/2025/01/15/', 'folder marker'],
    ['a/b/', 'folder marker'],
    ['mydb/cpu/2025/01/15/10/a.parquet/', 'folder marker named .parquet'],
    ['mydb/cpu/2025/01/15/10/sub/a.parquet', 'too deep'],
    ['x/mydb/cpu/2025/01/15/10/a.parquet', 'too deep (extra leading segment)'],
    ['cpu/2025/01/15/10/a.parquet', 'too shallow'],
    ['mydb/cpu/2025/01/a.parquet', 'too shallow'],
    ['a.parquet', 'top level'],
    ['mydb/cpu/2025/02/30/10/a.parquet', 'February 30th'],
    ['mydb/cpu/2025/02/29/10/a.parquet', 'February 29th of a non-leap year'],
    ['mydb/cpu/2025/13/01/10/a.parquet', 'month 13'],
    ['mydb/cpu/2025/00/10/10/a.parquet', 'month 00'],
    ['mydb/cpu/2025/01/00/10/a.parquet', 'day 00'],
    ['mydb/cpu/2025/01/32/10/a.parquet', 'day 32'],
    ['mydb/cpu/2025/01/15/24/a.parquet', 'hour 24'],
    ['mydb/cpu/2025/01/15/99/a.parquet', 'hour 99'],
    ['mydb/cpu/2025/01/15/1/a.parquet', 'one-digit hour'],
    ['mydb/cpu/25/01/15/10/a.parquet', 'two-digit year'],
    ['mydb/cpu/0025/01/15/10/a.parquet', 'year 0025'],
    ['mydb/cpu/2025/1/15/10/a.parquet', 'one-digit month'],
    ['mydb/cpu/2025/01/15/1x/a.parquet', 'non-digit hour'],
    ['mydb/cpu/2025/01/15/١٠/a.parquet', 'non-ASCII digits'],
    ['mydb/cpu/2025/02/30/a_daily.parquet', 'invalid day of a daily output'],
    ['mydb//2025/01/15/10/a.parquet', 'empty segment'],
    ['mydb/../2025/01/15/10/a.parquet', "'..' segment"],
    ['mydb/./2025/01/15/10/a.parquet', "'.' segment"],
  ])('%j (%s) is not a data file', (key) => {
    expect(arc.parse(key)).toBeUndefined();
  });

  it('accepts leap days and the edges of the day', () => {
    expect(arc.parse('mydb/cpu/2024/02/29/00/a.parquet')?.hour).toEqual(new Date(Date.UTC(2024, 1, 29, 0)));
    expect(arc.parse('mydb/cpu/2025/12/31/23/a.parquet')?.hour).toEqual(new Date(Date.UTC(2025, 11, 31, 23)));
    expect(hive.parse('t/dt=2025-02-30/hour=10/a.parquet')).toBeUndefined();
    expect(hive.parse('t/dt=2025-01-15/hour=24/a.parquet')).toBeUndefined();
  });
});

describe('keys with unusual characters', () => {
  it.each(['my db', 'a+b', 'a%20b', 'a#b', 'a?b', 'a[0]', 'k=v', 'mesure-é', '日本語', 'emoji-📈', '*'])(
    'parses table segment %j',
    (name) => {
      const key = `${name}/${name}/2025/01/15/10/${name}_1.parquet`;
      const file = arc.parse(key);
      expect(file).toMatchObject({
        key,
        table: `${name}/${name}/`,
        dayFolder: `${name}/${name}/2025/01/15/`,
        hourFolder: `${name}/${name}/2025/01/15/10/`,
        hour: HOUR,
        level: 0,
        fileName: `${name}_1.parquet`,
      });
      expect(file && arc.tableName(file)).toBe(name);
      const daily = arc.parse(`${name}/${name}/2025/01/15/${name}_daily.parquet`);
      expect(daily).toMatchObject({ level: 2, dayFolder: `${name}/${name}/2025/01/15/` });
      const hiveFile = hive.parse(`${name}/dt=2025-01-15/hour=10/${name} x.parquet`);
      expect(hiveFile).toMatchObject({ table: `${name}/`, hour: HOUR, fileName: `${name} x.parquet` });
    },
  );

  it('handles unusual characters in the data prefix', () => {
    const layout = Layout.fromName('hive', 'my lake+[1]');
    expect(layout.stateRoot).toBe('my lake+[1]/_compaction/');
    expect(layout.parse('my lake+[1]/t/dt=2025-01-15/hour=10/a.parquet')?.hourFolder).toBe(
      'my lake+[1]/t/dt=2025-01-15/hour=10/',
    );
    expect(layout.parse('my lake+[1]/_compaction/t/dt=2025-01-15/hour=10/a.parquet')).toBeUndefined();
  });
});

describe('compactDate', () => {
  it('formats the UTC date', () => {
    expect(compactDate(HOUR)).toBe('20250115');
    expect(compactDate(new Date(Date.UTC(2024, 1, 29, 23, 59, 59)))).toBe('20240229');
  });
});
