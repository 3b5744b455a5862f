/**
 * Owner liveness for local runs. A local execution id names its host and process; a process
 * that is gone cannot act again, so recovery may take its jobs over at once (no lease wait).
 * Ids of other kinds (a Step Functions execution ARN) or other hosts are reported alive, so
 * recovery waits for their lease to expire.
 */

import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { processAlive } from './process-alive.ts';

const PREFIX = 'local:';

export function newLocalExecutionId(): string {
  return `${PREFIX}${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
}

/** The host and process a local execution id names; undefined for ids of other kinds. */
export function localOwnerOf(
  executionId: string,
): { readonly host: string; readonly pid: number } | undefined {
  if (!executionId.startsWith(PREFIX)) return undefined;
  const [host = '', pidText] = executionId.slice(PREFIX.length).split(':');
  const pid = Number(pidText);
  return Number.isInteger(pid) && pid > 0 ? { host, pid } : undefined;
}

export class LocalOwners {
  readonly #active = new Set<string>();

  /** Marks an execution of this process as running until the returned function is called. */
  begin(executionId: string): () => void {
    this.#active.add(executionId);
    return () => this.#active.delete(executionId);
  }

  isAlive = async (executionId: string): Promise<boolean> => {
    const owner = localOwnerOf(executionId);
    if (owner === undefined || owner.host !== hostname()) return true;
    const { pid } = owner;
    if (pid === process.pid) return this.#active.has(executionId);
    // Alive unless surely gone: recovery then waits for the lease.
    return processAlive(pid, () => true);
  };
}
