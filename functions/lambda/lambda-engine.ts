/**
 * The DuckDB engine of the Lambdas that need one (compact, and the canary's seed and check),
 * sized by the stack, and the SQL the canary runs on it.
 */

import { join } from 'node:path';
import { DuckDbEngine } from '../adapters/duckdb-engine/duckdb-engine.ts';
import type { Sql } from '../core/canary.ts';
import { ConfigError } from '../core/errors.ts';
import { duckDbSettingsFromEnv } from './env-deps.ts';
import type { HandlerDeps } from './handler-kit.ts';
import { SPILL_DIR } from './work-dir.ts';

/** DuckDB sized by the stack (memory limit below the Lambda's, threads per vCPU), spilling to /tmp. */
export function lambdaEngine(workDir: string) {
  return DuckDbEngine.create({ tempDirectory: join(workDir, SPILL_DIR), ...duckDbSettingsFromEnv() });
}

/** The deps' engine as the canary uses it: one that runs SQL. */
export async function engineSql(deps: HandlerDeps): Promise<Sql> {
  const engine = await deps.engine();
  const query = engine.query?.bind(engine);
  if (!query) throw new ConfigError('the canary needs an engine that runs SQL (DuckDB)');
  return { query };
}
