/**
 * `compactor demo [--dir DIR]`: generates an Arc-layout lake of small files, runs the hourly and daily
 * cycles over it and checks the row counts are equal.
 */

import { readdir, rm } from 'node:fs/promises';
import { resolve } from 'node:path';
import { LocalFolderStore } from '../../adapters/local-store/local-store.ts';
import { ConfigError, errorCode } from '../../core/errors.ts';
import type { ObjectStore } from '../../core/object-store.ts';
import { visibleFiles } from '../../core/visible.ts';
import { type CliIo, commandContext } from '../command.ts';
import { buildEngine } from '../context.ts';
import type { generateDemoLake } from '../demo-lake.ts';
import { formatBytes, formatCount, formatDuration, table } from '../format.ts';
import { footerRows } from '../lake-stats.ts';
import { DEMO_DIR, DEMO_QUIET_SECONDS, type ParsedOptions } from '../options.ts';
import { runCommand } from './run.ts';

/** What a demo lake's folder holds: the demo may replace a folder holding only these. */
const DEMO_ENTRIES = new Set(['telemetry', '_compaction', '.compactor-store']);

/** Longer than the demo lake's oldest hour has waited (it starts 3 days ago). */
const DEMO_BEHIND_AFTER_SECONDS = String(7 * 86_400);

export async function demoCommand(options: ParsedOptions, io: CliIo): Promise<number> {
  const dir = resolve(options.dir ?? DEMO_DIR);
  // The folder is wiped first: only ever an earlier demo lake, never someone's data.
  const existing = await readdir(dir).catch((error: unknown) => {
    if (errorCode(error) === 'ENOENT') return [];
    throw error;
  });
  const foreign = existing.filter((name) => !DEMO_ENTRIES.has(name));
  if (foreign.length > 0) {
    throw new ConfigError(
      `--dir ${dir} holds ${foreign.slice(0, 3).join(', ')}${foreign.length > 3 ? ', ...' : ''}: the demo replaces only an earlier demo lake; use a new or empty folder`,
    );
  }
  await rm(dir, { recursive: true, force: true });
  const store: ObjectStore = new LocalFolderStore(dir);
  const { engine } = await buildEngine(options);
  const today = new Date();
  today.setUTCHours(0, 0, 0, 0);
  const firstDay = new Date(today.getTime() - 3 * 86_400_000);
  io.out(`Generating an Arc-layout lake in ${dir}`);
  io.out(
    `  db "telemetry", measurements cpu, mem, disk; 2 days from ${firstDay.toISOString().slice(0, 10)}; 3 to 14 files an hour`,
  );
  const started = Date.now();
  let lake: Awaited<ReturnType<typeof generateDemoLake>>;
  try {
    lake = await (await import('../demo-lake.ts')).generateDemoLake(
      engine,
      store,
      {
        database: 'telemetry',
        measurements: ['cpu', 'mem', 'disk'],
        firstDay,
        days: 2,
        filesPerHour: (h) => 3 + ((h * 5) % 12),
        rowsPerFile: 250,
        dataPrefix: '',
      },
      (written, total) => {
        if (written % 250 === 0 || written === total) io.err(`  wrote ${written}/${total} files`);
      },
    );
  } finally {
    await engine.close();
  }
  io.out(
    `  ${formatCount(lake.files)} files, ${formatBytes(lake.bytes)}, ${formatCount(lake.rows)} rows in ${formatDuration(Date.now() - started)}`,
  );

  // The files were just written; act as if the writers went quiet a little while ago.
  const base: ParsedOptions = { ...options, store: dir, quiet: options.quiet ?? DEMO_QUIET_SECONDS };
  const before = await lakeSummary(base);
  // The default tiers (the monthly one is opt-in; the demo's days are too recent for it anyway).
  for (const tier of ['hourly', 'daily'] as const) {
    io.out(`\n== ${tier} cycle ==`);
    // Its hours are days old by design (the daily tier merges finished days only): not a tier
    // falling behind, so no warning that it is.
    const code = await runCommand({ ...base, tier, 'behind-after': DEMO_BEHIND_AFTER_SECONDS }, io);
    if (code !== 0) return code;
  }
  const after = await lakeSummary(base);
  io.out('\n== before / after ==');
  io.out(
    table(
      ['', 'files', 'bytes', 'rows'],
      [
        ['before', before.files, formatBytes(before.bytes), formatCount(before.rows)],
        ['after', after.files, formatBytes(after.bytes), formatCount(after.rows)],
      ],
    ),
  );
  const equal = before.rows === after.rows && after.rows === lake.rows;
  io.out(
    equal
      ? `rows equal: ${formatCount(after.rows)} before and after; files ${before.files} -> ${after.files}` +
          (after.files < before.files
            ? ` (${(before.files / Math.max(1, after.files)).toFixed(0)}x fewer)`
            : ' (nothing compacted: see the cycles above)')
      : `ROWS DIFFER: generated ${lake.rows}, before ${before.rows}, after ${after.rows}`,
  );
  io.out('\nTry (`npm run compactor -- <command>` in this repository, or `compactor` once on your PATH):');
  for (const command of ['status', 'visible --sql', 'receipts', 'audit'])
    io.out(`  compactor ${command} --store ${dir}`);
  return equal ? 0 : 1;
}

async function lakeSummary(options: ParsedOptions): Promise<{ files: number; bytes: number; rows: number }> {
  const ctx = await commandContext(options);
  const view = await visibleFiles(ctx.target.store, ctx.config);
  const { engine } = await buildEngine(options);
  try {
    const rows = await footerRows(ctx.target.store, ctx.target.localRoot, engine, view.files);
    return {
      files: rows.length,
      bytes: rows.reduce((s, r) => s + r.size, 0),
      rows: rows.reduce((s, r) => s + (r.rows ?? 0), 0),
    };
  } finally {
    await engine.close();
  }
}
