import { describe, expect, it } from 'vitest';
import type { Column } from '../../functions/core/engine.ts';
import { SchemaConflictError } from '../../functions/core/errors.ts';
import { integerFloatMixes, unifySchemas } from '../../functions/core/schema.ts';

const cols = (spec: Record<string, string>): Column[] =>
  Object.entries(spec).map(([name, type]) => ({ name, type }));

/** One input per type for a single column `x`, keyed f0.parquet, f1.parquet, ... */
const unifyX = (...types: string[]) =>
  unifySchemas(
    'db/m/2024/01/01/10',
    types.map((type, i) => ({ key: `f${i}.parquet`, columns: cols({ x: type }) })),
  );

const conflictOf = (run: () => unknown): SchemaConflictError => {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(SchemaConflictError);
    return error as SchemaConflictError;
  }
  throw new Error('expected a SchemaConflictError');
};

describe('unifySchemas', () => {
  it('returns nothing for no inputs', () => {
    expect(unifySchemas('p', [])).toEqual([]);
  });

  it('unions columns by name in order of first appearance', () => {
    const result = unifySchemas('p', [
      { key: 'a.parquet', columns: cols({ time: 'TIMESTAMP', host: 'VARCHAR' }) },
      { key: 'b.parquet', columns: cols({ region: 'VARCHAR', time: 'TIMESTAMP' }) },
      { key: 'c.parquet', columns: cols({ host: 'VARCHAR', value: 'DOUBLE' }) },
    ]);
    expect(result).toEqual(cols({ time: 'TIMESTAMP', host: 'VARCHAR', region: 'VARCHAR', value: 'DOUBLE' }));
  });

  it('keeps identical types, nested ones included', () => {
    expect(unifyX('STRUCT(a INTEGER, b VARCHAR)', 'STRUCT(a INTEGER, b VARCHAR)')).toEqual(
      cols({ x: 'STRUCT(a INTEGER, b VARCHAR)' }),
    );
    expect(unifyX('DECIMAL(18,3)', 'DECIMAL(18,3)')).toEqual(cols({ x: 'DECIMAL(18,3)' }));
    expect(unifyX('VARCHAR[]', 'VARCHAR[]')).toEqual(cols({ x: 'VARCHAR[]' }));
  });

  it('widens signed integers to the widest present, whatever the order', () => {
    expect(unifyX('INTEGER', 'BIGINT')).toEqual(cols({ x: 'BIGINT' }));
    expect(unifyX('BIGINT', 'INTEGER')).toEqual(cols({ x: 'BIGINT' }));
    expect(unifyX('TINYINT', 'SMALLINT', 'INTEGER')).toEqual(cols({ x: 'INTEGER' }));
    expect(unifyX('SMALLINT', 'BIGINT', 'TINYINT')).toEqual(cols({ x: 'BIGINT' }));
  });

  it('widens FLOAT to DOUBLE', () => {
    expect(unifyX('FLOAT', 'DOUBLE')).toEqual(cols({ x: 'DOUBLE' }));
    expect(unifyX('DOUBLE', 'FLOAT', 'DOUBLE')).toEqual(cols({ x: 'DOUBLE' }));
  });

  it('merges an unsigned integer only into a strictly wider signed one', () => {
    expect(unifyX('UTINYINT', 'SMALLINT')).toEqual(cols({ x: 'SMALLINT' }));
    expect(unifyX('UINTEGER', 'BIGINT')).toEqual(cols({ x: 'BIGINT' }));
    // The set decides, not the order: INTEGER alone cannot hold UINTEGER, but BIGINT can.
    expect(unifyX('INTEGER', 'UINTEGER', 'BIGINT')).toEqual(cols({ x: 'BIGINT' }));
    expect(conflictOf(() => unifyX('UINTEGER', 'INTEGER')).message).toContain(
      'UINTEGER in "f0.parquet" vs INTEGER in "f1.parquet"',
    );
    expect(conflictOf(() => unifyX('UBIGINT', 'BIGINT')).message).toContain('UBIGINT');
    expect(conflictOf(() => unifyX('UTINYINT', 'USMALLINT')).message).toContain(
      'UTINYINT in "f0.parquet" vs USMALLINT in "f1.parquet"',
    );
  });

  it('fails on any other type change, naming the partition, column, both files and both types', () => {
    const error = conflictOf(() =>
      unifySchemas('db/cpu/2024/01/01/10', [
        { key: 'a.parquet', columns: cols({ time: 'TIMESTAMP', host: 'VARCHAR' }) },
        { key: 'b.parquet', columns: cols({ time: 'TIMESTAMP', host: 'BIGINT' }) },
      ]),
    );
    expect(error.name).toBe('SchemaConflictError');
    expect(error.partition).toBe('db/cpu/2024/01/01/10');
    expect(error.column).toBe('host');
    expect(error.message).toContain('VARCHAR in "a.parquet" vs BIGINT in "b.parquet"');
  });

  it.each([
    ['TIMESTAMP', 'TIMESTAMP_NS'],
    ['TIMESTAMP', 'TIMESTAMP WITH TIME ZONE'],
    ['DOUBLE', 'BIGINT'],
    ['FLOAT', 'INTEGER'],
    ['DECIMAL(18,3)', 'DECIMAL(18,2)'],
    ['DECIMAL(18,3)', 'DOUBLE'],
    ['INTEGER[]', 'BIGINT[]'],
    ['STRUCT(a INTEGER)', 'STRUCT(a BIGINT)'],
    ['STRUCT(a INTEGER)', 'STRUCT(a INTEGER, b INTEGER)'],
    ['VARCHAR', 'BLOB'],
    ['DATE', 'TIMESTAMP'],
  ])('rejects %s vs %s', (a, b) => {
    const error = conflictOf(() => unifyX(a, b));
    expect(error.message).toContain(`${a} in "f0.parquet" vs ${b} in "f1.parquet"`);
  });

  it('names the first file of the clashing types when a widened column later clashes', () => {
    const error = conflictOf(() => unifyX('INTEGER', 'BIGINT', 'VARCHAR'));
    expect(error.message).toContain('INTEGER in "f0.parquet" vs VARCHAR in "f2.parquet"');
  });

  it('matches names case-insensitively like union_by_name, keeping the first spelling', () => {
    const result = unifySchemas('p', [
      { key: 'a.parquet', columns: cols({ Host: 'VARCHAR', n: 'integer' }) },
      { key: 'b.parquet', columns: cols({ host: 'VARCHAR', N: 'BIGINT' }) },
    ]);
    expect(result).toEqual(cols({ Host: 'VARCHAR', n: 'BIGINT' }));
  });

  it('merges integers with floats into DOUBLE only with a proof; a failed proof is a conflict that says why; none is the old conflict', () => {
    const inputs = [
      { key: 'a.parquet', columns: cols({ v: 'BIGINT', n: 'INTEGER' }) },
      { key: 'b.parquet', columns: cols({ V: 'DOUBLE', n: 'FLOAT' }) },
    ];
    expect(
      unifySchemas('p', inputs, {
        doubleProofs: new Map([
          ['v', { proved: true }],
          ['n', { proved: true }],
        ]),
      }),
    ).toEqual(cols({ v: 'DOUBLE', n: 'DOUBLE' }));
    const failed = conflictOf(() =>
      unifySchemas('p', inputs, {
        doubleProofs: new Map([
          ['v', { proved: false, reason: 'no statistics' }],
          ['n', { proved: true }],
        ]),
      }),
    );
    expect(failed.column).toBe('v');
    expect(failed.message).toContain(
      'BIGINT in "a.parquet" vs DOUBLE in "b.parquet"; not merged into DOUBLE: no statistics',
    );
    const plain = conflictOf(() => unifySchemas('p', inputs));
    expect(plain.message).toContain('BIGINT in "a.parquet" vs DOUBLE in "b.parquet". Only');
    // A proof never merges anything else.
    conflictOf(() =>
      unifySchemas(
        'p',
        [
          { key: 'a.parquet', columns: cols({ v: 'VARCHAR' }) },
          { key: 'b.parquet', columns: cols({ v: 'DOUBLE' }) },
        ],
        { doubleProofs: new Map([['v', { proved: true }]]) },
      ),
    );
  });

  it('lists integer/float mixes with the inputs whose integers are wider than 53 bits (they need statistics)', () => {
    expect(
      integerFloatMixes([
        { key: 'a.parquet', columns: cols({ v: 'BIGINT', n: 'INTEGER', s: 'VARCHAR', w: 'UBIGINT' }) },
        { key: 'b.parquet', columns: cols({ V: 'DOUBLE', n: 'FLOAT', s: 'DOUBLE', w: 'BIGINT' }) },
        { key: 'c.parquet', columns: cols({ v: 'HUGEINT' }) },
      ]),
    ).toEqual([
      {
        column: 'v',
        needProof: [
          { key: 'a.parquet', name: 'v', type: 'BIGINT' },
          { key: 'c.parquet', name: 'v', type: 'HUGEINT' },
        ],
      },
      { column: 'n', needProof: [] },
    ]);
  });

  it('merges naive TIMESTAMP (and _S, _MS) into TIMESTAMPTZ only when the table says naive ones are UTC; never TIMESTAMP_NS (it would lose digits)', () => {
    const tz = 'TIMESTAMP WITH TIME ZONE';
    const inputs = (...types: string[]) =>
      types.map((type, i) => ({ key: `f${i}.parquet`, columns: cols({ time: type }) }));
    const utc = { naiveTimestampsUtc: true };
    expect(unifySchemas('p', inputs('TIMESTAMP', tz), utc)).toEqual(cols({ time: tz }));
    expect(unifySchemas('p', inputs(tz, 'TIMESTAMP_MS', 'TIMESTAMP_S', 'TIMESTAMP'), utc)).toEqual(
      cols({ time: tz }),
    );
    const refused = conflictOf(() => unifySchemas('p', inputs('TIMESTAMP', tz)));
    expect(refused.message).toContain(
      `TIMESTAMP in "f0.parquet" vs ${tz} in "f1.parquet"; if this table's naive timestamps are UTC, list the table under naiveTimestampsUtc`,
    );
    const ns = conflictOf(() => unifySchemas('p', inputs('TIMESTAMP_NS', tz), utc));
    expect(ns.message).not.toContain('naiveTimestampsUtc');
    // Without a TIMESTAMPTZ input the option changes nothing.
    conflictOf(() => unifySchemas('p', inputs('TIMESTAMP', 'TIMESTAMP_MS'), utc));
  });
});
