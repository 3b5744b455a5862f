/**
 * The stack's scheduled canary run locally: the canary state machine CDK synthesizes, each of its
 * Lambdas bound in-process, and its "Compact the canary" task (StartExecution `.sync`) running
 * the synthesized compaction state machine locally (runWorkflowLocally) with the input the task
 * builds, over the same store. So the local run exercises both deployed definitions.
 */

import { extractWorkflow, localStateMachineArn, STATE_MACHINES } from '../../cdk/synth-definition.ts';
import { LocalOwners, newLocalExecutionId } from '../adapters/local-owner.ts';
import { CANARY_STEPS, type CanaryStepName } from '../contract.ts';
import { JOB_KINDS, type JobKind } from '../core/config.ts';
import type { ObjectStore } from '../core/object-store.ts';
import { CANARY_HANDLERS, isStepName, type LogSink, localInvoker, type StepName } from './lambdas.ts';
import {
  type LocalRunDeps,
  type LocalRunResult,
  localHandlerDeps,
  runWorkflowLocally,
  type SynthesizedWorkflow,
} from './run.ts';
import { executeDefinition, type LambdaInvoker, type WorkflowExecution } from './workflow.ts';

type Template = Parameters<typeof extractWorkflow>[0];

export interface CanaryRunResult {
  readonly execution: WorkflowExecution;
  /** The compaction executions its task started, each run locally. */
  readonly compactions: readonly LocalRunResult[];
}

function isCanaryStep(step: string): step is CanaryStepName {
  return (CANARY_STEPS as readonly string[]).includes(step);
}

/** The compaction workflow of the template, as `compactor run` executes it. */
function compactionWorkflow(template: Template): SynthesizedWorkflow {
  const extracted = extractWorkflow(template, STATE_MACHINES.compaction);
  const functionSteps = new Map<string, StepName>();
  for (const [name, step] of extracted.functionSteps) {
    if (!isStepName(step)) throw new Error(`function ${name} runs unknown step ${step}`);
    functionSteps.set(name, step);
  }
  return { ...extracted, functionSteps };
}

/** Runs one execution of the template's canary state machine over `deps.store`. */
export async function runCanaryLocally(
  template: Template,
  deps: LocalRunDeps,
  options: {
    readonly retryIntervalMs?: number;
    readonly onLog?: LogSink;
    /** The store each canary Lambda works on; default `deps.store` (tests wrap it to record calls). */
    readonly storeFor?: (step: CanaryStepName) => ObjectStore;
  } = {},
): Promise<CanaryRunResult> {
  const canary = extractWorkflow(template, STATE_MACHINES.canary);
  const compaction = compactionWorkflow(template);
  const compactionArn = Object.keys(template.Resources)
    .filter((id) => new RegExp(`^${STATE_MACHINES.compaction}StateMachine[0-9A-F]{8}$`).test(id))
    .map(localStateMachineArn)[0];
  const functionSteps = new Map<string, CanaryStepName>();
  for (const [name, step] of canary.functionSteps) {
    if (!isCanaryStep(step)) throw new Error(`the canary invokes ${name}, which runs ${step}`);
    functionSteps.set(name, step);
  }
  const owners = deps.owners ?? new LocalOwners();
  const executionId = newLocalExecutionId();
  const end = owners.begin(executionId);
  try {
    const handlerDeps = localHandlerDeps(deps, canary.bucket, owners, executionId);
    // One invoker per function, so each Lambda can get a store of its own.
    const invokers = new Map(
      [...functionSteps].map(([name, step]) => [
        name,
        localInvoker(
          new Map([[name, step]]),
          async () => ({ ...handlerDeps, store: options.storeFor?.(step) ?? deps.store }),
          undefined,
          options.onLog,
          CANARY_HANDLERS,
        ),
      ]),
    );
    const invoke: LambdaInvoker = async (name, payload) => {
      const bound = invokers.get(name);
      if (!bound) throw new Error(`no local handler is bound to function ${name}`);
      return bound(name, payload);
    };
    const compactions: LocalRunResult[] = [];
    const execution = await executeDefinition(
      canary.definition,
      {
        store: deps.store,
        bucket: canary.bucket,
        invoke,
        startExecution: async ({ stateMachineArn, input }) => {
          if (stateMachineArn !== compactionArn)
            throw new Error(`the canary starts ${stateMachineArn}, not the compaction state machine`);
          const tier = input.tier as JobKind;
          if (!JOB_KINDS.includes(tier)) throw new Error(`the canary starts tier ${String(input.tier)}`);
          const run = await runWorkflowLocally(
            compaction,
            { ...deps, owners },
            {
              tier,
              ...(typeof input.now === 'string' ? { now: input.now } : {}),
              ...(typeof input.only === 'string' ? { only: input.only } : {}),
              ...(options.retryIntervalMs !== undefined ? { retryIntervalMs: options.retryIntervalMs } : {}),
            },
          );
          compactions.push(run);
          const ran = run.execution;
          return {
            executionArn: ran.executionId,
            status: ran.status,
            ...(ran.output !== undefined ? { output: ran.output } : {}),
            ...(ran.error !== undefined ? { error: ran.error, cause: ran.cause ?? '' } : {}),
          };
        },
      },
      {
        input: {},
        executionId,
        executionName: `canary-${executionId.slice(-8)}`,
        ...(options.retryIntervalMs !== undefined ? { retryIntervalMs: options.retryIntervalMs } : {}),
      },
    );
    return { execution, compactions };
  } finally {
    end();
  }
}
