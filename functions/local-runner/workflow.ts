/**
 * Runs the state machine definition that CDK synthesizes, locally, with aws-local-stepfunctions
 * and every Lambda task bound to its handler in-process.
 *
 * The interpreter ignores a Distributed Map's ItemReader, ResultWriter and
 * ToleratedFailurePercentage, so the definition is rewritten before it runs, each feature
 * emulated with states the interpreter does run:
 * - ItemReader: a Task state before the Map evaluates the reader's own Parameters (so
 *   `Key.$` paths resolve as in AWS), reads that JSON object from the store, and the Map
 *   iterates over it (ItemsPath). MaxConcurrency is honoured by the interpreter itself.
 * - Child workflows (ItemProcessor.ProcessorConfig, which the interpreter ignores): each item
 *   runs as its own execution of the item processor, in a nested interpreter, from a Task state
 *   whose Catch turns a failed child into a FAILED result instead of failing the Map; a Task
 *   state after the Map fails with `States.ExceedToleratedFailureThreshold` when failures exceed
 *   the tolerance. ExecutionType EXPRESS gives each child the Express limit as its execution
 *   timeout (five minutes: it fails with States.Timeout while its handler runs on, as a Lambda
 *   outlives its Express execution), and `childDeliveries` can deliver each Express child twice,
 *   one after the other or overlapping, as at-least-once Express may
 *   (https://docs.aws.amazon.com/step-functions/latest/dg/express-at-least-once-execution.html).
 *   STANDARD children are exactly-once.
 * - ResultWriter: that same Task writes the results as AWS does (`{prefix}/{runId}/manifest.json`
 *   naming `SUCCEEDED_0.json` / `FAILED_0.json`) and puts `{ResultWriterDetails: {Bucket, Key}}`
 *   where the Map's ResultPath points.
 * - States.JsonToString, which the interpreter gets wrong for text holding a quote, is evaluated
 *   by the runner (json-to-string.ts).
 * Redrive is emulated as AWS does it: the execution restarts at the state that failed, with the
 * input that state had; a Map re-runs only the items that did not succeed, each a new child from
 * its start, as a Map Run redrive reruns Express children with StartExecution
 * (https://docs.aws.amazon.com/step-functions/latest/apireference/API_RedriveExecution.html).
 * A Standard child would be redriven from its failed state instead; here it starts over too
 * (every step is idempotent, so the outcome is the same).
 */

import { ExecutionError, type StateMachineDefinition } from 'aws-local-stepfunctions';
import type { ObjectStore } from '../core/object-store.ts';
import {
  findState,
  type Json,
  type JsonObject,
  pruneUnreachable,
  type StateDef,
  startsExecution,
  taskFunctions,
} from './asl-graph.ts';
import { type ChildDeliveries, type ChildRunner, childExecutions } from './child-executions.ts';
import {
  compileDefinition,
  failureOf,
  startExecution,
  type TaskHandlers,
  type ValidatedCache,
} from './interpreter.ts';
import { emulateJsonToString, JSON_TO_STRING, jsonToStringResult } from './json-to-string.ts';
import {
  emulateDistributedMaps,
  ITEM_READER_SUFFIX,
  type MapEmulation,
  RESULT_WRITER_SUFFIX,
} from './map-emulation.ts';
import { checkTolerance, type ItemResult, itemsToRun, mergeResults, writeResults } from './map-results.ts';

// The runner's API (functions/cli/, run.ts and tests import it from here).
export {
  type ChildDeliveries,
  ChildFailedError,
  type ChildRunner,
  ChildTimeoutError,
  childExecutions,
  EXPRESS_CHILD_TIMEOUT_SECONDS,
} from './child-executions.ts';
export { emulateDistributedMaps, type MapEmulation } from './map-emulation.ts';
export { ExceedToleratedFailureThresholdError } from './map-results.ts';

/** Calls the Lambda bound to a function name with a payload; returns what the Lambda returns. */
export type LambdaInvoker = (functionName: string, payload: Json) => Promise<Json>;

export interface WorkflowExecution {
  readonly executionId: string;
  readonly executionName: string;
  readonly status: 'SUCCEEDED' | 'FAILED';
  readonly output?: Json;
  readonly error?: string;
  readonly cause?: string;
  /** The top-level state that failed and the input it had: where a redrive restarts. */
  readonly failedState?: { readonly name: string; readonly input: Json };
  /** Per Map: the results of its last run, for a redrive to re-run only unsuccessful items. */
  readonly mapResults: ReadonlyMap<string, readonly ItemResult[]>;
  /**
   * Every Map run's results (one run per wave), oldest first; a redriven run's replace what the
   * run had, as a redriven Map Run keeps its ARN and its results folder.
   */
  readonly mapRunResults: readonly (readonly ItemResult[])[];
  /** The ResultWriter manifests of its Map Runs, oldest first, one per Map Run. */
  readonly mapRunManifests: readonly string[];
  readonly statesEntered: readonly string[];
  /** The input each top-level state last had (a redrive restarts with one of them). */
  readonly inputs: ReadonlyMap<string, Json>;
  readonly executionInput: JsonObject;
  /** Child executions the Maps started (deliveries included), as a Map Run's executionCounts.total. */
  readonly childExecutions: number;
  /** Of those, the ones run elsewhere (RunLocalOptions.elsewhere: a helper thread). */
  readonly childExecutionsElsewhere: number;
}

/** How a started execution ended (StartExecution's `.sync` integration waits for it). */
export interface StartedExecutionResult {
  readonly executionArn: string;
  readonly status: 'SUCCEEDED' | 'FAILED';
  readonly output?: Json;
  readonly error?: string;
  readonly cause?: string;
}

/** Runs the state machine a definition starts (by its ARN there) with the task's parameters, to its end. */
export type ExecutionStarter = (request: {
  readonly stateMachineArn: string;
  readonly input: JsonObject;
  readonly name?: string;
}) => Promise<StartedExecutionResult>;

export interface LocalWorkflowDeps {
  readonly store: ObjectStore;
  /** The bucket name the definition refers to (the local stand-in's name). */
  readonly bucket: string;
  readonly invoke: LambdaInvoker;
  /** Runs the executions the definition starts; absent: a definition that starts one cannot run locally. */
  readonly startExecution?: ExecutionStarter;
}

/**
 * A `.sync` StartExecution task whose execution did not succeed fails with States.TaskFailed,
 * its cause the execution's description
 * (https://docs.aws.amazon.com/step-functions/latest/dg/connect-stepfunctions.html).
 */
class StartedExecutionFailedError extends Error {
  override readonly name = 'States.TaskFailed';
}

export interface RunLocalOptions {
  readonly input: JsonObject;
  readonly executionId: string;
  readonly executionName: string;
  /** Redrive: restart at this state with this input; Maps re-run only unsuccessful items. */
  readonly redriveOf?: WorkflowExecution;
  /** Retry waits in ms (0 in tests); default: the definition's own intervals. */
  readonly retryIntervalMs?: number;
  /** Deliveries of each Express child (at-least-once); default once. Standard children: once only. */
  readonly childDeliveries?: ChildDeliveries;
  /** An Express child's execution timeout; default EXPRESS_CHILD_TIMEOUT_SECONDS (tests shorten it). */
  readonly expressChildTimeoutSeconds?: number;
  readonly onStateEntered?: (name: string) => void;
  /**
   * Where definitions the validator accepted are marked (definition-cache.ts validatedKey), so a
   * definition run before is not validated again; default: every definition is validated.
   */
  readonly validatedCache?: ValidatedCache;
  /**
   * Where children may run besides this thread, given the Maps as rewritten (their item processors
   * as each child runs them) and the retry waits; absent: every child runs here.
   */
  readonly elsewhere?: (maps: readonly MapEmulation[], retryOverrides: Record<string, number>) => ChildRunner;
}

export async function executeDefinition(
  definition: StateMachineDefinition,
  deps: LocalWorkflowDeps,
  options: RunLocalOptions,
): Promise<WorkflowExecution> {
  const emulated = emulateDistributedMaps(definition);
  const def = emulated.definition as unknown as JsonObject;
  const topStates = def.States as Record<string, StateDef>;
  emulateJsonToString(topStates);
  for (const m of emulated.maps) emulateJsonToString(m.processor.States as Record<string, StateDef>);
  const previousResults = options.redriveOf?.mapResults ?? new Map<string, readonly ItemResult[]>();
  const mapResults = new Map<string, readonly ItemResult[]>(previousResults);
  const mapRunManifests = [...(options.redriveOf?.mapRunManifests ?? [])];
  const mapRunResults = [...(options.redriveOf?.mapRunResults ?? [])];
  const input: Json = options.redriveOf ? restartAt(def, emulated, options.redriveOf) : options.input;

  // Task states of the parent and of every child (item processor) definition.
  const allTasks = taskFunctions(topStates);
  for (const m of emulated.maps) taskFunctions(m.processor.States as Record<string, StateDef>, allTasks);
  const retryOverrides: Record<string, number> = {};
  if (options.retryIntervalMs !== undefined) {
    for (const name of allTasks.keys()) retryOverrides[name] = options.retryIntervalMs;
  }
  const handlers: TaskHandlers = {};
  const children = childExecutions(emulated.maps, {
    executionId: options.executionId,
    executionName: options.executionName,
    handlers,
    retryOverrides,
    deliveries: options.childDeliveries ?? 'once',
    expressChildTimeoutSeconds: options.expressChildTimeoutSeconds,
    validatedCache: options.validatedCache,
    ...(options.elsewhere ? { elsewhere: options.elsewhere(emulated.maps, retryOverrides) } : {}),
  });
  const failedMap = options.redriveOf ? failedMapOf(emulated, options.redriveOf) : undefined;
  bindTasks(handlers, allTasks, {
    emulated,
    topStates,
    deps,
    executionName: options.executionName,
    children,
    previousResults,
    redriven: failedMap === undefined ? undefined : { map: failedMap },
    mapResults,
    mapRunManifests,
    mapRunResults,
  });

  const machine = await compileDefinition(def, options.validatedCache);
  const executionInput = options.redriveOf ? options.redriveOf.executionInput : options.input;
  const execution = startExecution(machine, input, {
    id: options.executionId,
    name: options.executionName,
    executionInput,
    handlers,
    retryOverrides,
  });
  const statesEntered: string[] = [];
  const inputs = new Map<string, Json>(options.redriveOf?.inputs ?? []);
  let lastFailed: { name: string; input: Json } | undefined;
  const watch = (async () => {
    for await (const event of execution.eventLogs) {
      if (event.type === 'StateEntered' && event.state.name in topStates && event.index === undefined) {
        statesEntered.push(event.state.name);
        inputs.set(event.state.name, event.state.input as Json);
        options.onStateEntered?.(event.state.name);
      }
      if (event.type === 'StateFailed' && event.state.name in topStates && event.index === undefined) {
        lastFailed = { name: event.state.name, input: inputs.get(event.state.name) ?? null };
      }
    }
  })();
  const base = {
    get childExecutions() {
      return children.started;
    },
    get childExecutionsElsewhere() {
      return children.startedElsewhere;
    },
    executionId: options.executionId,
    executionName: options.executionName,
    mapResults,
    mapRunManifests,
    mapRunResults,
    statesEntered,
    inputs,
    executionInput,
  };
  try {
    const output = (await execution.result) as Json;
    await watch;
    return { ...base, status: 'SUCCEEDED', output } satisfies WorkflowExecution;
  } catch (error) {
    await watch;
    if (!(error instanceof ExecutionError)) throw error;
    return {
      ...base,
      status: 'FAILED',
      ...failureOf(error),
      ...(lastFailed ? { failedState: lastFailed } : {}),
    } satisfies WorkflowExecution;
  }
}

/**
 * Points a redriven definition at the state that failed (a failed Map restarts at its item
 * reader, which then yields only the unsuccessful items) and drops what it can no longer reach.
 * Returns the input that state had.
 */
function restartAt(
  def: JsonObject,
  emulated: ReturnType<typeof emulateDistributedMaps>,
  redriveOf: WorkflowExecution,
): Json {
  const failed = redriveOf.failedState;
  if (!failed) throw new Error(`execution ${redriveOf.executionName} did not fail: nothing to redrive`);
  const mapName = failedMapOf(emulated, redriveOf);
  def.StartAt = mapName ? `${mapName}${ITEM_READER_SUFFIX}` : failed.name;
  pruneUnreachable(def);
  return mapName ? (redriveOf.inputs.get(`${mapName}${ITEM_READER_SUFFIX}`) ?? failed.input) : failed.input;
}

/** The Map whose run failed the execution (its ResultWriter applies the tolerance), if one did. */
function failedMapOf(
  emulated: ReturnType<typeof emulateDistributedMaps>,
  redriveOf: WorkflowExecution,
): string | undefined {
  const failed = redriveOf.failedState;
  return emulated.maps.find((m) => failed?.name === `${m.mapName}${RESULT_WRITER_SUFFIX}`)?.mapName;
}

interface TaskBindings {
  readonly emulated: ReturnType<typeof emulateDistributedMaps>;
  readonly topStates: Record<string, StateDef>;
  readonly deps: LocalWorkflowDeps;
  readonly executionName: string;
  readonly children: ReturnType<typeof childExecutions>;
  /** A redriven execution's Map results, which its Maps keep for the items that succeeded. */
  readonly previousResults: ReadonlyMap<string, readonly ItemResult[]>;
  /**
   * The Map whose failed run a redrive runs again: its next run is that run redriven (only the
   * items that did not succeed, its results beside theirs, in its folder); every later run of it
   * (a later wave) is a new run. Cleared once its ResultWriter wrote.
   */
  redriven: { readonly map: string } | undefined;
  /** Each Map's results as its ResultWriter writes them. */
  readonly mapResults: Map<string, readonly ItemResult[]>;
  /** The manifest of every Map Run's results, in the order written. */
  readonly mapRunManifests: string[];
  /** Every Map Run's results, in the same order. */
  readonly mapRunResults: (readonly ItemResult[])[];
}

/**
 * A handler for every task state: the emulated Distributed Map's child executions, ItemReader and
 * ResultWriter, and each Lambda task, invoked with its payload as Lambda's Invoke integration would.
 */
function bindTasks(
  handlers: TaskHandlers,
  allTasks: ReadonlyMap<string, string | undefined>,
  b: TaskBindings,
): void {
  const stateOf = (name: string): StateDef | undefined =>
    findState(b.topStates, name) ??
    b.emulated.maps.map((m) => findState(m.processor.States as Record<string, StateDef>, name)).find(Boolean);
  const mapNamed = (map: string) => {
    const emulation = b.emulated.maps.find((m) => m.mapName === map);
    if (!emulation) throw new Error(`no Map named ${map}`);
    return emulation;
  };
  for (const [stateName, functionName] of allTasks) {
    const params = stateOf(stateName)?.Parameters as JsonObject | undefined;
    if (params?.__local === 'ChildExecution') {
      handlers[stateName] = async (taskInput) => {
        const { item, map } = taskInput as { item: Json; map: string };
        return b.children.deliver(mapNamed(map), item);
      };
    } else if (params?.__local === 'ItemReader') {
      handlers[stateName] = async (taskInput) => {
        const { Bucket, Key } = taskInput as { Bucket: string; Key: string };
        if (Bucket !== b.deps.bucket)
          throw new Error(`ItemReader bucket ${Bucket} is not the local store's ${b.deps.bucket}`);
        const items = JSON.parse((await b.deps.store.getBytes(Key)).body.toString('utf8')) as Json[];
        const mapName = stateName.slice(0, -ITEM_READER_SUFFIX.length);
        return itemsToRun(items, b.redriven?.map === mapName ? b.previousResults.get(mapName) : undefined);
      };
    } else if (params?.__local === JSON_TO_STRING) {
      handlers[stateName] = jsonToStringTask;
    } else if (params?.__local === 'ResultWriter') {
      handlers[stateName] = async (taskInput) => {
        const { results, map } = taskInput as unknown as { results: ItemResult[]; map: string };
        const emulation = mapNamed(map);
        const redriven = b.redriven?.map === map;
        const all = mergeResults(redriven ? b.previousResults.get(map) : undefined, results);
        b.mapResults.set(map, all);
        // The redriven run writes into its own folder again, as a redriven Map Run keeps its ARN.
        const rewritten = redriven ? b.mapRunManifests.at(-1) : undefined;
        const details = await writeResults(b.deps.store, emulation, b.executionName, all, rewritten);
        if (rewritten !== undefined) {
          b.mapRunManifests.pop();
          b.mapRunResults.pop();
        }
        b.redriven = undefined;
        b.mapRunManifests.push(details.ResultWriterDetails.Key);
        b.mapRunResults.push(all);
        checkTolerance(emulation, all);
        return details;
      };
    } else if (startsExecution(stateOf(stateName) ?? {})) {
      handlers[stateName] = async (taskInput) => {
        const { StateMachineArn, Input, Name } = taskInput as JsonObject;
        if (!b.deps.startExecution) throw new Error(`no local state machine is bound for ${stateName}`);
        const ended = await b.deps.startExecution({
          stateMachineArn: String(StateMachineArn),
          input: (Input ?? {}) as JsonObject,
          ...(typeof Name === 'string' ? { name: Name } : {}),
        });
        const described = {
          ExecutionArn: ended.executionArn,
          StateMachineArn: String(StateMachineArn),
          Status: ended.status,
          ...(ended.output !== undefined ? { Output: ended.output } : {}),
          ...(ended.error !== undefined ? { Error: ended.error, Cause: ended.cause ?? '' } : {}),
        };
        if (ended.status !== 'SUCCEEDED') throw new StartedExecutionFailedError(JSON.stringify(described));
        return described;
      };
    } else if (functionName !== undefined) {
      handlers[stateName] = lambdaTask(functionName, b.deps.invoke);
    }
  }
}

const jsonToStringTask = async (taskInput: Json): Promise<Json> =>
  jsonToStringResult(taskInput as JsonObject);

/** A Lambda task, invoked with its payload as Lambda's Invoke integration would. */
function lambdaTask(functionName: string, invoke: LambdaInvoker): (taskInput: Json) => Promise<Json> {
  return async (taskInput) => {
    const payload = (taskInput as JsonObject).Payload ?? null;
    return { Payload: await invoke(functionName, payload), StatusCode: 200 };
  };
}

/**
 * The handlers of the Maps' item processors, as a thread that runs only children binds them: their
 * Lambda tasks and the JsonToString emulation, the only tasks a child holds.
 */
export function processorHandlers(maps: readonly MapEmulation[], invoke: LambdaInvoker): TaskHandlers {
  const handlers: TaskHandlers = {};
  for (const m of maps) {
    const states = m.processor.States as Record<string, StateDef>;
    for (const [stateName, functionName] of taskFunctions(states)) {
      const params = findState(states, stateName)?.Parameters as JsonObject | undefined;
      if (params?.__local === JSON_TO_STRING) handlers[stateName] = jsonToStringTask;
      else if (functionName !== undefined) handlers[stateName] = lambdaTask(functionName, invoke);
      else
        throw new Error(`task ${stateName} of Map ${m.mapName}'s children runs in the parent's thread only`);
    }
  }
  return handlers;
}
