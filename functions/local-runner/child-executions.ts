/**
 * A Distributed Map's child workflows, run locally: each item is its own execution of the item
 * processor, in a nested interpreter compiled once per Map. An EXPRESS child gets the Express
 * execution limit as its timeout and may be delivered twice, after the first or overlapping it
 * (at-least-once, see workflow.ts's header); a STANDARD child runs exactly once.
 */

import { ExecutionError, ExecutionTimeoutError, type StateMachine } from 'aws-local-stepfunctions';
import type { Json, JsonObject } from './asl-graph.ts';
import {
  compileDefinition,
  failureOf,
  startExecution,
  type TaskHandlers,
  type ValidatedCache,
} from './interpreter.ts';
import type { MapEmulation } from './map-emulation.ts';

/** An Express execution lasts at most five minutes (cdk/child-budget.ts EXPRESS_MAX_SECONDS). */
export const EXPRESS_CHILD_TIMEOUT_SECONDS = 300;

/**
 * How many times each Express child is delivered: once; twice, the second after the first ended
 * (a rerun); or twice at once (a duplicate overlapping the first). The Map records the first.
 */
export type ChildDeliveries = 'once' | 'twice' | 'overlapping';

/** A child execution that ran past its execution timeout (an Express child's five minutes). */
export class ChildTimeoutError extends Error {
  override readonly name = 'States.Timeout';
}

/** A child execution's failure, as the Map records it: the error name and cause of the child. */
export class ChildFailedError extends Error {
  constructor(name: string, message: string) {
    super(message);
    this.name = name;
  }
}

/**
 * A child a ChildRunner took but never started (its thread failed first): it runs here instead,
 * as nothing of it ran.
 */
export class ChildNotStartedError extends Error {
  override readonly name = 'ChildNotStartedError';
}

/**
 * Another place some children run (child-thread.ts: a helper thread), each still its own
 * execution of the item processor. A child goes there when it takes the item and runs fewer
 * children than this thread does, so the two share the Map's concurrency.
 */
export interface ChildRunner {
  accepts(item: Json): boolean;
  /** Children it runs now. */
  readonly running: number;
  /** Children it started so far. */
  readonly started: number;
  /**
   * One child execution named `name`: its output, or it throws as a child here fails
   * (ChildFailedError), or ChildNotStartedError when it never started it.
   */
  run(map: MapEmulation, item: Json, name: string): Promise<Json>;
}

export interface ChildExecutionsOptions {
  /** The parent execution's: each child's name and id extend them. */
  readonly executionId: string;
  readonly executionName: string;
  /** The Task handlers, the parent's and its children's (bound before any child runs). */
  readonly handlers: TaskHandlers;
  readonly retryOverrides: Record<string, number>;
  readonly deliveries: ChildDeliveries;
  readonly expressChildTimeoutSeconds: number | undefined;
  readonly validatedCache: ValidatedCache | undefined;
  /** Where children may run besides this thread; absent: all run here. */
  readonly elsewhere?: ChildRunner;
}

export interface ChildExecutions {
  /** Runs the Map's child for `item` (delivered as `deliveries` says); its output, or it throws its failure. */
  deliver(map: MapEmulation, item: Json): Promise<Json>;
  /** Runs one child named `name` in this thread, once (the other side of a ChildRunner). */
  runHere(map: MapEmulation, item: Json, name: string): Promise<Json>;
  /** Child executions started so far, deliveries included. */
  readonly started: number;
  /** Of those, the ones the ChildRunner ran. */
  readonly startedElsewhere: number;
}

/** The child executions of `maps`; refuses more than one delivery of a STANDARD Map's children. */
export function childExecutions(
  maps: readonly MapEmulation[],
  options: ChildExecutionsOptions,
): ChildExecutions {
  const { deliveries } = options;
  for (const m of maps) {
    if (m.executionType === 'STANDARD' && deliveries !== 'once')
      throw new Error(`Map ${m.mapName} runs STANDARD children, which run exactly once: no ${deliveries}`);
  }
  let children = 0;
  let runningHere = 0;
  // One interpreter per Map, validated once (asl-validator takes hundreds of ms a definition) and
  // run once per child: each run is its own execution, as the library's own Map runs its items.
  const childMachines = new Map<MapEmulation, { machine: StateMachine; timeoutSeconds?: number }>();
  /** One child execution of a Map's item processor, in its own interpreter. */
  const runHere = async (map: MapEmulation, item: Json, name: string): Promise<Json> => {
    let compiled = childMachines.get(map);
    if (compiled === undefined) {
      const childDefinition = {
        ...structuredClone(map.processor),
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
    const run = startExecution(compiled.machine, item, {
      id: `${options.executionId}/${name}`,
      name,
      executionInput: item as JsonObject,
      handlers: options.handlers,
      retryOverrides: options.retryOverrides,
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
      const failure = failureOf(error);
      throw new ChildFailedError(failure.error, failure.cause);
    }
  };
  /** Names the child (numbered here, wherever it runs) and runs it where fewer children run. */
  const runChild = async (map: MapEmulation, item: Json): Promise<Json> => {
    const name = `${options.executionName}-${map.mapName.replace(/\W+/g, '-')}-${++children}`;
    const { elsewhere } = options;
    if (elsewhere?.accepts(item) && elsewhere.running < runningHere) {
      try {
        return await elsewhere.run(map, item, name);
      } catch (error) {
        if (!(error instanceof ChildNotStartedError)) throw error;
      }
    }
    runningHere++;
    try {
      return await runHere(map, item, name);
    } finally {
      runningHere--;
    }
  };
  const settle = (p: Promise<Json>) =>
    p.then(
      (value) => ({ ok: true as const, value }),
      (error: unknown) => ({ ok: false as const, error }),
    );
  return {
    get started() {
      return children;
    },
    get startedElsewhere() {
      return options.elsewhere?.started ?? 0;
    },
    runHere,
    async deliver(map, item) {
      if (map.executionType === 'STANDARD' || deliveries === 'once') return runChild(map, item);
      // At-least-once: a second delivery of the same child, after the first or alongside it.
      const [first] =
        deliveries === 'twice'
          ? [await settle(runChild(map, item)), await settle(runChild(map, item))]
          : await Promise.all([settle(runChild(map, item)), settle(runChild(map, item))]);
      if (first.ok) return first.value;
      throw first.error;
    },
  };
}
