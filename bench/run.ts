/**
 * `npm run bench`: the side-by-side benchmark, request accounting, orchestration overhead,
 * planner scale, the memory (spill) case and the cost model, in one run on this machine.
 * Writes bench/results.json, bench/results.md and bench/results.svg and prints the tables.
 * Options (for development; `npm run bench` uses none): see USAGE, or `npm run bench -- --help`.
 */

import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { DuckDbEngine } from '../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { type AuditLakeResult, auditLakeRows, runAuditLake } from './audit-lake.ts';
import { type BacklogResult, runBacklog } from './backlog.ts';
import { LAMBDA_MEMORY_MB, PRODUCT_MEMORY_LIMIT, THREADS } from './compact-lambda.ts';
import { type Comparison, runComparison } from './compare.ts';
import { costModel } from './cost.ts';
import { DATASETS, type Dataset, generateDataset } from './datasets.ts';
import { type MemoryResult, runMemory } from './memory.ts';
import { type OrchestrationResult, runOrchestration } from './orchestration.ts';
import {
  type PartitionProfile,
  partitionProfileNote,
  partitionProfileTable,
  runPartitionProfile,
} from './partition-profile.ts';
import {
  type PlannerLakeResult,
  type PlannerScaleResult,
  plannerLakeRows,
  runPlannerLake,
  runPlannerScale,
} from './planner-scale.ts';
import { type ReadersResult, runReaders } from './readers.ts';
import { printTables, renderMarkdown } from './report.ts';
import { renderSvg } from './report-svg.ts';
import { type RequestAccounting, runRequestAccounting } from './requests.ts';
import type { BenchResults, Environment } from './results.ts';
import { runS3Latency, type S3LatencyResult, s3LatencyCases } from './s3-latency.ts';
import {
  runSmallPartitions,
  type SmallPartitionsResult,
  smallPartitionsTargets,
} from './small-partitions.ts';
import { renderSummaryBlock, replaceSummaryBlock, SUMMARY_FILES } from './summary-block.ts';
import { countTransitions, type TransitionCount } from './transitions.ts';

interface Args {
  readonly runs: number;
  readonly datasets: readonly string[];
  readonly only: readonly string[];
  readonly quick: boolean;
  /** Only re-render results.md, results.svg and the summary blocks from bench/results.json. */
  readonly render: boolean;
}

const SECTIONS = [
  'compare',
  'requests',
  'orchestration',
  'planner',
  'audit',
  'memory',
  's3',
  'backlog',
  'partitions',
  'readers',
];

const USAGE = `usage: npm run bench [-- options]

Runs every section and writes bench/results.json, results.md and results.svg (under half an hour
on 2 cores; results.md's first paragraph says how long the last full run took). With --quick,
--only or --datasets the run is partial and writes no results files.

  --runs N            measured rounds per tool (default 5; the median is reported)
  --datasets LIST     comma-separated dataset ids: ${DATASETS.map((d) => d.id).join(',')} (default all)
  --only LIST         comma-separated sections: ${SECTIONS.join(',')} (default all)
  --quick             smaller request, orchestration, planner and memory cases; s3: the Firehose
                      hour and 2 GiB job at 1/8 size, one run each; readers: one measured run
  --render            measure nothing: price bench/results.json's measurements again with the
                      cost model (its prices and targets, and the state transitions counted on
                      the definition as it is now) and re-render results.json, results.md,
                      results.svg and the README's and docs/performance.md's summaries from them
                      (after editing the model or the report's wording, or text around a block)
  --help              this text
`;

/** Bad usage: the message and the usage text, exit 2 (as the compactor CLI does). */
class UsageError extends Error {
  override readonly name = 'UsageError';
}

function parseArgs(argv: readonly string[]): Args | 'help' {
  let runs = 5;
  let datasets = DATASETS.map((d) => d.id);
  let only = SECTIONS;
  let quick = false;
  let render = false;
  const list = (arg: string, text: string, known: readonly string[]) => {
    const items = text.split(',').filter((item) => item !== '');
    const unknown = items.filter((item) => !known.includes(item));
    if (items.length === 0 || unknown.length > 0) {
      throw new UsageError(`${arg} ${text}: use a comma-separated list of ${known.join(', ')}`);
    }
    return items;
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    const value = () => {
      const v = argv[++i];
      if (v === undefined) throw new UsageError(`${arg} needs a value`);
      return v;
    };
    if (arg === '--help' || arg === '-h') return 'help';
    if (arg === '--runs') {
      const text = value();
      runs = Number(text);
      if (!Number.isSafeInteger(runs) || runs < 1)
        throw new UsageError(`--runs ${text}: use a whole number of 1 or more`);
    } else if (arg === '--datasets')
      datasets = list(
        arg,
        value(),
        DATASETS.map((d) => d.id),
      );
    else if (arg === '--only') only = list(arg, value(), SECTIONS);
    else if (arg === '--quick') quick = true;
    else if (arg === '--render') render = true;
    else throw new UsageError(`unknown option ${arg}`);
  }
  return { runs, datasets, only, quick, render };
}

async function versions(): Promise<{ duckdb: string; polars: string }> {
  const { createRequire } = await import('node:module');
  const require = createRequire(import.meta.url);
  const read = (name: string) => (require(`${name}/package.json`) as { version: string }).version;
  return { duckdb: read('@duckdb/node-api'), polars: read('nodejs-polars') };
}

async function main(): Promise<number> {
  let args: Args;
  try {
    const parsed = parseArgs(process.argv.slice(2));
    if (parsed === 'help') {
      process.stdout.write(USAGE);
      return 0;
    }
    args = parsed;
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    process.stderr.write(`bench: ${error.message}\n\n${USAGE}`);
    return 2;
  }
  if (args.render) {
    const stored = JSON.parse(
      await readFile(join(import.meta.dirname, 'results.json'), 'utf8'),
    ) as BenchResults;
    // The measurements are the run's; their prices and targets are the cost model's, priced again,
    // with the transitions counted on the definition as it is now (a count, not a measurement).
    const transitions = await countTransitions().catch((error: Error) => {
      process.stderr.write(`state transitions: not counted again (${error.message}); the run's stand\n`);
      return stored.transitions;
    });
    const full = priced({ ...stored, ...(transitions ? { transitions } : {}) });
    await writeFile(join(import.meta.dirname, 'results.json'), `${JSON.stringify(full, null, 2)}\n`);
    await writeResults(full, (line) => process.stderr.write(`${line}\n`));
    return 0;
  }
  // A full run rewrites the summary blocks at its end: find them missing now, not after it.
  if (!args.quick && args.only.length === SECTIONS.length && args.datasets.length === DATASETS.length) {
    for (const file of SUMMARY_FILES) {
      const path = join(import.meta.dirname, '..', file.path);
      try {
        replaceSummaryBlock(await readFile(path, 'utf8'), '', file.path);
      } catch (error) {
        if (!(error instanceof Error)) throw error;
        process.stderr.write(`bench: ${error.message}\n`);
        return 2;
      }
    }
  }
  const started = Date.now();
  const loadAverageStart = loadavg();
  const log = (line: string) => process.stderr.write(`${line}\n`);
  const tmp = await mkdtemp(join(tmpdir(), 'compactor-bench-'));
  const engine = await DuckDbEngine.create({ threads: THREADS });
  const results: {
    comparisons: Comparison[];
    requests?: RequestAccounting;
    orchestration?: OrchestrationResult;
    planner?: PlannerScaleResult;
    plannerLake?: PlannerLakeResult;
    auditLake?: AuditLakeResult;
    memory?: MemoryResult;
    transitions?: TransitionCount;
    s3Latency?: S3LatencyResult;
    backlog?: BacklogResult;
    partitions?: SmallPartitionsResult;
    readers?: ReadersResult;
    partitionsProfile?: PartitionProfile;
  } = { comparisons: [] };
  try {
    if (args.only.includes('compare')) {
      for (const spec of DATASETS.filter((d) => args.datasets.includes(d.id))) {
        const t = Date.now();
        const ds: Dataset = await generateDataset(engine, join(tmp, 'data'), spec);
        log(
          `dataset ${ds.title}: ${ds.rows.toLocaleString('en-US')} rows, ${(ds.bytes / 1e6).toFixed(1)} MB (generated in ${((Date.now() - t) / 1000).toFixed(0)} s)`,
        );
        results.comparisons.push(
          await runComparison(engine, ds, {
            runs: args.runs,
            threads: THREADS,
            memoryLimit: PRODUCT_MEMORY_LIMIT,
            tmp,
            log,
          }),
        );
        await rm(ds.storeRoot, { recursive: true, force: true });
      }
    }
    if (args.only.includes('requests')) {
      log('request accounting');
      results.requests = await runRequestAccounting(engine, join(tmp, 'requests'), {
        sizes: args.quick ? [10, 100] : [10, 100, 1000, 5000],
        log,
      });
    }
    if (args.only.includes('orchestration')) {
      log('orchestration overhead');
      results.orchestration = await runOrchestration(engine, join(tmp, 'orchestration'), {
        partitions: args.quick ? 10 : 100,
        quick: args.quick,
        log,
      });
    }
    if (args.only.includes('planner')) {
      log('planner scale');
      results.planner = await runPlannerScale(join(tmp, 'planner'), {
        partitions: args.quick ? 5_000 : 50_000,
        filesPerPartition: 20,
      });
      const p = results.planner;
      log(
        `  ${p.objects.toLocaleString('en-US')} objects: ${(p.capped.wallMs / 1000).toFixed(1)} s, peak RSS ${(p.capped.maxRssBytes / 2 ** 20).toFixed(0)} MiB ` +
          `with a ${p.cappedHeapMb} MiB heap; ${(p.maxRssBytes / 2 ** 20).toFixed(0)} MiB with V8's default heap`,
      );
      // The lake (issue 14 item 6): 500 tables x 5 years, about 10M objects; --quick: 50 tables.
      log('planner at lake scale: narrow cycles and sweeps');
      results.plannerLake = await runPlannerLake(join(tmp, 'planner'), {
        tables: args.quick ? 50 : 500,
        years: 5,
      });
      for (const line of plannerLakeRows(results.plannerLake)) log(`  ${line}`);
    }
    if (args.only.includes('audit')) {
      // The planner's lake, audited (bench/audit-lake.ts); --quick: 50 tables.
      log('audit at lake scale');
      results.auditLake = await runAuditLake(join(tmp, 'audit'), { tables: args.quick ? 50 : 500, years: 5 });
      for (const line of auditLakeRows(results.auditLake)) log(`  ${line}`);
    }
    if (args.only.includes('memory')) {
      log('memory: spilling partition');
      results.memory = await runMemory(engine, join(tmp, 'memory'), {
        memoryLimit: '256MB',
        targetBytes: args.quick ? 120e6 : 520e6,
        threads: THREADS,
        log,
      });
    }
    if (args.only.includes('s3')) {
      log('S3 path behind the latency shaper');
      const s3Dir = join(tmp, 's3');
      results.s3Latency = await runS3Latency(engine, s3Dir, {
        jobs: await s3LatencyCases(engine, s3Dir, { quick: args.quick, datasets: args.datasets }),
        // The full 2 GiB job takes minutes a run; the others' medians of 3 price the cost rows,
        // whose largest term is the compact step's wall (its engine time varies run to run).
        runs: (spec) => (args.quick || spec.costJob === 'full-job' ? 1 : 3),
        threads: THREADS,
        memoryLimit: PRODUCT_MEMORY_LIMIT,
        log,
      });
    }
    if (args.only.includes('backlog')) {
      log('backlog: one hour of many job bounds, drained by one run');
      results.backlog = await runBacklog(engine, join(tmp, 'backlog'), {
        files: args.quick ? 4_000 : 20_000,
        rowsPerFile: 50,
        log,
      });
    }
    if (args.only.includes('partitions')) {
      // The common lake: many tables x hours, a few small files each (--quick: 10 tables).
      const shape = { tables: args.quick ? 10 : 100, hours: 24, files: 10, rows: 50 };
      log(`many small partitions: ${shape.tables} tables x ${shape.hours} h x ${shape.files} files`);
      results.partitions = await runSmallPartitions(join(tmp, 'partitions'), shape, {
        runs: args.quick ? 1 : 3,
        concurrency: 4,
        threads: THREADS,
      });
      for (const t of smallPartitionsTargets(results.partitions)) log(`  ${t.name}: ${t.value}`);
      // One partition's chain, instrumented, on fewer tables of the same shape (bench/partition-profile.ts).
      const profiled = { ...shape, tables: args.quick ? 2 : 10 };
      results.partitionsProfile = await runPartitionProfile(join(tmp, 'partitions'), profiled, {
        threads: THREADS,
      });
      log(`  ${partitionProfileNote(results.partitionsProfile, results.partitions.partitions)}`);
      log(partitionProfileTable(results.partitionsProfile));
    }
    if (args.only.includes('readers')) {
      // Two DuckDB queries over an Arc hour on the shaped S3 path, before and after compaction.
      log('what readers gain: an Arc hour queried before and after compaction');
      results.readers = await runReaders(engine, join(tmp, 'readers'), {
        runs: args.quick ? 1 : args.runs,
        threads: THREADS,
        memoryLimit: PRODUCT_MEMORY_LIMIT,
        log,
      });
    }
    results.transitions = await countTransitions().catch((error: Error) => {
      log(
        `state transitions: could not synthesize the state machine (${error.message}); using the stated counts`,
      );
      return undefined;
    });
  } finally {
    await engine.close();
    await rm(tmp, { recursive: true, force: true });
  }

  const v = await versions();
  const cpu = cpus();
  const environment: Environment = {
    node: process.version,
    cpu: cpu[0]?.model ?? 'unknown',
    cores: cpu.length,
    memoryBytes: totalmem(),
    arch: process.arch,
    duckdb: v.duckdb,
    polars: v.polars,
    loadAverageStart,
    loadAverageEnd: loadavg(),
    startedAt: new Date(started).toISOString(),
    durationS: (Date.now() - started) / 1000,
  };
  const full = priced({
    environment,
    settings: { runs: args.runs, threads: THREADS, productMemoryLimit: PRODUCT_MEMORY_LIMIT },
    ...results,
  });
  printTables(full);
  const complete =
    !args.quick && args.only.length === SECTIONS.length && results.comparisons.length === DATASETS.length;
  if (complete) {
    await writeFile(join(import.meta.dirname, 'results.json'), `${JSON.stringify(full, null, 2)}\n`);
    await writeResults(full, log);
  } else {
    log('partial run (options given): results files not written');
  }
  log(`bench finished in ${((Date.now() - started) / 1000).toFixed(0)} s`);
  return 0;
}

/** A run's measurements with their cost: the cost model's prices and targets applied to them. */
function priced(run: Omit<BenchResults, 'cost'>): BenchResults {
  const { cost: _, ...measured } = run as BenchResults;
  return {
    ...measured,
    ...(measured.requests
      ? {
          cost: costModel({
            comparisons: measured.comparisons,
            requests: measured.requests,
            transitions: measured.transitions,
            s3: measured.s3Latency,
            lambdaMemoryMb: LAMBDA_MEMORY_MB,
          }),
        }
      : {}),
  };
}

/** results.md, results.svg and the summary blocks, all rendered from one run's results. */
async function writeResults(full: BenchResults, log: (line: string) => void): Promise<void> {
  const dir = import.meta.dirname;
  await writeFile(join(dir, 'results.md'), renderMarkdown(full));
  await writeFile(join(dir, 'results.svg'), renderSvg(full));
  log('wrote bench/results.md, bench/results.svg');
  // The README's and docs' numbers come from this run, never by hand.
  for (const file of SUMMARY_FILES) {
    const path = join(dir, '..', file.path);
    const text = await readFile(path, 'utf8');
    await writeFile(path, replaceSummaryBlock(text, renderSummaryBlock(full, file), file.path));
    log(`wrote the bench summary in ${file.path}`);
  }
}

process.exitCode = await main();
