/**
 * What `compactor run`'s helper thread (local-runner/child-thread.ts) builds its deps from: the
 * CLI's own options, read by the same functions as the main thread reads them, so both reach the
 * same store, settings and clock. The thread runs small jobs only, so its engine is bounded as the
 * small compact function's DuckDB is (core/lambda-sizing.ts), or by --memory-limit if that is less.
 */

import type { DuckDbEngine } from '../adapters/duckdb-engine/duckdb-engine.ts';
import { ConfigError } from '../core/errors.ts';
import { SMALL_ENGINE } from '../core/lambda-sizing.ts';
import type { LocalRunDeps } from '../local-runner/run.ts';
import { type CommandContext, commandContext } from './command.ts';
import { buildEngine, parseSize } from './context.ts';
import type { ParsedOptions } from './options.ts';

/**
 * The helper thread's engine limit: the small compact function's, or --memory-limit if less. A
 * value DuckDB took but parseSize does not read (DuckDB knows more units) is kept as given.
 */
export function threadMemoryLimit(memoryLimit: string | undefined): string {
  const small = SMALL_ENGINE.memoryLimit;
  if (memoryLimit === undefined) return small;
  let given: number;
  try {
    given = parseSize('memory-limit', memoryLimit);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    return memoryLimit;
  }
  return given < parseSize('memory-limit', small) ? memoryLimit : small;
}

/** A local run's deps from its command context and engine: the main thread's and the helper's. */
export function localRunDeps(
  ctx: CommandContext,
  built: { readonly engine: DuckDbEngine; readonly workDir: string },
): LocalRunDeps {
  return {
    store: ctx.target.store,
    config: ctx.config,
    clock: ctx.clock,
    engine: async () => built.engine,
    workDir: built.workDir,
  };
}

/** The recipe's function (child-thread.ts ThreadDepsRecipe): the run's deps, from its options. */
export async function threadRunDeps(options: ParsedOptions): Promise<LocalRunDeps> {
  const ctx = await commandContext(options);
  const built = await buildEngine(
    {
      ...options,
      'memory-limit': threadMemoryLimit(options['memory-limit']),
      threads: String(SMALL_ENGINE.threads),
    },
    true,
  );
  return localRunDeps(ctx, built);
}
