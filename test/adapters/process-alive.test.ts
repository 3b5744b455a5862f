/**
 * The one pid-liveness probe (process-alive.ts) the local store's lock, its upload reaper and
 * local-owner.ts share: a running pid is alive, an exited one is not, and an error other than
 * ESRCH/EPERM is the caller's to answer.
 */

import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { processAlive } from '../../functions/adapters/process-alive.ts';

const unreachable = (error: unknown): boolean => {
  throw new Error(`unexpected probe error: ${String(error)}`);
};

describe('processAlive', () => {
  it('is true for a running process and false once it has exited and been reaped', async () => {
    const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60_000)'], { stdio: 'ignore' });
    const pid = child.pid as number;
    expect(processAlive(pid, unreachable)).toBe(true);
    child.kill('SIGKILL');
    await once(child, 'exit');
    expect(processAlive(pid, unreachable)).toBe(false);
  });

  it('hands an error process.kill raises for a pid it refuses to the caller', () => {
    const seen: unknown[] = [];
    expect(processAlive(1.5, (error) => seen.push(error) > 0)).toBe(true);
    expect(seen).toHaveLength(1);
    expect(() =>
      processAlive(1.5, (error) => {
        throw error;
      }),
    ).toThrow();
  });
});
