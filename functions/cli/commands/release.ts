/**
 * `compactor release (--partition P | --all) [--dry-run]`: re-admits quarantined inputs once their
 * cause is fixed, and prunes records whose objects are gone (quarantine-ts).
 */

import { ConfigError } from '../../core/errors.ts';
import { quarantinedManifestsRoot } from '../../core/manifest/manifest.ts';
import {
  listQuarantinedInputs,
  pruneInputRecords,
  pruneJobRecords,
  type QuarantineChange,
  type ReleaseSelection,
  releaseInputs,
  selects,
} from '../../core/quarantine-lifecycle.ts';
import { type CliIo, type CommandContext, commandContext, emit, partitionFolderOption } from '../command.ts';
import { buildEngine } from '../context.ts';
import { table } from '../format.ts';
import type { ParsedOptions } from '../options.ts';
import { assertCliStore } from '../store-guard.ts';

export async function releaseCommand(options: ParsedOptions, io: CliIo): Promise<number> {
  const ctx = await commandContext(options);
  const selection = releaseSelection(options, ctx);
  const dryRun = Boolean(options['dry-run']);
  // Its deletes are conditional: a store that ignores the condition could drop a fresh record.
  if (!dryRun) await assertCliStore(ctx, io.err);
  const deps = { store: ctx.target.store, config: ctx.config };
  const records = await listQuarantinedInputs(deps);
  const { engine, workDir } = await buildEngine(options);
  let released: QuarantineChange[];
  try {
    const chosen = records.filter((r) => selects(selection, r.key));
    released = await releaseInputs({ ...deps, engine, workDir }, chosen, { dryRun });
  } finally {
    await engine.close();
  }
  // Records outside the selection are pruned too when their objects are gone, as recovery would.
  const others = records.filter((r) => !selects(selection, r.key));
  const pruned = await pruneInputRecords(deps, others, { dryRun });
  const jobs = await pruneJobRecords(deps, { dryRun });
  const changes = [...released, ...pruned, ...jobs.pruned];
  const held = jobs.kept.filter((key) => jobInSelection(ctx, selection, key));
  emit(io, options, { dryRun, changes, quarantinedJobs: held }, () => formatRelease(changes, held, dryRun));
  // An input that still fails its checks is a problem found.
  return changes.some((c) => c.action === 'still-bad') ? 1 : 0;
}

/** --partition P (with or without the data prefix; a folder at or above a partition) or --all. */
function releaseSelection(options: ParsedOptions, ctx: CommandContext): ReleaseSelection {
  const partition = options.partition;
  if (options.all && partition !== undefined)
    throw new ConfigError('release takes --partition P or --all, not both');
  if (options.all) return { all: true };
  if (partition === undefined || partition.trim() === '') {
    throw new ConfigError(
      'release needs --partition P (a partition folder such as mydb/cpu/2025/01/15/10/, or a folder above it) or --all; `compactor status` lists the quarantined inputs',
    );
  }
  return { partition: partitionFolderOption(ctx, partition) };
}

/** Whether a quarantined job's record lies in the selection (never released here, only listed). */
function jobInSelection(ctx: CommandContext, selection: ReleaseSelection, recordKey: string): boolean {
  const root = quarantinedManifestsRoot(ctx.config.layout);
  // `<tier>/<partition without the data prefix>/<stamp>.json` (quarantinedManifestKey).
  const partition = recordKey.slice(root.length).split('/').slice(1, -1).join('/');
  return selects(selection, `${ctx.config.layout.dataPrefix}${partition}/`);
}

/**
 * A released row's record reason no longer holds (the input passed the re-check), so the row says
 * what happens to it next and keeps the old reason only as what it was.
 */
function why(change: QuarantineChange, dryRun: boolean): string {
  if (change.action !== 'released') return change.reason;
  return dryRun
    ? `passes the re-check; the next run would check it in full (was: ${change.reason})`
    : `passed the re-check; the next run checks it in full (was: ${change.reason})`;
}

function formatRelease(
  changes: readonly QuarantineChange[],
  held: readonly string[],
  dryRun: boolean,
): string {
  const count = (action: QuarantineChange['action']) => changes.filter((c) => c.action === action).length;
  const lines = [
    changes.length === 0
      ? 'no quarantined input matches'
      : table(
          ['record', 'input', dryRun ? 'would be' : 'action', 'why'],
          changes.map((c) => [c.recordKey, c.holds, c.action, why(c, dryRun)]),
        ),
    dryRun
      ? `dry run: ${count('released')} input(s) would be re-admitted, ${count('pruned')} record(s) pruned; nothing changed`
      : `${count('released')} input(s) re-admitted: the next run checks and compacts them (a file still bad is quarantined again); ${count('pruned')} record(s) of objects that are gone pruned${count('changed-meanwhile') > 0 ? `; ${count('changed-meanwhile')} rewritten meanwhile, kept` : ''}`,
    ...(count('still-bad') > 0
      ? [
          `${count('still-bad')} input(s) still fail their checks and stay quarantined: replace or remove the file, or fix the setting the reason names, then release again`,
        ]
      : []),
  ];
  if (held.length > 0) {
    lines.push(
      `${held.length} quarantined job(s) are not released: their outputs may sit beside their inputs; see "Quarantine" in docs/operations.md (first: ${held[0]})`,
    );
  }
  return lines.join('\n');
}
