/**
 * Liveness: a partition whose job fails K times in a row is reported and skipped with
 * exponential backoff instead of being retried forever, never blocks other partitions, is tried
 * again once its backoff ends, and loses its failure record when it finally compacts.
 */

import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { readIds } from '../../functions/adapters/sample-data.ts';
import { parseConfig } from '../../functions/core/config.ts';
import { runCycle } from '../../functions/core/cycle.ts';
import { backoffSeconds, failureKey, readFailures } from '../../functions/core/failures.ts';
import { ForwardingStore, type ObjectStore } from '../../functions/core/object-store.ts';
import { planTier } from '../../functions/core/planner/planner.ts';
import type { JobEvent } from '../../functions/core/protocol.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { sweepDeps, writeLake } from '../support/lake-harness.ts';
import { testStore } from '../support/test-store.ts';

const BAD = 'db/cpu/2025/01/15/10/cpu_20250115_104500_bad.parquet';
const config = parseConfig({
  tiers: { hourly: { minFiles: 2 } },
  quietSeconds: 0,
  failureBackoff: { after: 3, baseSeconds: 3600, maxSeconds: 86_400 },
});

let engine: DuckDbEngine;
let dir: string;
/** The steps' local work dir, and where the bad file is written before it is put. */
let work: string;
let total: number;

useEngineAndDir('failures-', async (e, root) => {
  engine = e;
  dir = join(root, 'lake');
  work = join(root, 'work');
  await mkdir(work);
  total = await writeLake(engine, dir, [
    { key: 'db/cpu/2025/01/15/10/cpu_20250115_100500_1.parquet', rows: 20 },
    { key: 'db/cpu/2025/01/15/10/cpu_20250115_101500_2.parquet', rows: 20 },
    { key: 'db/cpu/2025/01/15/11/cpu_20250115_110500_3.parquet', rows: 20 },
    { key: 'db/cpu/2025/01/15/11/cpu_20250115_111500_4.parquet', rows: 20 },
  ]);
  await putBadFile(dir);
});

/** Puts BAD, a file whose `count` is text: hour 10 fails with a schema conflict every time. */
async function putBadFile(lake: string): Promise<void> {
  const bad = join(work, `${Date.now()}-${Math.random().toString(16).slice(2)}-bad.parquet`);
  await engine.query(
    `COPY (SELECT 1000 AS id, TIMESTAMP '2025-01-15 10:50:00' AS time, 'h' AS host, 'r' AS region, 1.0 AS value, 'text' AS count) TO '${bad}' (FORMAT parquet)`,
  );
  await testStore(lake).put(BAD, { file: bad });
  await rm(bad);
}

describe('a partition that keeps failing', () => {
  it('is skipped with backoff after 3 failures, never blocks others, and recovers once fixed', async () => {
    const store = testStore(dir);
    let now = Date.now() + 3600_000;
    const clock = { now: () => new Date(now) };
    const cycle = async (n: number) =>
      runCycle(
        { ...sweepDeps(store, config, engine, join(work, 'steps'), `exec-${n}`, new Set()), clock },
        'hourly',
      );

    // Three cycles: hour 10 fails each time with a named error; hour 11 compacts in the first.
    for (let n = 1; n <= 3; n++) {
      const report = await cycle(n);
      const failed = report.jobs.filter((j) => j.outcome.status === 'failed');
      expect(failed.map((j) => j.job.partition)).toEqual(['db/cpu/2025/01/15/10/']);
      expect(failed[0]?.outcome.status === 'failed' && failed[0].outcome.error.name).toBe(
        'SchemaConflictError',
      );
      if (n === 1) expect(report.jobs.filter((j) => j.outcome.status === 'compacted')).toHaveLength(1);
      now += 60_000;
    }
    const key = failureKey(config, 'hourly', 'db/cpu/2025/01/15/10/');
    const record = (await readFailures(store, config)).get(key);
    expect(record).toMatchObject({ consecutiveFailures: 3 });
    expect(record?.lastError).toContain('SchemaConflictError');

    // Now it is skipped, with the reason, until its backoff ends.
    const plan = await planTier(store, config, clock, 'hourly');
    expect(plan.jobs).toEqual([]);
    expect(plan.skipped.find((s) => s.partition === 'db/cpu/2025/01/15/10/')?.reason).toMatch(
      /^failed 3 times in a row \(last: SchemaConflictError: .*\); next attempt after /,
    );
    expect((await cycle(4)).jobs).toEqual([]);

    // After the backoff it is tried again, fails again, and waits twice as long.
    now = Date.parse(record?.nextAttemptAt ?? '') + 1000;
    expect((await cycle(5)).jobs.map((j) => j.outcome.status)).toEqual(['failed']);
    const again = (await readFailures(store, config)).get(key);
    expect(again?.consecutiveFailures).toBe(4);
    expect(Date.parse(again?.nextAttemptAt ?? '') - now).toBeGreaterThanOrEqual(
      backoffSeconds(config, 4) * 1000 - 5000,
    );
    expect(backoffSeconds(config, 4)).toBe(7200);

    // Fixed by the operator (the odd file removed): the next attempt compacts and clears the record.
    await store.deleteMany([{ key: BAD }]);
    now = Date.parse(again?.nextAttemptAt ?? '') + 1000;
    expect((await cycle(6)).jobs.map((j) => j.outcome.status)).toEqual(['compacted']);
    expect((await readFailures(store, config)).size).toBe(0);
    const files: string[] = [];
    for await (const o of store.list('')) if (config.layout.isDataKey(o.key)) files.push(join(dir, o.key));
    expect(await readIds(engine, files)).toEqual(Array.from({ length: total }, (_, i) => BigInt(i + 1)));
  });

  it('a failure record that cannot be written is reported; the job still fails with its own error', async () => {
    const lake = await mkdtemp(join(tmpdir(), 'failures-denied-'));
    try {
      await writeLake(engine, lake, [
        { key: 'db/cpu/2025/01/15/10/cpu_20250115_100500_1.parquet', rows: 20 },
      ]);
      await putBadFile(lake);
      // As the compact role was before its grants covered the failures folder: writes denied.
      class DeniedFailures extends ForwardingStore {
        override put(...args: Parameters<ObjectStore['put']>) {
          if (args[0].startsWith('_compaction/failures/'))
            return Promise.reject(new Error('AccessDenied (test)'));
          return this.inner.put(...args);
        }
      }
      const events: JobEvent[] = [];
      const report = await runCycle(
        {
          ...sweepDeps(
            new DeniedFailures(testStore(lake)),
            config,
            engine,
            join(work, 'steps'),
            'exec-d',
            new Set(),
          ),
          onEvent: (event) => events.push(event),
        },
        'hourly',
      );
      const [job] = report.jobs;
      expect(job?.outcome.status === 'failed' && job.outcome.error.name).toBe('SchemaConflictError');
      const warned = events.filter((e) => e.type === 'failure-not-recorded');
      expect(warned).toHaveLength(1);
      expect(warned[0] && 'reason' in warned[0] && warned[0].reason).toMatch(
        /^the failure record of hourly db\/cpu\/2025\/01\/15\/10\/ could not be written \(Error: AccessDenied \(test\)\); its backoff starts over$/,
      );
      expect((await readFailures(testStore(lake), config)).size).toBe(0);
    } finally {
      await rm(lake, { recursive: true, force: true });
    }
  });

  it('backs off exponentially up to the cap', () => {
    expect([1, 2, 3, 4, 5, 10].map((n) => backoffSeconds(config, n))).toEqual([
      0, 0, 3600, 7200, 14400, 86_400,
    ]);
  });
});
