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
 * Redrive is emulated as AWS does it: the execution restarts at the state that failed, with the
 * input that state had; a Map re-runs only the items that did not succeed, each a new child from
 * its start, as a Map Run redrive reruns Express children with StartExecution
 * (https://docs.aws.amazon.com/step-functions/latest/apireference/API_RedriveExecution.html).
 * A Standard child would be redriven from its failed state instead; here it starts over too
 * (every step is idempotent, so the outcome is the same).
 */

import { randomBytes } from 'node:crypto';
import {
  ExecutionError,
  ExecutionTimeoutError,
  type RunOptions,
  StateMachine,
  type StateMachineDefinition,
} from 'aws-local-stepfunctions';
import type { ObjectStore } from '../core/object-store.ts';
import { markValidated, validatedKey, wasValidated } from './definition-cache.ts';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };
type StateDef = JsonObject;

/** Calls the Lambda bound to a function name with a payload; returns what the Lambda returns. */
export type LambdaInvoker = (functionName: string, payload: Json) => Promise<Json>;

const ITEM_READER_SUFFIX = ' (ItemReader)';
const RESULT_WRITER_SUFFIX = ' (ResultWriter)';
const ITEM_STATE = 'Item';
const ITEM_FAILED_STATE = 'Item failed';
const ITEM_SUCCEEDED_STATE = 'Item succeeded';

interface MapEmulation {
  readonly mapName: string;
  readonly bucket: string;
  readonly prefix: string;
  readonly tolerated: number;
  /** The item processor without its ProcessorConfig: one child execution's definition. */
  readonly processor: JsonObject;
  readonly executionType: 'EXPRESS' | 'STANDARD';
}

/** An Express execution lasts at most five minutes (cdk/child-budget.ts EXPRESS_MAX_SECONDS). */
export const EXPRESS_CHILD_TIMEOUT_SECONDS = 300;

/**
 * How many times each Express child is delivered: once; twice, the second after the first ended
 * (a rerun); or twice at once (a duplicate overlapping the first). The Map records the first.
 */
export type ChildDeliveries = 'once' | 'twice' | 'overlapping';

export interface LocalExecution {
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
  readonly statesEntered: readonly string[];
  /** The input each top-level state last had (a redrive restarts with one of them). */
  readonly inputs: ReadonlyMap<string, Json>;
  readonly executionInput: JsonObject;
  /** Child executions the Maps started (deliveries included), as a Map Run's executionCounts.total. */
  readonly childExecutions: number;
}

interface ItemResult {
  readonly Status: 'SUCCEEDED' | 'FAILED';
  readonly Item: Json;
  readonly Output?: Json;
  readonly Error?: string;
  readonly Cause?: string;
}

export class ExceedToleratedFailureThresholdError extends Error {
  override readonly name = 'States.ExceedToleratedFailureThreshold';
}

/** A child execution that ran past its execution timeout (an Express child's five minutes). */
export class ChildTimeoutError extends Error {
  override readonly name = 'States.Timeout';
}

/** A child execution's failure, as the Map records it: the error name and cause of the child. */
class ChildFailedError extends Error {
  constructor(name: string, message: string) {
    super(message);
    this.name = name;
  }
}

function clone<T>(value: T): T {
  return structuredClone(value);
}

/**
 * Every Task state, keyed by state name (names must be unique to bind them), with its Lambda
 * function name, or undefined for the emulation's own states.
 */
function taskFunctions(
  states: Record<string, StateDef>,
  out = new Map<string, string | undefined>(),
): Map<string, string | undefined> {
  for (const [name, state] of Object.entries(states)) {
    if (state.Type === 'Task') {
      const params = state.Parameters as JsonObject | undefined;
      const fn = params?.FunctionName;
      if (typeof fn !== 'string' && params?.__local === undefined) {
        throw new Error(`task state "${name}" has no FunctionName to bind locally`);
      }
      if (out.has(name))
        throw new Error(`state name "${name}" is used twice; local binding needs unique names`);
      out.set(name, typeof fn === 'string' ? fn : undefined);
    }
    const processor = (state.ItemProcessor ?? state.Iterator) as JsonObject | undefined;
    if (processor) taskFunctions(processor.States as Record<string, StateDef>, out);
    for (const branch of (state.Branches as JsonObject[] | undefined) ?? []) {
      taskFunctions(branch.States as Record<string, StateDef>, out);
    }
  }
  return out;
}

function redirect(states: Record<string, StateDef>, from: string, to: string): void {
  for (const state of Object.values(states)) {
    if (state.Next === from) state.Next = to;
    if (state.Default === from) state.Default = to;
    for (const choice of (state.Choices as JsonObject[] | undefined) ?? [])
      if (choice.Next === from) choice.Next = to;
    for (const catcher of (state.Catch as JsonObject[] | undefined) ?? [])
      if (catcher.Next === from) catcher.Next = to;
  }
}

/** Rewrites Distributed Map features the interpreter ignores into states it runs (see above). */
export function emulateDistributedMaps(definition: StateMachineDefinition): {
  definition: StateMachineDefinition;
  maps: MapEmulation[];
} {
  const def = clone(definition) as unknown as JsonObject;
  const states = def.States as Record<string, StateDef>;
  const maps: MapEmulation[] = [];
  for (const [name, state] of Object.entries({ ...states })) {
    if (state.Type !== 'Map' || !state.ItemReader) continue;
    const reader = state.ItemReader as JsonObject;
    const writer = state.ResultWriter as JsonObject | undefined;
    const writerParams = (writer?.Parameters ?? {}) as JsonObject;
    const processor = (state.ItemProcessor ?? state.Iterator) as JsonObject;
    const { ProcessorConfig: config, ...plainProcessor } = processor;
    const executionType =
      (config as JsonObject | undefined)?.ExecutionType === 'EXPRESS' ? 'EXPRESS' : 'STANDARD';
    maps.push({
      mapName: name,
      bucket: String(writerParams.Bucket ?? ''),
      prefix: String(writerParams.Prefix ?? ''),
      tolerated: Number(state.ToleratedFailurePercentage ?? 0),
      processor: plainProcessor,
      executionType,
    });

    const readerState = `${name}${ITEM_READER_SUFFIX}`;
    const writerState = `${name}${RESULT_WRITER_SUFFIX}`;
    redirect(states, name, readerState);
    if (def.StartAt === name) def.StartAt = readerState;
    states[readerState] = {
      Type: 'Task',
      Resource: 'arn:aws:states:::s3:getObject',
      Parameters: { ...(reader.Parameters as JsonObject), __local: 'ItemReader' },
      ResultPath: '$.__items',
      Next: name,
    };
    const original = { ...state };
    delete original.ItemReader;
    delete original.ResultWriter;
    delete original.ToleratedFailurePercentage;
    delete original.ItemBatcher;
    const next = original.Next;
    const end = original.End;
    states[name] = {
      ...original,
      ItemsPath: '$.__items',
      ItemProcessor: {
        StartAt: ITEM_STATE,
        States: {
          // One child execution (runLocalWorkflow's ChildExecution handler).
          [ITEM_STATE]: {
            Type: 'Task',
            Resource: 'arn:aws:states:::states:startExecution',
            Parameters: { 'item.$': '$', __local: 'ChildExecution', map: name },
            ResultPath: '$.__result',
            Catch: [{ ErrorEquals: ['States.ALL'], ResultPath: '$.__error', Next: ITEM_FAILED_STATE }],
            Next: ITEM_SUCCEEDED_STATE,
          },
          [ITEM_SUCCEEDED_STATE]: {
            Type: 'Pass',
            Parameters: { Status: 'SUCCEEDED', 'Output.$': '$.__result', 'Item.$': '$' },
            End: true,
          },
          [ITEM_FAILED_STATE]: {
            Type: 'Pass',
            Parameters: {
              Status: 'FAILED',
              'Error.$': '$.__error.Error',
              'Cause.$': '$.__error.Cause',
              'Item.$': '$',
            },
            End: true,
          },
        },
      },
      ResultPath: '$.__mapResults',
      Next: writerState,
    };
    delete (states[name] as JsonObject).End;
    states[writerState] = {
      Type: 'Task',
      Resource: 'arn:aws:states:::s3:putObject',
      Parameters: { 'results.$': '$.__mapResults', __local: 'ResultWriter', map: name },
      ResultPath: (original.ResultPath as Json) ?? '$',
      ...(end ? { End: true } : { Next: next as Json }),
    };
  }
  return { definition: def as unknown as StateMachineDefinition, maps };
}

export interface LocalWorkflowDeps {
  readonly store: ObjectStore;
  /** The bucket name the definition refers to (the local stand-in's name). */
  readonly bucket: string;
  readonly invoke: LambdaInvoker;
}

export interface RunLocalOptions {
  readonly input: JsonObject;
  readonly executionId: string;
  readonly executionName: string;
  /** Redrive: restart at this state with this input; Maps re-run only unsuccessful items. */
  readonly redriveOf?: LocalExecution;
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
  readonly validatedCache?: { readonly dir: string; readonly root: string };
}

const VALIDATION = { checkArn: false, checkPaths: true } as const;

/** The interpreter for a definition, validated unless the same text passed before. */
async function compileDefinition(
  definition: JsonObject,
  cache: RunLocalOptions['validatedCache'],
): Promise<StateMachine> {
  const build = (noValidate: boolean) =>
    new StateMachine(definition as unknown as StateMachineDefinition, {
      validationOptions: noValidate ? { ...VALIDATION, noValidate } : VALIDATION,
    });
  if (!cache) return build(false);
  const key = validatedKey(cache.root, definition, VALIDATION);
  if (await wasValidated(cache.dir, key)) return build(true);
  const machine = build(false);
  await markValidated(cache.dir, key);
  return machine;
}

export async function runLocalWorkflow(
  definition: StateMachineDefinition,
  deps: LocalWorkflowDeps,
  options: RunLocalOptions,
): Promise<LocalExecution> {
  const emulated = emulateDistributedMaps(definition);
  const def = emulated.definition as unknown as JsonObject;
  const topStates = def.States as Record<string, StateDef>;
  const previousResults = options.redriveOf?.mapResults ?? new Map<string, readonly ItemResult[]>();
  const mapResults = new Map<string, readonly ItemResult[]>(previousResults);
  let input: Json = options.input;
  if (options.redriveOf) {
    const failed = options.redriveOf.failedState;
    if (!failed)
      throw new Error(`execution ${options.redriveOf.executionName} did not fail: nothing to redrive`);
    // A failed Map restarts at its item reader, which then yields only the unsuccessful items.
    const mapName = emulated.maps.find((m) => failed.name === `${m.mapName}${RESULT_WRITER_SUFFIX}`)?.mapName;
    def.StartAt = mapName ? `${mapName}${ITEM_READER_SUFFIX}` : failed.name;
    input = failed.input;
    if (mapName) input = options.redriveOf.inputs.get(`${mapName}${ITEM_READER_SUFFIX}`) ?? input;
    pruneUnreachable(def);
  }

  // Task states of the parent and of every child (item processor) definition.
  const allTasks = taskFunctions(topStates);
  for (const m of emulated.maps) taskFunctions(m.processor.States as Record<string, StateDef>, allTasks);
  const stateOf = (name: string): StateDef | undefined =>
    findState(topStates, name) ??
    emulated.maps.map((m) => findState(m.processor.States as Record<string, StateDef>, name)).find(Boolean);
  const retryOverrides: Record<string, number> = {};
  if (options.retryIntervalMs !== undefined) {
    for (const name of allTasks.keys()) retryOverrides[name] = options.retryIntervalMs;
  }
  const deliveries = options.childDeliveries ?? 'once';
  for (const m of emulated.maps) {
    if (m.executionType === 'STANDARD' && deliveries !== 'once')
      throw new Error(`Map ${m.mapName} runs STANDARD children, which run exactly once: no ${deliveries}`);
  }
  let children = 0;

  const handlers: Record<string, (input: Json) => Promise<Json>> = {};
  // One interpreter per Map, validated once (asl-validator takes hundreds of ms a definition) and
  // run once per child: each run is its own execution, as the library's own Map runs its items.
  const childMachines = new Map<MapEmulation, { machine: StateMachine; timeoutSeconds?: number }>();
  /** One child execution of a Map's item processor, in its own interpreter (see the top). */
  const runChild = async (map: MapEmulation, item: Json): Promise<Json> => {
    let compiled = childMachines.get(map);
    if (compiled === undefined) {
      const childDefinition = {
        ...clone(map.processor),
        ...(map.executionType === 'EXPRESS'
          ? { TimeoutSeconds: options.expressChildTimeoutSeconds ?? EXPRESS_CHILD_TIMEOUT_SECONDS }
          : {}),
      };
      const machine = await compileDefinition(childDefinition as JsonObject, options.validatedCache);
      compiled = {
        machine,
        ...('TimeoutSeconds' in childDefinition ? { timeoutSeconds: childDefinition.TimeoutSeconds } : {}),
      };
      childMachines.set(map, compiled);
    }
    const name = `${options.executionName}-${map.mapName.replace(/\W+/g, '-')}-${++children}`;
    const run = compiled.machine.run(item, {
      overrides: { taskResourceLocalHandlers: handlers, retryIntervalOverrides: retryOverrides },
      context: {
        Execution: {
          Id: `${options.executionId}/${name}`,
          Name: name,
          Input: item as JsonObject,
          StartTime: new Date().toISOString(),
        },
      },
    });
    try {
      return (await run.result) as Json;
    } catch (error) {
      if (error instanceof ExecutionTimeoutError) {
        throw new ChildTimeoutError(
          `child ${name} ran past its ${compiled.timeoutSeconds} s execution timeout`,
        );
      }
      if (!(error instanceof ExecutionError)) throw error;
      const cause = error.cause as { name?: string; message?: string } | undefined;
      throw new ChildFailedError(cause?.name ?? error.name, cause?.message ?? error.message);
    }
  };
  const settle = (p: Promise<Json>) =>
    p.then(
      (value) => ({ ok: true as const, value }),
      (error: unknown) => ({ ok: false as const, error }),
    );

  for (const [stateName, functionName] of allTasks) {
    const params = stateOf(stateName)?.Parameters as JsonObject | undefined;
    if (params?.__local === 'ChildExecution') {
      handlers[stateName] = async (taskInput) => {
        const { item, map } = taskInput as { item: Json; map: string };
        const emulation = emulated.maps.find((m) => m.mapName === map);
        if (!emulation) throw new Error(`no Map named ${map}`);
        if (emulation.executionType === 'STANDARD' || deliveries === 'once') return runChild(emulation, item);
        // At-least-once: a second delivery of the same child, after the first or alongside it.
        const [first] =
          deliveries === 'twice'
            ? [await settle(runChild(emulation, item)), await settle(runChild(emulation, item))]
            : await Promise.all([settle(runChild(emulation, item)), settle(runChild(emulation, item))]);
        if (first.ok) return first.value;
        throw first.error;
      };
    } else if (params?.__local === 'ItemReader') {
      handlers[stateName] = async (taskInput) => {
        const { Bucket, Key } = taskInput as { Bucket: string; Key: string };
        if (Bucket !== deps.bucket)
          throw new Error(`ItemReader bucket ${Bucket} is not the local store's ${deps.bucket}`);
        const items = JSON.parse((await deps.store.getBytes(Key)).body.toString('utf8')) as Json[];
        const mapName = stateName.slice(0, -ITEM_READER_SUFFIX.length);
        const previous = previousResults.get(mapName);
        if (!previous) return items;
        // Redrive: only the items that did not succeed run again.
        const succeeded = new Set(
          previous.filter((r) => r.Status === 'SUCCEEDED').map((r) => JSON.stringify(r.Item)),
        );
        return items.filter((item) => !succeeded.has(JSON.stringify(item)));
      };
    } else if (params?.__local === 'ResultWriter') {
      handlers[stateName] = async (taskInput) => {
        const { results, map } = taskInput as unknown as { results: ItemResult[]; map: string };
        const emulation = emulated.maps.find((m) => m.mapName === map);
        if (!emulation) throw new Error(`no Map named ${map}`);
        const earlier = (previousResults.get(map) ?? []).filter((r) => r.Status === 'SUCCEEDED');
        const all = [...earlier, ...results.map(stripInternals)];
        mapResults.set(map, all);
        const details = await writeResults(deps.store, emulation, options.executionName, all);
        const failed = all.filter((r) => r.Status === 'FAILED').length;
        if (all.length > 0 && (failed * 100) / all.length > emulation.tolerated) {
          throw new ExceedToleratedFailureThresholdError(
            `${failed} of ${all.length} items failed, above the tolerated ${emulation.tolerated}%; first: ${all.find((r) => r.Status === 'FAILED')?.Error}`,
          );
        }
        return details;
      };
    } else if (functionName !== undefined) {
      handlers[stateName] = async (taskInput) => {
        const payload = (taskInput as JsonObject).Payload ?? null;
        return { Payload: await deps.invoke(functionName, payload), StatusCode: 200 };
      };
    }
  }

  const machine = await compileDefinition(def, options.validatedCache);
  const runOptions: RunOptions = {
    overrides: { taskResourceLocalHandlers: handlers, retryIntervalOverrides: retryOverrides },
    context: {
      Execution: {
        Id: options.executionId,
        Name: options.executionName,
        Input: (options.redriveOf ? options.redriveOf.executionInput : options.input) as JsonObject,
        StartTime: new Date().toISOString(),
      },
    },
  };
  const execution = machine.run(input as JsonObject, runOptions);
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
      return children;
    },
    executionId: options.executionId,
    executionName: options.executionName,
    mapResults,
    statesEntered,
    inputs,
    executionInput: options.redriveOf ? options.redriveOf.executionInput : options.input,
  };
  try {
    const output = (await execution.result) as Json;
    await watch;
    return { ...base, status: 'SUCCEEDED', output } satisfies LocalExecution;
  } catch (error) {
    await watch;
    if (!(error instanceof ExecutionError)) throw error;
    const cause = error.cause as { name?: string; message?: string } | undefined;
    return {
      ...base,
      status: 'FAILED',
      error: cause?.name ?? error.name,
      cause: cause?.message ?? error.message,
      ...(lastFailed ? { failedState: lastFailed } : {}),
    } satisfies LocalExecution;
  }
}

/** A redrive starts mid-graph; the states before it are never entered, and ASL forbids unreachable states. */
function pruneUnreachable(def: JsonObject): void {
  const states = def.States as Record<string, StateDef>;
  const reachable = new Set<string>();
  const visit = (name: unknown) => {
    if (typeof name !== 'string' || reachable.has(name) || !states[name]) return;
    reachable.add(name);
    const state = states[name];
    visit(state.Next);
    visit(state.Default);
    for (const choice of (state.Choices as JsonObject[] | undefined) ?? []) visit(choice.Next);
    for (const catcher of (state.Catch as JsonObject[] | undefined) ?? []) visit(catcher.Next);
  };
  visit(def.StartAt);
  for (const name of Object.keys(states)) if (!reachable.has(name)) delete states[name];
}

function findState(states: Record<string, StateDef>, name: string): StateDef | undefined {
  if (states[name]) return states[name];
  for (const state of Object.values(states)) {
    const processor = (state.ItemProcessor ?? state.Iterator) as JsonObject | undefined;
    const found = processor ? findState(processor.States as Record<string, StateDef>, name) : undefined;
    if (found) return found;
    for (const branch of (state.Branches as JsonObject[] | undefined) ?? []) {
      const inBranch = findState(branch.States as Record<string, StateDef>, name);
      if (inBranch) return inBranch;
    }
  }
  return undefined;
}

function stripInternals(result: ItemResult): ItemResult {
  const item = { ...(result.Item as JsonObject) };
  delete item.__error;
  delete item.__result;
  return { ...result, Item: item };
}

/** Writes results the way a Distributed Map's ResultWriter lays them out in S3. */
async function writeResults(
  store: ObjectStore,
  map: MapEmulation,
  executionName: string,
  results: readonly ItemResult[],
): Promise<Json> {
  const runId = `${executionName}-${randomBytes(4).toString('hex')}`;
  const base = `${map.prefix.replace(/\/$/, '')}/${runId}`;
  const files: Record<string, { Key: string; Size: number }[]> = { FAILED: [], PENDING: [], SUCCEEDED: [] };
  for (const status of ['SUCCEEDED', 'FAILED'] as const) {
    const entries = results
      .filter((r) => r.Status === status)
      .map((r) => ({
        Status: r.Status,
        Input: JSON.stringify(r.Item),
        ...(r.Output !== undefined ? { Output: JSON.stringify(r.Output) } : {}),
        ...(r.Error !== undefined ? { Error: r.Error, Cause: r.Cause ?? '' } : {}),
      }));
    if (entries.length === 0) continue;
    const key = `${base}/${status}_0.json`;
    const body = Buffer.from(JSON.stringify(entries));
    await store.put(key, body, { contentType: 'application/json' });
    files[status]?.push({ Key: key, Size: body.length });
  }
  const manifestKey = `${base}/manifest.json`;
  await store.put(
    manifestKey,
    Buffer.from(
      JSON.stringify({ DestinationBucket: map.bucket, MapRunArn: `local:${runId}`, ResultFiles: files }),
    ),
    { contentType: 'application/json' },
  );
  return { ResultWriterDetails: { Bucket: map.bucket, Key: manifestKey } };
}
