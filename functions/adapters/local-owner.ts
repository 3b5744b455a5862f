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

export class LocalOwners {
  readonly #active = new Set<string>();

  /** Marks an execution of this process as running until the returned function is called. */
  begin(executionId: string): () => void {
    this.#active.add(executionId);
    return () => this.#active.delete(executionId);
  }

  isAlive = async (executionId: string): Promise<boolean> => {
    if (!executionId.startsWith(PREFIX)) return true;
    const [host, pidText] = executionId.slice(PREFIX.length).split(':');
    if (host !== hostname()) return true;
    const pid = Number(pidText);
    if (!Number.isInteger(pid) || pid <= 0) return true;
    if (pid === process.pid) return this.#active.has(executionId);
    // Alive unless surely gone: recovery then waits for the lease.
    return processAlive(pid, () => true);
  };
}
