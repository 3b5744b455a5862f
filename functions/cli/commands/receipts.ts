/**
 * `compactor receipts`: what each committed job did, read from its receipt (receipts.ts): the
 * inputs it took, the rows in and out, the outputs it published. Loads no engine or SDK beyond
 * the store's.
 */

import { ConfigError } from '../../core/errors.ts';
import { listReceipts, type Receipt } from '../../core/receipts.ts';
import { type CliIo, commandContext, emit, partitionFolderOption } from '../command.ts';
import { formatBytes, formatCount, table } from '../format.ts';
import type { ParsedOptions } from '../options.ts';

export async function receiptsCommand(options: ParsedOptions, io: CliIo): Promise<number> {
  const ctx = await commandContext(options);
  const since = options.since === undefined ? undefined : Date.parse(options.since);
  if (since !== undefined && Number.isNaN(since)) {
    throw new ConfigError(`--since ${options.since}: use an ISO time like 2025-01-15T00:00:00Z`);
  }
  const under = options.partition === undefined ? undefined : partitionFolderOption(ctx, options.partition);
  const listed = await listReceipts(ctx.target.store, ctx.config, {
    ...(under === undefined ? {} : { under }),
    ...(since === undefined ? {} : { since: new Date(since) }),
  });
  const receipts = listed.flatMap((r) => ('receipt' in r ? [r.receipt] : []));
  const invalid = listed.flatMap((r) => ('invalid' in r ? [r] : []));
  emit(io, options, { receipts, invalid }, () =>
    [
      `receipts: ${receipts.length}${under === undefined ? '' : ` under ${under}`}${options.since === undefined ? '' : ` of jobs started since ${options.since}`}`,
      ...(receipts.length > 0
        ? [
            table(
              ['partition', 'tier', 'job', 'inputs deleted at', 'inputs', 'rows in', 'rows out', 'outputs'],
              receipts.map((r) => [
                r.partition,
                r.tier,
                r.jobId,
                r.inputsDeletedAt,
                inputsCell(r),
                r.inputRows === undefined ? '' : formatCount(r.inputRows),
                rowsOut(r),
                outputsCell(r),
              ]),
            ),
          ]
        : []),
      ...invalid.map((r) => `not a receipt: ${r.invalid}`),
    ].join('\n'),
  );
  return invalid.length > 0 ? 1 : 0;
}

/** The inputs, and those left in place (kept: replaced after the job read them; quarantined). */
function inputsCell(r: Receipt): string {
  const kept = (r.keptInputs?.length ?? 0) + (r.quarantinedInputs?.length ?? 0);
  const bytes = r.inputs.reduce((sum, i) => sum + i.size, 0);
  return `${r.inputs.length} (${formatBytes(bytes)})${kept > 0 ? `, ${kept} left in place` : ''}`;
}

function rowsOut(r: Receipt): string {
  if (r.expiry) return `expired (${r.expiry.rule}: ${r.expiry.days} days)`;
  if (r.repairOf) return `held by ${r.repairOf.length} output(s)`;
  return formatCount(r.outputs.reduce((sum, o) => sum + o.rows, 0));
}

function outputsCell(r: Receipt): string {
  if (r.outputs.length === 0) return '';
  const bytes = r.outputs.reduce((sum, o) => sum + o.size, 0);
  return `${r.outputs.length} (${formatBytes(bytes)})`;
}
