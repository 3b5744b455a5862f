/**
 * The compact step's checks of what may be merged: integer and float columns proven exact as
 * DOUBLE, epoch times inside the folder's period, and the dedup request.
 */

import type { CompactorConfig, TierName } from '../config.ts';
import { dedupOf, type TimeUnit, timeColumnOf } from '../config-tables.ts';
import type { DedupRequest, Engine, InputInfo } from '../engine.ts';
import { epochOutsideReason, epochRange, isEpochIntegerType } from '../epoch-time.ts';
import { ConfigError, DedupError, ManifestConflictError, SchemaConflictError } from '../errors.ts';
import type { CompactDeps } from '../job.ts';
import type { DataFile } from '../layout.ts';
import type { InputRef, KeptInput } from '../manifest/manifest.ts';
import { DOUBLE_EXACT_LIMIT, type DoubleProof, type IntegerFloatMix } from '../schema.ts';
import { tierPeriod } from '../tiers.ts';

/**
 * For each column held as an integer by some inputs and as a float by others: a proof, from footer
 * statistics, that every integer value is exact as a DOUBLE (|x| <= 2^53), or why there is none.
 * Integers of up to 53 bits are exact by type. A wider one needs min_value/max_value statistics in
 * every row group of every input holding it, within the bound: a file without them is no proof.
 * The values are then checked against the claim (one column of those inputs is read).
 */
export async function proveDoubles(
  engine: Engine,
  mixes: readonly IntegerFloatMix[],
  pathOf: ReadonlyMap<string, string>,
): Promise<Map<string, DoubleProof>> {
  const proofs = new Map<string, DoubleProof>();
  for (const { column, needProof } of mixes) {
    let proof: DoubleProof = { proved: true };
    for (const { key, name, type } of needProof) {
      const path = pathOf.get(key);
      const where = `${type} column "${name}" of ${JSON.stringify(key)}`;
      if (path === undefined || engine.integerBounds === undefined) {
        proof = { proved: false, reason: `no statistics can be read for the ${where}` };
        break;
      }
      const bounds = await engine.integerBounds(path, name);
      if ('unproved' in bounds) {
        proof = {
          proved: false,
          reason: `the ${where}: ${bounds.unproved}, so its values are not proved exact`,
        };
        break;
      }
      const outside = [bounds.min, bounds.max].find(
        (v) => v !== null && (v > DOUBLE_EXACT_LIMIT || v < -DOUBLE_EXACT_LIMIT),
      );
      if (outside !== undefined && outside !== null) {
        proof = {
          proved: false,
          reason: `the ${where} holds ${outside}, beyond ±2^53, which a DOUBLE cannot hold exactly`,
        };
        break;
      }
      // Verified, not assumed: statistics are the writer's claim; the values themselves must agree.
      const inexact =
        engine.countInexactAsDouble === undefined ? undefined : await engine.countInexactAsDouble(path, name);
      if (inexact !== 0) {
        proof = {
          proved: false,
          reason:
            inexact === undefined
              ? `the values of the ${where} cannot be checked`
              : `the statistics of the ${where} say every value is within ±2^53, but ${inexact} of its values are not exact as DOUBLE (the statistics are wrong)`,
        };
        break;
      }
    }
    proofs.set(column.toLowerCase(), proof);
  }
  return proofs;
}

/**
 * Why a readable input is foreign to its partition, or undefined when it belongs: an input without
 * the time column (matched case-insensitively, as the schema union matches names) is set aside
 * like a corrupt one. Merged, its rows would get NULL times, sort last, escape retention, and the
 * original would be deleted.
 */
export function foreignReason(timeColumn: string, info: InputInfo): string | undefined {
  const wanted = timeColumn.toLowerCase();
  if (info.columns.some((c) => c.name.toLowerCase() === wanted)) return undefined;
  return `foreign to its partition: no time column "${timeColumn}" (columns: ${shownColumns(info)}); readable, but not merged`;
}

/** An input's column names for a message: the first ten, then "...". */
export function shownColumns(info: InputInfo): string {
  const names = info.columns.map((c) => c.name);
  return names.length > 10 ? `${names.slice(0, 10).join(', ')}, ...` : names.join(', ');
}

/** An input downloaded to `path` whose footer `info` checked out. */
export interface GoodInput {
  readonly input: InputRef;
  readonly path: string;
  readonly info: InputInfo;
}

/**
 * The inputs of an integer epoch table whose times, read in the declared unit, lie outside the
 * partition's period widened by retention.bufferHours (retention, judging by path, stays right
 * within it), counted from the data. A time column that is not an integer is a schema conflict:
 * the declared unit is wrong for the table, and the stored type is never converted.
 */
export async function epochMisfits(
  deps: CompactDeps,
  tier: TierName,
  partition: string,
  partitionFile: DataFile,
  unit: TimeUnit,
  inputs: readonly GoodInput[],
): Promise<{ input: GoodInput; kept: KeptInput }[]> {
  const { config, engine } = deps;
  const table = partitionFile.table.slice(config.layout.dataPrefix.length);
  const period = tierPeriod(tier, partitionFile);
  if (period === undefined) throw new ManifestConflictError(`${partition} has no ${tier} period`);
  const slackMs = config.retention.bufferHours * 3_600_000;
  const range = epochRange(period, slackMs, unit);
  const wanted = timeColumnOf(config, partitionFile.table).toLowerCase();
  const misfits: { input: GoodInput; kept: KeptInput }[] = [];
  for (const good of inputs) {
    const column = good.info.columns.find((c) => c.name.toLowerCase() === wanted);
    if (column === undefined) continue; // foreign inputs were set aside already
    if (!isEpochIntegerType(column.type)) {
      throw new SchemaConflictError(
        partition,
        column.name,
        `${column.type} in ${JSON.stringify(good.input.key)}, but timeUnits[${JSON.stringify(table)}] declares it an integer epoch in "${unit}"; the stored type is never converted: remove the table from timeUnits, or rewrite the file with an integer time`,
      );
    }
    if (engine.integerOutside === undefined) {
      throw new ConfigError(
        `timeUnits[${JSON.stringify(table)}]: this engine cannot read an integer column's range, so epoch times cannot be checked; remove the table from timeUnits`,
      );
    }
    const found = await engine.integerOutside(good.path, column.name, range.low, range.high);
    const reason = epochOutsideReason(column.name, unit, period, slackMs, found);
    if (reason !== undefined) misfits.push({ input: good, kept: { key: good.input.key, reason } });
  }
  return misfits;
}

/**
 * The engine's dedup for a partition of `table`, or undefined when the table has none. The time
 * column is part of every 'last' key; a key column the inputs lack fails the partition, since
 * comparing without it would merge different series.
 */
export function dedupRequest(
  config: CompactorConfig,
  table: string,
  columns: readonly { readonly name: string }[],
): DedupRequest | undefined {
  const setting = dedupOf(config, table);
  if (setting?.mode !== 'last') return setting;
  const keys = [...setting.keys, timeColumnOf(config, table)];
  const present = new Set(columns.map((c) => c.name.toLowerCase()));
  const missing = keys.filter((k) => !present.has(k.toLowerCase()));
  if (missing.length > 0) {
    throw new DedupError(
      `table ${table}: dedup "last" keys on ${keys.join(', ')}, but the inputs have no column ${missing.join(', ')}; fix dedup["${table.slice(config.layout.dataPrefix.length)}"].keys (or the table's time column: timeColumns, timeColumn) or the data. Nothing was published`,
    );
  }
  return { mode: 'last', keys };
}

export function describeDedup(dedup: DedupRequest): string {
  return dedup.mode === 'exact' ? '"exact"' : `"last" on ${dedup.keys.join(', ')}`;
}
