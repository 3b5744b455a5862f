/**
 * `compactor verify`: row counts per partition, plain glob against the visible view, the partitions a
 * non-atomic compactor left suspect, and what is known of the owner of each job holding one.
 */

import { setTimeout as sleep } from 'node:timers/promises';
import { TransientStoreError } from '../../core/errors.ts';
import { halfCompacted } from '../../core/half-compacted.ts';
import type { ObjectSummary } from '../../core/object-store.ts';
import { type VisibleView, visibleFiles } from '../../core/visible.ts';
import { type CliIo, type CommandContext, commandContext, emit } from '../command.ts';
import { buildEngine } from '../context.ts';
import { formatCount, table } from '../format.ts';
import { footerRows, listData } from '../lake-stats.ts';
import { layoutHint } from '../layout-hint.ts';
import type { ParsedOptions } from '../options.ts';
import { describeOwner, readLiveManifests, recoverCommand } from './status.ts';

interface PartitionRows {
  partition: string;
  files: number;
  rows: number;
  visibleFiles: number;
  visibleRows: number;
  unreadable: string[];
  note: string;
}

/** Unreadable files a partition's note names before it says how many more. */
const NAMED_UNREADABLE = 3;

export async function verifyCommand(options: ParsedOptions, io: CliIo): Promise<number> {
  const ctx = await commandContext(options);
  const { layout } = ctx.config;
  const { engine } = await buildEngine(options);
  try {
    const { view, all, rows } = await stableSnapshot(ctx, engine);
    const visible = new Set(view.files.map((f) => `${f.key}\0${f.etag}`));
    const byPartition = new Map<string, PartitionRows>();
    for (const [i, file] of rows.entries()) {
      const parsed = layout.parse(file.key);
      // Monthly outputs count under their month folder.
      const partition = parsed?.dayFolder ?? parsed?.monthFolder ?? OUTSIDE;
      const entry = byPartition.get(partition) ?? {
        partition,
        files: 0,
        rows: 0,
        visibleFiles: 0,
        visibleRows: 0,
        unreadable: [],
        note: '',
      };
      entry.files++;
      entry.rows += file.rows ?? 0;
      if (file.rows === undefined) entry.unreadable.push(file.key);
      const object = all[i];
      if (object && visible.has(`${object.key}\0${object.etag}`)) {
        entry.visibleFiles++;
        entry.visibleRows += file.rows ?? 0;
      }
      byPartition.set(partition, entry);
    }
    // An output next to inputs older than itself, with no job holding them, is what a
    // non-atomic compactor leaves behind (the seed bug): flag it, as `compactor audit` does.
    // Only what the visible view holds counts: a job's inputs past its commit are not left behind.
    const shown = all.filter((o) => visible.has(`${o.key}\0${o.etag}`));
    // A quarantined input is left in place by design, not left behind.
    const suspects = new Set(
      halfCompacted(ctx.config, shown, (key) => view.quarantinedInputs.has(key)).map((h) => h.day),
    );
    // Read after the snapshot: a job that started meanwhile is named too, one that ended is not.
    const now = ctx.clock.now().getTime();
    const recover = recoverCommand(options);
    const jobs = (await readLiveManifests(ctx)).flatMap((found) =>
      'manifest' in found
        ? [
            {
              partition: found.manifest.partition,
              text: `${found.manifest.tier} job on ${found.manifest.partition}: ${describeOwner(found.manifest, now, recover).note}`,
            },
          ]
        : [],
    );
    const result = [...byPartition.values()].map((p) => ({
      ...p,
      note: [
        p.rows !== p.visibleRows
          ? `plain glob sees ${p.rows - p.visibleRows} rows more (a manifest holds the partition: a job in flight, or one a stopped run left)`
          : '',
        p.unreadable.length > 0 ? unreadableNote(p.unreadable, view.quarantinedInputs) : '',
        suspects.has(p.partition) ? 'SUSPECT: an output coexists with older raw files' : '',
        // A monthly job holds the days below its month; an hourly or daily one the day above it.
        ...jobs
          .filter((j) => j.partition.startsWith(p.partition) || p.partition.startsWith(j.partition))
          .map((j) => j.text),
      ]
        .filter(Boolean)
        .join('; '),
    }));
    const hint = byPartition.has(OUTSIDE) ? await layoutHint(ctx.target.store, ctx.config) : undefined;
    if (hint !== undefined) io.err(`warning: ${hint}`);
    const problems = result.filter((p) => p.note.includes('SUSPECT') || p.unreadable.length > 0).length;
    const { quarantinedInputs, ...shownView } = view;
    const json = {
      partitions: result.map((p) => ({
        ...p,
        unreadable: p.unreadable.length,
        unreadableFiles: p.unreadable,
      })),
      problems,
      visibleView: { ...shownView, quarantinedInputs: quarantinedInputs.size },
    };
    emit(io, options, json, () =>
      [
        table(
          ['partition', 'files', 'rows', 'visible files', 'visible rows', 'note'],
          result.map((p) => [
            p.partition,
            p.files,
            formatCount(p.rows),
            p.visibleFiles,
            formatCount(p.visibleRows),
            p.note,
          ]),
        ),
        `total: ${formatCount(result.reduce((s, p) => s + p.visibleRows, 0))} visible rows in ${view.files.length} files; ${view.liveManifests} live and ${view.quarantinedManifests} quarantined manifest(s), ${quarantinedInputs.size} quarantined input(s); ${problems} partition(s) need attention`,
      ].join('\n'),
    );
    return problems > 0 ? 1 : 0;
  } finally {
    await engine.close();
  }
}

/** A partition's unreadable files, the first few named, and whether compaction quarantined them. */
function unreadableNote(keys: readonly string[], quarantined: ReadonlySet<string>): string {
  const named = keys.slice(0, NAMED_UNREADABLE).join(', ');
  const more = keys.length > NAMED_UNREADABLE ? ` and ${keys.length - NAMED_UNREADABLE} more` : '';
  const held = keys.filter((k) => quarantined.has(k)).length;
  return `${keys.length} unreadable file(s): ${named}${more}${held > 0 ? ` (${held} quarantined: \`compactor status\`)` : ''}`;
}

/**
 * The visible view, the plain listing and their footers, taken again until nothing changed while
 * they were read: a cycle running meanwhile deletes files between the listing and the reading,
 * which would otherwise show as unreadable files and wrong row counts.
 */
async function stableSnapshot(
  ctx: CommandContext,
  engine: Awaited<ReturnType<typeof buildEngine>>['engine'],
) {
  const { store, localRoot } = ctx.target;
  const { layout } = ctx.config;
  const list = () => listData(store, (k) => layout.isDataKey(k), layout.dataPrefix);
  const same = (a: readonly ObjectSummary[], b: readonly ObjectSummary[]) =>
    a.length === b.length && a.every((o, i) => o.key === b[i]?.key && o.etag === b[i]?.etag);
  // The view's own retries can run out while a cycle moves many jobs: that is a change too.
  const viewOrChanged = (): Promise<VisibleView | undefined> =>
    visibleFiles(store, ctx.config).catch((error: unknown) => {
      if (error instanceof TransientStoreError) return undefined;
      throw error;
    });
  for (let attempt = 1; ; attempt++) {
    const view = await viewOrChanged();
    const all = await list();
    const rows = await footerRows(store, localRoot, engine, all);
    const viewAfter = await viewOrChanged();
    if (view && viewAfter && same(view.files, viewAfter.files) && same(all, await list()))
      return { view, all, rows };
    if (attempt >= VERIFY_ATTEMPTS) {
      throw new TransientStoreError(
        `the lake changed while it was read, ${VERIFY_ATTEMPTS} times (a cycle is running?); try again`,
      );
    }
    await sleep(250 * attempt);
  }
}

const VERIFY_ATTEMPTS = 8;

const OUTSIDE = '(outside the layout)';
