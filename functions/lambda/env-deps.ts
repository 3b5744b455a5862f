/**
 * Dependencies of a deployed Lambda, read from the environment the stack sets. Built on the
 * first invocation and kept for warm ones; importing this module reads nothing.
 */

import { randomBytes } from 'node:crypto';
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { DEFAULT_WORK_DIR, ENV, METRICS_NAMESPACE, SERVICE_NAME } from '../contract.ts';
import { type ConfigInput, parseConfig } from '../core/config.ts';
import { type Engine, systemClock } from '../core/engine.ts';
import { ConfigError } from '../core/errors.ts';
import { stateFolder } from '../core/state-root.ts';
import { type DepsFactory, type HandlerDeps, once } from './handler-kit.ts';
import type { Observability } from './telemetry.ts';
import { clearWorkDir, SPILL_DIR } from './work-dir.ts';

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new ConfigError(`environment variable ${name} is not set; the stack sets it`);
  return value;
}

/** Parses COMPACTOR_CONFIG (JSON) with DATA_PREFIX; errors name the variable. */
export function configFromEnv(): HandlerDeps['config'] {
  let input: ConfigInput;
  try {
    input = JSON.parse(process.env[ENV.config] ?? '{}') as ConfigInput;
  } catch (error) {
    throw new ConfigError(`environment variable ${ENV.config} is not valid JSON`, { cause: error });
  }
  return parseConfig({ ...input, dataPrefix: process.env[ENV.dataPrefix] ?? input.dataPrefix ?? '' });
}

/** The deps factory for deployed Lambdas; those that run DuckDB pass its engine factory. */
export function envDeps(engine?: (workDir: string) => Promise<Engine>): DepsFactory {
  return once(async () => {
    const bucket = required(ENV.dataBucket);
    const config = configFromEnv();
    const workDir = process.env[ENV.workDir] ?? DEFAULT_WORK_DIR;
    const region = process.env.AWS_REGION;
    // The SDK clients are loaded here, on a Lambda's first invocation, not on import: the local
    // runner binds the same handlers in-process with its own store and owners, and never needs them.
    const [{ SFNClient }, { createS3Client, S3Store }, { StepFunctionsOwners }, { sfnMapRunManifests }] =
      await Promise.all([
        import('@aws-sdk/client-sfn'),
        import('../adapters/s3-store/s3-store.ts'),
        import('../adapters/sfn-owners.ts'),
        import('../adapters/sfn-map-runs.ts'),
      ]);
    const sfn = new SFNClient(region ? { region } : {});
    const owners = new StepFunctionsOwners({
      client: sfn,
      // A Lambda a finished execution started may run until its timeout; the lease covers it.
      zombieGraceSeconds: config.leaseSeconds,
      clock: systemClock,
    });
    const getEngine = engine ? once(() => engine(workDir)) : undefined;
    return {
      store: new S3Store({ client: createS3Client(region ? { region } : {}), bucket }),
      bucket,
      config,
      clock: systemClock,
      engine: async () => {
        if (!getEngine) throw new ConfigError('this Lambda has no compaction engine');
        return getEngine();
      },
      workDir,
      // The warm engine's spill folder stays: DuckDB owns it for the life of the container.
      resetWorkDir: async () => {
        await clearWorkDir(workDir, [SPILL_DIR]);
      },
      isOwnerAlive: owners.isAlive,
      randomHex: () => randomBytes(8).toString('hex'),
      mapRunManifests: sfnMapRunManifests(sfn, stateFolder(config.layout.stateRoot, 'results')),
    };
  });
}

export function envObservability(): Observability {
  return {
    logger: new Logger({ serviceName: process.env[ENV.serviceName] ?? SERVICE_NAME }),
    metrics: new Metrics({
      namespace: process.env[ENV.metricsNamespace] ?? METRICS_NAMESPACE,
      serviceName: process.env[ENV.serviceName] ?? SERVICE_NAME,
    }),
  };
}

/** The DuckDB settings the stack sets for a Lambda's size (absent: DuckDB's defaults). */
export function duckDbSettingsFromEnv(): { readonly memoryLimit?: string; readonly threads?: number } {
  const memoryLimit = process.env[ENV.duckDbMemoryLimit];
  const threads = Number(process.env[ENV.duckDbThreads] ?? '0');
  return { ...(memoryLimit ? { memoryLimit } : {}), ...(threads > 0 ? { threads } : {}) };
}
