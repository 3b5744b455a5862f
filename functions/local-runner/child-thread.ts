/**
 * A helper thread that runs some of a local run's Map children (child-thread-worker.ts), so a run
 * of many small partitions uses a second core: the parent's interpreter, the children it keeps and
 * each child's store calls all run on one JavaScript thread, which bounds such a run. Each child
 * there is the same execution of the same item processor, its Lambda handlers bound to deps the
 * thread builds from a recipe (a module and the data it takes, e.g. the CLI's options), so they
 * reach the same store, settings and clock; its owner checks are answered here, where the run's
 * executions are registered, and its step results and logs are forwarded to the run's observers.
 */

import { Worker } from 'node:worker_threads';
import type { Json } from './asl-graph.ts';
import { ChildFailedError, ChildNotStartedError, type ChildRunner } from './child-executions.ts';
import type { ValidatedCache } from './interpreter.ts';
import type { LogSink, StepName, StepObserver } from './lambdas.ts';
import type { MapEmulation } from './map-emulation.ts';
import { timed } from './timing-spans.ts';

/**
 * How the thread builds its deps: `module` (a URL) exports `threadRunDeps(data)`, which returns
 * what run.ts's LocalRunDeps holds (store, config, clock, engine, workDir); `data` must survive a
 * structured clone.
 */
export interface ThreadDepsRecipe {
  readonly module: string;
  readonly data: Json;
}

/** Marks the thread's workerData: the entry serves only a thread started here. */
export const CHILD_THREAD_KIND = 'compactor-child-thread';

/** The log message a run's observer gets when its helper thread fails. */
export const CHILD_THREAD_FAILED = 'child thread failed';

/** What the thread is started with (its workerData). */
export interface ChildThreadData {
  readonly kind: typeof CHILD_THREAD_KIND;
  readonly recipe: ThreadDepsRecipe;
  readonly maps: readonly MapEmulation[];
  readonly functionSteps: readonly (readonly [string, StepName])[];
  readonly bucket: string;
  readonly executionId: string;
  readonly executionName: string;
  readonly retryOverrides: Record<string, number>;
  readonly expressChildTimeoutSeconds: number | undefined;
  readonly validatedCache: ValidatedCache | undefined;
  /** Whether the run observes step results and logs: the thread sends only what is observed. */
  readonly observes: { readonly steps: boolean; readonly logs: boolean };
}

/** Messages to the thread. */
export type ToChildThread =
  | {
      readonly type: 'run';
      readonly id: number;
      readonly map: string;
      readonly item: Json;
      readonly name: string;
    }
  | { readonly type: 'alive'; readonly id: number; readonly alive: boolean }
  | { readonly type: 'alive-failed'; readonly id: number; readonly message: string }
  | { readonly type: 'close' };

/** Messages from the thread. */
export type FromChildThread =
  | { readonly type: 'started'; readonly id: number }
  | { readonly type: 'done'; readonly id: number; readonly output: Json }
  | { readonly type: 'failed'; readonly id: number; readonly error: string; readonly cause: string }
  | { readonly type: 'alive?'; readonly id: number; readonly executionId: string }
  | {
      readonly type: 'step';
      readonly step: StepName;
      readonly payload: unknown;
      readonly result: unknown;
      readonly elapsedMs: number;
    }
  | {
      readonly type: 'log';
      readonly level: 'warn' | 'error';
      readonly message: string;
      readonly details: Record<string, unknown>;
    };

export interface ChildThreadHooks {
  /** Whether the thread takes this item (e.g. small jobs only: the thread's engine is small). */
  readonly accepts: (item: Json) => boolean;
  readonly isOwnerAlive: (executionId: string) => Promise<boolean>;
  readonly onStep?: StepObserver;
  readonly onLog?: LogSink;
  /** Told once when the thread fails or exits before the run ends. */
  readonly onFailure?: (error: Error) => void;
}

export interface ChildThread extends ChildRunner {
  /** Ends the thread (its engine closed); resolves once it exited. */
  close(): Promise<void>;
}

const WORKER = new URL('./child-thread-worker.ts', import.meta.url);

/**
 * The helper thread as a ChildRunner, started at its first child. A thread that fails or exits
 * fails the children it was running and takes no more: they run in the parent's thread.
 */
export function childThread(
  data: Omit<ChildThreadData, 'kind' | 'maps' | 'retryOverrides' | 'recipe' | 'observes'> & {
    /** Made when the thread starts (e.g. a clock's reading then). */
    readonly recipe: () => ThreadDepsRecipe;
  },
  hooks: ChildThreadHooks,
): (maps: readonly MapEmulation[], retryOverrides: Record<string, number>) => ChildThread {
  return (maps, retryOverrides) => {
    let worker: Worker | undefined;
    let ended: Promise<void> | undefined;
    let closed = false;
    let failure: Error | undefined;
    let nextId = 0;
    let started = 0;
    const pending = new Map<
      number,
      { resolve: (output: Json) => void; reject: (error: Error) => void; started: boolean }
    >();
    const send = (message: ToChildThread) => worker?.postMessage(message);
    /** Fails the children the thread started; those it never started run in the parent's thread. */
    const fail = (error: Error) => {
      if (failure === undefined) hooks.onFailure?.(error);
      failure ??= error;
      for (const child of pending.values())
        child.reject(child.started ? error : new ChildNotStartedError(error.message));
      pending.clear();
    };
    const receive = (message: FromChildThread) => {
      if (message.type === 'started') {
        const waiting = pending.get(message.id);
        if (waiting) waiting.started = true;
        started++;
      } else if (message.type === 'done' || message.type === 'failed') {
        const waiting = pending.get(message.id);
        pending.delete(message.id);
        if (message.type === 'done') waiting?.resolve(message.output);
        else waiting?.reject(new ChildFailedError(message.error, message.cause));
      } else if (message.type === 'alive?') {
        // A check that fails, fails where it was asked, as it would in this thread.
        void hooks.isOwnerAlive(message.executionId).then(
          (alive) => send({ type: 'alive', id: message.id, alive }),
          (error: unknown) => send({ type: 'alive-failed', id: message.id, message: String(error) }),
        );
      } else if (message.type === 'step') {
        hooks.onStep?.(message.step, message.payload, message.result, message.elapsedMs);
      } else {
        hooks.onLog?.(message.level, message.message, message.details);
      }
    };
    const start = (): Worker => {
      const thread = new Worker(WORKER, {
        workerData: {
          kind: CHILD_THREAD_KIND,
          ...data,
          recipe: data.recipe(),
          maps,
          retryOverrides,
          observes: { steps: hooks.onStep !== undefined, logs: hooks.onLog !== undefined },
        } satisfies ChildThreadData,
      });
      thread.on('message', receive);
      thread.on('error', fail);
      const exited = new Promise<void>((resolve) => {
        thread.once('exit', (code) => {
          if (!closed) fail(new Error(`the run's child thread exited (code ${code}) before the run ended`));
          resolve();
        });
      });
      ended = exited;
      // The thread's life, from its first child to its exit, as a span of the run.
      void timed('run: child thread', () => exited);
      return thread;
    };
    return {
      accepts: (item) => failure === undefined && hooks.accepts(item),
      get running() {
        return pending.size;
      },
      get started() {
        return started;
      },
      run(map, item, name) {
        if (failure !== undefined) return Promise.reject(new ChildNotStartedError(failure.message));
        const id = ++nextId;
        const done = new Promise<Json>((resolve, reject) =>
          pending.set(id, { resolve, reject, started: false }),
        );
        if (worker === undefined) {
          try {
            worker = start();
          } catch (error) {
            // Whatever stopped the thread starting (workerData that does not clone, say): none of
            // its children started, so they run in the parent's thread.
            fail(error instanceof Error ? error : new Error(String(error)));
            return done;
          }
        }
        send({ type: 'run', id, map: map.mapName, item, name });
        return done;
      },
      async close() {
        if (worker !== undefined && !closed) send({ type: 'close' });
        closed = true;
        await ended;
      },
    };
  };
}
