/** The bench's targets, met or not, each miss with its measured cause; and the gaps the tables explain. */

import {
  POLARS_MAX_INPUT_BYTES,
  POLARS_MIN_AVERAGE_INPUT_BYTES,
  POLARS_MIN_COLUMNS,
} from '../functions/core/merge-engine.ts';
import { auditLakeTargets } from './audit-lake.ts';
import { backlogTargets } from './backlog.ts';
import type { Comparison } from './compare.ts';
import { type CostModel, FLOOR_RATIO } from './cost.ts';
import { wholeProcessTargets } from './orchestration-report.ts';
import { plannerLakeTargets } from './planner-scale.ts';
import { readersTargets } from './readers.ts';
import { duration, f1, f2, int, label, MIB, secs, usd, usd6 } from './report-format.ts';
import type { BenchResults } from './results.ts';
import { smallPartitionsTargets } from './small-partitions.ts';

export interface Target {
  readonly name: string;
  readonly value: string;
  readonly met: boolean;
  /** Where a missed target's time or money went, from this run's measurements. */
  readonly cause?: string;
  /** One of issue 14's rows, shown in the README's summary too. */
  readonly headline?: boolean;
}

/** Wall-time ratio targets against raw DuckDB per dataset: (i) the compact path, (ii) issue 14 item 4. */
const RATIO_TARGETS: Readonly<Record<string, number>> = { i: 1.1, ii: 1.5 };

/** Rows per second one compact job merges on dataset (i) with the bench's threads, at least. */
const THROUGHPUT_TARGET = 4e6;

/** The product's phases and the fetch floor: where its wall time goes next to raw DuckDB's. */
function productCause(c: Comparison): string | undefined {
  const product = c.tools.find((t) => t.tool === 'product');
  const fetch = c.tools.find((t) => t.tool === 'fetch');
  const duck = c.tools.find((t) => t.tool === 'duckdb');
  if (!product || !duck) return undefined;
  const p = product.phases;
  const parts = [
    ...(p
      ? [
          `product phases: downloads ${int(p.downloadMs ?? 0)} ms (from the local folder store: a hard link per input, its ETag checked), ` +
            `footer checks ${int(p.inspectMs ?? 0)} ms (overlapping), merge ${int(p.mergeMs ?? 0)} ms, staging upload ${int(p.stagingPutMs ?? 0)} ms, manifests ${int(p.manifestMs ?? 0)} ms, ` +
            `against raw DuckDB's whole run of ${int(duck.wallMs)} ms reading the files in place`,
        ]
      : []),
    ...(fetch
      ? [
          `a byte copy of each input (the fetch floor, what downloading from S3 writes) would take ${secs(fetch.wallMs)} s alone, ${f2(fetch.wallMs / duck.wallMs)}x raw DuckDB's whole run`,
        ]
      : []),
  ];
  return parts.length > 0 ? parts.join('; ') : undefined;
}

/** A cost row's terms per GiB, largest first: which one puts it over the target. */
function costRowCause(row: CostModel['rows'][number]): string {
  const g = row.perGib;
  const terms: [string, number][] = [
    ['compact Lambda GB-seconds', g.lambdaCompute],
    ['Lambda requests', g.lambdaRequests],
    ['S3 requests', g.s3Requests],
    ['Step Functions', g.stepFunctions],
    ['waiting on S3', g.totalWithS3Wait - g.total],
  ];
  terms.sort((a, b) => b[1] - a[1]);
  return `per GiB: ${terms.map(([name, v]) => `${name} ${usd(v)}`).join(', ')}`;
}

/** Why the merge (one engine's read + sort + write) is slower than the best engine's whole run. */
function mergeCause(c: Comparison): string | undefined {
  const duck = c.tools.find((t) => t.tool === 'duckdb');
  const polars = c.tools.find((t) => t.tool === c.polarsBest);
  const write = c.tools.find((t) => t.tool === 'write');
  if (!duck || !polars) return undefined;
  const engine = c.samples.find((s) => s.tool === 'product' && s.kind === 'measured')?.mergeEngine;
  if (engine === 'polars') {
    return `the merge runs on polars (core/merge-engine.ts), and does more than the bench's polars run: the casts to the unified schema, a stable sort, the requested row groups and statistics, the footer metadata, and DuckDB reading back each output's rows and types; polars' whole run is ${secs(polars.wallMs)} s, raw DuckDB's ${secs(duck.wallMs)} s`;
  }
  const product = c.tools.find((t) => t.tool === 'product');
  return (
    `the merge is DuckDB's own read + sort + write; raw DuckDB's whole run is ${secs(duck.wallMs)} s, ${f2(duck.wallMs / polars.wallMs)}x polars' (${secs(polars.wallMs)} s)` +
    (write
      ? `, and DuckDB's Parquet writer alone, rows already in memory, takes ${secs(write.wallMs)} s`
      : '') +
    `; the merge rule (core/merge-engine.ts) keeps this job on DuckDB: ${ruleReason(c.dataset)}` +
    (product && polars.outputBytes > product.outputBytes
      ? `, and polars' run here writes ${f1(polars.outputBytes / MIB)} MiB where the product writes ${f1(product.outputBytes / MIB)} MiB`
      : '')
  );
}

/** Which of the merge rule's bounds keeps a dataset's job on DuckDB (chooseMergeEngine). */
function ruleReason(d: Comparison['dataset']): string {
  const average = d.bytes / d.files;
  const reasons = [
    ...(d.columns < POLARS_MIN_COLUMNS ? [`${d.columns} columns, fewer than ${POLARS_MIN_COLUMNS}`] : []),
    ...(average < POLARS_MIN_AVERAGE_INPUT_BYTES
      ? [
          `inputs of ${int(average / 1024)} KiB on average, under ${int(POLARS_MIN_AVERAGE_INPUT_BYTES / 1024)} KiB`,
        ]
      : []),
    ...(d.bytes > POLARS_MAX_INPUT_BYTES
      ? [`${int(d.bytes / MIB)} MiB of input, over ${int(POLARS_MAX_INPUT_BYTES / MIB)} MiB`]
      : []),
  ];
  return reasons.length > 0 ? reasons.join('; ') : 'within every bound, yet polars did not take it';
}

/**
 * Why one compact job merges fewer rows a second than the target: how much of its wall is the
 * merge, and the rates the engines reach by themselves on the same files.
 */
function throughputCause(c: Comparison): string | undefined {
  const product = c.tools.find((t) => t.tool === 'product');
  const duck = c.tools.find((t) => t.tool === 'duckdb');
  const polars = c.tools.find((t) => t.tool === c.polarsBest);
  const mergeMs = product?.phases?.mergeMs;
  const why = mergeCause(c);
  if (!product || !duck || !polars || mergeMs === undefined || !why) return undefined;
  const rate = (ms: number) => `${f2(c.dataset.rows / ms / 1000)} M rows/s`;
  return (
    `the merge takes ${int(mergeMs)} of the job's ${int(product.wallMs)} ms (${rate(mergeMs)} by itself, ` +
    `raw DuckDB's whole run ${rate(duck.wallMs)}, ${label(c, polars.tool)} ${rate(polars.wallMs)}); ${why}`
  );
}

export function targets(r: BenchResults): Target[] {
  const out: Target[] = [];
  for (const c of r.comparisons) {
    const product = c.tools.find((t) => t.tool === 'product');
    const duck = c.tools.find((t) => t.tool === 'duckdb');
    const polars = c.tools.find((t) => t.tool === c.polarsBest);
    if (!product || !duck || !polars) continue;
    const ratioTarget = RATIO_TARGETS[c.dataset.id];
    const cause = productCause(c);
    if (ratioTarget !== undefined) {
      const met = product.ratioVsDuckDb <= ratioTarget;
      out.push({
        name: `${c.dataset.id}: product <= ${f2(ratioTarget)}x raw DuckDB`,
        value: `${f2(product.ratioVsDuckDb)}x`,
        met,
        headline: true,
        ...(met || !cause ? {} : { cause }),
      });
    }
    if (c.dataset.id === 'i') {
      // The whole compact step (claim, fetch, checks, merge, checksum, staging upload, manifest).
      const perSecond = c.dataset.rows / (product.wallMs / 1000);
      const met = perSecond >= THROUGHPUT_TARGET;
      const why = throughputCause(c);
      out.push({
        name: `i: one compact job >= ${f1(THROUGHPUT_TARGET / 1e6)} M rows/s with ${r.settings.threads} threads`,
        value: `${f2(perSecond / 1e6)} M rows/s (${int(c.dataset.rows)} rows in ${secs(product.wallMs)} s)`,
        met,
        headline: true,
        ...(met || !why ? {} : { cause: why }),
      });
    }
    const beatsPolars = product.wallMs < polars.wallMs;
    out.push({
      name: `${c.dataset.id}: product faster than polars' best mode`,
      value: `${f2(product.wallMs / 1000)} s vs ${f2(polars.wallMs / 1000)} s (${f2(product.wallMs / polars.wallMs)}x)`,
      met: beatsPolars,
      ...(beatsPolars || !cause ? {} : { cause }),
    });
    // Issue 14 item 8: the merge takes no longer than the best engine's whole run.
    const mergeMs = product.phases?.mergeMs;
    if (mergeMs !== undefined) {
      const best = duck.wallMs <= polars.wallMs ? duck : polars;
      const met = mergeMs <= best.wallMs;
      const why = mergeCause(c);
      out.push({
        name: `${c.dataset.id}: product's merge <= the best engine's whole run`,
        value: `${secs(mergeMs)} s vs ${secs(best.wallMs)} s (${best === duck ? 'raw DuckDB' : label(c, best.tool)})`,
        met,
        headline: true,
        ...(met || !why ? {} : { cause: why }),
      });
    }
    if (c.footerPass) {
      const met = c.footerPass.productMs <= c.footerPass.duckdbListMs;
      out.push({
        name: `${c.dataset.id}: footer validation of every input <= DuckDB's one query over the list`,
        value: `${f1(c.footerPass.productMs)} ms vs ${f1(c.footerPass.duckdbListMs)} ms`,
        met,
        ...(met
          ? {}
          : {
              cause:
                `one pass either way; the product's JS reader decodes each footer in ${f2(c.footerPass.productMs / c.dataset.files)} ms ` +
                `(DuckDB's C++ reader ${f2(c.footerPass.duckdbListMs / c.dataset.files)} ms) and also checks chunk bounds and key-value metadata; ` +
                `${f1(c.footerPass.productMs - c.footerPass.duckdbListMs)} ms of a ${secs(product.wallMs)} s job`,
            }),
      });
    }
    out.push({
      name: `${c.dataset.id}: output bytes <= raw DuckDB's`,
      value: `${f1(product.outputBytes / MIB)} MiB vs ${f1(duck.outputBytes / MIB)} MiB`,
      met: product.outputBytes <= duck.outputBytes,
    });
  }
  out.push(...wholeProcessTargets(r.orchestration).map((t) => ({ ...t, headline: true })));
  if (r.planner) {
    const p = r.planner;
    out.push({
      name: `planner: ${int(p.objects / 1e6)}M objects <= 512 MiB peak RSS`,
      value:
        `${int(p.capped.maxRssBytes / MIB)} MiB with a ${p.cappedHeapMb} MiB heap (half the plan Lambda's memory) ` +
        `(${int(p.maxRssBytes / MIB)} MiB with V8's default heap on this ${int(r.environment.memoryBytes / 2 ** 30)} GiB machine), ${f1(p.capped.wallMs / 1000)} s`,
      met: p.capped.maxRssBytes <= 512 * MIB,
    });
  }
  if (r.plannerLake) out.push(...plannerLakeTargets(r.plannerLake).map((t) => ({ ...t, headline: true })));
  if (r.auditLake) out.push(...auditLakeTargets(r.auditLake).map((t) => ({ ...t, headline: true })));
  if (r.backlog) out.push(...backlogTargets(r.backlog).map((t) => ({ ...t, headline: true })));
  if (r.partitions)
    out.push(
      ...smallPartitionsTargets(r.partitions, r.partitionsProfile).map((t) => ({ ...t, headline: true })),
    );
  if (r.readers) out.push(...readersTargets(r.readers).map((t) => ({ ...t, headline: true })));
  for (const job of r.s3Latency?.jobs ?? []) {
    const planned = Math.min(job.run.plannedConcurrency, job.files);
    out.push({
      name: `s3 ${job.id}: downloads reach the compact step's concurrency (${planned})`,
      value: `${job.run.maxConcurrentDownloads} in flight at most`,
      met: job.run.maxConcurrentDownloads >= planned,
    });
  }
  for (const job of r.cost?.jobs ?? []) {
    out.push({
      name: `cost ${job.title}, ${job.childType} children: ${job.target.text}`,
      value: `${usd6(job.total)} vs ${usd6(job.target.limit)} (floor ${usd6(job.floor)}, ${f1(job.total / job.floor)}x; S3 Tables ${job.s3Tables.strategy} ${usd6(job.s3Tables.total)})`,
      met: job.target.met,
      headline: true,
      ...(job.cause ? { cause: job.cause } : {}),
    });
  }
  for (const c of r.cost?.cycles ?? []) {
    const met = c.total <= FLOOR_RATIO * c.floor;
    out.push({
      name: `cost: a cycle of ${int(c.partitions)} small partitions, ${c.childType} children: <= ${f1(FLOOR_RATIO)}x its floor`,
      value: `${usd6(c.total)} vs ${usd6(c.floor)} (${f1(c.total / c.floor)}x), ${c.items.toLocaleString('en-US')} Map items, about ${duration(c.seconds)}`,
      met,
      headline: true,
      ...(met
        ? {}
        : {
            cause: `a partition's bill ${usd6(c.perPartition)} against its floor ${usd6(c.floor / c.partitions)}: largest terms ${c.largest.map((t) => `${t.name} ${usd6(t.usd)}`).join(', ')}`,
          }),
    });
  }
  if (r.cost) {
    for (const row of r.cost.rows) {
      out.push({
        name: `cost <= $0.001/GiB: ${row.scenario}`,
        value: `${usd(row.perGib.totalWithS3Wait)}/GiB`,
        met: row.meetsTarget,
        ...(row.meetsTarget ? {} : { cause: costRowCause(row) }),
      });
    }
  }
  return out;
}

/**
 * How much of the product's time is fetching the inputs to local files, which raw DuckDB and
 * polars (reading the files in place) never pay.
 */
export function fetchGap(c: Comparison): string | undefined {
  const product = c.tools.find((t) => t.tool === 'product');
  const fetch = c.tools.find((t) => t.tool === 'fetch');
  const duck = c.tools.find((t) => t.tool === 'duckdb');
  if (!product || !fetch || !duck) return undefined;
  const rest = product.wallMs - fetch.wallMs;
  return (
    `Fetch floor ${f2(fetch.wallMs / 1000)} s: copying the ${int(c.dataset.files)} inputs to new local files, which the product must do ` +
    `when it downloads from S3 and raw DuckDB and polars do not (they read the files in place); from the local folder store ` +
    `the product hard-links each input instead (its downloads phase above). The product less the fetch floor would be ` +
    `${f2(rest / 1000)} s, ${f2(rest / duck.wallMs)}x raw DuckDB.`
  );
}

/**
 * What DuckDB's Parquet writer alone costs, next to polars' whole run: the part of the product's
 * merge that no DuckDB setting removes.
 */
export function writeGap(c: Comparison): string | undefined {
  const write = c.tools.find((t) => t.tool === 'write');
  const polars = c.tools.find((t) => t.tool === c.polarsBest);
  const product = c.tools.find((t) => t.tool === 'product');
  if (!write || !polars || !product) return undefined;
  return (
    `DuckDB write only ${f2(write.wallMs / 1000)} s: writing the rows, already read and sorted in memory, to one ZSTD file ` +
    `(${f2(write.wallMs / polars.wallMs)}x polars' whole run, ${f2(polars.wallMs / 1000)} s; ` +
    `${int((write.wallMs / (product.phases?.mergeMs ?? product.wallMs)) * 100)}% of the product's merge).`
  );
}

/** The footer pass (issue 14 item 3): the product's validation of every input against DuckDB's list query. */
export function footerGap(c: Comparison): string | undefined {
  const f = c.footerPass;
  if (!f) return undefined;
  return (
    `Footer pass: validating all ${int(c.dataset.files)} inputs' footers (rows, row groups, chunk bounds, schema, key-value metadata) ` +
    `takes the product ${f1(f.productMs)} ms (the JS footer reader per file, one DESCRIBE per distinct schema), ` +
    `DuckDB's one parquet_file_metadata + parquet_metadata query over the whole list ${f1(f.duckdbListMs)} ms ` +
    `(${f2(f.productMs / Math.max(f.duckdbListMs, 0.001))}x); a file that fails is checked alone by DuckDB, only then.`
  );
}
