/**
 * `compactor recover`: resolves the manifests left by crashed or stopped runs.
 */

import type { RecoveryReport } from '../../core/recovery.ts';
import { type CliIo, commandContext, emit } from '../command.ts';
import { quarantinePrunedNote, table } from '../format.ts';
import { asLocalExecution, logEvent } from '../local-execution.ts';
import type { ParsedOptions } from '../options.ts';
import { assertCliStore } from '../store-guard.ts';

export async function recoverCommand(options: ParsedOptions, io: CliIo): Promise<number> {
  const ctx = await commandContext(options);
  await assertCliStore(ctx, io.err);
  return asLocalExecution(ctx, async (deps) => {
    const { recover } = await import('../../core/recovery.ts');
    const report = await recover({ ...deps, onEvent: (event) => logEvent(io, event) });
    emit(io, options, report, () => formatRecovery(report));
    return report.entries.some((e) => e.action === 'quarantined') ? 1 : 0;
  });
}

function formatRecovery(report: RecoveryReport): string {
  const head = `recovery: ${report.entries.length} manifest(s) examined, ${report.orphanStagingDeleted} orphan staging object(s) removed, ${report.uploadsAborted} incomplete upload(s) aborted${quarantinePrunedNote(report.quarantinePruned)}`;
  if (report.entries.length === 0) return head;
  return `${head}\n${table(
    ['manifest', 'state', 'action', 'why'],
    report.entries.map((e) => [e.manifestKey, e.state ?? '?', e.action, e.reason]),
  )}`;
}
