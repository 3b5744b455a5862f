/**
 * `compactor repair [--dry-run]`: removes, through the protocol, raw files whose rows an output next to
 * them already holds.
 */

import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { StepResult } from '../../core/protocol.ts';
import type { repairPartition } from '../../core/repair.ts';
import { type CliIo, commandContext, emit } from '../command.ts';
import { buildEngine } from '../context.ts';
import { formatCount, table } from '../format.ts';
import { asLocalExecution } from '../local-execution.ts';
import type { ParsedOptions } from '../options.ts';
import { assertCliStore } from '../store-guard.ts';

export async function repairCommand(options: ParsedOptions, io: CliIo): Promise<number> {
  const ctx = await commandContext(options);
  if (!options['dry-run']) await assertCliStore(ctx, io.err);
  const { engine, workDir } = await buildEngine(options);
  try {
    return await asLocalExecution(ctx, (base) =>
      repairWith(options, io, {
        ...base,
        engine,
        workDir: join(workDir, base.executionId.replaceAll(':', '-')),
      }),
    );
  } finally {
    await engine.close();
  }
}

async function repairWith(
  options: ParsedOptions,
  io: CliIo,
  deps: Parameters<typeof repairPartition>[0],
): Promise<number> {
  const { findRepairs, repairPartition } = await import('../../core/repair.ts');
  const candidates = await findRepairs(deps);
  const results: { partition: string; result: StepResult }[] = [];
  for (const candidate of options['dry-run'] ? [] : candidates.filter((c) => c.inputs.length > 0)) {
    results.push({ partition: candidate.partition, result: await repairPartition(deps, candidate) });
  }
  await rm(deps.workDir, { recursive: true, force: true });
  const duplicated = candidates.reduce((sum, c) => sum + c.duplicatedRows, 0);
  emit(io, options, { dryRun: Boolean(options['dry-run']), candidates, results }, () =>
    [
      candidates.length === 0
        ? 'no output coexists with raw files whose rows it holds'
        : table(
            ['partition', 'tier', 'duplicate files', 'duplicated rows', 'kept', 'why kept'],
            candidates.map((c) => [
              c.partition,
              c.tier,
              c.inputs.length,
              formatCount(c.duplicatedRows),
              c.kept.length,
              c.kept[0] ? `${c.kept[0].key}: ${c.kept[0].reason}` : '',
            ]),
          ),
      options['dry-run']
        ? `dry run: ${formatCount(duplicated)} duplicated rows in ${candidates.filter((c) => c.inputs.length > 0).length} partition(s); nothing changed`
        : `repaired ${results.filter((r) => r.result.status === 'done').length} partition(s), ${formatCount(duplicated)} duplicated rows removed; ${results.filter((r) => r.result.status !== 'done').length} skipped`,
    ].join('\n'),
  );
  const refused = candidates.some((c) => c.kept.length > 0);
  return refused || results.some((r) => r.result.status !== 'done') ? 1 : 0;
}
