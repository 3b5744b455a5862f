/**
 * `compactor audit`: is this lake healthy? Per table and day its files, bytes and rows, then every
 * defect the core's audit finds (functions/core/audit.ts), each naming the object and its fix.
 * Changes nothing; exits 1 when it finds anything.
 */

import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { type AuditDay, type AuditReport, auditLake, FINDING_KINDS } from '../../core/audit.ts';
import type { FixCost } from '../../core/cost/index.ts';
import { type CliIo, commandContext } from '../command.ts';
import { buildEngine } from '../context.ts';
import { formatBytes, formatCount, table } from '../format.ts';
import { footerRows } from '../lake-stats.ts';
import type { ParsedOptions } from '../options.ts';
import { deployedCycle } from '../plan-cost.ts';

/** Day rows printed at a time: the table's widths are a chunk's, and no more rows are held. */
export const DAY_CHUNK = 1000;

/** `dayChunk`: day rows printed at a time (DAY_CHUNK); a test passes a small one to print several. */
export async function auditCommand(options: ParsedOptions, io: CliIo, dayChunk = DAY_CHUNK): Promise<number> {
  const ctx = await commandContext(options);
  const { store, localRoot } = ctx.target;
  const { engine, workDir } = await buildEngine(options);
  const scratch = join(workDir, `audit-${process.pid}`);
  // Days are printed as each is done (a lake of millions of days is never held whole); --json
  // streams them as the report's `days` array, the rest of the report after them.
  const json = options.json === true;
  const days = new DayPrinter(io, json, dayChunk);
  let report: AuditReport;
  try {
    report = await auditLake({
      store,
      config: ctx.config,
      clock: ctx.clock,
      engine,
      workDir: scratch,
      rowsOf: async (objects) =>
        new Map((await footerRows(store, localRoot, engine, objects)).map((f) => [f.key, f.rows])),
      onDay: (day) => days.add(day),
    });
  } finally {
    await engine.close();
    await rm(scratch, { recursive: true, force: true });
  }
  days.flush();
  const { findings } = report;
  const { fixCost } = await import('../../core/cost/index.ts');
  const cost = fixCost({
    ...report.fix,
    // The cycle's price needs the deployed definition, synthesized only when there is one to price.
    ...(report.fix.compactions.length > 0
      ? { cycle: await deployedCycle(options, ctx.target.dataPrefix, io.err) }
      : {}),
  });
  const { days: _streamed, ...rest } = report;
  if (json) {
    // The report's other fields after the streamed days: `{"days": [...], ...}` stays one object.
    io.out(`], ${JSON.stringify({ ...rest, fixCost: cost }, null, 2).slice(1)}`);
    return findings.length > 0 ? 1 : 0;
  }
  io.out(
    [
      ...(findings.length > 0
        ? [
            '',
            table(
              ['finding', 'object', 'detail', 'fix'],
              findings.map((f) => [f.kind, f.key, f.detail, f.fix]),
            ),
            '',
            formatFixCost(cost),
          ]
        : []),
      '',
      findings.length === 0
        ? `audit: clean: ${days.count} day(s), ${report.receipts} receipt(s), no defect found`
        : `audit: ${findings.length} finding(s): ${summarize(findings.map((f) => f.kind))}`,
    ].join('\n'),
  );
  return findings.length > 0 ? 1 : 0;
}

/** Prints day rows `chunk` at a time: a table per chunk, or JSON array elements. */
class DayPrinter {
  count = 0;
  readonly #io: CliIo;
  readonly #json: boolean;
  readonly #chunk: number;
  readonly #pending: AuditDay[] = [];

  constructor(io: CliIo, json: boolean, chunk: number) {
    this.#io = io;
    this.#json = json;
    this.#chunk = chunk;
    if (json) io.out('{"days": [');
  }

  add(day: AuditDay): void {
    this.#pending.push(day);
    if (this.#pending.length >= this.#chunk) this.flush();
  }

  flush(): void {
    if (this.#pending.length === 0) return;
    if (this.#json) {
      for (const day of this.#pending) this.#io.out(`${this.count++ > 0 ? ',' : ''}${JSON.stringify(day)}`);
    } else {
      this.count += this.#pending.length;
      this.#io.out(
        table(
          ['table', 'day', 'files', 'bytes', 'rows', 'findings'],
          this.#pending.map((d) => [
            d.table,
            d.day,
            d.files,
            formatBytes(d.bytes),
            d.rows === undefined ? 'unreadable' : formatCount(d.rows),
            d.findings === 0 ? '' : d.findings,
          ]),
        ),
      );
    }
    this.#pending.length = 0;
  }
}

const usd = (n: number) => `$${n.toFixed(6)}`;
const requests = (r: FixCost['requests']) =>
  `${formatCount(r.get)} GET, ${formatCount(r.put)} PUT, ${formatCount(r.list)} LIST, ${formatCount(r.delete)} DELETE`;

/** The price of the fix: repair, then the cycle that compacts what it leaves. */
function formatFixCost(cost: FixCost): string {
  const { repair, compaction } = cost;
  return [
    `estimated cost of the fix, ${cost.basis}:`,
    `  compactor repair: ${repair.folders} folder(s) checked by content, ${repair.duplicates} duplicate file(s) removed: ${requests(repair.requests)}, ${usd(repair.usd)}`,
    compaction === undefined
      ? '  then compaction: nothing left uncompacted'
      : `  then a cycle compacting ${compaction.total.jobs} partition(s) (${compaction.total.inputFiles} file(s), ${formatBytes(compaction.total.inputBytes)}), ${compaction.childExecutionType} children: ${requests(compaction.total.requests)}, ${usd(compaction.total.totalUsd)}`,
    `  total: ${requests(cost.requests)}, ${usd(cost.totalUsd)}`,
  ].join('\n');
}

/** "2 duplicate (rows an output ... holds), 1 orphan-staging (...)". */
function summarize(kinds: readonly (keyof typeof FINDING_KINDS)[]): string {
  const counts = new Map<keyof typeof FINDING_KINDS, number>();
  for (const kind of kinds) counts.set(kind, (counts.get(kind) ?? 0) + 1);
  return [...counts].map(([kind, n]) => `${n} ${kind} (${FINDING_KINDS[kind]})`).join(', ');
}
