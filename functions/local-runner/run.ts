/**
 * `compactor run`: synthesizes the CDK stack in-process, takes the state machine definition it
 * would deploy, and executes it locally with every Lambda bound to its handler in-process, over
 * the CLI's store. A local run therefore exercises the deployed definition: its states, retries,
 * Map concurrency and tolerated failures.
 */

import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { StateMachineDefinition } from 'aws-local-stepfunctions';
import { parseStackConfig, type StackConfig } from '../../cdk/config.ts';
import { compactorContextOver } from '../../cdk/config-context.ts';
import { LOCAL_STATE_MACHINE_ARN, type StatusRule } from '../../cdk/synth-definition.ts';
import { LocalOwners, newLocalExecutionId, removeGoneScratch, scratchName } from '../adapters/local-owner.ts';
import type { CompactorConfig, JobKind } from '../core/config.ts';
import type { Clock, Engine } from '../core/engine.ts';
import { isPlainObject } from '../core/is-plain-object.ts';
import type { CompactSize } from '../core/lambda-sizing.ts';
import { deletePrefix } from '../core/manifest/manifest-cas.ts';
import { MAX_DELETE_BATCH, type ObjectStore } from '../core/object-store.ts';
import { plansPrefix } from '../core/plan-store.ts';
import type { StepDeps } from '../core/protocol.ts';
import type { RunSummary } from '../core/run-summary.ts';
import { expiresAtMs, RUN_RECORD_DAYS, stateExpiries, stateFolder } from '../core/state-root.ts';
import { type HandlerDeps, once } from '../lambda/handler-kit.ts';
import type { PlanOutput } from '../plan.ts';
import type { RecoverOutput } from '../recover.ts';
import type { SummaryOutput } from '../summary.ts';
import type { Json } from './asl-graph.ts';
import { CHILD_THREAD_FAILED, type ChildThread, childThread, type ThreadDepsRecipe } from './child-thread.ts';

export { CHILD_THREAD_FAILED };

import { definitionKey, readCachedDefinition, writeCachedDefinition } from './definition-cache.ts';
import { isStepName, type LogSink, localInvoker, type StepName, type StepObserver } from './lambdas.ts';
import { fireStatusRules } from './status-rules.ts';
import { timed } from './timing-spans.ts';
import {
  type ChildDeliveries,
  executeDefinition,
  type LambdaInvoker,
  type WorkflowExecution,
} from './workflow.ts';

function resultsRoot(layout: CompactorConfig['layout']): string {
  return stateFolder(layout.stateRoot, 'results');
}

/** Removes what the bucket's lifecycle rules expire (real time: they are files on disk). */
async function expireRunRecords(deps: StepDeps): Promise<void> {
  const { layout, receiptDays } = deps.config;
  const old: { key: string }[] = [];
  const now = Date.now();
  for (const { folder, days } of stateExpiries({ runRecords: RUN_RECORD_DAYS, receipts: receiptDays })) {
    for await (const object of deps.store.list(stateFolder(layout.stateRoot, folder)))
      if (expiresAtMs(object.lastModified.getTime(), days) <= now) old.push({ key: object.key });
  }
  for (let i = 0; i < old.length; i += MAX_DELETE_BATCH)
    await deps.store.deleteMany(old.slice(i, i + MAX_DELETE_BATCH));
}

export interface SynthesizedWorkflow {
  readonly definition: StateMachineDefinition;
  readonly functionSteps: ReadonlyMap<string, StepName>;
  readonly bucket: string;
  /** The stack's rules on a stopped execution (its failure Summary), fired after a failed run. */
  readonly statusRules: readonly StatusRule[];
}

const REPO = fileURLToPath(new URL('../../', import.meta.url));

/** Where a synthesis is cached unless the caller says: the CLI's default work dir. */
export const DEFAULT_DEFINITION_CACHE = join(tmpdir(), 'compactor-work', 'definitions');

/** What a synthesis runs (followed through their imports) and reads besides. */
const SYNTH_ENTRIES = ['cdk/app.ts', 'cdk/synth-definition.ts'];
const SYNTH_FILES = ['cdk.json', 'functions/local-runner/run.ts'];

/** The cache key of synthesizeWorkflow(compactorContext): see definition-cache.ts. */
export function workflowCacheKey(compactorContext: Record<string, unknown>, root = REPO): Promise<string> {
  return definitionKey({
    root,
    entries: SYNTH_ENTRIES,
    files: SYNTH_FILES,
    context: compactorContext,
    env: process.env,
  });
}

/**
 * The definition `cdk deploy` would deploy, with the given `compactor` context (e.g. map
 * settings). Synthesis takes seconds, so the result is cached in `cacheDir`, keyed by a hash of
 * everything it reads (definition-cache.ts): any change to the stack's code, its packages, cdk.json
 * or the context synthesizes again.
 */
export async function synthesizeWorkflow(
  compactorContext: Record<string, unknown> = {},
  options: {
    readonly cacheDir?: string;
    /** Told before a synthesis (a cache miss), which takes seconds. */
    readonly onSynthesize?: () => void;
  } = {},
): Promise<SynthesizedWorkflow> {
  const cacheDir = options.cacheDir ?? DEFAULT_DEFINITION_CACHE;
  const key = await workflowCacheKey(compactorContext);
  const cached = (await readCachedDefinition(cacheDir, key)) as
    | {
        definition: StateMachineDefinition;
        functionSteps: [string, string][];
        bucket: string;
        statusRules: StatusRule[];
      }
    | undefined;
  // The steps are checked against this code's as on a synthesis.
  if (cached?.functionSteps.every(([, step]) => isStepName(step)) && Array.isArray(cached.statusRules)) {
    return { ...cached, functionSteps: new Map(cached.functionSteps as [string, StepName][]) };
  }
  options.onSynthesize?.();
  return timed('definition: synthesis (cache miss)', async () => {
    const workflow = await synthesizeUncached(compactorContext);
    await writeCachedDefinition(cacheDir, key, { ...workflow, functionSteps: [...workflow.functionSteps] });
    return workflow;
  });
}

async function synthesizeUncached(compactorContext: Record<string, unknown>): Promise<SynthesizedWorkflow> {
  // Loaded only on a cache miss: aws-cdk-lib takes a second or two to import.
  const { createApp } = await import('../../cdk/app.ts');
  const { extractWorkflow } = await import('../../cdk/synth-definition.ts');
  const outdir = await mkdtemp(join(tmpdir(), 'compactor-synth-'));
  try {
    const { app } = createApp({
      outdir,
      // The definition does not depend on the Lambda bundles: skip bundling.
      context: {
        'aws:cdk:bundling-stacks': [],
        // Over cdk.json's own `compactor` settings, as `cdk deploy -c` would not merge but a user expects.
        compactor: compactorContextOver(compactorContext),
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
    return {
      definition: extracted.definition,
      functionSteps,
      bucket: extracted.bucket,
      statusRules: extracted.statusRules,
    };
  } finally {
    await rm(outdir, { recursive: true, force: true });
  }
}

/**
 * The stack's settings as `cdk synth` parses them: cdk.json's `compactor` context with
 * `compactorContext` merged over it. `lambdaConfigInput` of it is what the Lambdas get.
 */
export async function stackConfigOf(compactorContext: Record<string, unknown> = {}): Promise<StackConfig> {
  return parseStackConfig(compactorContextOver(compactorContext));
}

export interface LocalRunDeps {
  readonly store: ObjectStore;
  readonly config: CompactorConfig;
  readonly clock: Clock;
  readonly engine: () => Promise<Engine>;
  readonly workDir: string;
  readonly owners?: LocalOwners;
  /**
   * How a helper thread builds these same deps (child-thread.ts), made when the thread starts;
   * absent: every child runs in this thread. The thread takes only items of small jobs.
   */
  readonly threadRecipe?: () => ThreadDepsRecipe;
}

/**
 * Whether every job of a Map item is small (core/lambda-sizing.ts): the helper thread's engine is
 * bounded as the small compact function's is, so a large job keeps this thread's engine.
 */
export function smallJobsOnly(item: Json): boolean {
  return (
    isPlainObject(item) &&
    Array.isArray(item.jobs) &&
    item.jobs.every((job) => isPlainObject(job) && job.compactSize === ('small' satisfies CompactSize))
  );
}

export interface LocalRunOptions {
  readonly tier: JobKind;
  /** Plan as if at this ISO time. */
  readonly now?: string;
  /** Plan only this table (the execution input's `only`). */
  readonly only?: string;
  readonly retryIntervalMs?: number;
  /** Deliveries of each Express child (executeDefinition's at-least-once emulation). */
  readonly childDeliveries?: ChildDeliveries;
  readonly expressChildTimeoutSeconds?: number;
  readonly redriveOf?: WorkflowExecution;
  readonly onStep?: StepObserver;
  /** Warnings and errors the handlers log (a rule that matches nothing, quarantines, failed partitions). */
  readonly onLog?: LogSink;
  readonly onStateEntered?: (name: string) => void;
  /** Where validated definitions are marked (executeDefinition); default the definition cache. */
  readonly definitionCacheDir?: string;
}

export interface LocalRunResult {
  readonly execution: WorkflowExecution;
  /** What the stack's rule made Summary say of an execution that failed. */
  readonly stoppedSummary?: SummaryOutput;
  readonly output?: {
    readonly tier: string;
    readonly recovery: RecoverOutput;
    readonly plan: PlanOutput;
    readonly summary: RunSummary;
  };
}

/**
 * What the handlers a local run binds get: the run's store, config, clock and engine (created
 * once), a scratch folder of the execution and its owners.
 */
export function localHandlerDeps(
  deps: LocalRunDeps,
  bucket: string,
  owners: Pick<LocalOwners, 'isAlive'>,
  executionId: string,
): HandlerDeps {
  return {
    store: deps.store,
    bucket,
    config: deps.config,
    clock: deps.clock,
    engine: once(deps.engine),
    workDir: join(deps.workDir, scratchName(executionId)),
    isOwnerAlive: owners.isAlive,
    randomHex: () => randomBytes(8).toString('hex'),
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
  await removeGoneScratch(deps.workDir);
  const end = owners.begin(executionId);
  const stepDeps = { store: deps.store, config: deps.config, clock: deps.clock };
  let manifests: readonly string[] = [];
  let thread: ChildThread | undefined;
  const { threadRecipe } = deps;
  const validatedCache = { dir: options.definitionCacheDir ?? DEFAULT_DEFINITION_CACHE, root: REPO };
  try {
    const handlerDeps: HandlerDeps = {
      ...localHandlerDeps(deps, workflow.bucket, owners, executionId),
      // Known once the execution ran: what its Maps' ResultWriter emulation wrote.
      mapRunManifests: async () => manifests,
    };
    const invoke = localInvoker(
      workflow.functionSteps,
      async () => handlerDeps,
      options.onStep,
      options.onLog,
    );
    const elsewhere =
      threadRecipe &&
      childThread(
        {
          recipe: threadRecipe,
          functionSteps: [...workflow.functionSteps],
          bucket: workflow.bucket,
          executionId,
          executionName,
          expressChildTimeoutSeconds: options.expressChildTimeoutSeconds,
          validatedCache,
        },
        {
          accepts: smallJobsOnly,
          isOwnerAlive: owners.isAlive,
          onFailure: (error) => options.onLog?.('warn', CHILD_THREAD_FAILED, { reason: error.message }),
          ...(options.onStep ? { onStep: options.onStep } : {}),
          ...(options.onLog ? { onLog: options.onLog } : {}),
        },
      );
    const execution = await timed('run: interpreter', () =>
      executeDefinition(
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
          ...(options.childDeliveries ? { childDeliveries: options.childDeliveries } : {}),
          ...(options.expressChildTimeoutSeconds !== undefined
            ? { expressChildTimeoutSeconds: options.expressChildTimeoutSeconds }
            : {}),
          ...(options.onStateEntered ? { onStateEntered: options.onStateEntered } : {}),
          validatedCache,
          ...(elsewhere ? { elsewhere: (maps, retries) => (thread = elsewhere(maps, retries)) } : {}),
        },
      ),
    );
    await thread?.close();
    manifests = execution.mapRunManifests;
    const stoppedSummary =
      execution.status === 'SUCCEEDED' ? undefined : await summaryByRule(workflow, execution, invoke);
    await timed('run: run records and scratch', async () => {
      await rm(handlerDeps.workDir, { recursive: true, force: true });
      // S3 expires run records by a lifecycle rule; a local folder has none. A succeeded run needs
      // its records no more; a failed one keeps them for a redrive, as the bucket's lifecycle rule does.
      if (execution.status === 'SUCCEEDED') {
        await deletePrefix(stepDeps, plansPrefix(deps.config.layout, executionName));
        await deletePrefix(stepDeps, `${resultsRoot(deps.config.layout)}${executionName}-`);
      }
      await expireRunRecords(stepDeps);
    });
    return {
      execution,
      ...(stoppedSummary ? { stoppedSummary } : {}),
      ...(execution.status === 'SUCCEEDED'
        ? { output: execution.output as unknown as LocalRunResult['output'] }
        : {}),
    };
  } finally {
    await thread?.close();
    end();
  }
}

/** Fires the stack's status rules on a stopped execution, as EventBridge would; returns Summary's output. */
async function summaryByRule(
  workflow: SynthesizedWorkflow,
  execution: WorkflowExecution,
  invoke: LambdaInvoker,
): Promise<SummaryOutput | undefined> {
  const summaryRules = workflow.statusRules.filter(
    (r) => workflow.functionSteps.get(r.functionName) === 'summary',
  );
  const [output] = await fireStatusRules(summaryRules, execution, LOCAL_STATE_MACHINE_ARN, invoke);
  return output as unknown as SummaryOutput | undefined;
}
