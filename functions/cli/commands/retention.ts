/**
 * `compactor retention [--dry-run]`: deletes, through the protocol, whole files older than their table's
 * retention.
 */

import { ConfigError } from '../../core/errors.ts';
import type { JobEvent } from '../../core/protocol.ts';
import type { RetentionPlan } from '../../core/retention.ts';
import { type CliIo, commandContext, emit } from '../command.ts';
import { formatBytes, table } from '../format.ts';
import { asLocalExecution, logEvent } from '../local-execution.ts';
import type { ParsedOptions } from '../options.ts';
import { assertCliStore } from '../store-guard.ts';

interface RetentionRow {
  readonly partition: string;
  readonly rule: string;
  readonly cutoff: string;
  readonly files: readonly string[];
  readonly bytes: number;
  /** Applied runs only: what the job did. */
  readonly result?: string;
  readonly removed?: number;
  readonly kept?: number;
  readonly note?: string;
}

export async function retentionCommand(options: ParsedOptions, io: CliIo): Promise<number> {
  const ctx = await commandContext(options);
  const { rules, bufferHours } = ctx.config.retention;
  if (rules.length === 0) {
    throw new ConfigError(
      'no retention rule: pass --retention TABLE=DAYS[,...], e.g. --retention "mydb/cpu/=30,mydb/=90,*=365"',
    );
  }
  const dryRun = Boolean(options['dry-run']);
  if (!dryRun) await assertCliStore(ctx, io.err);
  return asLocalExecution(ctx, async (base) => {
    const deps = { ...base, onEvent: (event: JobEvent) => logEvent(io, event) };
    // An applied run first resolves what an earlier one left, as every cycle does.
    const [{ recover }, { planRetention }, { assignJobs, runJob }] = await Promise.all([
      import('../../core/recovery.ts'),
      import('../../core/retention.ts'),
      import('../../core/cycle.ts'),
    ]);
    const recovery = dryRun ? undefined : await recover(deps);
    const plan: RetentionPlan = await planRetention(ctx.target.store, ctx.config, ctx.clock);
    const rows: RetentionRow[] = [];
    let failed = 0;
    const assigned = assignJobs(plan, deps);
    for (const [i, job] of plan.jobs.entries()) {
      const row: RetentionRow = {
        partition: job.partition,
        rule: job.rule,
        cutoff: job.cutoff,
        files: job.inputs.map((input) => input.key),
        bytes: job.inputBytes,
      };
      const assignedJob = assigned[i];
      if (dryRun || !assignedJob) {
        rows.push(row);
        continue;
      }
      const outcome = await runJob(deps, assignedJob);
      const committed = outcome.steps[0];
      const deleted = outcome.steps.find((r) => r.state === 'inputs-deleted' || r.state === 'cleared');
      // Inputs set aside at the commit are not in the committed inputs; those kept at the delete are.
      const keptAtDelete = Math.max(0, (deleted?.keptInputs ?? 0) - (committed?.keptInputs ?? 0));
      if (outcome.status === 'failed') failed++;
      rows.push({
        ...row,
        result: outcome.status,
        removed: outcome.status === 'expired' ? (committed?.inputs ?? 0) - keptAtDelete : 0,
        kept: deleted?.keptInputs ?? committed?.keptInputs ?? 0,
        note:
          outcome.status === 'failed'
            ? `${outcome.error.name}: ${outcome.error.message}`
            : (committed?.reason ?? ''),
      });
    }
    const files = rows.reduce((sum, r) => sum + (dryRun ? r.files.length : (r.removed ?? 0)), 0);
    const bytes = rows.reduce((sum, r) => sum + (dryRun || r.result === 'expired' ? r.bytes : 0), 0);
    const report = {
      dryRun,
      now: plan.now,
      rules,
      bufferHours,
      objectsListed: plan.objectsListed,
      partitions: rows,
      skipped: plan.skipped,
      unmatchedRules: plan.unmatchedRules,
      ...(recovery ? { recovery } : {}),
    };
    emit(io, options, report, () =>
      [
        `retention at ${plan.now}${dryRun ? ' (dry run)' : ''}: rules ${rules.map((r) => `${r.table}=${r.days}d`).join(', ')}, buffer ${bufferHours} h; ${plan.objectsListed} objects listed`,
        rows.length === 0
          ? 'no expired file'
          : table(
              dryRun
                ? ['partition', 'rule', 'cutoff', 'files', 'bytes']
                : ['partition', 'rule', 'cutoff', 'files', 'bytes', 'result', 'removed', 'kept', 'note'],
              rows.map((r) => [
                r.partition,
                r.rule,
                r.cutoff,
                r.files.length,
                formatBytes(r.bytes),
                ...(dryRun ? [] : [r.result ?? '', r.removed ?? 0, r.kept ?? 0, r.note ?? '']),
              ]),
            ),
        ...plan.skipped.map((s) => `skipped ${s.partition}: ${s.reason}`),
        ...plan.unmatchedRules.map(
          (rule) =>
            `warning: retention rule "${rule}" matches no data file, so it expires nothing; a rule names a table path under the data prefix${plan.tablesSeen.length > 0 ? ` (tables here include ${plan.tablesSeen.join(', ')})` : ' (no table found)'}`,
        ),
        dryRun
          ? `dry run: ${files} file(s), ${formatBytes(bytes)} in ${rows.length} day(s) would be removed; nothing changed`
          : `removed ${files} file(s), ${formatBytes(bytes)} in ${rows.filter((r) => r.result === 'expired').length} day(s); ${failed} failed`,
      ].join('\n'),
    );
    return failed > 0 ? 1 : 0;
  });
}
