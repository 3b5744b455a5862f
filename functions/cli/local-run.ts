/**
 * `compactor run`: synthesizes the CDK stack in-process, takes the state machine definition it
 * would deploy, and executes it locally with every Lambda bound to its handler in-process, over
 * the CLI's store. A local run therefore exercises the deployed definition: its states, retries,
 * Map concurrency and tolerated failures.
 */

import { createHash, randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { StateMachineDefinition } from 'aws-local-stepfunctions';
import { lambdaConfigInput, parseStackConfig, type StackConfig } from '../../cdk/config.ts';
import { LocalOwners, newLocalExecutionId } from '../adapters/local-owner.ts';
import type { CompactorConfig, ConfigInput, JobKind } from '../core/config.ts';
import type { Clock, Engine } from '../core/engine.ts';
import { MAX_DELETE_BATCH, type ObjectStore } from '../core/object-store.ts';
import { plansPrefix } from '../core/plan-store.ts';
import { deletePrefix, type StepDeps } from '../core/protocol.ts';
import type { RunSummary } from '../core/run-summary.ts';
import type { StepOutput } from '../lambda/events.ts';
import { type HandlerDeps, once } from '../lambda/handler-kit.ts';
import type { PlanOutput } from '../plan.ts';
import type { RecoverOutput } from '../recover.ts';
import { isStepName, localInvoker, type StepName } from './local-lambdas.ts';
import { type LocalExecution, runLocalWorkflow } from './local-workflow.ts';

/** As the bucket's lifecycle rule expires them in AWS. */
export const RUN_RECORD_DAYS = 15;

function resultsRoot(layout: CompactorConfig['layout']): string {
  return `${layout.stateRoot}results/`;
}

/** Removes plans and Map results older than `days` (real time: they are files on disk). */
async function expireRunRecords(deps: StepDeps, days: number): Promise<void> {
  const cutoff = Date.now() - days * 86_400_000;
  const old: { key: string }[] = [];
  for (const prefix of [`${deps.config.layout.stateRoot}plans/`, resultsRoot(deps.config.layout)]) {
    for await (const object of deps.store.list(prefix))
      if (object.lastModified.getTime() < cutoff) old.push({ key: object.key });
  }
  for (let i = 0; i < old.length; i += MAX_DELETE_BATCH)
    await deps.store.deleteMany(old.slice(i, i + MAX_DELETE_BATCH));
}

export interface SynthesizedWorkflow {
  readonly definition: StateMachineDefinition;
  readonly functionSteps: ReadonlyMap<string, StepName>;
  readonly bucket: string;
}

const REPO = fileURLToPath(new URL('../../', import.meta.url));
const CACHE_DIR = join(REPO, 'node_modules', '.cache', 'compactor-definition');

/** Everything the synthesized definition depends on: the CDK sources, cdk.json, aws-cdk-lib. */
async function definitionInputsHash(context: Record<string, unknown>): Promise<string> {
  const hash = createHash('sha256');
  hash.update(JSON.stringify(context));
  const cdkLib = JSON.parse(await readFile(join(REPO, 'node_modules/aws-cdk-lib/package.json'), 'utf8')) as {
    version: string;
  };
  hash.update(cdkLib.version);
  const files = [
    'cdk.json',
    'functions/core/errors.ts',
    'functions/core/config.ts',
    'functions/core/layout.ts',
    ...(await readdir(join(REPO, 'cdk'), { recursive: true }))
      .filter((f) => f.endsWith('.ts'))
      .map((f) => join('cdk', f)),
  ].sort();
  for (const file of files) {
    hash.update(file);
    hash.update(await readFile(join(REPO, file)));
  }
  return hash.digest('hex').slice(0, 32);
}

/**
 * The definition `cdk deploy` would deploy, with the given `compactor` context (e.g. map
 * settings). Synthesis takes seconds, so the result is cached, keyed by a hash of everything it
 * depends on: any change to the stack's code or context synthesizes again.
 */
export async function synthesizeWorkflow(
  compactorContext: Record<string, unknown> = {},
): Promise<SynthesizedWorkflow> {
  const cacheFile = join(CACHE_DIR, `${await definitionInputsHash(compactorContext)}.json`);
  const cached = await readFile(cacheFile, 'utf8').then(
    (text) =>
      JSON.parse(text) as {
        definition: StateMachineDefinition;
        functionSteps: [string, StepName][];
        bucket: string;
      },
    (error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return undefined;
      throw error;
    },
  );
  if (cached) return { ...cached, functionSteps: new Map(cached.functionSteps) };
  const workflow = await synthesizeUncached(compactorContext);
  await mkdir(CACHE_DIR, { recursive: true });
  const temp = `${cacheFile}.${randomBytes(4).toString('hex')}.tmp`;
  await writeFile(temp, JSON.stringify({ ...workflow, functionSteps: [...workflow.functionSteps] }));
  await rename(temp, cacheFile);
  return workflow;
}

async function synthesizeUncached(compactorContext: Record<string, unknown>): Promise<SynthesizedWorkflow> {
  // Loaded only on a cache miss: aws-cdk-lib takes a second or two to import.
  const { createApp, cdkJsonContext } = await import('../../cdk/app.ts');
  const { extractWorkflow } = await import('../../cdk/synth-definition.ts');
  const outdir = await mkdtemp(join(tmpdir(), 'compactor-synth-'));
  try {
    const { app } = createApp({
      outdir,
      // The definition does not depend on the Lambda bundles: skip bundling.
      context: {
        'aws:cdk:bundling-stacks': [],
        // Over cdk.json's own `compactor` settings, as `cdk deploy -c` would not merge but a user expects.
        compactor: deepMerge((cdkJsonContext().compactor ?? {}) as Record<string, unknown>, compactorContext),
      },
    });
    const assembly = app.synth();
    const stack = assembly.stacks[0];
    if (!stack) throw new Error('the app synthesized no stack');
    const extracted = extractWorkflow(stack.template as Parameters<typeof extractWorkflow>[0]);
    const functionSteps = new Map<string, StepName>();
    for (const [name, step] of extracted.functionSteps) {
      if (!isStepName(step)) throw new Error(`function ${name} runs unknown step ${step}`);
      functionSteps.set(name, step);
    }
    return { definition: extracted.definition, functionSteps, bucket: extracted.bucket };
  } finally {
    await rm(outdir, { recursive: true, force: true });
  }
}

/**
 * The table settings (dedup, naiveTimestampsUtc, timeUnits) and monthly tier the deployed Lambdas
 * get in COMPACTOR_CONFIG: cdk.json's `compactor` context with `compactorContext` merged over it (as the definition is synthesized), validated as
 * `cdk synth` validates it, so a bad setting fails here with the same message.
 */
export async function stackStepSettings(
  compactorContext: Record<string, unknown> = {},
): Promise<Pick<ConfigInput, 'dedup' | 'tiers' | 'naiveTimestampsUtc' | 'timeUnits'>> {
  const input = lambdaConfigInput(await stackConfigOf(compactorContext));
  return {
    ...(input.dedup ? { dedup: input.dedup } : {}),
    ...(input.naiveTimestampsUtc ? { naiveTimestampsUtc: input.naiveTimestampsUtc } : {}),
    ...(input.timeUnits ? { timeUnits: input.timeUnits } : {}),
    ...(input.tiers?.monthly?.enabled ? { tiers: { monthly: { enabled: true } } } : {}),
  };
}

/**
 * The stack's settings as `cdk synth` parses them: cdk.json's `compactor` context with
 * `compactorContext` merged over it. `lambdaConfigInput` of it is what the Lambdas get.
 */
export async function stackConfigOf(compactorContext: Record<string, unknown> = {}): Promise<StackConfig> {
  const cdkJson = JSON.parse(await readFile(join(REPO, 'cdk.json'), 'utf8')) as {
    context?: { compactor?: Record<string, unknown> };
  };
  return parseStackConfig(deepMerge(cdkJson.context?.compactor ?? {}, compactorContext));
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function deepMerge(base: Record<string, unknown>, over: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(over)) {
    const current = out[key];
    out[key] = isPlainObject(current) && isPlainObject(value) ? deepMerge(current, value) : value;
  }
  return out;
}

export interface LocalRunDeps {
  readonly store: ObjectStore;
  readonly config: CompactorConfig;
  readonly clock: Clock;
  readonly engine: () => Promise<Engine>;
  readonly workDir: string;
  readonly owners?: LocalOwners;
}

export interface LocalRunOptions {
  readonly tier: JobKind;
  /** Plan as if at this ISO time. */
  readonly now?: string;
  /** Plan only this table (the execution input's `only`). */
  readonly only?: string;
  readonly retryIntervalMs?: number;
  readonly redriveOf?: LocalExecution;
  readonly onStep?: (step: StepName, payload: unknown, result: unknown) => void;
  /** Errors the handlers log (quarantines, failed partitions). */
  readonly onError?: (message: string, details: Record<string, unknown>) => void;
  readonly onStateEntered?: (name: string) => void;
}

export interface LocalRunResult {
  readonly execution: LocalExecution;
  readonly output?: {
    readonly tier: string;
    readonly recovery: RecoverOutput;
    readonly plan: PlanOutput;
    readonly summary: RunSummary;
  };
}

export async function runWorkflowLocally(
  workflow: SynthesizedWorkflow,
  deps: LocalRunDeps,
  options: LocalRunOptions,
): Promise<LocalRunResult> {
  const owners = deps.owners ?? new LocalOwners();
  const executionId = options.redriveOf?.executionId ?? newLocalExecutionId();
  const executionName =
    options.redriveOf?.executionName ??
    `${options.tier}-${new Date().toISOString().replace(/[-:]/g, '').replace(/\..*/, '')}-${randomBytes(4).toString('hex')}`;
  const end = owners.begin(executionId);
  const stepDeps = { store: deps.store, config: deps.config, clock: deps.clock };
  try {
    const handlerDeps: HandlerDeps = {
      store: deps.store,
      bucket: workflow.bucket,
      config: deps.config,
      clock: deps.clock,
      engine: once(deps.engine),
      workDir: join(deps.workDir, executionId.replaceAll(':', '-')),
      isOwnerAlive: owners.isAlive,
      randomHex: () => randomBytes(8).toString('hex'),
    };
    const invoke = localInvoker(
      workflow.functionSteps,
      async () => handlerDeps,
      options.onStep,
      options.onError,
    );
    const execution = await runLocalWorkflow(
      workflow.definition,
      { store: deps.store, bucket: workflow.bucket, invoke },
      {
        input: {
          tier: options.tier,
          ...(options.now ? { now: options.now } : {}),
          ...(options.only !== undefined ? { only: options.only } : {}),
        },
        executionId,
        executionName,
        ...(options.redriveOf ? { redriveOf: options.redriveOf } : {}),
        ...(options.retryIntervalMs !== undefined ? { retryIntervalMs: options.retryIntervalMs } : {}),
        ...(options.onStateEntered ? { onStateEntered: options.onStateEntered } : {}),
      },
    );
    await rm(handlerDeps.workDir, { recursive: true, force: true });
    // S3 expires run records by a lifecycle rule; a local folder has none. A succeeded run needs
    // its records no more; a failed one keeps them for a redrive, until they are 14 days old.
    if (execution.status === 'SUCCEEDED') {
      await deletePrefix(stepDeps, plansPrefix(deps.config.layout, executionName));
      await deletePrefix(stepDeps, `${resultsRoot(deps.config.layout)}${executionName}-`);
    }
    await expireRunRecords(stepDeps, RUN_RECORD_DAYS);
    return {
      execution,
      ...(execution.status === 'SUCCEEDED'
        ? { output: execution.output as unknown as LocalRunResult['output'] }
        : {}),
    };
  } finally {
    end();
  }
}

export type { StepOutput };
