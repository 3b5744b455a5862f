/** Renders the bench results: console tables, bench/results.md and a hand-written SVG chart. */

import type { Comparison, ToolSummary } from './compare.ts';
import type { CostModel } from './cost.ts';
import { wholeProcessSection, wholeProcessTargets } from './orchestration.ts';
import { plannerLakeMarkdown, plannerLakeTargets } from './planner-scale.ts';
import type { BenchResults } from './run.ts';
import type { Tool } from './worker.ts';

const MIB = 2 ** 20;

const TOOL_LABEL: Record<Tool, string> = {
  product: 'product (compact step)',
  duckdb: 'raw DuckDB COPY',
  'polars-scan': 'polars scan+collect',
  'polars-sink': 'polars scan+sink',
  'polars-read': 'polars read+concat',
  floor: 'I/O floor',
  fetch: 'fetch floor',
  write: 'DuckDB write only',
  footers: 'footer pass',
};

const TOOL_COLOR: Record<Tool, string> = {
  product: '#1f77b4',
  duckdb: '#7f7f7f',
  'polars-scan': '#ff7f0e',
  'polars-sink': '#ff7f0e',
  'polars-read': '#ff7f0e',
  floor: '#2ca02c',
  fetch: '#98df8a',
  write: '#c7c7c7',
  footers: '#dbdb8d',
};

function label(c: Comparison, tool: Tool): string {
  return tool === c.polarsBest
    ? `polars best (${TOOL_LABEL[tool].replace('polars ', '')})`
    : TOOL_LABEL[tool];
}

const f1 = (n: number) => n.toFixed(1);
const f2 = (n: number) => n.toFixed(2);
const int = (n: number) => Math.round(n).toLocaleString('en-US');
const secs = (ms: number) => f2(ms / 1000);
const usd = (n: number) => (n >= 0.01 ? `$${n.toFixed(3)}` : `$${n.toFixed(5)}`);

function table(headers: readonly string[], rows: readonly (readonly string[])[], align?: string): string {
  const sep = align ?? headers.map((_, i) => (i === 0 ? '---' : '---:')).join(' | ');
  return [`| ${headers.join(' | ')} |`, `| ${sep} |`, ...rows.map((r) => `| ${r.join(' | ')} |`)].join('\n');
}

/** The fastest and slowest measured run of a tool: how far one run's noise reaches. */
function wallRange(c: Comparison, tool: Tool): string {
  const walls = c.samples.filter((s) => s.tool === tool && s.kind === 'measured').map((s) => s.wallMs);
  if (walls.length === 0) return '';
  return `${f2(Math.min(...walls) / 1000)}-${f2(Math.max(...walls) / 1000)}`;
}

function comparisonRows(c: Comparison): string[][] {
  return c.tools.map((t: ToolSummary) => [
    label(c, t.tool),
    f2(t.wallMs / 1000),
    wallRange(c, t.tool),
    f1(t.mbPerS),
    int(t.rowsPerS),
    f2(t.cpuMs / 1000),
    int(t.maxRssBytes / MIB),
    f1(t.outputBytes / MIB),
    `${f2(t.ratioVsDuckDb)}x`,
  ]);
}

const COMPARISON_HEADERS = [
  'tool',
  'wall s',
  'runs min-max s',
  'MB/s',
  'rows/s',
  'CPU s',
  'peak RSS MiB',
  'output MiB',
  'vs raw DuckDB',
];

interface Target {
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

/** Why the merge (one DuckDB read + sort + write) is slower than the best engine's whole run. */
function mergeCause(c: Comparison): string | undefined {
  const duck = c.tools.find((t) => t.tool === 'duckdb');
  const polars = c.tools.find((t) => t.tool === c.polarsBest);
  const write = c.tools.find((t) => t.tool === 'write');
  if (!duck || !polars) return undefined;
  return (
    `the merge is DuckDB's own read + sort + write; raw DuckDB's whole run is ${secs(duck.wallMs)} s, ${f2(duck.wallMs / polars.wallMs)}x polars' (${secs(polars.wallMs)} s)` +
    (write
      ? `, and DuckDB's Parquet writer alone, rows already in memory, takes ${secs(write.wallMs)} s`
      : '') +
    ': the engine, not the product, sets this floor (a second engine behind the Engine interface is the remaining option)'
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
      value: `${usd6(job.total)} vs ${usd6(job.target.limit)} (S3 Tables ${job.s3Tables.strategy} ${usd6(job.s3Tables.total)})`,
      met: job.target.met,
      headline: true,
      ...(job.cause ? { cause: job.cause } : {}),
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

/** Dollars to six decimals: a job's terms are millionths. */
const usd6 = (n: number) => `$${n.toFixed(6)}`;

/** The S3 bench: per job, concurrency, multipart, and each Lambda's wait on S3 versus compute. */
export function s3Section(r: BenchResults): string[] {
  const s = r.s3Latency;
  if (!s) return [];
  const rows = s.jobs.map((job) => {
    const step = (name: string) => job.run.steps.find((x) => x.step === name);
    const compact = step('compact');
    const others = job.run.steps.filter((x) => x.step !== 'compact');
    const parts = job.run.commands.UploadPart ?? 0;
    const chainMs = job.run.steps.reduce((sum, x) => sum + x.wallMs, 0);
    return [
      job.title,
      int(job.files),
      f1(job.bytes / 1e6),
      `${job.run.maxConcurrentDownloads} / ${job.run.plannedConcurrency}`,
      `${job.shaper.maxAwaitingRequests} / ${job.shaper.connections}`,
      parts > 0
        ? `${job.run.commands.CreateMultipartUpload ?? 0} upload(s), ${parts} parts`
        : `none (${job.run.commands.PutObject ?? 0} PUTs)`,
      `${f1(job.run.outputBytes / MIB)}`,
      secs(compact?.wallMs ?? 0),
      secs(compact?.s3OnlyMs ?? 0),
      secs(compact?.engineBusyMs ?? 0),
      // The rest of the step: neither an S3 call nor the engine running.
      secs((compact?.wallMs ?? 0) - (compact?.engineBusyMs ?? 0) - (compact?.s3OnlyMs ?? 0)),
      others.map((x) => `${x.step} ${secs(x.wallMs)} (S3 ${secs(x.s3OnlyMs)})`).join(', '),
      secs(chainMs),
      `${int((((compact?.s3OnlyMs ?? 0) + others.reduce((sum, x) => sum + x.s3OnlyMs, 0)) / Math.max(chainMs, 1)) * 100)}%`,
    ];
  });
  return [
    '',
    '## S3 path behind a latency shaper',
    '',
    `The per-partition chain (compact, publish, verify, delete inputs, clear) over the product's S3 path (the real SDK and S3Store, built as the Lambdas build them) ` +
      `against fauxqs behind a TCP shaper: every response's first byte ${s.firstByteLatencyMs} ms after its request's last byte, ${f1(s.bytesPerSecond / 1e6)} MB/s per connection each way ` +
      `(from ${s.sources.join(' and ')}). Multipart parts are 8 MiB here (fauxqs refuses bodies over 11 MiB; the Lambda's are 64 MiB). ` +
      `"S3 only": time with an S3 call in flight and no engine call running; "engine": time with the engine working (footer checks overlap the downloads); ` +
      `"other": the rest of the step (JS work between calls). One run each, the median of three for the small jobs; seconds on this shared machine.`,
    '',
    table(
      [
        'job',
        'files',
        'MB',
        'downloads in flight (max / planned)',
        'requests awaiting first byte (max) / connections',
        'multipart on upload',
        'output MiB',
        'compact s',
        'S3 only s',
        'engine s',
        'other s',
        'other steps s',
        'chain s',
        'waiting on S3 alone',
      ],
      rows,
    ),
  ];
}

/** The three user jobs priced term by term for both child types, against S3 Tables. */
export function jobCostSection(r: BenchResults): string[] {
  const jobs = r.cost?.jobs ?? [];
  if (jobs.length === 0) return [];
  const out: string[] = [
    '',
    '## Cost of the jobs users have',
    '',
    'Each term from the measured S3 run of that job (Lambda billed seconds = max(wall, CPU / vCPUs), requests counted on the wire) ' +
      'or a stated assumption (marked). Prices: bench/cost.ts PRICES, each with its page.',
  ];
  for (const job of jobs) {
    out.push(
      '',
      `### ${job.title}, ${job.childType} children: ${usd6(job.total)} vs ${usd6(job.target.limit)} (${job.target.text}): ${job.target.met ? 'met' : 'not met'}`,
      '',
      table(
        ['term', 'arithmetic', 'USD'],
        [
          ...job.terms.map((t) => [t.name, t.arithmetic, usd6(t.usd)]),
          ['**total**', '', `**${usd6(job.total)}**`],
          ...job.s3Tables.terms.map((t) => [t.name, t.arithmetic, usd6(t.usd)]),
          [`S3 Tables ${job.s3Tables.strategy} total`, '', usd6(job.s3Tables.total)],
          [`target: ${job.target.text}`, '', usd6(job.target.limit)],
        ],
        '--- | --- | ---:',
      ),
    );
    if (job.cause) out.push('', `Not met: ${job.cause}.`);
  }
  return out;
}

export function renderMarkdown(r: BenchResults): string {
  const e = r.environment;
  const lines: string[] = [];
  lines.push('# Benchmark results', '');
  lines.push(
    `One run of \`npm run bench\` on ${e.startedAt.slice(0, 10)}: ${e.cores} x ${e.cpu} (${e.arch}), ` +
      `${int(e.memoryBytes / 2 ** 30)} GiB RAM, Node ${e.node}, @duckdb/node-api ${e.duckdb}, nodejs-polars ${e.polars}. ` +
      `Every tool gets ${r.settings.threads} threads; the product runs with the compact Lambda's settings ` +
      `(DuckDB memory_limit ${r.settings.productMemoryLimit}, ${r.settings.threads} threads). ` +
      `Median of ${r.settings.runs} runs after a warm-up, tools alternating run by run, each run in its own process; ` +
      `every output verified (row count, sorted by time, ids exactly 1..N). ` +
      `Load average ${e.loadAverageStart.map(f1).join('/')} at the start and ${e.loadAverageEnd.map(f1).join('/')} at the end ` +
      `(the machine is shared: wall times carry that noise, CPU seconds less so). The run took ${int(e.durationS)} s.`,
    '',
  );
  lines.push('![wall time relative to raw DuckDB, and peak RSS](results.svg)', '');
  for (const c of r.comparisons) {
    lines.push(
      `## ${c.dataset.title}`,
      '',
      `${int(c.dataset.rows)} rows, ${c.dataset.columns} columns, ${f1(c.dataset.bytes / 1e6)} MB of snappy Parquet in ${int(c.dataset.files)} files. ` +
        `MB/s and rows/s are input bytes and rows per wall second.`,
      '',
      table(COMPARISON_HEADERS, comparisonRows(c)),
      '',
      `polars modes (median of warm-up and selection run): ${c.polarsModes.map((m) => `${TOOL_LABEL[m.tool]} ${f2(m.wallMs / 1000)} s`).join(', ')}; best: ${TOOL_LABEL[c.polarsBest]}.`,
      '',
    );
    const phases = c.tools.find((t) => t.tool === 'product')?.phases;
    if (phases) {
      lines.push(
        `Product phases (median ms): downloads ${int(phases.downloadMs ?? 0)}, footer checks ${int(phases.inspectMs ?? 0)} ` +
          `(overlapping the downloads), merge ${int(phases.mergeMs ?? 0)}, staging upload ${int(phases.stagingPutMs ?? 0)}, ` +
          `manifest reads/writes ${int(phases.manifestMs ?? 0)}.`,
        '',
      );
    }
    const gap = fetchGap(c);
    if (gap) lines.push(gap, '');
    const write = writeGap(c);
    if (write) lines.push(write, '');
    const footers = footerGap(c);
    if (footers) lines.push(footers, '');
  }
  lines.push('## Targets', '');
  lines.push(
    table(
      ['target', 'measured', 'met', 'measured cause, where not met'],
      targets(r).map((t) => [t.name, t.value, t.met ? 'yes' : '**no**', t.cause ?? '']),
      '--- | --- | --- | ---',
    ),
    '',
  );
  if (r.requests) {
    lines.push('## Object-store requests per job', '');
    lines.push(`Formula, checked by the bench: **${r.requests.formula}** (one output per job).`, '');
    lines.push(
      table(
        ['tier', 'inputs', 'GET/HEAD', 'PUT/COPY', 'LIST', 'DELETE', 'total', 'formula', 'calls by kind'],
        r.requests.jobs.map((j) => [
          j.tier,
          int(j.inputs),
          int(j.byClass.get),
          int(j.byClass.put),
          int(j.byClass.list),
          int(j.byClass.delete),
          int(j.total),
          int(j.expected),
          Object.entries(j.calls)
            .map(([k, v]) => `${k} ${v}`)
            .join(', '),
        ]),
      ),
      '',
    );
    const plan = r.requests.jobs[0]?.planCalls;
    if (plan) {
      lines.push(
        `Planning (once per cycle, not per job): ${Object.entries(plan)
          .map(([k, v]) => `${k} ${v}`)
          .join(', ')}; on S3 each list is one LIST request per 1,000 keys.`,
        '',
      );
    }
  }
  if (r.orchestration) {
    const o = r.orchestration;
    lines.push('## Orchestration overhead', '');
    lines.push(
      `A local cycle (recover, plan, then every step of every job, as \`runCycle\` and the state machine do) over ` +
        `${o.partitions} partitions of ${o.filesPerPartition} files x ${o.rowsPerFile} rows:`,
      '',
      table(
        ['concurrency', 'cycle wall s', 'engine busy s', 'overhead s', 'store calls'],
        o.runs.map((run) => [
          String(run.concurrency),
          f2(run.cycleWallMs / 1000),
          f2(run.engineBusyMs / 1000),
          f2((run.cycleWallMs - run.engineBusyMs) / 1000),
          int(run.storeCalls),
        ]),
      ),
      '',
      `At concurrency 1 the protocol around the engine costs ${f1(o.overheadPerPartitionMs)} ms per partition ` +
        `(${int(o.overheadShare * 100)}% of the cycle): manifests, conditional writes, downloads, staging, publish, verify, deletes, clear. ` +
        `Time inside store calls at concurrency 1 (ms, summed): ${Object.entries(o.runs[0]?.storeMsByOp ?? {})
          .sort((a, b) => b[1] - a[1])
          .map(([op, ms]) => `${op} ${int(ms)}`)
          .join(
            ', ',
          )}; the local folder store fsyncs every object and its folder on each write, as S3 makes each write durable before it answers.`,
      '',
    );
    lines.push(...wholeProcessSection(o));
  }
  if (r.planner) {
    const p = r.planner;
    const live = (run: { liveHeapBytes?: number }) =>
      run.liveHeapBytes === undefined ? 'n/a' : `${int(run.liveHeapBytes / MIB)} MiB`;
    lines.push('## Planner scale', '');
    lines.push(
      `planTier (hourly) over a synthetic listing of ${int(p.objects)} objects in ${int(p.partitions)} partitions, through the ObjectStore interface, ` +
        `in its own process; ${int(p.jobs)} jobs planned with ${int(p.plannedInputs)} inputs.`,
      '',
      table(
        ['Node heap', 'wall s', 'peak RSS MiB', 'RSS before planning MiB', 'live heap after plan'],
        [
          [
            `--max-old-space-size=${p.cappedHeapMb} (half the plan Lambda's 512 MB)`,
            f1(p.capped.wallMs / 1000),
            int(p.capped.maxRssBytes / MIB),
            int(p.capped.baselineRssBytes / MIB),
            live(p.capped),
          ],
          [
            `V8 default for this ${int(r.environment.memoryBytes / 2 ** 30)} GiB machine`,
            f1(p.wallMs / 1000),
            int(p.maxRssBytes / MIB),
            int(p.baselineRssBytes / MIB),
            live(p),
          ],
        ],
      ),
      '',
      'The plan itself keeps the live heap shown (every input key, size and ETag of every job: the Plan it returns); ' +
        "the rest of the peak is garbage V8 has not collected yet, which grows with the heap V8 allows, not with the planner's needs.",
      '',
    );
  }
  if (r.plannerLake) lines.push(...plannerLakeMarkdown(r.plannerLake));
  if (r.memory) {
    const m = r.memory;
    lines.push('## Memory: a partition larger than the engine memory', '');
    lines.push(
      `${f1(m.inputBytes / 1e6)} MB of Parquet (${int(m.rows)} rows x ${m.columns} columns, ${m.files} files) through the product path with ` +
        `DuckDB memory_limit ${m.memoryLimit}: completed in ${f1(m.wallMs / 1000)} s, spilled up to ${int(m.spillPeakBytes / MIB)} MiB to its temp directory, ` +
        `peak RSS ${int(m.maxRssBytes / MIB)} MiB, output ${f1(m.outputBytes / MIB)} MiB, verified.`,
      '',
    );
  }
  lines.push(...s3Section(r), ...jobCostSection(r));
  if (r.cost) {
    const c = r.cost;
    lines.push('## Cost per GiB compacted', '');
    lines.push(
      table(
        [
          'job',
          'Lambda compute',
          'Lambda requests',
          'S3 requests',
          'Step Functions',
          'total',
          'with S3 wait',
          'S3 Tables binpack',
          'S3 Tables sort',
          'Glue',
        ],
        c.rows.map((row) => [
          `${row.scenario} (${f2(row.measuredSeconds)} s measured, ${f2(row.lambdaSeconds)} s on ${row.lambdaVcpus.toFixed(2)} vCPUs, + ${f2(row.s3WaitSeconds)} s S3 wait)`,
          usd(row.perGib.lambdaCompute),
          usd(row.perGib.lambdaRequests),
          usd(row.perGib.s3Requests),
          usd(row.perGib.stepFunctions),
          usd(row.perGib.total),
          `**${usd(row.perGib.totalWithS3Wait)}**`,
          usd(row.perGib.s3TablesBinpack),
          usd(row.perGib.s3TablesSort),
          usd(row.perGib.glue),
        ]),
      ),
      '',
      `Lambda: compact at ${c.lambdaMemoryMb} MB arm64 for the measured wall time or, if longer, the measured CPU time over the ` +
        `${(c.lambdaMemoryMb / c.assumptions.lambdaMbPerVcpu).toFixed(2)} vCPUs Lambda gives ${c.lambdaMemoryMb} MB (one per ${c.assumptions.lambdaMbPerVcpu} MB; this machine has 2 cores) ` +
        `(this machine is x64; Lambda is arm64 Graviton: the same throughput per vCPU is assumed), the other four steps at ${c.assumptions.otherStepMemoryMb} MB for ${c.assumptions.otherStepSeconds} s each, ` +
        `recover/plan/summary at ${c.assumptions.otherStepMemoryMb} MB for ${c.assumptions.perExecutionLambdaSeconds} s each per execution of ` +
        `${c.assumptions.partitionsPerExecution} partitions; $${c.prices.lambdaArmGbSecond} per GB-s, $0.20 per 1M requests. ` +
        `S3: per job N input GETs + ${c.fixedCalls.get} GET/HEAD + ${c.fixedCalls.put} PUT/COPY + ${c.fixedCalls.list} LIST (measured above), ` +
        `each input listed ${c.assumptions.listingsPerInput} times by planning; PUT/COPY/LIST $0.005 and GET/HEAD $0.0004 per 1,000, DELETE free. ` +
        `Step Functions: 1 transition per child execution started + ${c.transitionsPerPartition} per partition + ${c.transitionsPerExecution} per execution (${c.transitionsSource}), $0.025 per 1,000. ` +
        `S3 wait: the local store is a folder; in Lambda the inputs come from S3: the compact step's measured time waiting on S3 alone over the S3 path behind the shaper ` +
        `(the S3 section below; the 2 GiB row scales (i)'s by bytes; 0 where that section did not run), billed as compact Lambda time. ` +
        `S3 Tables: $0.005/GB binpack or $0.01/GB sort plus $0.002 per 1,000 objects. Glue: ${c.assumptions.glueDpus} DPU x max(${c.assumptions.glueMinimumSeconds} s, ` +
        `input / ${c.assumptions.glueMegabytesPerSecond} MB/s) at $0.44 per DPU-hour (a stated, not measured, throughput) plus the same input GETs. ` +
        `Target: $${c.targetPerGib}/GiB.`,
      '',
    );
  }
  return `${lines.join('\n')}\n`;
}

export function printTables(r: BenchResults): void {
  const out: string[] = [];
  for (const c of r.comparisons) {
    out.push('', c.dataset.title, table(COMPARISON_HEADERS, comparisonRows(c)));
    const gap = fetchGap(c);
    if (gap) out.push(gap);
    const write = writeGap(c);
    if (write) out.push(write);
    const footers = footerGap(c);
    if (footers) out.push(footers);
  }
  out.push(...s3Section(r), ...jobCostSection(r));
  out.push(
    '',
    'targets',
    table(
      ['target', 'measured', 'met'],
      targets(r).map((t) => [t.name, t.value, t.met ? 'yes' : 'NO']),
    ),
    ...targets(r)
      .filter((t) => !t.met && t.cause)
      .map((t) => `not met, ${t.name}: ${t.cause}`),
  );
  process.stdout.write(`${out.join('\n')}\n`);
}

function escapeXml(text: string): string {
  return text.replace(
    /[<>&"]/g,
    (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;' })[c] as string,
  );
}

/** Two panels: wall time relative to raw DuckDB (with the 1.10x target), and peak RSS. */
export function renderSvg(r: BenchResults): string {
  const width = 1040;
  const left = 200;
  const panelW = 380;
  const rssX = 730;
  const rssW = 230;
  const barH = 16;
  const gap = 4;
  const groupGap = 26;
  const top = 90;
  const maxRatio = Math.max(...r.comparisons.flatMap((c) => c.tools.map((t) => t.ratioVsDuckDb)));
  // Long bars are cut at the axis end (marked), so the bars near 1.0x stay readable.
  const axisMax = Math.min(2.5, Math.max(1.5, Math.ceil(maxRatio * 4) / 4));
  const maxRss = Math.max(1, ...r.comparisons.flatMap((c) => c.tools.map((t) => t.maxRssBytes / MIB)));
  const xRatio = (v: number) => left + (Math.min(v, axisMax) / axisMax) * panelW;
  const xRss = (v: number) => rssX + (v / maxRss) * rssW;
  const parts: string[] = [];
  let y = top;
  for (const c of r.comparisons) {
    parts.push(
      `<text x="10" y="${y + 2}" font-weight="bold" font-size="13">${escapeXml(c.dataset.title)}</text>`,
    );
    y += 10;
    for (const t of c.tools) {
      const color = TOOL_COLOR[t.tool];
      const end = xRatio(t.ratioVsDuckDb);
      const cut = t.ratioVsDuckDb > axisMax;
      parts.push(
        `<text x="${left - 8}" y="${y + barH - 4}" text-anchor="end" font-size="12">${escapeXml(label(c, t.tool))}</text>`,
        `<rect x="${left}" y="${y}" width="${Math.max(1, end - left).toFixed(1)}" height="${barH}" fill="${color}"/>`,
        cut
          ? `<path d="M${(end - 10).toFixed(1)} ${y - 1} l6 ${barH + 2} M${(end - 5).toFixed(1)} ${y - 1} l6 ${barH + 2}" stroke="white" stroke-width="2"/>`
          : '',
        `<text x="${(end + 4).toFixed(1)}" y="${y + barH - 4}" font-size="11"${t.tool === 'product' ? ' font-weight="bold"' : ''}>${f2(t.ratioVsDuckDb)}x (${f2(t.wallMs / 1000)} s)</text>`,
        `<rect x="${rssX}" y="${y}" width="${Math.max(1, xRss(t.maxRssBytes / MIB) - rssX).toFixed(1)}" height="${barH}" fill="${color}" opacity="0.75"/>`,
        `<text x="${(xRss(t.maxRssBytes / MIB) + 4).toFixed(1)}" y="${y + barH - 4}" font-size="11">${int(t.maxRssBytes / MIB)}</text>`,
      );
      y += barH + gap;
    }
    y += groupGap;
  }
  const bottom = y - groupGap + 4;
  const line = (v: number, dash: string) =>
    `<line x1="${xRatio(v).toFixed(1)}" y1="${top - 8}" x2="${xRatio(v).toFixed(1)}" y2="${bottom}" stroke="#333" stroke-dasharray="${dash}"/>`;
  const ticks = [0.5, 1, 1.5, 2, 2.5]
    .filter((v) => v <= axisMax)
    .map(
      (v) =>
        `<text x="${xRatio(v).toFixed(1)}" y="${top - 12}" text-anchor="middle" font-size="10" fill="#555">${v.toFixed(1)}x</text>`,
    );
  const height = bottom + 92;
  const e = r.environment;
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="Helvetica, Arial, sans-serif">
<title>Compacting one partition: wall time relative to raw DuckDB, and peak RSS, per tool and dataset</title>
<rect width="100%" height="100%" fill="white"/>
<text x="10" y="22" font-size="16" font-weight="bold">Compacting one partition: wall time relative to raw DuckDB (lower is better), and peak RSS</text>
<text x="10" y="40" font-size="11" fill="#555">${escapeXml(`median of ${r.settings.runs} runs after a warm-up, ${r.settings.threads} threads per tool, ${e.cores} x ${e.cpu}, ${e.startedAt.slice(0, 10)}; every output verified`)}</text>
<text x="${left}" y="64" font-size="12" font-weight="bold">wall time / raw DuckDB</text>
<text x="${rssX}" y="64" font-size="12" font-weight="bold">peak RSS of the process (MiB)</text>
${ticks.join('\n')}
${line(1, '4 3')}
${line(1.1, '2 2')}
${parts.join('\n')}
<text x="${xRatio(1).toFixed(1)}" y="${bottom + 14}" text-anchor="end" font-size="11">raw DuckDB = 1.0x</text>
<text x="${(xRatio(1.1) + 4).toFixed(1)}" y="${bottom + 14}" font-size="11">1.10x target</text>
<text x="10" y="${height - 54}" font-size="11" fill="#555">blue: product (the compact Lambda's code path on the local folder store); grey: raw DuckDB COPY ... ORDER BY time; orange: nodejs-polars' best mode;</text>
<text x="10" y="${height - 40}" font-size="11" fill="#555">green: I/O floor (read every input byte, write the output's size); light green: fetch floor (copy each input to a new local file, as the product's downloads do);</text>
<text x="10" y="${height - 26}" font-size="11" fill="#555">light grey: DuckDB write only (the rows already sorted in memory, written to one ZSTD file: the writer's share of any DuckDB merge).</text>
<text x="10" y="${height - 12}" font-size="11" fill="#555">Bars past ${axisMax.toFixed(1)}x are cut (marked //).</text>
</svg>
`;
}
