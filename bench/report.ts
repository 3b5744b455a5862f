/**
 * Renders the bench results: console tables and bench/results.md. The targets are in
 * report-targets.ts, the SVG chart in report-svg.ts, the shared formats in report-format.ts.
 */

import { auditLakeMarkdown } from './audit-lake.ts';
import { backlogMarkdown } from './backlog.ts';
import type { Comparison, ToolSummary } from './compare.ts';
import { type CycleCost, FLOOR_DEFINITION } from './cost.ts';
import { wholeProcessSection } from './orchestration-report.ts';
import { partitionProfileNote, partitionProfileSection, partitionProfileTable } from './partition-profile.ts';
import { plannerLakeMarkdown } from './planner-scale.ts';
import { readersMarkdown } from './readers.ts';
import { duration, f1, f2, int, label, MIB, secs, TOOL_LABEL, table, usd, usd6 } from './report-format.ts';
import { fetchGap, footerGap, targets, writeGap } from './report-targets.ts';
import type { BenchResults } from './results.ts';
import { wholeProcessProfileNote, wholeProcessProfileTable } from './whole-process-profile.ts';
import type { Tool } from './worker.ts';

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
    'Each term from the measured S3 run of that job (Lambda billed seconds = max(wall, CPU / vCPUs), requests counted on the wire, an output the bench sent in parts counted in 64 MiB parts, as the Lambdas send it: requestsAtLambdaParts) ' +
      'or a stated assumption (marked). Prices: functions/core/cost/prices.ts PRICES, each with its page.',
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
          ...job.floorTerms.map((t) => [t.name, t.arithmetic, usd6(t.usd)]),
          ['floor total', '', usd6(job.floor)],
          [`target: ${job.target.text}`, '', usd6(job.target.limit)],
        ],
        '--- | --- | ---:',
      ),
    );
    if (job.cause) out.push('', `Not met: ${job.cause}.`);
  }
  for (const c of r.cost?.cycles ?? []) out.push('', `### ${cycleLine(c)}`);
  return out;
}

/** A cycle of many small partitions beside its floor, and where one partition's bill goes. */
export function cycleLine(c: CycleCost): string {
  return (
    `a cycle of ${c.partitions.toLocaleString('en-US')} partitions of ${c.filesPerPartition} small files, ${c.childType} children: ` +
    `${usd6(c.total)} (${usd6(c.perPartition)} a partition) vs the floor ${usd6(c.floor)} (${FLOOR_DEFINITION}): ` +
    `${(c.total / c.floor).toFixed(1)}x; about ${duration(c.seconds)} at ${c.maxConcurrency} Map items at once (${c.items.toLocaleString('en-US')} items); ` +
    `largest terms of a partition: ${c.largest.map((t) => `${t.name} ${usd6(t.usd)}`).join(', ')}`
  );
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
  if (r.auditLake) lines.push(...auditLakeMarkdown(r.auditLake));
  if (r.backlog) lines.push(...backlogMarkdown(r.backlog));
  if (r.readers) lines.push(...readersMarkdown(r.readers));
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
  if (r.partitionsProfile)
    lines.push(...partitionProfileSection(r.partitionsProfile, r.partitions?.partitions));
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

/** The two profiles, whole process and one partition's chain, as printed after a run. */
function profileTables(r: BenchResults): string[] {
  const w = r.orchestration?.wholeProcess;
  const p = r.partitionsProfile;
  return [
    ...(w?.profile
      ? [
          '',
          'where a compactor run process goes',
          wholeProcessProfileTable(w.profile),
          wholeProcessProfileNote(w.profile, w.productWallMs),
        ]
      : []),
    ...(p
      ? [
          '',
          "where one small partition's chain goes",
          partitionProfileTable(p),
          partitionProfileNote(p, r.partitions?.partitions),
        ]
      : []),
  ];
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
  out.push(...s3Section(r), ...jobCostSection(r), ...profileTables(r));
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
