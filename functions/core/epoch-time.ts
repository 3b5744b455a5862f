/**
 * Integer epoch time columns (`timeUnits`). The stored integer is never converted: sorting an
 * integer of one unit is already chronological. What the unit adds is that the compact step can
 * read an input's times and check that they lie in its folder's period: retention judges a file by
 * its path alone (retention.ts), which is only right while a folder's rows lie in its period, and an
 * input written in another unit (seconds in a milliseconds table) has its values a factor of 1,000
 * away, decades from its folder. Such an input is set aside like a corrupt one: kept, reported,
 * never merged or deleted.
 */

import { TIME_UNITS, type TimeUnit } from './config-tables.ts';
import type { IntegerOutside } from './engine.ts';

/** Integer types an epoch time column may have (DuckDB's names for Parquet's INT32/INT64 and kin). */
const INTEGER_TYPES: ReadonlySet<string> = new Set([
  'TINYINT',
  'SMALLINT',
  'INTEGER',
  'BIGINT',
  'UTINYINT',
  'USMALLINT',
  'UINTEGER',
  'UBIGINT',
]);

export function isEpochIntegerType(type: string): boolean {
  return INTEGER_TYPES.has(type.trim().toUpperCase());
}

const TICKS_PER_SECOND: Readonly<Record<TimeUnit, bigint>> = {
  s: 1n,
  ms: 1_000n,
  us: 1_000_000n,
  ns: 1_000_000_000n,
};

const UNIT_NAMES: Readonly<Record<TimeUnit, string>> = {
  s: 'seconds',
  ms: 'milliseconds',
  us: 'microseconds',
  ns: 'nanoseconds',
};

/** A closed range of epoch values in one unit. */
export interface EpochRange {
  readonly low: bigint;
  readonly high: bigint;
}

/** Floor division for bigints (BigInt's `/` truncates toward zero). */
function floorDiv(a: bigint, b: bigint): bigint {
  const q = a / b;
  return a % b !== 0n && a < 0n !== b < 0n ? q - 1n : q;
}

/**
 * The values, in `unit`, of the instants in [startMs - slackMs, endMs + slackMs): a folder's period
 * widened by the slack on both sides.
 */
export function epochRange(
  period: { readonly start: number; readonly end: number },
  slackMs: number,
  unit: TimeUnit,
): EpochRange {
  const ticks = TICKS_PER_SECOND[unit];
  const startTicks = BigInt(period.start - slackMs) * ticks;
  const endTicks = BigInt(period.end + slackMs) * ticks;
  // Ceil the start and floor the end (minus one tick): every value inside maps into the window.
  const low = -floorDiv(-startTicks, 1000n);
  const high = floorDiv(endTicks, 1000n) - (endTicks % 1000n === 0n ? 1n : 0n);
  return { low, high };
}

/** The instant an epoch value names, as ISO text, or why it has none a Date can show. */
export function describeEpoch(value: bigint, unit: TimeUnit): string {
  const ms = floorDiv(value * 1000n, TICKS_PER_SECOND[unit]);
  // ECMAScript Dates span ±8.64e15 ms (about ±275,000 years).
  if (ms > 8_640_000_000_000_000n || ms < -8_640_000_000_000_000n) {
    return `beyond year ${ms > 0n ? '275760' : '-271821'}`;
  }
  return new Date(Number(ms)).toISOString();
}

/** The other units that would place `value` inside `period` widened by the slack. */
export function unitsThatFit(
  value: bigint,
  period: { readonly start: number; readonly end: number },
  slackMs: number,
  declared: TimeUnit,
): TimeUnit[] {
  return TIME_UNITS.filter((unit) => {
    if (unit === declared) return false;
    const range = epochRange(period, slackMs, unit);
    return value >= range.low && value <= range.high;
  });
}

/**
 * Why an input's times do not belong to its folder's period, or undefined when every one does.
 * The reason names the values as instants, the period, and a unit that would fit, if one does.
 */
export function epochOutsideReason(
  column: string,
  unit: TimeUnit,
  period: { readonly start: number; readonly end: number },
  slackMs: number,
  found: IntegerOutside,
): string | undefined {
  if (found.rows === 0) return undefined;
  const range = epochRange(period, slackMs, unit);
  const odd = [found.min, found.max].find((v) => v !== null && (v < range.low || v > range.high));
  const example =
    odd === undefined || odd === null
      ? ''
      : `, e.g. ${odd} = ${describeEpoch(odd, unit)} in ${UNIT_NAMES[unit]}`;
  const fits = odd === undefined || odd === null ? [] : unitsThatFit(odd, period, slackMs, unit);
  const hint =
    fits.length > 0
      ? `; read as ${fits.map((u) => UNIT_NAMES[u]).join(' or ')} it would fit: check the writer's unit, or timeUnits`
      : '';
  const window = `${new Date(period.start).toISOString()} .. ${new Date(period.end).toISOString()}`;
  const slack = slackMs > 0 ? ` (±${slackMs / 3_600_000} h, retention.bufferHours)` : '';
  return `time outside its folder's period: ${found.rows} row(s) of "${column}" (an epoch in ${UNIT_NAMES[unit]}, timeUnits) lie outside ${window}${slack}${example}${hint}; readable, but not merged`;
}
