/**
 * The helper thread's entry (child-thread.ts starts it; loading it anywhere else does nothing): it
 * builds its deps from the recipe, binds the item processors' Lambda tasks to the same handlers the
 * parent binds, runs each child it is given as its own execution, and answers with its output or
 * its failure. Owner checks go to the parent thread, which knows the run's live executions.
 */

import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import type { Json } from './asl-graph.ts';
import {
  CHILD_THREAD_KIND,
  type ChildThreadData,
  type FromChildThread,
  type ToChildThread,
} from './child-thread.ts';
import { ClosingStore } from './closing-store.ts';
import { localInvoker } from './lambdas.ts';
import { type LocalRunDeps, localHandlerDeps } from './run.ts';
import { childExecutions, processorHandlers } from './workflow.ts';

async function serve(port: NonNullable<typeof parentPort>, data: ChildThreadData): Promise<void> {
  const post = (message: FromChildThread) => port.postMessage(message);
  const { threadRunDeps } = (await import(data.recipe.module)) as {
    threadRunDeps: (data: Json) => Promise<LocalRunDeps>;
  };
  const deps = await threadRunDeps(data.recipe.data);
  let asked = 0;
  const answers = new Map<number, { resolve: (alive: boolean) => void; reject: (error: Error) => void }>();
  const owners = {
    isAlive: (executionId: string) =>
      new Promise<boolean>((resolve, reject) => {
        const id = ++asked;
        answers.set(id, { resolve, reject });
        post({ type: 'alive?', id, executionId });
      }),
  };
  const store = new ClosingStore(deps.store);
  // Its engine is made once, by the first step that asks (localHandlerDeps), or at close.
  const handlerDeps = localHandlerDeps({ ...deps, store }, data.bucket, owners, data.executionId);
  // The thread ends only once DuckDB and the store have closed, each waiting for its calls in
  // flight: a DuckDB call completing into the torn-down thread would abort the whole process, and a
  // store call cut short would leave its key's lock held in the name of this live process
  // (closing-store.ts). A child can still be running at the run's end: one whose task timed out
  // runs on, as a Lambda outlives its Express execution.
  const closeDeps = (reason: Error) =>
    Promise.all([store.close(reason), handlerDeps.engine().then((engine) => engine.close())]);
  // A bug that escapes a child ends the thread with that error, and the run fails its children
  // with it.
  process.once('uncaughtException', (error) => {
    const end = () => Promise.reject(error);
    void closeDeps(
      new Error(`the run's helper thread ends after an uncaught error: ${error.message}`, { cause: error }),
    ).then(end, end);
  });
  const invoke = localInvoker(
    new Map(data.functionSteps),
    async () => handlerDeps,
    data.observes.steps
      ? (step, payload, result, elapsedMs) => post({ type: 'step', step, payload, result, elapsedMs })
      : undefined,
    data.observes.logs
      ? (level, message, details) => post({ type: 'log', level, message, details })
      : undefined,
  );
  const children = childExecutions(data.maps, {
    executionId: data.executionId,
    executionName: data.executionName,
    handlers: processorHandlers(data.maps, invoke),
    retryOverrides: data.retryOverrides,
    deliveries: 'once',
    expressChildTimeoutSeconds: data.expressChildTimeoutSeconds,
    validatedCache: data.validatedCache,
  });
  const run = async (id: number, mapName: string, item: Json, name: string) => {
    const map = data.maps.find((m) => m.mapName === mapName);
    try {
      if (!map) throw new Error(`no Map named ${mapName}`);
      post({ type: 'started', id });
      post({ type: 'done', id, output: await children.runHere(map, item, name) });
    } catch (error) {
      // Every failure is the child's, as the parent's Map records a child's: its name and message.
      const { name: errorName, message } = error instanceof Error ? error : new Error(String(error));
      post({ type: 'failed', id, error: errorName, cause: message });
    }
  };
  port.on('message', (message: ToChildThread) => {
    if (message.type === 'run') void run(message.id, message.map, message.item, message.name);
    else if (message.type === 'alive' || message.type === 'alive-failed') {
      const answer = answers.get(message.id);
      answers.delete(message.id);
      if (message.type === 'alive') answer?.resolve(message.alive);
      else answer?.reject(new Error(message.message));
    } else {
      // Its deps close, then the thread exits: the store's idle connections (an S3 client's
      // keep-alive sockets) would keep it alive for as long as they stay open. Exiting runs its
      // exit handlers (the store's lock claim is removed).
      void (async () => {
        await closeDeps(new Error('the run has ended, and its helper thread with it'));
        process.exit(0);
      })();
    }
  });
}

const data = workerData as Partial<ChildThreadData> | undefined;
if (!isMainThread && parentPort && data?.kind === CHILD_THREAD_KIND)
  await serve(parentPort, data as ChildThreadData);
