/**
 * Schema unification for one compaction job: the union of the inputs' columns, where a column whose
 * type differs between inputs is merged only by a widening that cannot change a value.
 */

import type { Column } from './engine.ts';
import { SchemaConflictError } from './errors.ts';

export interface InputSchema {
  /** Names the input in conflict messages (object key or file name). */
  readonly key: string;
  readonly columns: readonly Column[];
}

const SIGNED_BITS: Readonly<Record<string, number>> = {
  TINYINT: 8,
  SMALLINT: 16,
  INTEGER: 32,
  BIGINT: 64,
  HUGEINT: 128,
};

const UNSIGNED_BITS: Readonly<Record<string, number>> = {
  UTINYINT: 8,
  USMALLINT: 16,
  UINTEGER: 32,
  UBIGINT: 64,
  UHUGEINT: 128,
};

const FLOAT_TYPES: ReadonlySet<string> = new Set(['FLOAT', 'DOUBLE']);

interface Seen {
  readonly type: string;
  /** The first input that had this type. */
  readonly key: string;
}

interface Family {
  readonly name: string;
  readonly bits: number;
}

/** Integers of at most this many bits are exact as DOUBLE by their type alone (53-bit significand). */
const DOUBLE_EXACT_BITS = 53;

/** 2^53: every integer x with |x| <= 2^53 is exactly representable as a DOUBLE. */
export const DOUBLE_EXACT_LIMIT = 2n ** 53n;

/**
 * Whether a column's integer values, in the inputs that hold it as an integer wider than 53 bits,
 * are proved exact as DOUBLE (from footer statistics, by the caller), and if not, why.
 */
export type DoubleProof = { readonly proved: true } | { readonly proved: false; readonly reason: string };

/** A column some inputs hold as an integer and others as FLOAT or DOUBLE. */
export interface IntegerFloatMix {
  /** The column's name as the first input spells it. */
  readonly column: string;
  /** The inputs whose integer type is too wide to be exact as DOUBLE by type: they need a proof. */
  readonly needProof: readonly { readonly key: string; readonly name: string; readonly type: string }[];
}

/** The naive timestamps that widen into TIMESTAMPTZ (microseconds) without losing a digit. */
const NAIVE_TIMESTAMPS: ReadonlySet<string> = new Set(['TIMESTAMP', 'TIMESTAMP_S', 'TIMESTAMP_MS']);
const TIMESTAMPTZ = 'TIMESTAMP WITH TIME ZONE';

/** The per-table setting that lets a naive timestamp join TIMESTAMPTZ (named in conflicts). */
export const NAIVE_UTC_OPTION = 'naiveTimestampsUtc';

export interface UnifyOptions {
  /**
   * The table's naive timestamps are UTC: TIMESTAMP (and _S, _MS) beside TIMESTAMPTZ becomes
   * TIMESTAMPTZ, each naive value read as UTC. Off: such a mix is a conflict naming the option.
   */
  readonly naiveTimestampsUtc?: boolean;
  /**
   * Proofs for integer/float mixes by lower-cased column name: a proved column becomes DOUBLE.
   * A mix without a proof, or whose proof failed, is a conflict, as without this option.
   */
  readonly doubleProofs?: ReadonlyMap<string, DoubleProof>;
}

/**
 * The columns whose types are all integers and floats, both present: the only merge that needs a
 * proof about values. Their wider-than-53-bit integer inputs are listed; when there are none, the
 * type alone proves every value exact and the column needs an empty proof only.
 */
export function integerFloatMixes(inputs: readonly InputSchema[]): IntegerFloatMix[] {
  const byName = new Map<
    string,
    { column: string; families: Set<string>; needProof: IntegerFloatMix['needProof'][number][] }
  >();
  for (const input of inputs) {
    for (const column of input.columns) {
      const id = column.name.toLowerCase();
      let entry = byName.get(id);
      if (entry === undefined) {
        entry = { column: column.name, families: new Set(), needProof: [] };
        byName.set(id, entry);
      }
      const type = normalizeType(column.type);
      const family = familyOf(type);
      entry.families.add(family.name);
      if (family.name === 'integer' && family.bits > DOUBLE_EXACT_BITS) {
        entry.needProof.push({ key: input.key, name: column.name, type });
      }
    }
  }
  return [...byName.values()]
    .filter((e) => e.families.size === 2 && e.families.has('integer') && e.families.has('float'))
    .map(({ column, needProof }) => ({ column, needProof }));
}

/**
 * Union by column name in order of first appearance. Names match case-insensitively (as DuckDB's
 * union_by_name does); the first spelling wins. Types: identical stays; signed integers widen to the
 * widest present; an unsigned integer joins only a strictly wider signed one; FLOAT widens to DOUBLE;
 * integers and floats together become DOUBLE only with a proof in `options.doubleProofs` that every
 * integer value is exact as a DOUBLE. Anything else, nested types included, throws
 * SchemaConflictError naming both inputs and types (and why a mix was not proved).
 */
export function unifySchemas(
  partition: string,
  inputs: readonly InputSchema[],
  options: UnifyOptions = {},
): Column[] {
  const byName = new Map<string, { name: string; seen: Seen[] }>();
  for (const input of inputs) {
    for (const column of input.columns) {
      const id = column.name.toLowerCase();
      let entry = byName.get(id);
      if (entry === undefined) {
        entry = { name: column.name, seen: [] };
        byName.set(id, entry);
      }
      const type = normalizeType(column.type);
      if (!entry.seen.some((s) => s.type === type)) entry.seen.push({ type, key: input.key });
    }
  }
  return [...byName.values()].map(({ name, seen }) => ({
    name,
    type: resolve(
      partition,
      name,
      seen,
      options.doubleProofs?.get(name.toLowerCase()),
      options.naiveTimestampsUtc === true,
    ),
  }));
}

function resolve(
  partition: string,
  column: string,
  seen: readonly Seen[],
  proof: DoubleProof | undefined,
  naiveUtc: boolean,
): string {
  const [first] = seen;
  if (first === undefined) throw new Error(`column ${column} has no type`);
  if (seen.length === 1) return first.type;

  const conflict = (a: Seen, b: Seen, why = ''): never => {
    throw new SchemaConflictError(
      partition,
      column,
      `${a.type} in ${JSON.stringify(a.key)} vs ${b.type} in ${JSON.stringify(b.key)}${why}`,
    );
  };

  // Naive timestamps beside TIMESTAMPTZ: only when the table says its naive ones are UTC.
  if (
    seen.some((s) => s.type === TIMESTAMPTZ) &&
    seen.every((s) => s.type === TIMESTAMPTZ || NAIVE_TIMESTAMPS.has(s.type))
  ) {
    if (naiveUtc) return TIMESTAMPTZ;
    const other = seen.find((s) => s.type !== first.type) ?? first;
    return conflict(
      first,
      other,
      `; if this table's naive timestamps are UTC, list the table under ${NAIVE_UTC_OPTION} to merge them as TIMESTAMPTZ`,
    );
  }

  // Integers beside floats: DOUBLE only when every integer value is proved exact as one.
  const families = new Set(seen.map((s) => familyOf(s.type).name));
  const mix = families.size === 2 && families.has('integer') && families.has('float');
  if (mix && proof?.proved) return 'DOUBLE';
  const why = mix && proof !== undefined && !proof.proved ? `; not merged into DOUBLE: ${proof.reason}` : '';

  // Different families (integer, float, or any other exact type) never merge.
  const family = familyOf(first.type);
  const stranger = seen.find((s) => familyOf(s.type).name !== family.name);
  if (stranger !== undefined) return conflict(first, stranger, why);

  if (family.name === 'float') return 'DOUBLE';
  if (family.name === 'integer') {
    const widest = (pool: Seen[]) =>
      pool.reduce<Seen | undefined>(
        (best, s) => (best === undefined || familyOf(s.type).bits > familyOf(best.type).bits ? s : best),
        undefined,
      );
    const signed = widest(seen.filter((s) => s.type in SIGNED_BITS));
    const unsignedTypes = seen.filter((s) => s.type in UNSIGNED_BITS);
    const unsigned = widest(unsignedTypes);
    if (unsigned === undefined && signed !== undefined) return signed.type;
    if (unsigned !== undefined && signed === undefined) {
      // Several unsigned widths: only widening into a signed type is allowed.
      const [a, b] = unsignedTypes;
      if (a !== undefined && b !== undefined) return conflict(a, b);
    }
    if (unsigned !== undefined && signed !== undefined) {
      if (familyOf(signed.type).bits > familyOf(unsigned.type).bits) return signed.type;
      return conflict(unsigned, signed);
    }
  }
  // Same family, distinct exact types: e.g. two DECIMAL scales or two STRUCT shapes.
  const [, second] = seen;
  return conflict(first, second ?? first);
}

function familyOf(type: string): Family {
  const signed = SIGNED_BITS[type];
  if (signed !== undefined) return { name: 'integer', bits: signed };
  const unsigned = UNSIGNED_BITS[type];
  if (unsigned !== undefined) return { name: 'integer', bits: unsigned };
  if (FLOAT_TYPES.has(type)) return { name: 'float', bits: type === 'DOUBLE' ? 64 : 32 };
  // Every other type is its own family: it merges only with itself.
  return { name: `exact:${type}`, bits: 0 };
}

/** Simple type names compare case-insensitively; parameterised and nested types compare exactly. */
function normalizeType(type: string): string {
  const trimmed = type.trim();
  return /^[A-Za-z_]+$/.test(trimmed) ? trimmed.toUpperCase() : trimmed;
}
