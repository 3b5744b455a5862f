/** The `dedup` setting of parseConfig: off by default, per table, and every mistake named with its fix. */

import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../functions/core/config.ts';
import { dedupOf } from '../../functions/core/config-tables.ts';
import { Layout } from '../../functions/core/layout.ts';
import { configError } from '../support/config-error.ts';

describe('config: dedup', () => {
  it('is off by default: no table is deduplicated', () => {
    const config = parseConfig({});
    expect(config.dedup.size).toBe(0);
    expect(dedupOf(config, 'mydb/cpu/')).toBeUndefined();
  });

  it('is set per table, by table path without the data prefix; a table not listed has none', () => {
    const config = parseConfig({
      dataPrefix: 'lake/',
      dedup: { 'mydb/cpu/': { mode: 'exact' }, 'mydb/mem/': { mode: 'last', keys: ['host', 'region'] } },
    });
    // DataFile.table, as the layout parses it, starts with the data prefix.
    const table = config.layout.parse('lake/mydb/mem/2025/01/15/10/mem_20250115_100500_1.parquet')?.table;
    expect(table).toBe('lake/mydb/mem/');
    expect(dedupOf(config, table ?? '')).toEqual({ mode: 'last', keys: ['host', 'region'] });
    expect(dedupOf(config, 'lake/mydb/cpu/')).toEqual({ mode: 'exact' });
    expect(dedupOf(config, 'lake/mydb/disk/')).toBeUndefined();
    // Without the prefix it is another bucket path, not this table.
    expect(dedupOf(config, 'mydb/cpu/')).toBeUndefined();
  });

  it('accepts "last" with no key columns: one row per time', () => {
    expect(dedupOf(parseConfig({ dedup: { 'db/cpu/': { mode: 'last', keys: [] } } }), 'db/cpu/')).toEqual({
      mode: 'last',
      keys: [],
    });
  });

  it('takes table paths of the configured layout (hive: one segment)', () => {
    const config = parseConfig({ layout: 'hive', dedup: { 'events/': { mode: 'exact' } } });
    expect(dedupOf(config, 'events/')).toEqual({ mode: 'exact' });
    expect(
      configError(() => parseConfig({ layout: 'hive', dedup: { 'db/events/': { mode: 'exact' } } })).message,
    ).toContain('is not a table of layout "{table}/dt={YYYY}-{MM}-{DD}/hour={HH}/"');
  });

  it.each([
    [{ dedup: [] }, 'dedup must be an object of table path -> setting'],
    [{ dedup: { 'mydb/cpu': { mode: 'exact' } } }, 'dedup["mydb/cpu"]: "mydb/cpu" is not a table of layout'],
    [{ dedup: { 'mydb/': { mode: 'exact' } } }, 'ending in "/" (e.g. "mydb/cpu/" for arc'],
    [{ dedup: { 'mydb/cpu/2025/': { mode: 'exact' } } }, 'without the data prefix'],
    [{ dedup: { 'mydb/cpu/': 'exact' } }, 'dedup["mydb/cpu/"] must be an object, e.g. {"mode": "exact"}'],
    [
      { dedup: { 'mydb/cpu/': { mode: 'latest' } } },
      'dedup["mydb/cpu/"].mode must be "exact" or "last", got "latest"',
    ],
    [{ dedup: { 'mydb/cpu/': {} } }, 'dedup["mydb/cpu/"].mode must be "exact" or "last", got undefined'],
    [{ dedup: { 'mydb/cpu/': { mode: 'exact', keys: ['host'] } } }, 'remove keys, or use mode "last"'],
    [{ dedup: { 'mydb/cpu/': { mode: 'last' } } }, 'dedup["mydb/cpu/"].keys must list the columns'],
    [{ dedup: { 'mydb/cpu/': { mode: 'last', keys: [''] } } }, '.keys[0] must be a column name, got ""'],
    [{ dedup: { 'mydb/cpu/': { mode: 'last', keys: ['time'] } } }, 'must not name the time column "time"'],
    [{ dedup: { 'mydb/cpu/': { mode: 'last', keys: ['host', 'Host'] } } }, 'names "Host" twice'],
    [{ dedup: { 'mydb/cpu/': { mode: 'last', keys: ['host'], order: 'desc' } } }, '.order is not a setting'],
  ])('rejects %j naming the setting and the fix', (input, message) => {
    expect(configError(() => parseConfig(input as never)).message).toContain(message);
  });

  it('checks keys against the configured time column', () => {
    expect(
      configError(() =>
        parseConfig({ timeColumn: 'ts', dedup: { 'db/cpu/': { mode: 'last', keys: ['TS'] } } }),
      ).message,
    ).toContain('must not name the time column "ts"');
    expect(
      dedupOf(
        parseConfig({ timeColumn: 'ts', dedup: { 'db/cpu/': { mode: 'last', keys: ['time'] } } }),
        'db/cpu/',
      ),
    ).toEqual({ mode: 'last', keys: ['time'] });
  });
});

describe('layout: table paths', () => {
  it.each([
    ['{db}/{measurement}/{YYYY}/{MM}/{DD}/{HH}/', 'mydb/cpu/', true],
    ['{db}/{measurement}/{YYYY}/{MM}/{DD}/{HH}/', 'mydb/cpu', false],
    ['{db}/{measurement}/{YYYY}/{MM}/{DD}/{HH}/', 'mydb/', false],
    ['{db}/{measurement}/{YYYY}/{MM}/{DD}/{HH}/', 'mydb/../', false],
    ['{db}/{measurement}/{YYYY}/{MM}/{DD}/{HH}/', '/cpu/', false],
    ['{table}/dt={YYYY}-{MM}-{DD}/hour={HH}/', 'events/', true],
    ['data/{table}/{YYYY}/{MM}/{DD}/{HH}/', 'data/events/', true],
    ['data/{table}/{YYYY}/{MM}/{DD}/{HH}/', 'other/events/', false],
  ])('%s: %j is a table: %s', (template, path, expected) => {
    expect(new Layout(template).isTablePath(path)).toBe(expected);
  });
});
