/**
 * `compactor run`'s helper thread as the CLI starts it: its engine is bounded as the small compact
 * function's DuckDB, or by --memory-limit when that is less; and a run of many small partitions at
 * a concurrency above one reports every partition once, whichever thread compacted it.
 */

import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { threadMemoryLimit } from '../../functions/cli/thread-deps.ts';
import { SMALL_ENGINE } from '../../functions/core/lambda-sizing.ts';
import { SPAN_CHANNEL, type SpanContext } from '../../functions/local-runner/timing-spans.ts';
import { arcRawKey, cli, idMismatch, lakeIds } from '../support/cli-lake.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { type LakeFile, writeLake } from '../support/lake-harness.ts';

describe('threadMemoryLimit', () => {
  const small = SMALL_ENGINE.memoryLimit;

  it("is the small compact function's DuckDB limit unless --memory-limit is less", () => {
    expect(threadMemoryLimit(undefined)).toBe(small);
    expect(threadMemoryLimit('4GB')).toBe(small);
    expect(threadMemoryLimit('256MiB')).toBe('256MiB');
  });

  it('keeps a value DuckDB reads and the CLI does not as given', () => {
    expect(threadMemoryLimit('1TB')).toBe('1TB');
  });
});

const TABLES = ['cpu', 'mem', 'disk', 'net', 'io'];
const FILES: LakeFile[] = TABLES.flatMap((table) =>
  Array.from({ length: 4 }, (_, i) => ({
    key: arcRawKey(Date.UTC(2025, 0, 15, Math.floor(i / 2)), i + 1, table),
    rows: 10 + i,
  })),
);
const PARTITIONS = TABLES.length * 2;

let engine: DuckDbEngine;
let root: string;

useEngineAndDir('thread-deps-', (e, dir) => {
  engine = e;
  root = dir;
});

describe('compactor run with a helper thread', () => {
  it('reports each partition once, counted across both threads, every row kept', async () => {
    const lake = join(root, 'lake');
    const total = await writeLake(engine, lake, FILES);
    const args = ['--store', lake, '--quiet', '0', '--min-files', '2', '--work-dir', join(root, 'work')];
    const spans: string[] = [];
    const onStart = (message: unknown) => spans.push((message as SpanContext).name);
    subscribe(`tracing:${SPAN_CHANNEL}:start`, onStart);
    const run = await cli('run', '--tier', 'hourly', ...args, '--concurrency', '4', '--threads', '1').finally(
      () => unsubscribe(`tracing:${SPAN_CHANNEL}:start`, onStart),
    );
    expect(run.code, run.err.join('\n')).toBe(0);
    // The helper thread ran (on one core the CLI starts none).
    if (availableParallelism() > 1) expect(spans).toContain('run: child thread');
    const progress = run.err.filter((line) => /^\[\d+\/\d+\] /.test(line));
    expect(progress).toHaveLength(PARTITIONS);
    expect(progress.map((line) => line.split(' ')[0])).toEqual(
      Array.from({ length: PARTITIONS }, (_, i) => `[${i + 1}/${PARTITIONS}]`),
    );
    expect(idMismatch(await lakeIds(engine, lake), total)).toBeUndefined();
  });
});
