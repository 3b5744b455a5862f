/**
 * Side-by-side runs on one dataset: a warm-up round of every tool (and every nodejs-polars mode),
 * a second round of the polars modes to pick polars' best mode, then `runs` measured rounds of
 * product, raw DuckDB, polars' best mode and the I/O floor, alternating the order run by run.
 * Every output is verified; the product's staged output and manifest are removed after each run.
 */

import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { DuckDbEngine } from '../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { LocalFolderStore } from '../functions/adapters/local-store/local-store.ts';
import { parseConfig } from '../functions/core/config.ts';
import { systemClock } from '../functions/core/engine.ts';
import { manifestKey, stagingRoot } from '../functions/core/manifest/manifest.ts';
import { deletePrefix } from '../functions/core/manifest/manifest-cas.ts';
import { runChild } from './child.ts';
import type { Dataset } from './datasets.ts';
import { median } from './stats.ts';
import { verifyOutputs } from './verify.ts';
import type { Tool, WorkerResult, WorkerTask } from './worker.ts';

export const POLARS_MODES: readonly Tool[] = ['polars-scan', 'polars-sink', 'polars-read'];

export interface Sample extends WorkerResult {
  readonly round: number;
  readonly kind: 'warm-up' | 'mode-selection' | 'measured';
}

export interface ToolSummary {
  readonly tool: Tool;
  readonly runs: number;
  readonly wallMs: number;
  readonly cpuMs: number;
  readonly maxRssBytes: number;
  readonly outputBytes: number;
  readonly mbPerS: number;
  readonly rowsPerS: number;
  readonly ratioVsDuckDb: number;
  readonly phases?: Readonly<Record<string, number>>;
}

export interface DatasetInfo {
  readonly id: string;
  readonly title: string;
  readonly files: number;
  readonly rows: number;
  readonly columns: number;
  readonly bytes: number;
}

export interface Comparison {
  readonly dataset: DatasetInfo;
  readonly tools: readonly ToolSummary[];
  /** Median wall time of each polars mode over its warm-up and selection runs. */
  readonly polarsModes: readonly { readonly tool: Tool; readonly wallMs: number }[];
  readonly polarsBest: Tool;
  /** Footer validation of every input: the product's pass and DuckDB's one query over the list (ms). */
  readonly footerPass?: { readonly productMs: number; readonly duckdbListMs: number };
  readonly samples: readonly Sample[];
}

export interface CompareOptions {
  readonly runs: number;
  readonly threads: number;
  readonly memoryLimit: string;
  readonly tmp: string;
  readonly log: (line: string) => void;
}

export function datasetInfo(ds: Dataset): DatasetInfo {
  return { id: ds.id, title: ds.title, files: ds.files, rows: ds.rows, columns: ds.columns, bytes: ds.bytes };
}

export async function runComparison(
  engine: DuckDbEngine,
  ds: Dataset,
  options: CompareOptions,
): Promise<Comparison> {
  const samples: Sample[] = [];
  let floorBytes = 0;
  let seq = 0;
  const run = async (tool: Tool, round: number, kind: Sample['kind']): Promise<Sample> => {
    const runDir = join(options.tmp, 'runs', `${ds.id}-${String(seq++).padStart(3, '0')}-${tool}`);
    await mkdir(runDir, { recursive: true });
    const task: WorkerTask = {
      tool,
      storeRoot: ds.storeRoot,
      partition: ds.partition,
      paths: ds.paths,
      runDir,
      threads: options.threads,
      memoryLimit: options.memoryLimit,
      floorBytes,
    };
    try {
      const result = await runChild<WorkerResult>('worker.ts', task, join(runDir, 'task.json'), {
        POLARS_MAX_THREADS: String(options.threads),
      });
      if (tool !== 'floor' && tool !== 'fetch' && tool !== 'footers') {
        await verifyOutputs(engine, `${ds.id}/${tool}`, result.outputs, ds.rows, true);
      }
      const sample: Sample = { ...result, round, kind };
      samples.push(sample);
      options.log(
        `  ${ds.id} ${kind.padEnd(14)} ${tool.padEnd(11)} ${(result.wallMs / 1000).toFixed(2).padStart(6)} s` +
          `  cpu ${(result.cpuMs / 1000).toFixed(2).padStart(6)} s  rss ${(result.maxRssBytes / 2 ** 20).toFixed(0).padStart(5)} MiB` +
          `  out ${(result.outputBytes / 2 ** 20).toFixed(1).padStart(6)} MiB`,
      );
      return sample;
    } finally {
      if (tool === 'product') await removeJob(ds);
      await rm(runDir, { recursive: true, force: true });
    }
  };

  // Warm-up: page cache, DuckDB and polars binaries, the floor's output size (the product's).
  const warm = await run('product', 0, 'warm-up');
  floorBytes = warm.outputBytes;
  for (const tool of ['duckdb', ...POLARS_MODES, 'floor', 'fetch', 'write', 'footers'] as const)
    await run(tool, 0, 'warm-up');
  for (const tool of POLARS_MODES) await run(tool, 0, 'mode-selection');
  const polarsModes = POLARS_MODES.map((tool) => ({
    tool,
    wallMs: median(samples.filter((s) => s.tool === tool).map((s) => s.wallMs)),
  }));
  const polarsBest = [...polarsModes].sort((a, b) => a.wallMs - b.wallMs)[0]?.tool ?? 'polars-scan';

  const tools: Tool[] = ['product', 'duckdb', polarsBest, 'floor', 'fetch', 'write', 'footers'];
  for (let round = 1; round <= options.runs; round++) {
    // Rotate who goes first, so no tool always runs right after the same neighbour.
    const order = tools.map((_, i) => tools[(i + round - 1) % tools.length] as Tool);
    for (const tool of order) await run(tool, round, 'measured');
  }

  const measured = (tool: Tool) => samples.filter((s) => s.tool === tool && s.kind === 'measured');
  const duckWall = median(measured('duckdb').map((s) => s.wallMs));
  const footerSamples = measured('footers');
  const footerPass =
    footerSamples.length > 0
      ? {
          productMs: median(footerSamples.map((s) => s.phases?.['product footer pass'] ?? 0)),
          duckdbListMs: median(footerSamples.map((s) => s.phases?.['DuckDB list pass'] ?? 0)),
        }
      : undefined;
  const summaries = tools
    .filter((tool) => tool !== 'footers')
    .map((tool): ToolSummary => {
      const list = measured(tool);
      const wallMs = median(list.map((s) => s.wallMs));
      const phases = list[0]?.phases
        ? Object.fromEntries(
            Object.keys(list[0].phases).map((key) => [key, median(list.map((s) => s.phases?.[key] ?? 0))]),
          )
        : undefined;
      return {
        tool,
        runs: list.length,
        wallMs,
        cpuMs: median(list.map((s) => s.cpuMs)),
        maxRssBytes: median(list.map((s) => s.maxRssBytes)),
        outputBytes: median(list.map((s) => s.outputBytes)),
        mbPerS: ds.bytes / 1e6 / (wallMs / 1000),
        rowsPerS: ds.rows / (wallMs / 1000),
        ratioVsDuckDb: wallMs / duckWall,
        ...(phases ? { phases } : {}),
      };
    });
  return {
    dataset: datasetInfo(ds),
    tools: summaries,
    polarsModes,
    polarsBest,
    ...(footerPass ? { footerPass } : {}),
    samples,
  };
}

/** Removes what a product run left: its staged output and its manifest (the claim). */
export async function removeJob(ds: Dataset): Promise<void> {
  const store = new LocalFolderStore(ds.storeRoot);
  const config = parseConfig({});
  await deletePrefix({ store, config, clock: systemClock }, stagingRoot(config.layout));
  await store.deleteMany([{ key: manifestKey(config.layout, 'hourly', ds.partition) }]);
}
