import { describe, expect, it } from 'vitest';
import { type CompactorConfig, parseConfig, type TierName } from '../../functions/core/config.ts';
import { MAX_JOB_FILES } from '../../functions/core/config-schema.ts';
import { InvalidManifestError } from '../../functions/core/errors.ts';
import type { DataFile } from '../../functions/core/layout.ts';
import {
  isAtOrPast,
  MAX_STATS_TEXT,
  type Manifest,
  manifestKey,
  newJobId,
  outputKey,
  parseManifest,
  quarantinedInputKey,
  quarantinedManifestKey,
  serializeManifest,
  stagingPrefix,
} from '../../functions/core/manifest/manifest.ts';
import { partitionOf } from '../../functions/core/tiers.ts';

const LOCATION = 's3://data-lake-bucket';
const config = parseConfig({});
const { layout } = config;

const HOUR_FOLDER = 'mydb/cpu/2025/01/15/10/';
const DAY_FOLDER = 'mydb/cpu/2025/01/15/';
const JOB_ID = newJobId(new Date(Date.UTC(2025, 0, 15, 12, 0, 0, 123)), () => '0a1b2c3d');

function dataFile(key: string): DataFile {
  const file = layout.parse(key);
  if (!file) throw new Error(`test key ${key} does not parse`);
  return file;
}

type Mutable = Record<string, unknown>;

/** A valid hourly manifest (state staged, one output) as plain JSON. */
function hourly(overrides: Mutable = {}): Mutable {
  const first = dataFile(`${HOUR_FOLDER}cpu_20250115_100000_000000001.parquet`);
  return {
    version: 1,
    jobId: JOB_ID,
    executionId: 'arn:aws:states:eu-west-1:123456789012:execution:compactor:run-1',
    tier: 'hourly',
    partition: HOUR_FOLDER,
    location: LOCATION,
    state: 'staged',
    inputs: [1, 2, 3].map((i) => ({
      key: `${HOUR_FOLDER}cpu_20250115_1000${i}0_00000000${i}.parquet`,
      size: 1000 + i,
      etag: `"etag-${i}"`,
    })),
    inputRows: 300,
    outputs: [
      {
        stagingKey: `${stagingPrefix(layout, JOB_ID)}out-000.parquet`,
        finalKey: outputKey(layout, 'hourly', first, JOB_ID, 0),
        size: 2500,
        rows: 300,
        checksum: { algorithm: 'CRC32', value: 'AAAAAA==' },
      },
    ],
    createdAt: '2025-01-15T12:00:00.123Z',
    updatedAt: '2025-01-15T12:00:05.000Z',
    leaseExpiresAt: '2025-01-15T12:20:00.123Z',
    ...overrides,
  };
}

/** A valid daily manifest over L1 files of two hours and a small L2. */
function daily(overrides: Mutable = {}): Mutable {
  const dayFile = dataFile(`${DAY_FOLDER}cpu_20250115_daily.parquet`);
  return {
    ...hourly(),
    tier: 'daily',
    partition: DAY_FOLDER,
    inputs: [
      { key: `${DAY_FOLDER}10/cpu_20250115_compacted.parquet`, size: 10, etag: 'a' },
      {
        key: `${DAY_FOLDER}11/cpu_20250115_11_20250115T120000Z-00000000_000_compacted.parquet`,
        size: 11,
        etag: 'b',
      },
      { key: `${DAY_FOLDER}cpu_20250115_daily.parquet`, size: 12, etag: 'c' },
    ],
    outputs: [
      {
        stagingKey: `${stagingPrefix(layout, JOB_ID)}000.parquet`,
        finalKey: outputKey(layout, 'daily', dayFile, JOB_ID, 0),
        size: 30,
        rows: 3,
        checksum: { algorithm: 'CRC32', value: 'AAAAAA==' },
      },
    ],
    ...overrides,
  };
}

function keyOf(m: Mutable): string {
  return manifestKey(layout, m.tier as TierName, m.partition as string);
}

function parse(m: Mutable | string, key = typeof m === 'string' ? keyOf(hourly()) : keyOf(m)): Manifest {
  const text = typeof m === 'string' ? m : JSON.stringify(m);
  return parseManifest(config, LOCATION, key, Buffer.from(text));
}

/** The InvalidManifestError reason of parsing `m`; fails the test if it parses. */
function rejection(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidManifestError);
    const e = error as InvalidManifestError;
    expect(e.name).toBe('InvalidManifestError');
    return e.reason;
  }
  throw new Error('expected an InvalidManifestError');
}

function reasonFor(m: Mutable | string, key?: string, cfg: CompactorConfig = config): string {
  const text = typeof m === 'string' ? m : JSON.stringify(m);
  const k = key ?? (typeof m === 'string' ? keyOf(hourly()) : keyOf(m));
  return rejection(() => parseManifest(cfg, LOCATION, k, Buffer.from(text)));
}

function withInputs(base: Mutable, inputs: unknown[]): Mutable {
  return { ...base, inputs };
}

function withOutput(base: Mutable, change: Mutable): Mutable {
  const outputs = base.outputs as Mutable[];
  return { ...base, outputs: [{ ...outputs[0], ...change }] };
}

describe('key helpers', () => {
  it('builds state-root keys', () => {
    expect(manifestKey(layout, 'hourly', HOUR_FOLDER)).toBe(
      '_compaction/manifests/hourly/mydb/cpu/2025/01/15/10.json',
    );
    expect(manifestKey(layout, 'daily', DAY_FOLDER)).toBe(
      '_compaction/manifests/daily/mydb/cpu/2025/01/15.json',
    );
    expect(stagingPrefix(layout, JOB_ID)).toBe(`_compaction/staging/${JOB_ID}/`);
    const lake = parseConfig({ dataPrefix: 'lake' }).layout;
    expect(manifestKey(lake, 'hourly', `lake/${HOUR_FOLDER}`)).toBe(
      'lake/_compaction/manifests/hourly/mydb/cpu/2025/01/15/10.json',
    );
    expect(quarantinedInputKey(lake, `lake/${HOUR_FOLDER}a.parquet`)).toBe(
      `lake/_compaction/quarantine/inputs/${HOUR_FOLDER}a.parquet.json`,
    );
    expect(quarantinedManifestKey(layout, manifestKey(layout, 'hourly', HOUR_FOLDER), 'stamp')).toBe(
      '_compaction/quarantine/manifests/hourly/mydb/cpu/2025/01/15/10/stamp.json',
    );
  });

  it('makes sortable job ids and outputs that carry them', () => {
    expect(JOB_ID).toBe('20250115T120000Z-0a1b2c3d');
    const hourFile = dataFile(`${HOUR_FOLDER}a.parquet`);
    const out = outputKey(layout, 'hourly', hourFile, JOB_ID, 7);
    expect(out).toBe(`${HOUR_FOLDER}cpu_20250115_10_${JOB_ID}_007_compacted.parquet`);
    expect(layout.parse(out)).toMatchObject({ level: 1, hourFolder: HOUR_FOLDER });
    const dayOut = outputKey(layout, 'daily', hourFile, JOB_ID, 0);
    expect(dayOut).toBe(`${DAY_FOLDER}cpu_20250115_${JOB_ID}_000_daily.parquet`);
    expect(layout.parse(dayOut)).toMatchObject({ level: 2, dayFolder: DAY_FOLDER, hourFolder: undefined });
  });

  it('assigns each level to exactly one tier', () => {
    const l0 = dataFile(`${HOUR_FOLDER}a.parquet`);
    const l1 = dataFile(`${HOUR_FOLDER}a_compacted.parquet`);
    const l2 = dataFile(`${DAY_FOLDER}a_daily.parquet`);
    expect([partitionOf('hourly', l0), partitionOf('daily', l0)]).toEqual([HOUR_FOLDER, undefined]);
    expect([partitionOf('hourly', l1), partitionOf('daily', l1)]).toEqual([undefined, DAY_FOLDER]);
    expect([partitionOf('hourly', l2), partitionOf('daily', l2)]).toEqual([undefined, DAY_FOLDER]);
  });

  it('orders states', () => {
    expect(isAtOrPast({ state: 'verified' }, 'published')).toBe(true);
    expect(isAtOrPast({ state: 'staged' }, 'published')).toBe(false);
  });
});

describe('parseManifest accepts', () => {
  it('a valid hourly manifest', () => {
    const m = parse(hourly());
    expect(m).toMatchObject({ jobId: JOB_ID, tier: 'hourly', partition: HOUR_FOLDER, state: 'staged' });
    expect(m.inputs).toHaveLength(3);
    expect(m.outputs?.[0]?.finalKey).toContain(JOB_ID);
  });

  it('a claimed manifest without outputs', () => {
    const { outputs: _, ...claimed } = hourly({ state: 'claimed' });
    expect(parse(claimed).outputs).toBeUndefined();
  });

  it('a valid daily manifest over L1 files in hour folders and a small L2 in the day folder', () => {
    const m = parse(daily());
    expect(m).toMatchObject({ tier: 'daily', partition: DAY_FOLDER });
    expect(m.inputs.map((i) => i.key)).toEqual((daily().inputs as { key: string }[]).map((i) => i.key));
  });

  it('a manifest under a data prefix', () => {
    const cfg = parseConfig({ dataPrefix: 'lake' });
    const partition = `lake/${HOUR_FOLDER}`;
    const m = hourly({
      partition,
      inputs: [{ key: `${partition}a.parquet`, size: 1, etag: 'e' }],
      outputs: [
        {
          stagingKey: `${stagingPrefix(cfg.layout, JOB_ID)}0.parquet`,
          finalKey: outputKey(
            cfg.layout,
            'hourly',
            cfg.layout.parse(`${partition}a.parquet`) as DataFile,
            JOB_ID,
            0,
          ),
          size: 1,
          rows: 1,
          checksum: { algorithm: 'CRC32', value: 'AAAAAA==' },
        },
      ],
    });
    const key = manifestKey(cfg.layout, 'hourly', partition);
    expect(parseManifest(cfg, LOCATION, key, Buffer.from(JSON.stringify(m))).partition).toBe(partition);
    // The same manifest stored without the prefix is not this configuration's.
    expect(reasonFor(m, keyOf(m), cfg)).toMatch(/partition/);
  });

  it('keys with unusual characters', () => {
    const partition = 'my db+%#?[=/cpu é/2025/01/15/10/';
    const input = `${partition}x y+z%.parquet`;
    const m = hourly({
      partition,
      inputs: [{ key: input, size: 1, etag: 'e' }],
      outputs: [
        {
          stagingKey: `${stagingPrefix(layout, JOB_ID)}0.parquet`,
          finalKey: outputKey(layout, 'hourly', dataFile(input), JOB_ID, 0),
          size: 1,
          rows: 1,
          checksum: { algorithm: 'CRC32', value: 'AAAAAA==' },
        },
      ],
    });
    expect(parse(m).inputs[0]?.key).toBe(input);
  });

  it('round-trips through serializeManifest', () => {
    for (const base of [hourly(), daily(), hourly({ state: 'inputs-deleted', keptInputs: [] })]) {
      const m = parse(base);
      const bytes = serializeManifest(m);
      const again = parseManifest(config, LOCATION, keyOf(base), bytes);
      expect(again).toEqual(m);
      expect(serializeManifest(again).equals(bytes)).toBe(true);
    }
    const withReasons = parse(
      hourly({
        state: 'inputs-deleted',
        keptInputs: [{ key: `${HOUR_FOLDER}cpu_20250115_100010_000000001.parquet`, reason: 'etag changed' }],
        quarantinedInputs: [
          { key: `${HOUR_FOLDER}cpu_20250115_100020_000000002.parquet`, reason: 'bad footer' },
        ],
      }),
    );
    expect(parseManifest(config, LOCATION, keyOf(hourly()), serializeManifest(withReasons))).toEqual(
      withReasons,
    );
  });
});

describe('parseManifest with dedup', () => {
  const last = { dedup: { mode: 'last', keys: ['host', 'time'] }, distinctRows: 300, inputRows: 420 };

  it('accepts the dedup a job applied and the distinct rows its outputs hold, and round-trips them', () => {
    for (const fields of [last, { dedup: { mode: 'exact' }, distinctRows: 300, inputRows: 301 }]) {
      const m = parse(hourly(fields));
      expect(m).toMatchObject(fields);
      expect(parseManifest(config, LOCATION, keyOf(hourly()), serializeManifest(m))).toEqual(m);
    }
  });

  it('still accepts manifests written before dedup existed, with neither field', () => {
    const m = parse(hourly());
    expect(m.dedup).toBeUndefined();
    expect(m.distinctRows).toBeUndefined();
    expect(Object.keys(m)).not.toContain('dedup');
  });

  it('rejects dedup records that do not add up', () => {
    expect(reasonFor(hourly({ distinctRows: 300 }))).toBe(
      'dedup must be an object (distinctRows is recorded only with it)',
    );
    expect(reasonFor(hourly({ dedup: { mode: 'exact' } }))).toBe('distinctRows must be a whole number >= 0');
    expect(reasonFor(hourly({ ...last, dedup: { mode: 'last', keys: [] } }))).toMatch(/^dedup must be/);
    expect(reasonFor(hourly({ ...last, dedup: { mode: 'exact', keys: ['host'] } }))).toMatch(
      /^dedup must be/,
    );
    expect(reasonFor(hourly({ ...last, dedup: { mode: 'newest' } }))).toMatch(/^dedup must be/);
    expect(reasonFor(hourly({ ...last, inputRows: 299 }))).toBe('distinctRows 300 exceeds inputRows 299');
    expect(reasonFor(hourly({ ...last, distinctRows: 299, inputRows: 420 }))).toBe(
      'outputs hold 300 rows, not the 299 distinct rows recorded',
    );
  });
});

describe('parseManifest with what a receipt records', () => {
  const recorded = (): Mutable => {
    const base = hourly({ state: 'verified' });
    const outputs = base.outputs as Record<string, unknown>[];
    return {
      ...base,
      inputs: (base.inputs as Record<string, unknown>[]).map((i) => ({ ...i, rows: 100 })),
      outputs: outputs.map((o) => ({
        ...o,
        etag: '"final-etag"',
        columns: [
          { name: 'time', nulls: 0, min: '2025-01-15 10:00:00', max: '2025-01-15 10:59:59' },
          { name: 'tags', nulls: null, min: null, max: null },
        ],
      })),
    };
  };

  it("accepts inputs' rows, outputs' ETags and column statistics, and dedup's keys hash, and round-trips them", () => {
    const m = parse(recorded());
    expect(m.inputs[0]?.rows).toBe(100);
    expect(m.outputs?.[0]?.etag).toBe('"final-etag"');
    expect(m.outputs?.[0]?.columns?.[1]).toEqual({ name: 'tags', nulls: null, min: null, max: null });
    expect(parseManifest(config, LOCATION, keyOf(hourly()), serializeManifest(m))).toEqual(m);
    const deduped = parse(hourly({ dedup: { mode: 'exact' }, distinctRows: 300, keysHash: '12345' }));
    expect(deduped.keysHash).toBe('12345');
  });

  it('rejects them malformed', () => {
    const base = recorded();
    const output = (patch: Record<string, unknown>) => ({
      ...base,
      outputs: [{ ...(base.outputs as Record<string, unknown>[])[0], ...patch }],
    });
    expect(reasonFor(output({ columns: 'time' }))).toBe('outputs[0].columns must be a list');
    expect(reasonFor(output({ columns: [{ name: 'time', nulls: -1, min: null, max: null }] }))).toBe(
      'outputs[0].columns[0].nulls must be a whole number >= 0',
    );
    expect(
      reasonFor(
        output({ columns: [{ name: 'time', nulls: 0, min: 'x'.repeat(MAX_STATS_TEXT + 1), max: null }] }),
      ),
    ).toBe('outputs[0].columns[0].min must be text or null');
    expect(reasonFor(output({ etag: '' }))).toBe('outputs[0].etag must be a non-empty string');
    expect(
      reasonFor({ ...base, inputs: [{ ...(base.inputs as Record<string, unknown>[])[0], rows: 1.5 }] }),
    ).toBe('inputs[0].rows must be a whole number >= 0');
    // A keys hash is dedup's: without it the record does not add up.
    expect(reasonFor(hourly({ keysHash: '1' }))).toMatch(/^dedup must be an object/);
  });
});

describe('parseManifest rejects', () => {
  it('bad JSON', () => {
    expect(reasonFor('{"version": 1,')).toBe('not valid JSON');
    expect(reasonFor('')).toBe('not valid JSON');
    expect(reasonFor('[]')).toBe('not a JSON object');
    expect(reasonFor('null')).toBe('not a JSON object');
    expect(reasonFor('"manifest"')).toBe('not a JSON object');
  });

  it('a wrong version', () => {
    expect(reasonFor(hourly({ version: 2 }))).toBe('unknown version');
    expect(reasonFor(hourly({ version: '1' }))).toBe('unknown version');
    expect(reasonFor(hourly({ version: undefined }))).toBe('unknown version');
  });

  it.each([
    ['job-1'],
    ['20250115T120000Z-0A1B2C3D'],
    ['20250115T120000Z-0a1b'],
    ['20250115T120000Z-0a1b2c3d/..'],
    ['../20250115T120000Z-0a1b2c3d'],
    [''],
    [42],
  ])('a bad jobId %j', (jobId) => {
    expect(reasonFor(hourly({ jobId }))).toMatch(/jobId/);
  });

  it('an unknown tier or state', () => {
    expect(reasonFor(hourly({ tier: 'weekly' }), keyOf(hourly()))).toBe('unknown tier weekly');
    expect(reasonFor(hourly({ tier: undefined }), keyOf(hourly()))).toMatch(/unknown tier/);
    expect(reasonFor(hourly({ state: 'done' }))).toBe('unknown state done');
    expect(reasonFor(hourly({ state: 'cleared' }))).toBe('unknown state cleared');
  });

  it('a partition that does not match the manifest key', () => {
    const otherHour = 'mydb/cpu/2025/01/15/11/';
    expect(reasonFor(hourly(), manifestKey(layout, 'hourly', otherHour))).toBe(
      'partition does not match the manifest key',
    );
    // Right partition, other tier's key.
    expect(reasonFor(hourly(), manifestKey(layout, 'daily', DAY_FOLDER))).toBe(
      'partition does not match the manifest key',
    );
    expect(reasonFor(hourly(), '_compaction/manifests/hourly/mydb/cpu/2025/01/15/10')).toBe(
      'partition does not match the manifest key',
    );
  });

  it('a partition that is not a folder of the tier', () => {
    expect(reasonFor(hourly({ partition: 'mydb/cpu/2025/01/15/10' }))).toMatch(/folder ending in/);
    // A day folder in an hourly manifest, and an hour folder in a daily one.
    expect(reasonFor(hourly({ partition: DAY_FOLDER }))).toMatch(/not a hourly folder/);
    expect(reasonFor(daily({ partition: HOUR_FOLDER }))).toMatch(/not a daily folder/);
    expect(reasonFor(hourly({ partition: 'mydb/cpu/2025/02/30/10/' }))).toMatch(/not a hourly folder/);
    expect(reasonFor(hourly({ partition: 'mydb/../2025/01/15/10/' }))).toMatch(/not a plain object key/);
    expect(reasonFor(hourly({ partition: '_compaction/staging/2025/01/15/10/' }))).toMatch(
      /not a hourly folder/,
    );
  });

  it('an input outside the partition', () => {
    const otherHour = withInputs(hourly(), [{ key: 'mydb/cpu/2025/01/15/11/a.parquet', size: 1, etag: 'e' }]);
    expect(reasonFor(otherHour)).toMatch(
      /input "mydb\/cpu\/2025\/01\/15\/11\/a.parquet" is outside partition/,
    );
    const otherTable = withInputs(hourly(), [
      { key: 'mydb/mem/2025/01/15/10/a.parquet', size: 1, etag: 'e' },
    ]);
    expect(reasonFor(otherTable)).toMatch(/is outside partition/);
    const otherDb = withInputs(hourly(), [{ key: 'other/cpu/2025/01/15/10/a.parquet', size: 1, etag: 'e' }]);
    expect(reasonFor(otherDb)).toMatch(/is outside partition/);
    const stateRoot = withInputs(hourly(), [
      { key: '_compaction/staging/2025/01/15/10/a.parquet', size: 1, etag: 'e' },
    ]);
    expect(reasonFor(stateRoot)).toMatch(/is outside partition/);
    const notData = withInputs(hourly(), [{ key: `${HOUR_FOLDER}_SUCCESS`, size: 1, etag: 'e' }]);
    expect(reasonFor(notData)).toMatch(/is outside partition/);
    const otherDay = withInputs(daily(), [
      { key: 'mydb/cpu/2025/01/16/10/a_compacted.parquet', size: 1, etag: 'e' },
    ]);
    expect(reasonFor(otherDay)).toMatch(/is outside partition/);
  });

  it.each([
    `${HOUR_FOLDER}../11/a.parquet`,
    `${HOUR_FOLDER}./a.parquet`,
    'mydb/cpu/2025/01/15/10//a.parquet',
    `/${HOUR_FOLDER}a.parquet`,
    `${HOUR_FOLDER}a\0.parquet`,
  ])('an input key with a `..`, `.` or empty segment: %j', (key) => {
    expect(reasonFor(withInputs(hourly(), [{ key, size: 1, etag: 'e' }]))).toMatch(
      /is not a plain object key/,
    );
  });

  it('an input of the wrong level for the tier', () => {
    const l1InHourly = withInputs(hourly(), [
      { key: `${HOUR_FOLDER}cpu_20250115_compacted.parquet`, size: 1, etag: 'e' },
    ]);
    expect(reasonFor(l1InHourly)).toMatch(/not a hourly input/);
    const l0InDaily = withInputs(daily(), [{ key: `${HOUR_FOLDER}a.parquet`, size: 1, etag: 'e' }]);
    expect(reasonFor(l0InDaily)).toMatch(/not a daily input/);
  });

  it('another location (bucket)', () => {
    expect(reasonFor(hourly({ location: 's3://other-bucket' }))).toBe(
      'belongs to s3://other-bucket, not s3://data-lake-bucket',
    );
    expect(reasonFor(hourly({ location: undefined }))).toMatch(/belongs to undefined/);
  });

  it('more inputs than maxJobFiles can ever allow', () => {
    const many = Array.from({ length: MAX_JOB_FILES + 1 }, (_, i) => ({
      key: `${HOUR_FOLDER}f${String(i).padStart(5, '0')}.parquet`,
      size: 1,
      etag: 'e',
    }));
    expect(reasonFor(withInputs(hourly(), many))).toBe('10001 inputs exceed the largest job bound (10000)');
    // At the bound it parses.
    expect(parse(withInputs(hourly(), many.slice(0, MAX_JOB_FILES))).inputs).toHaveLength(MAX_JOB_FILES);
  });

  it('a live job planned under a higher maxJobFiles still parses after the setting is lowered', () => {
    const planned = Array.from({ length: 30 }, (_, i) => ({
      key: `${HOUR_FOLDER}f${String(i).padStart(5, '0')}.parquet`,
      size: 1,
      etag: 'e',
    }));
    const lowered = parseConfig({ maxJobFiles: 10 });
    const m = withInputs(hourly(), planned);
    const parsed = parseManifest(lowered, LOCATION, keyOf(m), Buffer.from(JSON.stringify(m)));
    expect(parsed.inputs).toHaveLength(30);
  });

  it('no inputs', () => {
    expect(reasonFor(withInputs(hourly(), []))).toBe('inputs must be a non-empty list');
    expect(reasonFor(hourly({ inputs: 'x' }))).toBe('inputs must be a non-empty list');
  });

  it('duplicate inputs', () => {
    const inputs = hourly().inputs as Mutable[];
    const dup = withInputs(hourly(), [...inputs, { ...inputs[1], etag: 'other' }]);
    expect(reasonFor(dup)).toMatch(/is listed twice/);
  });

  it('bad input sizes and etags', () => {
    const inputs = hourly().inputs as Mutable[];
    expect(reasonFor(withInputs(hourly(), [{ ...inputs[0], size: -1 }]))).toMatch(/inputs\[0\]\.size/);
    expect(reasonFor(withInputs(hourly(), [{ ...inputs[0], size: 1.5 }]))).toMatch(/inputs\[0\]\.size/);
    expect(reasonFor(withInputs(hourly(), [{ ...inputs[0], etag: '' }]))).toMatch(/inputs\[0\]\.etag/);
    expect(reasonFor(withInputs(hourly(), [null]))).toMatch(/inputs\[0\] is not an object/);
  });

  it('a staged (or later) state without outputs', () => {
    for (const state of ['staged', 'published', 'verified', 'inputs-deleted']) {
      const { outputs: _, ...m } = hourly({ state });
      expect(reasonFor(m)).toBe(`state ${state} without outputs`);
    }
    expect(reasonFor(hourly({ outputs: [] }))).toBe('outputs must be a non-empty list');
  });

  it('an output key without the job id', () => {
    const m = withOutput(hourly(), { finalKey: `${HOUR_FOLDER}cpu_20250115_10_other_000_compacted.parquet` });
    expect(reasonFor(m)).toMatch(/is not an output of this job/);
    const otherJob = newJobId(new Date(Date.UTC(2025, 0, 15, 12)), () => 'ffffffff');
    const theirs = withOutput(hourly(), {
      finalKey: `${HOUR_FOLDER}cpu_20250115_10_${otherJob}_000_compacted.parquet`,
    });
    expect(reasonFor(theirs)).toMatch(/is not an output of this job/);
  });

  it('an output key in another folder or of the wrong level', () => {
    const otherHour = withOutput(hourly(), {
      finalKey: `mydb/cpu/2025/01/15/11/cpu_20250115_11_${JOB_ID}_000_compacted.parquet`,
    });
    expect(reasonFor(otherHour)).toMatch(/is not an output of this job in mydb\/cpu\/2025\/01\/15\/10\//);
    const otherTable = withOutput(hourly(), {
      finalKey: `mydb/mem/2025/01/15/10/cpu_20250115_10_${JOB_ID}_000_compacted.parquet`,
    });
    expect(reasonFor(otherTable)).toMatch(/is not an output of this job/);
    const l0Name = withOutput(hourly(), { finalKey: `${HOUR_FOLDER}cpu_${JOB_ID}.parquet` });
    expect(reasonFor(l0Name)).toMatch(/is not an output of this job/);
    const dailyInHourFolder = withOutput(daily(), {
      finalKey: `${HOUR_FOLDER}cpu_${JOB_ID}_000_daily.parquet`,
    });
    expect(reasonFor(dailyInHourFolder)).toMatch(/is not an output of this job/);
    const l1InDaily = withOutput(daily(), { finalKey: `${HOUR_FOLDER}cpu_${JOB_ID}_000_compacted.parquet` });
    expect(reasonFor(l1InDaily)).toMatch(/is not an output of this job/);
    const inStaging = withOutput(hourly(), {
      finalKey: `_compaction/staging/2025/01/15/10/cpu_${JOB_ID}_000_compacted.parquet`,
    });
    expect(reasonFor(inStaging)).toMatch(/is not an output of this job/);
  });

  it('a staging key outside staging/{jobId}/', () => {
    const otherJob = newJobId(new Date(Date.UTC(2025, 0, 15, 12)), () => 'ffffffff');
    for (const stagingKey of [
      `${stagingPrefix(layout, otherJob)}out-000.parquet`,
      `_compaction/staging/${JOB_ID}0/out-000.parquet`,
      `_compaction/staging/out-000.parquet`,
      `${HOUR_FOLDER}out-000.parquet`,
      `lake/${stagingPrefix(layout, JOB_ID)}out-000.parquet`,
    ]) {
      expect(reasonFor(withOutput(hourly(), { stagingKey }))).toMatch(/^staging key ".*" is outside/);
    }
    const dotDot = withOutput(hourly(), { stagingKey: `${stagingPrefix(layout, JOB_ID)}../other/x.parquet` });
    expect(reasonFor(dotDot)).toMatch(/not a plain object key/);
  });

  it('a bad checksum', () => {
    for (const checksum of [
      undefined,
      null,
      'AAAAAA==',
      { algorithm: 'MD5', value: 'AAAAAA==' },
      { algorithm: 'crc32', value: 'AAAAAA==' },
      { algorithm: 'CRC32' },
      { algorithm: 'CRC32', value: 123 },
    ]) {
      expect(reasonFor(withOutput(hourly(), { checksum }))).toBe(
        'outputs[0].checksum must be a CRC32 checksum',
      );
    }
  });

  it('bad times and kept inputs outside the partition', () => {
    expect(reasonFor(hourly({ createdAt: 'yesterday' }))).toBe('createdAt is not a time');
    expect(reasonFor(hourly({ leaseExpiresAt: undefined }))).toMatch(/leaseExpiresAt/);
    const kept = hourly({ keptInputs: [{ key: 'mydb/cpu/2025/01/15/11/a.parquet', reason: 'changed' }] });
    expect(reasonFor(kept)).toBe('keptInputs[0] is outside the partition');
  });
});
