/**
 * Orchestration overhead: one local cycle (recover -> plan -> every partition through every
 * step, as runCycle does and the state machine mirrors) over many small partitions, against the
 * time the engine itself worked (footer checks + merges). The difference is what the protocol
 * costs: manifests, conditional writes, downloads, staging, publish, verify, deletes, clear.
 */

import { copyFile, mkdir, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { DuckDbEngine } from '../functions/adapters/duckdb-engine.ts';
import { LocalFolderStore } from '../functions/adapters/local-store.ts';
import { writeSampleParquet } from '../functions/adapters/sample-data.ts';
import { parseConfig } from '../functions/core/config.ts';
import { runCycle } from '../functions/core/cycle.ts';
import { systemClock } from '../functions/core/engine.ts';
import type { ObjectStore } from '../functions/core/object-store.ts';
import { FaultStore } from '../test/support/fault-store.ts';
import { TimedEngine } from './timed.ts';

export interface OrchestrationRun {
  readonly concurrency: number;
  readonly cycleWallMs: number;
  readonly engineBusyMs: number;
  readonly storeCalls: number;
  /** Time spent inside store calls, by kind (summed over calls; they may overlap). */
  readonly storeMsByOp: Readonly<Record<string, number>>;
  readonly compacted: number;
}

/** Times every call of an ObjectStore (list: until its iteration ends), summed by method. */
function timeCalls(inner: ObjectStore, totals: Record<string, number>): ObjectStore {
  const add = (op: string, ms: number) => {
    totals[op] = (totals[op] ?? 0) + ms;
  };
  return new Proxy(inner, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver);
      if (typeof value !== 'function' || typeof prop !== 'string') return value;
      if (prop === 'list') {
        return (...args: unknown[]) =>
          (async function* () {
            const start = performance.now();
            try {
              yield* (value as (...a: unknown[]) => AsyncIterable<unknown>).apply(target, args);
            } finally {
              add('list', performance.now() - start);
            }
          })();
      }
      return async (...args: unknown[]) => {
        const start = performance.now();
        try {
          return await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
        } finally {
          add(prop, performance.now() - start);
        }
      };
    },
  });
}

export interface OrchestrationResult {
  readonly partitions: number;
  readonly filesPerPartition: number;
  readonly rowsPerFile: number;
  readonly runs: readonly OrchestrationRun[];
  /** Concurrency 1: cycle wall minus engine time, per partition. */
  readonly overheadPerPartitionMs: number;
  readonly overheadShare: number;
}

const FILES = 10;
const ROWS = 200;
const TEMPLATES = 5;

export async function runOrchestration(
  engine: DuckDbEngine,
  dir: string,
  options: { readonly partitions: number; readonly log: (line: string) => void },
): Promise<OrchestrationResult> {
  await mkdir(dir, { recursive: true });
  const templates: string[] = [];
  for (let t = 0; t < TEMPLATES; t++) {
    const path = join(dir, `template-${t}.parquet`);
    await writeSampleParquet(engine, path, {
      rows: ROWS,
      firstId: t * ROWS + 1,
      startTimeMs: Date.UTC(2025, 0, 10),
      spanMs: 3_600_000,
    });
    templates.push(path);
  }
  const config = parseConfig({ quietSeconds: 0 });
  const runs: OrchestrationRun[] = [];
  for (const concurrency of [1, 2]) {
    const lake = join(dir, `lake-${concurrency}`);
    const start = Date.UTC(2025, 0, 10);
    for (let p = 0; p < options.partitions; p++) {
      const hour = new Date(start + p * 3_600_000);
      const ymd = hour.toISOString().slice(0, 10).replaceAll('-', '');
      const hh = String(hour.getUTCHours()).padStart(2, '0');
      const folder = `db/cpu/${ymd.slice(0, 4)}/${ymd.slice(4, 6)}/${ymd.slice(6, 8)}/${hh}`;
      for (let f = 0; f < FILES; f++) {
        const path = join(lake, ...folder.split('/'), `cpu_${ymd}_${hh}0000_${f}.parquet`);
        await mkdir(dirname(path), { recursive: true });
        await copyFile(templates[f % TEMPLATES] as string, path);
      }
    }
    const timed = new TimedEngine(engine);
    const storeMsByOp: Record<string, number> = {};
    const store = new FaultStore(timeCalls(new LocalFolderStore(lake), storeMsByOp));
    let counter = 0;
    const t0 = performance.now();
    const report = await runCycle(
      {
        store,
        config,
        clock: systemClock,
        engine: timed,
        workDir: join(dir, 'work'),
        executionId: `bench-cycle-${concurrency}`,
        isOwnerAlive: async () => false,
        concurrency,
        randomHex: () => (++counter).toString(16).padStart(8, '0'),
      },
      'hourly',
    );
    const cycleWallMs = performance.now() - t0;
    const compacted = report.jobs.filter((j) => j.outcome.status === 'compacted').length;
    if (compacted !== options.partitions) {
      const failed = report.jobs.find((j) => j.outcome.status === 'failed');
      throw new Error(
        `orchestration: ${compacted} of ${options.partitions} partitions compacted` +
          (failed?.outcome.status === 'failed' ? `; first failure: ${failed.outcome.error.message}` : ''),
      );
    }
    const run = {
      concurrency,
      cycleWallMs,
      engineBusyMs: timed.busyMs(),
      storeCalls: store.calls.length,
      storeMsByOp,
      compacted,
    };
    runs.push(run);
    options.log(
      `  concurrency ${concurrency}: cycle ${(cycleWallMs / 1000).toFixed(2)} s, engine busy ${(run.engineBusyMs / 1000).toFixed(2)} s, ${run.storeCalls} store calls`,
    );
    await rm(lake, { recursive: true, force: true });
  }
  const serial = runs[0] as OrchestrationRun;
  return {
    partitions: options.partitions,
    filesPerPartition: FILES,
    rowsPerFile: ROWS,
    runs,
    overheadPerPartitionMs: (serial.cycleWallMs - serial.engineBusyMs) / options.partitions,
    overheadShare: (serial.cycleWallMs - serial.engineBusyMs) / serial.cycleWallMs,
  };
}
