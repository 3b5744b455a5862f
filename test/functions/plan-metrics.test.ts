/**
 * The Plan step's ExecutionsPlanned metric, which the stack's missed-start alarm per tier reads
 * (cdk/constructs/monitoring.ts): one per execution, under the dimension set {service, tier}, so a
 * tier whose schedule never starts anything shows as missing data for that tier alone. And a
 * compaction tier's backlog figures beside it, which the backlog alarm per tier reads.
 */

import { join } from 'node:path';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { describe, expect, it } from 'vitest';
import { LocalFolderStore } from '../../functions/adapters/local-store/local-store.ts';
import { parseConfig } from '../../functions/core/config.ts';
import { systemClock } from '../../functions/core/engine.ts';
import { backlogRecordKey } from '../../functions/core/planner/planner.ts';
import type { HandlerDeps } from '../../functions/lambda/handler-kit.ts';
import { localObservability } from '../../functions/local-runner/lambdas.ts';
import { planStep } from '../../functions/plan.ts';
import { metricNames, metricTotal } from '../support/emf.ts';
import { useTempDir } from '../support/engine-fixture.ts';

let dir: string;
useTempDir('plan-metrics-', (d) => {
  dir = d;
});

/** A lake of its own (an empty folder) per test. */
function deps(lake: string): HandlerDeps {
  const root = join(dir, lake);
  return {
    store: new LocalFolderStore(root),
    bucket: 'local-data-bucket',
    config: parseConfig({}),
    clock: systemClock,
    engine: async () => {
      throw new Error('Plan needs no engine');
    },
    workDir: join(root, 'work'),
    isOwnerAlive: async () => false,
    randomHex: () => 'abcdef01',
  };
}

describe('the Plan step counts its execution for the missed-start alarm', () => {
  it.each(['hourly', 'daily', 'retention'] as const)(
    'emits ExecutionsPlanned = 1 with dimension tier=%s, even when nothing is to do',
    async (tier) => {
      const metrics = new Metrics({ namespace: 'Compactor', serviceName: 'compactor' });
      const output = await planStep(
        { tier, executionId: 'arn:exec', executionName: `n-${tier}` },
        deps(tier),
        {
          ...localObservability(),
          metrics,
          signal: new AbortController().signal,
        },
      );
      expect(output.jobs).toBe(0);
      expect(metricTotal(metrics, 'ExecutionsPlanned')).toBe(1);
      const emf = metrics.serializeMetrics() as unknown as {
        _aws: { CloudWatchMetrics: { Dimensions: string[][] }[] };
        tier: string;
        service: string;
      };
      // The alarm's metric has exactly these dimensions: EMF publishes one metric per dimension set.
      expect(emf._aws.CloudWatchMetrics[0]?.Dimensions).toEqual([['service', 'tier']]);
      expect({ service: emf.service, tier: emf.tier }).toEqual({ service: 'compactor', tier });
    },
  );

  it('does not count a run scoped to one table (a canary is not the scheduled run)', async () => {
    const metrics = new Metrics({ namespace: 'Compactor', serviceName: 'compactor' });
    await planStep(
      { tier: 'hourly', executionId: 'arn:exec', executionName: 'canary', only: 'db/canary/' },
      deps('canary'),
      { ...localObservability(), metrics, signal: new AbortController().signal },
    );
    expect(metricTotal(metrics, 'ExecutionsPlanned')).toBe(0);
  });
});

describe('the Plan step publishes the backlog the backlog alarm reads', () => {
  /** `count` raw files in one hour folder of the lake. */
  async function hour(store: LocalFolderStore, folder: string, count: number): Promise<void> {
    for (let i = 1; i <= count; i++) {
      await store.put(
        `${folder}cpu_20250115_100000_${String(i).padStart(9, '0')}.parquet`,
        Buffer.alloc(8, 1),
      );
    }
  }

  it('emits OldestEligibleAgeSeconds and EligiblePartitions with dimension tier, as its output says', async () => {
    const lake = deps('backlog');
    await hour(lake.store as LocalFolderStore, 'db/cpu/2025/01/15/10/', 10);
    await hour(lake.store as LocalFolderStore, 'db/cpu/2025/01/15/12/', 10);
    const metrics = new Metrics({ namespace: 'Compactor', serviceName: 'compactor' });
    const output = await planStep(
      { tier: 'hourly', executionId: 'arn:exec', executionName: 'backlog' },
      lake,
      {
        ...localObservability(),
        metrics,
        signal: new AbortController().signal,
      },
    );
    expect(output.backlog).toMatchObject({
      eligiblePartitions: 2,
      oldestEligiblePartition: 'db/cpu/2025/01/15/10/',
      behind: true,
    });
    expect(metricTotal(metrics, 'EligiblePartitions')).toBe(2);
    expect(metricTotal(metrics, 'OldestEligibleAgeSeconds')).toBe(output.backlog?.oldestEligibleAgeSeconds);
    // 10:00-11:00 on 2025-01-15 became due at 12:00 (minAge 1 h).
    expect(output.backlog?.oldestEligibleAgeSeconds).toBe(
      Math.floor((Date.parse(output.plannedAt) - Date.parse('2025-01-15T12:00:00Z')) / 1000),
    );
    const emf = metrics.serializeMetrics() as unknown as {
      _aws: { CloudWatchMetrics: { Dimensions: string[][] }[] };
    };
    expect(emf._aws.CloudWatchMetrics[0]?.Dimensions).toEqual([['service', 'tier']]);
  });

  it('a windowed plan lists again what the backlog record carries: it keeps an old backlog in view and clears it once drained', async () => {
    const lake = deps('windowed');
    const store = lake.store as LocalFolderStore;
    const old = 'db/cpu/2025/01/15/10/';
    await hour(store, old, 10);
    const plan = async (name: string) => {
      const metrics = new Metrics({ namespace: 'Compactor', serviceName: 'compactor' });
      const tools = { ...localObservability(), metrics, signal: new AbortController().signal };
      const output = await planStep(
        { tier: 'hourly', executionId: 'arn:exec', executionName: name },
        lake,
        tools,
      );
      return { output, names: metricNames(metrics), age: metricTotal(metrics, 'OldestEligibleAgeSeconds') };
    };
    // The first plan sweeps (no sweep recorded yet): it sees the old hour and says behind.
    const sweep = await plan('sweep');
    expect(sweep.output).toMatchObject({
      listing: 'sweep',
      backlog: { eligiblePartitions: 1, behind: true },
    });
    expect(sweep.names).toContain('OldestEligibleAgeSeconds');
    // The next lists recent windows, and the old hour again, alone: the sweep's record carries it.
    const narrow = await plan('narrow');
    expect(narrow.output).toMatchObject({
      listing: 'windows',
      backlog: { eligiblePartitions: 1, oldestEligiblePartition: old, behind: true },
    });
    expect(narrow.age).toBeGreaterThan(3 * 3600);
    // Compacted since (one hourly output where the ten files were): the next windowed plan finds
    // nothing eligible and publishes an age of 0, which returns the alarm to OK before the sweep.
    const keys: string[] = [];
    for await (const o of store.list(old)) keys.push(o.key);
    await store.deleteMany(keys.map((key) => ({ key })));
    await store.put(`${old}cpu_20250115_100000_compacted.parquet`, Buffer.alloc(8, 1));
    const drained = await plan('drained');
    expect(drained.output).toMatchObject({
      listing: 'windows',
      backlog: { eligiblePartitions: 0, behind: false },
    });
    expect(drained.names).toContain('OldestEligibleAgeSeconds');
    expect(drained.age).toBe(0);
    // Without the record (expired, or written by a stack from before it), a windowed plan cannot
    // see an older backlog drain: it publishes the age only when behind, so the alarm keeps its state.
    await store.deleteMany([{ key: backlogRecordKey(lake.config, 'hourly') }]);
    const blind = await plan('blind');
    expect(blind.output).toMatchObject({
      listing: 'windows',
      backlog: { eligiblePartitions: 0, behind: false },
    });
    expect(blind.output.listingReason).toContain('no backlog record');
    expect(blind.names).not.toContain('OldestEligibleAgeSeconds');
    expect(blind.names).toContain('EligiblePartitions');
    // A recent hour already past the threshold is in the window: that plan says behind, and publishes.
    const tenHoursAgo = Math.floor(Date.now() / 3_600_000) * 3_600_000 - 10 * 3_600_000;
    const iso = new Date(tenHoursAgo).toISOString();
    await hour(
      store,
      `db/cpu/${iso.slice(0, 4)}/${iso.slice(5, 7)}/${iso.slice(8, 10)}/${iso.slice(11, 13)}/`,
      10,
    );
    await store.deleteMany([{ key: backlogRecordKey(lake.config, 'hourly') }]);
    const behind = await plan('behind');
    expect(behind.output).toMatchObject({
      listing: 'windows',
      backlog: { eligiblePartitions: 1, behind: true },
    });
    expect(behind.names).toContain('OldestEligibleAgeSeconds');
  });

  it('publishes none for retention or for a run scoped to one table', async () => {
    for (const [name, event] of [
      ['retention', { tier: 'retention' as const }],
      ['scoped', { tier: 'hourly' as const, only: 'db/cpu/' }],
    ] as const) {
      const metrics = new Metrics({ namespace: 'Compactor', serviceName: 'compactor' });
      const output = await planStep({ ...event, executionId: 'arn:exec', executionName: name }, deps(name), {
        ...localObservability(),
        metrics,
        signal: new AbortController().signal,
      });
      expect(metricNames(metrics)).not.toContain('OldestEligibleAgeSeconds');
      expect(metricNames(metrics)).not.toContain('EligiblePartitions');
      expect(output.backlog === null).toBe(name === 'retention');
    }
  });
});
