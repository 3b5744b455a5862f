/** Runs a bench script in a child Node process (the same Node as the parent) and parses its last JSON line. */

import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';

const BENCH_DIR = import.meta.dirname;

export async function runChild<T>(
  script: string,
  task: unknown,
  taskFile: string,
  env: Readonly<Record<string, string>> = {},
  nodeArgs: readonly string[] = [],
): Promise<T> {
  await writeFile(taskFile, JSON.stringify(task));
  const stdout = await new Promise<string>((resolve, reject) => {
    execFile(
      process.execPath,
      [...nodeArgs, join(BENCH_DIR, script), taskFile],
      { env: { ...process.env, ...env }, maxBuffer: 64 * 1024 * 1024 },
      (error, out, err) => {
        if (error) reject(new Error(`${script} failed: ${error.message}\n${err}`));
        else resolve(out);
      },
    );
  });
  const line = stdout.trim().split('\n').at(-1) ?? '';
  try {
    return JSON.parse(line) as T;
  } catch {
    throw new Error(`${script} printed no result: ${stdout.slice(-500)}`);
  }
}
