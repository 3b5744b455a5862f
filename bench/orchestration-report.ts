/** The whole-process and start-up rows of the bench's targets, and their section of bench/results.md. */

import { type OrchestrationResult, STARTUP_TARGET_MS, WHOLE_PROCESS_TARGET } from './orchestration.ts';
import { table } from './report-format.ts';
import { wholeProcessProfileNote, wholeProcessProfileTable } from './whole-process-profile.ts';

/** The rows of issue 14 item 7 for the bench's targets table. */
export function wholeProcessTargets(
  o: OrchestrationResult | undefined,
): { readonly name: string; readonly value: string; readonly met: boolean; readonly cause?: string }[] {
  const out: { name: string; value: string; met: boolean; cause?: string }[] = [];
  const w = o?.wholeProcess;
  if (w) {
    const met = w.ratio <= WHOLE_PROCESS_TARGET;
    // The same command on an empty lake: everything but the partition's own work.
    const empty = o?.startup?.find((s) => !s.light);
    const s = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
    out.push({
      name: `whole process: compactor run --tier hourly over ${w.files} files x ${w.rowsPerFile.toLocaleString('en-US')} rows <= ${WHOLE_PROCESS_TARGET.toFixed(2)}x raw DuckDB's`,
      value: `${w.ratio.toFixed(2)}x (${(w.productWallMs / 1000).toFixed(2)} s vs ${(w.duckdbWallMs / 1000).toFixed(2)} s)`,
      met,
      ...(met || !empty
        ? {}
        : {
            cause:
              `${empty.command} takes ${s(empty.wallMs)} (Node start-up, modules, the cached definition in the ASL interpreter, recovery, planning, run records), ` +
              `so the partition's own five steps take ${s(w.productWallMs - empty.wallMs)} against raw DuckDB's whole process ${s(w.duckdbWallMs)} ` +
              `(${((w.productWallMs - empty.wallMs) / w.duckdbWallMs).toFixed(2)}x); the steps add each input's hard link and ETag check, the staging upload, the publish copy and the local store's fsync of every object and folder written`,
          }),
    });
  }
  for (const s of o?.startup ?? []) {
    if (!s.light) continue;
    out.push({
      name: `start-up: ${s.command} < ${(STARTUP_TARGET_MS / 1000).toFixed(1)} s`,
      value: `${(s.wallMs / 1000).toFixed(2)} s`,
      met: s.wallMs < STARTUP_TARGET_MS,
    });
  }
  return out;
}

/** The whole-process and start-up section of bench/results.md. */
export function wholeProcessSection(o: OrchestrationResult): string[] {
  const w = o.wholeProcess;
  if (!w) return [];
  return [
    '## Whole process',
    '',
    `\`compactor run --tier hourly\` over one partition of ${w.files} files x ${w.rowsPerFile.toLocaleString('en-US')} rows, ` +
      `spawn to exit (Node start-up, module loading, the cached definition run in the ASL interpreter, recovery, planning, ` +
      `every step, the run records), against a Node process running raw DuckDB's COPY of the same files; medians of ${w.runs} runs each:`,
    '',
    table(
      ['process', 'wall s', 'runs s'],
      [
        [
          'compactor run --tier hourly',
          (w.productWallMs / 1000).toFixed(2),
          w.productSamplesMs.map((ms) => (ms / 1000).toFixed(2)).join(', '),
        ],
        [
          'raw DuckDB (node + COPY)',
          (w.duckdbWallMs / 1000).toFixed(2),
          w.duckdbSamplesMs.map((ms) => (ms / 1000).toFixed(2)).join(', '),
        ],
      ],
    ),
    '',
    `${w.ratio.toFixed(2)}x raw DuckDB's whole process. The first run, which synthesizes the stack (an empty definition cache), took ${(w.coldProductWallMs / 1000).toFixed(2)} s.`,
    '',
    ...(w.profile
      ? [
          'Where one `compactor run` process of that partition goes (docs/performance.md says how to read it):',
          '',
          wholeProcessProfileTable(w.profile),
          '',
          wholeProcessProfileNote(w.profile, w.productWallMs),
          '',
        ]
      : []),
    'Start-up, spawn to exit:',
    '',
    table(
      ['command', 'wall s'],
      (o.startup ?? []).map((s) => [s.command, (s.wallMs / 1000).toFixed(2)]),
    ),
    '',
  ];
}
