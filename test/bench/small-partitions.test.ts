import { describe, expect, it } from 'vitest';
import { PARTITION_BUCKETS, type PartitionProfile } from '../../bench/partition-profile.ts';
import { type SmallPartitionsResult, smallPartitionsTargets } from '../../bench/small-partitions.ts';

const side = (wallMs: number) => ({ wallMs, cpuMs: wallMs, peakRssMiB: 200 });
const result = (productMs: number): SmallPartitionsResult => ({
  shape: { tables: 1, hours: 10, files: 10, rows: 50 },
  partitions: 10,
  files: 100,
  rows: 5000,
  concurrency: 4,
  product: side(productMs),
  duckdb: side(100),
  wallRatio: productMs / 100,
  cpuRatio: productMs / 100,
  productMsPerPartition: productMs / 10,
  duckdbMsPerPartition: 10,
});

describe('smallPartitionsTargets', () => {
  it("names the profile's three largest buckets, largest first, as the cause of a missed ratio", () => {
    const ms: Partial<Record<(typeof PARTITION_BUCKETS)[number], number>> = {
      fsyncs: 7,
      'other store calls': 20,
      'manifest requests': 11,
      interpreter: 1,
    };
    const profile: PartitionProfile = {
      shape: { tables: 1, hours: 10, files: 10, rows: 50 },
      partitions: 10,
      concurrency: 1,
      wallMs: 400,
      wallMsPerPartition: 40,
      cpuMs: 100,
      buckets: PARTITION_BUCKETS.map((bucket) => ({ bucket, msPerPartition: ms[bucket] ?? 0.1 })),
      loadAverage: [1, 1, 1],
    };
    const [ratio] = smallPartitionsTargets(result(500), profile);
    expect(ratio?.met).toBe(false);
    expect(ratio?.cause).toBe(
      "50 ms per partition against the loop's 10 ms: the profiled chain's largest buckets per partition: " +
        'other store calls 20.0 ms, manifest requests 11.0 ms, fsyncs 7.0 ms, of 40.0 ms (see its profile)',
    );
  });

  it("adds the disk's measured file-creation cost to the cause when the result has it", () => {
    const measured = { ...result(500), fileCreateUs: { median: 598.4, min: 21.2, max: 673.9 } };
    expect(smallPartitionsTargets(measured)[0]?.cause).toMatch(
      /; creating a file took 598 us here \(21-674\), which a chain pays for each object version and new folder it writes/,
    );
    expect(smallPartitionsTargets(result(500))[0]?.cause).not.toMatch(/creating a file/);
  });

  it('gives no cause when the ratio is met, and points to the profile script without a profile', () => {
    expect(smallPartitionsTargets(result(150))[0]?.cause).toBeUndefined();
    expect(smallPartitionsTargets(result(500))[0]?.cause).toMatch(/small-partitions-profile\.ts/);
  });
});
