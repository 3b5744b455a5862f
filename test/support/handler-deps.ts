/** The deps the Lambda handlers get, for a local folder and engine: what env-deps.ts builds in AWS. */

import { join } from 'node:path';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import type { CompactorConfig } from '../../functions/core/config.ts';
import { systemClock } from '../../functions/core/engine.ts';
import type { HandlerDeps } from '../../functions/lambda/handler-kit.ts';

export function localHandlerDeps(
  store: HandlerDeps['store'],
  config: CompactorConfig,
  engine: DuckDbEngine,
  root: string,
): HandlerDeps {
  return {
    store,
    bucket: 'local-data-bucket',
    config,
    clock: systemClock,
    engine: async () => engine,
    workDir: join(root, 'work'),
    // Every owner is gone: recovery may take over any job it finds.
    isOwnerAlive: async () => false,
    randomHex: () => Math.random().toString(16).slice(2, 10).padEnd(8, '0'),
  };
}
