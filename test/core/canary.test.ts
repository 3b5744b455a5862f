/**
 * Where a canary lives (core/canary.ts): every canary of a layout starts with canaryKeyPrefix,
 * the prefix the stack scopes the canary's grants to, and a canary is fully given by its id and
 * hour (canaryOf), so the scheduled canary's steps need only those.
 */

import { describe, expect, it } from 'vitest';
import { CANARY_ROOT, canaryKeyPrefix, canaryOf } from '../../functions/core/canary.ts';
import { parseConfig } from '../../functions/core/config.ts';
import { ConfigError } from '../../functions/core/errors.ts';

const HOUR = Date.UTC(2025, 0, 14, 3);

describe('canaryKeyPrefix and canaryOf', () => {
  it.each([
    ['arc', 'lake/', `lake/${CANARY_ROOT}/canary-`],
    ['hive', 'lake/', `lake/${CANARY_ROOT}-canary-`],
    ['arc', '', `${CANARY_ROOT}/canary-`],
    ['db={db}/m={measurement}/{YYYY}/{MM}/{DD}/{HH}/', 'x/', `x/db=${CANARY_ROOT}/m=canary-`],
  ])('%s under "%s": every canary starts with %s', (layout, dataPrefix, prefix) => {
    const config = parseConfig({ layout, dataPrefix });
    expect(canaryKeyPrefix(config.layout)).toBe(prefix);
    const canary = canaryOf(config, '0a1b2c3d', HOUR);
    expect(canary.prefix.startsWith(prefix)).toBe(true);
    expect(canary.prefix).toBe(`${dataPrefix}${canary.table}`);
    for (const key of canary.keys) {
      expect(key.startsWith(canary.partition)).toBe(true);
      expect(config.layout.parse(key)?.level).toBe(0);
    }
    // The same id and hour give the same canary: the check and the removal recompute it.
    expect(canaryOf(config, '0a1b2c3d', HOUR)).toEqual(canary);
  });

  it('refuses an id that is not lowercase hex (it becomes part of a key the remove step deletes under)', () => {
    const config = parseConfig({});
    for (const id of ['', '../db', 'ABC', '0a1b*'])
      expect(() => canaryOf(config, id, HOUR)).toThrow(ConfigError);
  });
});
