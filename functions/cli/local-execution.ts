/**
 * Protocol work a command (recover, repair, retention) runs in this process: one local execution registered
 * as live while it runs, and its job events printed on stderr.
 */

import { randomBytes } from 'node:crypto';
import { LocalOwners, newLocalExecutionId } from '../adapters/local-owner.ts';
import type { CompactorConfig } from '../core/config.ts';
import type { Clock } from '../core/engine.ts';
import type { ObjectStore } from '../core/object-store.ts';
import type { JobEvent } from '../core/protocol.ts';
import type { CliIo, CommandContext } from './command.ts';

/**
 * Runs a command's protocol work as one local execution: registered as live while it runs (so the
 * recovery of a concurrent run leaves its manifests alone), with the step deps every command shares.
 */
export async function asLocalExecution<T>(
  ctx: CommandContext,
  work: (deps: {
    readonly store: ObjectStore;
    readonly config: CompactorConfig;
    readonly clock: Clock;
    readonly executionId: string;
    readonly isOwnerAlive: LocalOwners['isAlive'];
    readonly randomHex: () => string;
  }) => Promise<T>,
): Promise<T> {
  const owners = new LocalOwners();
  const executionId = newLocalExecutionId();
  const end = owners.begin(executionId);
  try {
    return await work({
      store: ctx.target.store,
      config: ctx.config,
      clock: ctx.clock,
      executionId,
      isOwnerAlive: owners.isAlive,
      randomHex: () => randomBytes(8).toString('hex'),
    });
  } finally {
    end();
  }
}

export function logEvent(io: CliIo, event: JobEvent): void {
  if (event.type === 'quarantined') io.err(`QUARANTINED ${event.key}: ${event.reason}`);
  if (event.type === 'input-quarantined') {
    io.err(`QUARANTINED input ${event.key} (partition ${event.partition}): ${event.reason}`);
  }
  if (event.type === 'failure-not-recorded') io.err(`warning: ${event.reason}`);
}
