/**
 * `compactor retention [--dry-run]`: deletes, through the protocol, whole files older than their
 * table's retention. Applied, it is `run --tier retention` (the synthesized state machine run
 * locally, as deployed); the dry run prints per day the files, bytes and cutoff, and changes nothing.
 */

import { type CliIo, commandContext, emit } from '../command.ts';
import { requireRetentionRules } from '../context.ts';
import { formatBytes, table } from '../format.ts';
import type { ParsedOptions } from '../options.ts';

interface RetentionRow {
  readonly partition: string;
  readonly rule: string;
  readonly cutoff: string;
  readonly files: readonly string[];
  readonly bytes: number;
}

export async function retentionCommand(options: ParsedOptions, io: CliIo): Promise<number> {
  const ctx = await commandContext(options);
  const { rules, bufferHours } = ctx.config.retention;
  requireRetentionRules(ctx.config);
  if (!options['dry-run']) {
    return (await import('./run.ts')).runCommand({ ...options, tier: 'retention' }, io);
  }
  const { planRetention, unmatchedRuleWarning } = await import('../../core/retention.ts');
  const plan = await planRetention(ctx.target.store, ctx.config, ctx.clock);
  const rows: RetentionRow[] = plan.jobs.map((job) => ({
    partition: job.partition,
    rule: job.rule,
    cutoff: job.cutoff,
    files: job.inputs.map((input) => input.key),
    bytes: job.inputBytes,
  }));
  const files = rows.reduce((sum, r) => sum + r.files.length, 0);
  const bytes = rows.reduce((sum, r) => sum + r.bytes, 0);
  const report = {
    dryRun: true,
    now: plan.now,
    rules,
    bufferHours,
    objectsListed: plan.objectsListed,
    partitions: rows,
    skipped: plan.skipped,
    unmatchedRules: plan.unmatchedRules,
  };
  emit(io, options, report, () =>
    [
      `retention at ${plan.now} (dry run): rules ${rules.map((r) => `${r.table}=${r.days}d`).join(', ')}, buffer ${bufferHours} h; ${plan.objectsListed} objects listed`,
      rows.length === 0
        ? 'no expired file'
        : table(
            ['partition', 'rule', 'cutoff', 'files', 'bytes'],
            rows.map((r) => [r.partition, r.rule, r.cutoff, r.files.length, formatBytes(r.bytes)]),
          ),
      ...plan.skipped.map((s) => `skipped ${s.partition}: ${s.reason}`),
      ...plan.unmatchedRules.map((rule) => unmatchedRuleWarning(rule, plan.tablesSeen)),
      `dry run: ${files} file(s), ${formatBytes(bytes)} in ${rows.length} day(s) would be removed; nothing changed`,
    ].join('\n'),
  );
  return 0;
}
