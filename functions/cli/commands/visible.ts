/**
 * `compactor visible [--format F]`: the files a consistent reader should read, or a statement that reads
 * exactly them. Loads no engine unless --format athena (test/cli/startup.test.ts).
 */

import { ConfigError, TransientStoreError } from '../../core/errors.ts';
import type { ObjectSummary } from '../../core/object-store.ts';
import { QUARANTINED_INPUT_FIX } from '../../core/quarantine.ts';
import {
  athenaStatement,
  athenaTables,
  athenaViewsRoot,
  clickhouseStatement,
  duckdbStatement,
  pathOf,
  polarsStatement,
  sparkStatement,
  unionColumns,
  VIEW_FORMATS,
  type ViewFormat,
  type ViewTarget,
  writeAthenaManifests,
} from '../../core/reader-views.ts';
import { type VisibleView, visibleFiles } from '../../core/visible.ts';
import { type CliIo, type CommandContext, commandContext, emit } from '../command.ts';
import { buildEngine } from '../context.ts';
import { footerRows } from '../lake-stats.ts';
import type { ParsedOptions } from '../options.ts';

export async function visibleCommand(options: ParsedOptions, io: CliIo): Promise<number> {
  const format = parseViewFormat(options);
  const ctx = await commandContext(options);
  const view = await visibleFiles(ctx.target.store, ctx.config);
  const viewTarget = viewTargetOf(ctx, options);
  // The view hides no data file; one no reader can read makes every read of it fail: exit 1.
  const unreadable = view.unreadableQuarantined.length > 0 ? 1 : 0;
  if (unreadable) {
    io.err(
      `warning: the view holds ${view.unreadableQuarantined.length} quarantined file(s) that are not Parquet, and reading it fails on them: ` +
        `${view.unreadableQuarantined.map((k) => pathOf(viewTarget, k)).join(', ')}; ` +
        `\`compactor status\` gives each reason; ${QUARANTINED_INPUT_FIX}`,
    );
  }
  const keys = view.files.map((f) => f.key);
  if (format === undefined) {
    emit(io, options, { ...view, quarantinedInputs: [...view.quarantinedInputs] }, () =>
      keys.map((k) => pathOf(viewTarget, k)).join('\n'),
    );
    return unreadable;
  }
  if (format === 'athena') return athenaView(ctx, options, io, view, viewTarget);
  const paths = keys.map((k) => pathOf(viewTarget, k));
  const statement =
    format === 'duckdb'
      ? duckdbStatement(paths)
      : format === 'clickhouse'
        ? clickhouseStatement(viewTarget, keys)
        : format === 'polars'
          ? polarsStatement(paths)
          : sparkStatement(viewTarget, keys);
  emit(io, options, { format, statement, paths, files: view.files.length }, () => statement);
  return unreadable;
}

function parseViewFormat(options: ParsedOptions): ViewFormat | undefined {
  const format = options.format;
  if (format !== undefined && !VIEW_FORMATS.includes(format as ViewFormat)) {
    throw new ConfigError(`--format ${format}: use ${VIEW_FORMATS.join(', ')}`);
  }
  if (options.sql && format !== undefined && format !== 'duckdb') {
    throw new ConfigError(`--sql is --format duckdb; it cannot be combined with --format ${format}`);
  }
  return options.sql ? 'duckdb' : (format as ViewFormat | undefined);
}

function viewTargetOf(ctx: CommandContext, options: ParsedOptions): ViewTarget {
  const { dataPrefix, stateRoot } = ctx.config.layout;
  if (ctx.target.localRoot) return { kind: 'local', root: ctx.target.localRoot, dataPrefix, stateRoot };
  return {
    kind: 's3',
    bucket: ctx.target.store.location.replace(/^s3:\/\//, ''),
    region: options.region ?? process.env.AWS_REGION ?? 'us-east-1',
    ...(options.endpoint ? { endpoint: options.endpoint } : {}),
    dataPrefix,
    stateRoot,
  };
}

/**
 * Athena, Trino, Redshift Spectrum: writes one SymlinkTextInputFormat manifest per table under
 * <stateRoot>views/athena/ (the only format that writes; it says so on stderr) and prints a
 * CREATE EXTERNAL TABLE per table, its columns read from the files' footers. A table it cannot
 * declare is skipped with a warning naming the fix, and the command exits 1.
 */
async function athenaView(
  ctx: CommandContext,
  options: ParsedOptions,
  io: CliIo,
  view: VisibleView,
  target: ViewTarget,
): Promise<number> {
  const tableOf = (key: string) =>
    ctx.config.layout.parse(key)?.table ?? key.slice(0, key.lastIndexOf('/') + 1);
  // A table holding a file no reader can read is skipped as one Athena cannot declare is.
  const unreadable = new Set(view.unreadableQuarantined.map(tableOf));
  const files = view.files
    .map((f) => ({ key: f.key, table: tableOf(f.key) }))
    .filter((f) => !unreadable.has(f.table));
  const declared = athenaTables(target, files);
  const tables = declared.tables;
  const skipped = [
    ...[...unreadable].map((table) => ({
      table,
      reason:
        'it holds a quarantined file that is not Parquet (named above), on which every query would fail',
      fix: QUARANTINED_INPUT_FIX,
    })),
    ...declared.skipped,
  ];
  for (const s of skipped) io.err(`warning: --format athena skips table ${s.table}: ${s.reason}; ${s.fix}`);
  if (tables.length === 0) {
    throw new ConfigError(
      skipped.length === 0
        ? '--format athena: no visible files, so no columns to declare'
        : `--format athena: no table can be declared (${skipped.length} skipped, see the warnings above)`,
    );
  }
  const byKey = new Map(view.files.map((f) => [f.key, f]));
  const { engine } = await buildEngine(options);
  const statements: string[] = [];
  try {
    for (const t of tables) {
      const objects = t.files.map((k) => byKey.get(k) as ObjectSummary);
      const read = await footerRows(ctx.target.store, ctx.target.localRoot, engine, objects);
      const bad = read.find((r) => r.columns === undefined);
      if (bad) {
        throw new TransientStoreError(`--format athena: ${bad.key}: ${bad.error ?? 'unreadable'}; try again`);
      }
      statements.push(athenaStatement(t, unionColumns(read.map((r) => r.columns ?? []))));
    }
  } finally {
    await engine.close();
  }
  const written = await writeAthenaManifests(ctx.target.store, ctx.config.layout.stateRoot, tables);
  io.err(
    `compactor visible --format athena wrote ${written.written.length} manifest(s) under ${athenaViewsRoot(ctx.config.layout.stateRoot)}` +
      `${written.removed.length ? ` and removed ${written.removed.length} stale one(s)` : ''}; ` +
      'they list the files visible now: write them again after each compaction run',
  );
  emit(
    io,
    options,
    {
      format: 'athena',
      statement: statements.join('\n\n'),
      tables: tables.map((t) => ({
        table: t.table,
        name: t.name,
        manifest: t.manifestKey,
        location: t.location,
        files: t.files.length,
      })),
      skipped,
      manifestsWritten: written.written,
      manifestsRemoved: written.removed,
    },
    () => statements.join('\n\n'),
  );
  // The statements printed leave out the skipped tables' rows: a problem found, not a success.
  return skipped.length > 0 ? 1 : 0;
}
