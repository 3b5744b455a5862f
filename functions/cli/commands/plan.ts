/**
 * `compactor plan --tier TIER`: the dry run of a cycle, what it would compact (or expire) and why the rest
 * is skipped, and what the cycle would cost in AWS with the deployed settings.
 */

import { behindWarning } from '../../core/backlog.ts';
import type { JobKind } from '../../core/config.ts';
import { mapItemIndexes } from '../../core/plan-store.ts';
import { type CliIo, commandContext, emit } from '../command.ts';
import { NO_RETENTION_RULE, parseTier } from '../context.ts';
import { formatBytes, table } from '../format.ts';
import { layoutHint } from '../layout-hint.ts';
import type { ParsedOptions } from '../options.ts';
import { deployedCycle, formatCost, usd } from '../plan-cost.ts';

/** Why a tier may find nothing: what it merges (functions/core/tiers.ts), and what writes that. */
const WHAT_A_TIER_MERGES: Readonly<Record<JobKind, string>> = {
  hourly: 'no hour holds raw files to merge',
  daily:
    'no finished day holds hourly outputs to merge; the daily tier merges what `compactor run --tier hourly` writes, not raw files',
  monthly:
    'no finished month holds daily outputs to merge; the monthly tier merges what `compactor run --tier daily` writes',
  retention: 'no file is older than its table rule',
};

export async function planCommand(options: ParsedOptions, io: CliIo): Promise<number> {
  const tier = parseTier(options.tier);
  const ctx = await commandContext(options);
  const { planCycle } = await import('../../core/cycle.ts');
  const { cycleCost, RequestCountingStore } = await import('../../core/cost/index.ts');
  // The plan's own listing is counted: the planning's S3 requests in the price.
  const counted = new RequestCountingStore(ctx.target.store);
  const plan = await planCycle(counted, ctx.config, ctx.clock, tier);
  // The Map items the plan step would write: small jobs of one table share a child.
  const items = mapItemIndexes(plan.jobs, ctx.config.layout, ctx.config.smallJobsPerItem);
  const cost = cycleCost({
    jobs: plan.jobs.map((j, i) => ({
      tier: j.tier,
      inputs: j.inputs.length,
      inputBytes: j.inputBytes,
      wave: j.wave,
      item: items[i] as number,
    })),
    ...(await deployedCycle(options, ctx.target.dataPrefix, io.err)),
    planning: counted.requests,
  });
  const empty = plan.jobs.length === 0 && plan.skipped.length === 0;
  const hint = empty && plan.objectsListed > 0 ? await layoutHint(ctx.target.store, ctx.config) : undefined;
  if (hint !== undefined) io.err(`warning: ${hint}`);
  const behind = tier === 'retention' || !plan.backlog ? undefined : behindWarning(tier, plan.backlog);
  if (behind !== undefined) io.err(`warning: ${behind}`);
  // The record is what a stack's Plan step writes for its next plan: its figures are in backlog.
  const { backlogRecord: _record, ...shown } = plan;
  emit(io, options, { ...shown, cost }, () => {
    const rows = [
      ...plan.jobs.map((j, i) => [
        j.partition,
        tier === 'retention' ? 'expire' : 'compact',
        j.inputs.length,
        j.candidates,
        formatBytes(j.inputBytes),
        usd(cost.jobs[i]?.totalUsd ?? 0),
        usd(cost.jobs[i]?.floorUsd ?? 0),
        j.reason,
      ]),
      // A skipped partition takes no input; its candidates are shown where the plan counted them.
      ...plan.skipped.map((s) => [s.partition, 'skip', '', s.candidates ?? '', '', '', '', s.reason]),
    ];
    const settled = plan.settled ? `${plan.settled} partition(s) already one ${tier} file` : undefined;
    return [
      `${tier} plan at ${plan.now} (dry run): ${plan.objectsListed} objects listed`,
      ...(rows.length > 0
        ? [
            table(['partition', 'action', 'inputs', 'candidates', 'bytes', 'cost', 'floor', 'why'], rows),
            ...(settled ? [settled] : []),
          ]
        : tier === 'retention' && ctx.config.retention.rules.length === 0
          ? [`nothing to do: ${NO_RETENTION_RULE}`]
          : [`nothing to do: ${settled ?? WHAT_A_TIER_MERGES[tier]}`]),
      '',
      formatCost(cost),
    ].join('\n');
  });
  return 0;
}
