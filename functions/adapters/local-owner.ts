/**
 * Owner liveness for local runs. A local execution id names its host and process; a process
 * that is gone cannot act again, so recovery may take its jobs over at once (no lease wait).
 * Ids of other kinds (a Step Functions execution ARN) or other hosts are reported alive, so
 * recovery waits for their lease to expire.
 */

import { randomBytes } from 'node:crypto';
import { readdir, rm } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { errorCode } from '../core/errors.ts';
import { goneFromThisHost, processAlive } from './process-alive.ts';

const PREFIX = 'local:';

export function newLocalExecutionId(): string {
  return `${PREFIX}${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
}

/** Whether `executionId` is a local execution's (`local:host:pid:nonce`), well formed or not. */
export function isLocalExecutionId(executionId: string): boolean {
  return executionId.startsWith(PREFIX);
}

/** The host and process a local execution id names; undefined for ids of other kinds. */
export function localOwnerOf(
  executionId: string,
): { readonly host: string; readonly pid: number } | undefined {
  if (!isLocalExecutionId(executionId)) return undefined;
  const [host = '', pidText] = executionId.slice(PREFIX.length).split(':');
  const pid = Number(pidText);
  return Number.isInteger(pid) && pid > 0 ? { host, pid } : undefined;
}

/** An execution's scratch folder name: its id, `:` spelled `-` (a folder name on any system). */
export function scratchName(executionId: string): string {
  return executionId.replaceAll(':', '-');
}

/** The local execution id a scratch folder name spells, if it spells one. */
export function executionOfScratchName(name: string): string | undefined {
  // local-<host>-<pid>-<nonce>: the host may hold '-', the pid and the nonce do not.
  const parts = new RegExp(`^${scratchName(PREFIX)}(.+)-(\\d+)-([0-9a-f]+)$`).exec(name);
  if (!parts) return undefined;
  const id = `${PREFIX}${parts[1]}:${parts[2]}:${parts[3]}`;
  return scratchName(id) === name ? id : undefined;
}

/**
 * A scratch folder name of this process that no other process or thread uses (e.g. an engine's
 * spill folder), removed by removeGoneScratch once this process is gone.
 */
export function newScratchName(): string {
  return scratchName(newLocalExecutionId());
}

/**
 * Removes the scratch folders in `dir` of this host's processes that are gone: a run killed
 * mid-job (Ctrl-C, kill -9) never reaches its own cleanup.
 */
export async function removeGoneScratch(dir: string): Promise<void> {
  const names = await readdir(dir).catch((error: unknown) => {
    if (errorCode(error) === 'ENOENT') return [];
    throw error;
  });
  for (const name of names) {
    const id = executionOfScratchName(name);
    if (id !== undefined && isGoneLocalExecution(id))
      await rm(join(dir, name), { recursive: true, force: true });
  }
}

/** Whether `executionId` is a local execution of this host whose process is surely gone. */
export function isGoneLocalExecution(executionId: string): boolean {
  const owner = localOwnerOf(executionId);
  return owner !== undefined && goneFromThisHost(owner);
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
