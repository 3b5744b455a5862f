/**
 * The rendered state graph of the synthesized state machine: its states and transitions, the
 * Retry on each Lambda task (transient errors only, by name, with backoff and jitter), the
 * Distributed Map's reader, writer and tolerance, its child workflow type (EXPRESS by default,
 * STANDARD when configured) and, for Express, the chain's worst case read from the rendered
 * TimeoutSeconds and Retry fields, and asl-validator over the definition.
 */

import { createRequire } from 'node:module';
import { beforeAll, describe, expect, it } from 'vitest';
import { EXPRESS_BUDGET_SECONDS, EXPRESS_MAX_SECONDS } from '../../cdk/child-budget.ts';
import { STATES, TRANSIENT_ERRORS } from '../../cdk/constructs/compaction-workflow.ts';
import { extractWorkflow } from '../../cdk/synth-definition.ts';
import { ITEM_FAILED_ERROR } from '../../functions/contract.ts';
import { MAX_SMALL_JOBS_PER_ITEM } from '../../functions/core/config-schema.ts';
import { ErrorNames } from '../../functions/core/errors.ts';
import {
  AFTER_PARTITIONS,
  BEFORE_PARTITIONS,
  EXECUTION_TYPES,
  PARTITION_STEPS,
  RETRY,
} from '../../functions/core/pipeline.ts';
import { type CfnTemplate, synth } from './synth.ts';

type State = Record<string, unknown> & { Type: string; Next?: string; End?: boolean };
type Graph = { StartAt: string; States: Record<string, State> };

const validate = createRequire(import.meta.url)('asl-validator') as (
  definition: unknown,
  options?: { checkPaths?: boolean; checkArn?: boolean },
) => { isValid: boolean; errorsText: (separator?: string) => string };

let definition: Graph;
let itemProcessor: Graph;

function rendered(compactor?: Record<string, unknown>): Graph {
  const s = synth(compactor ? { compactor } : {});
  return extractWorkflow(s.json as CfnTemplate as Parameters<typeof extractWorkflow>[0])
    .definition as unknown as Graph;
}

/** One Map item's child workflow: its jobs' inline Map, then the item's verdict. */
function childOf(graph: Graph): Graph {
  return (graph.States[STATES.map] as unknown as { ItemProcessor: Graph }).ItemProcessor;
}

/** One job's chain: inside its item's child, or the child itself at one job an item. */
function processorOf(graph: Graph): Graph {
  const jobs = childOf(graph).States[STATES.jobs] as unknown as { ItemProcessor: Graph } | undefined;
  return jobs?.ItemProcessor ?? childOf(graph);
}

beforeAll(() => {
  definition = rendered();
  itemProcessor = processorOf(definition);
});

type Retrier = {
  MaxAttempts?: number;
  IntervalSeconds?: number;
  BackoffRate?: number;
  MaxDelaySeconds?: number;
};

/**
 * The longest one child can take, from the rendered fields alone: along its longest path (a
 * Choice takes whichever branch is longer), each Task's attempts times its TimeoutSeconds, plus
 * its retry waits at their longest (IntervalSeconds x BackoffRate^k, capped by MaxDelaySeconds;
 * ASL defaults 3 attempts, 1 s, 2.0); an inline Map without MaxConcurrency runs its iterations
 * at once, so it takes as long as its longest one.
 */
function renderedWorstCase(processor: Graph, from = processor.StartAt): number {
  const state = processor.States[from] as State;
  let own = 0;
  if (state.Type === 'Task') {
    const timeout = state.TimeoutSeconds as number;
    for (const retry of (state.Retry as Retrier[] | undefined) ?? []) {
      const attempts = retry.MaxAttempts ?? 3;
      own += attempts * timeout;
      for (let k = 0; k < attempts; k++) {
        const delay = (retry.IntervalSeconds ?? 1) * (retry.BackoffRate ?? 2) ** k;
        own += Math.min(delay, retry.MaxDelaySeconds ?? Number.POSITIVE_INFINITY);
      }
    }
    own += timeout;
  }
  if (state.Type === 'Map') {
    expect(state.MaxConcurrency ?? 0).toBe(0);
    own = renderedWorstCase((state as unknown as { ItemProcessor: Graph }).ItemProcessor);
  }
  const next =
    state.Type === 'Choice'
      ? [...(state.Choices as { Next: string }[]).map((c) => c.Next), state.Default as string]
      : state.End || state.Next === undefined
        ? []
        : [state.Next];
  return own + Math.max(0, ...next.map((n) => renderedWorstCase(processor, n)));
}

/** The path from StartAt following Next (or the given choice branch) to the end. */
function walk(
  graph: Graph,
  choose: (name: string, state: State) => string | undefined = () => undefined,
): string[] {
  const path: string[] = [];
  let name: string | undefined = graph.StartAt;
  while (name !== undefined) {
    const state = graph.States[name] as State;
    path.push(name);
    if (path.length > 50) throw new Error('cycle in the state graph');
    name = state.Type === 'Choice' ? choose(name, state) : state.End ? undefined : state.Next;
  }
  return path;
}

/** Anything planned, one wave. */
function firstWaveOnly(name: string, state: State): string {
  return choiceTarget(state, name === STATES.moreWaves ? 'default' : 0);
}

function choiceTarget(state: State, index: number | 'default'): string {
  if (index === 'default') return state.Default as string;
  return (state.Choices as { Next: string }[])[index]?.Next as string;
}

describe('the synthesized state graph', () => {
  it('is valid ASL (asl-validator)', () => {
    const result = validate(definition, { checkArn: true, checkPaths: true });
    expect(result.errorsText('\n')).toBe('');
    expect(result.isValid).toBe(true);
  });

  it('is written in JSONPath, which the local interpreter runs', () => {
    expect(JSON.stringify(definition)).not.toContain('"QueryLanguage":"JSONata"');
    expect(JSON.stringify(definition)).not.toContain('{%');
  });

  it('runs Recover -> Plan -> Map once per wave -> Summary, or straight to Summary when nothing is planned', () => {
    expect(walk(definition, firstWaveOnly)).toEqual([
      STATES.defaults,
      STATES.input,
      STATES.recover,
      STATES.plan,
      STATES.anything,
      STATES.waves,
      STATES.waveItems,
      STATES.map,
      STATES.nextWave,
      STATES.moreWaves,
      STATES.summary,
      STATES.output,
    ]);
    // A further wave goes round again: its items, the Map, the next wave.
    const more = definition.States[STATES.moreWaves] as State;
    expect(more.Choices).toEqual([
      { Variable: '$.wave.index', NumericLessThanPath: '$.plan.Payload.waves', Next: STATES.waveItems },
    ]);
    expect(more.Default).toBe(STATES.summary);
    const items = definition.States[STATES.waveItems] as State & { Parameters: Record<string, string> };
    expect(items.Parameters['itemsKey.$']).toBe(
      'States.ArrayGetItem($.plan.Payload.itemsKeys, $.wave.index)',
    );
    expect(items.Next).toBe(STATES.map);
    const next = definition.States[STATES.nextWave] as State & { Parameters: Record<string, string> };
    expect(next.Parameters).toEqual({
      'index.$': 'States.MathAdd($.wave.index, 1)',
      'maps.$': 'States.Array($.map, $.wave.maps)',
    });
    expect(walk(definition, (_, st) => choiceTarget(st, 'default'))).toEqual([
      STATES.defaults,
      STATES.input,
      STATES.recover,
      STATES.plan,
      STATES.anything,
      STATES.nothing,
      STATES.summary,
      STATES.output,
    ]);
  });

  it('past its tolerance the Map fails the execution, with no Catch, so a redrive re-runs its failed partitions', () => {
    // A caught Map would have exited: a redrive would then restart after it and replay nothing.
    const map = definition.States[STATES.map] as State;
    expect(map.ToleratedFailurePercentage).toBe(5);
    expect(map.Next).toBe(STATES.nextWave);
    expect(map.Catch).toBeUndefined();
    const summary = definition.States[STATES.summary] as State & { Parameters: Record<string, unknown> };
    expect(summary.Parameters.Payload).toMatchObject({
      toleratedFailurePercentage: 5,
      'executionName.$': '$$.Execution.Name',
      'maps.$': '$.wave.maps',
    });
    expect(summary.Next).toBe(STATES.output);
    expect(Object.values(definition.States).filter((st) => (st as State).Type === 'Fail')).toEqual([]);
  });

  it('per partition: compact, then skip or publish -> verify -> delete inputs -> clear manifest', () => {
    expect(walk(itemProcessor, (_, st) => choiceTarget(st, 'default'))).toEqual([
      STATES.compactSize,
      STATES.compact,
      STATES.staged,
      STATES.publish,
      STATES.verify,
      STATES.deleteInputs,
      STATES.clearManifest,
      STATES.done,
    ]);
    expect(walk(itemProcessor, (_, st) => choiceTarget(st, 0))).toEqual([
      STATES.compactSize,
      STATES.compactSmall,
      STATES.staged,
      STATES.skipped,
    ]);
    const staged = itemProcessor.States[STATES.staged] as State;
    expect(JSON.stringify(staged.Choices)).toContain('"StringEquals":"skipped"');
    expect(JSON.stringify(staged.Choices)).toContain('"StringEquals":"superseded"');
  });

  it('an item sized "small" runs on the small compact function, any other item (one without a size too) on the large one', () => {
    const choice = itemProcessor.States[STATES.compactSize] as State;
    expect(choice.Choices).toEqual([
      {
        And: [
          { Variable: '$.job.compactSize', IsPresent: true },
          { Variable: '$.job.compactSize', StringEquals: 'small' },
        ],
        Next: STATES.compactSmall,
      },
    ]);
    expect(choice.Default).toBe(STATES.compact);
    const large = itemProcessor.States[STATES.compact] as State & { Parameters: Record<string, unknown> };
    const small = itemProcessor.States[STATES.compactSmall] as State & {
      Parameters: Record<string, unknown>;
    };
    // Same payload (the item whole), result path, timeout, retry and next state; another function.
    expect({ ...small, Parameters: { ...small.Parameters, FunctionName: '' } }).toEqual({
      ...large,
      Parameters: { ...large.Parameters, FunctionName: '' },
    });
    expect(small.Parameters.FunctionName).not.toEqual(large.Parameters.FunctionName);
  });

  it('Standard children have no small compact function: the Choice would cost a transition per partition', () => {
    const processor = processorOf(rendered({ map: { childExecutionType: 'STANDARD' } }));
    expect(processor.StartAt).toBe(STATES.compact);
    expect(processor.States[STATES.compactSmall]).toBeUndefined();
  });

  it('a retention item, which Compact commits (done, verified), takes the same path to delete inputs and clear', () => {
    // Staged? diverts only skipped and superseded items; every other status goes on to Publish,
    // whose step (and Verify's) find a verified manifest already done (test/functions/handlers.test.ts).
    const staged = itemProcessor.States[STATES.staged] as State;
    const diverted = [...JSON.stringify(staged.Choices).matchAll(/"StringEquals":"([a-z-]+)"/g)].map(
      (m) => m[1],
    );
    expect(diverted.sort()).toEqual(['skipped', 'superseded']);
    expect(staged.Default).toBe(STATES.publish);
  });

  it('a Distributed Map reading the plan from S3 and writing results, with concurrency and tolerance', () => {
    const map = definition.States[STATES.map] as State & Record<string, Record<string, unknown>>;
    expect(map.ItemProcessor?.ProcessorConfig).toEqual({ Mode: 'DISTRIBUTED', ExecutionType: 'EXPRESS' });
    expect(map.ItemReader).toMatchObject({
      Resource: 'arn:aws:states:::s3:getObject',
      ReaderConfig: { InputType: 'JSON' },
      Parameters: { 'Key.$': '$.wave.itemsKey' },
    });
    expect(map.ResultWriter).toMatchObject({
      Resource: 'arn:aws:states:::s3:putObject',
      Parameters: { Prefix: '_compaction/results' },
    });
    expect(map.MaxConcurrency).toBe(10);
  });

  it('every Lambda task retries transient errors only, by name, with backoff and full jitter', () => {
    const tasks = [definition, itemProcessor].flatMap((g) =>
      Object.entries(g.States).filter(([, st]) => st.Type === 'Task'),
    );
    expect(tasks.map(([name]) => name).sort()).toEqual(
      [
        STATES.recover,
        STATES.plan,
        STATES.compact,
        STATES.compactSmall,
        STATES.publish,
        STATES.verify,
        STATES.deleteInputs,
        STATES.clearManifest,
        STATES.summary,
      ].sort(),
    );
    for (const [name, task] of tasks) {
      const retry = task.Retry as { ErrorEquals: string[]; BackoffRate: number; JitterStrategy: string }[];
      expect(retry, name).toHaveLength(1);
      expect(retry[0]?.ErrorEquals, name).toEqual([...TRANSIENT_ERRORS]);
      expect(retry[0]?.BackoffRate, name).toBeGreaterThan(1);
      expect(retry[0]?.JitterStrategy, name).toBe('FULL');
      // Never a catch-all: States.ALL or TaskFailed would retry a schema conflict forever.
      expect(JSON.stringify(task.Retry ?? [])).not.toMatch(/States\.(ALL|TaskFailed)/);
      // A parent task's failure fails the execution (a redrive restarts there); a job's ends
      // that job's chain with its error recorded, so the item's other jobs go on.
      const inChain = name in itemProcessor.States;
      expect(task.Catch, name).toEqual(
        inChain
          ? [{ ErrorEquals: ['States.ALL'], ResultPath: '$.failure', Next: STATES.jobFailed }]
          : undefined,
      );
      // Each task outlasts its Lambda (Init, at most 10 s, is not part of a function's timeout).
      expect(task.TimeoutSeconds, name).toBeGreaterThanOrEqual(10 + 10);
    }
  });

  it("runs a Map item's jobs at once, each chain recording its failure; the item fails with JobsFailed and every outcome in its cause when one did", () => {
    const child = childOf(definition);
    expect(child.StartAt).toBe(STATES.jobs);
    expect(child.States[STATES.jobs]).toMatchObject({
      Type: 'Map',
      ItemsPath: '$.jobs',
      ItemSelector: { 'job.$': '$$.Map.Item.Value' },
      ResultPath: '$.outcomes',
      Next: STATES.anyFailed,
    });
    expect(child.States[STATES.jobs]?.MaxConcurrency ?? 0).toBe(0);
    expect(itemProcessor.States[STATES.jobFailed]).toMatchObject({
      Type: 'Pass',
      Parameters: { 'partition.$': '$.job.partition', 'jobId.$': '$.job.jobId', 'failure.$': '$.failure' },
      End: true,
    });
    // One IsPresent per job an item may carry, by a definite path: no filter.
    const anyFailed = child.States[STATES.anyFailed] as State & {
      Choices: { Or: { Variable: string; IsPresent: boolean }[]; Next: string }[];
    };
    expect(anyFailed.Choices).toHaveLength(1);
    expect(anyFailed.Choices[0]?.Or.map((c) => c.Variable)).toEqual(
      Array.from({ length: MAX_SMALL_JOBS_PER_ITEM }, (_, i) => `$.outcomes[${i}].failure`),
    );
    expect(anyFailed.Choices[0]?.Next).toBe(STATES.itemFailure);
    expect(child.States[STATES.itemFailure]).toMatchObject({
      Type: 'Pass',
      Parameters: { 'cause.$': 'States.JsonToString($.outcomes)' },
      Next: STATES.itemFailed,
    });
    expect(child.States[STATES.itemFailed]).toMatchObject({
      Type: 'Fail',
      Error: ITEM_FAILED_ERROR,
      CausePath: '$.cause',
    });
    expect(anyFailed.Default).toBe(STATES.itemDone);
    expect(child.States[STATES.itemDone]).toMatchObject({ Type: 'Pass', InputPath: '$.outcomes', End: true });
  });

  it('with one job an item (Standard children by default) the child is the chain alone: no item states, no Catch, and Plan asks for one job an item', () => {
    const standard = rendered({ map: { childExecutionType: 'STANDARD' } });
    const child = childOf(standard);
    expect(child.StartAt).toBe(STATES.compact);
    // The Distributed Map's ItemSelector gives the chain its item under `job`, as the Jobs Map does.
    const map = standard.States[STATES.map] as State & { ItemSelector?: unknown };
    expect(map.ItemSelector).toEqual({ 'job.$': '$$.Map.Item.Value' });
    expect((definition.States[STATES.map] as typeof map).ItemSelector).toBeUndefined();
    expect(child.States[STATES.jobs]).toBeUndefined();
    expect(child.States[STATES.jobFailed]).toBeUndefined();
    for (const [name, state] of Object.entries(child.States)) expect(state.Catch, name).toBeUndefined();
    const plan = standard.States[STATES.plan] as State & { Parameters: { Payload: Record<string, unknown> } };
    expect(plan.Parameters.Payload.itemShape).toBe('job');
    expect((definition.States[STATES.plan] as typeof plan).Parameters.Payload.itemShape).toBe('jobs');
    // Asked for, Standard children get items of jobs too.
    const batched = childOf(rendered({ map: { childExecutionType: 'STANDARD' }, smallJobsPerItem: 4 }));
    expect(batched.StartAt).toBe(STATES.jobs);
  });

  it('retries the Lambda errors Step Functions recommends (bp-lambda-serviceexception), ClientExecutionTimeout included', () => {
    // https://docs.aws.amazon.com/step-functions/latest/dg/bp-lambda-serviceexception.html
    for (const name of [
      'Lambda.ClientExecutionTimeoutException',
      'Lambda.ServiceException',
      'Lambda.AWSLambdaException',
      'Lambda.SdkClientException',
    ]) {
      expect(TRANSIENT_ERRORS).toContain(name);
    }
  });

  it('retries the error names the code throws for transient failures, and not the ones that must fail', () => {
    expect(TRANSIENT_ERRORS).toContain(ErrorNames.TransientStore);
    expect(TRANSIENT_ERRORS).toContain(ErrorNames.DeleteFailed);
    for (const permanent of [
      ErrorNames.SchemaConflict,
      ErrorNames.ManifestConflict,
      ErrorNames.FinalKeyConflict,
      ErrorNames.VerificationFailed,
      ErrorNames.RowCountMismatch,
      ErrorNames.LeaseExpired,
    ]) {
      expect(TRANSIENT_ERRORS).not.toContain(permanent);
    }
  });
});

describe('the state graph is the pipeline (functions/core/pipeline.ts), row by row', () => {
  type Task = State & {
    Resource?: string;
    ResultPath?: string;
    TimeoutSeconds?: number;
    Retry?: (Retrier & { ErrorEquals: string[] })[];
  };
  const retryOfTask = (task: Task) => {
    const [retry] = task.Retry ?? [];
    return {
      intervalSeconds: retry?.IntervalSeconds,
      backoffRate: retry?.BackoffRate,
      maxAttempts: retry?.MaxAttempts,
      maxDelaySeconds: retry?.MaxDelaySeconds,
    };
  };

  it.each(EXECUTION_TYPES)(
    '%s children: the chain walks PARTITION_STEPS with their names, result keys and retries',
    (type) => {
      const processor = processorOf(rendered({ map: { childExecutionType: type } }));
      const tasks = walk(processor, (_, st) => choiceTarget(st, 'default')).filter(
        (name) => processor.States[name]?.Type === 'Task',
      );
      expect(tasks).toEqual(PARTITION_STEPS.map((s) => s.stateName));
      for (const row of PARTITION_STEPS) {
        const task = processor.States[row.stateName] as Task;
        expect(task.ResultPath, row.step).toBe(`$.${row.resultKey}`);
        expect(retryOfTask(task), row.step).toEqual(RETRY[type]);
        // Every step's payload is the job's item, one path to an object.
        expect(
          (task as Task & { Parameters: Record<string, unknown> }).Parameters['Payload.$'],
          row.step,
        ).toBe('$.job');
      }
      // The item's output carries each step's result under its result key: what the verdict reads.
      const done = processor.States[STATES.done] as State & { Parameters: Record<string, string> };
      for (const row of PARTITION_STEPS) {
        expect(done.Parameters[`${row.resultKey}.$`], row.step).toBe(`$.${row.resultKey}.Payload`);
      }
    },
  );

  it("the parent's steps are the pipeline's too, retried as Standard", () => {
    const parentTasks = walk(definition, firstWaveOnly).filter(
      (name) => definition.States[name]?.Type === 'Task',
    );
    expect(parentTasks).toEqual([...BEFORE_PARTITIONS, ...AFTER_PARTITIONS].map((s) => s.stateName));
    for (const row of [...BEFORE_PARTITIONS, ...AFTER_PARTITIONS]) {
      const task = definition.States[row.stateName] as Task;
      expect(task.ResultPath, row.step).toBe(`$.${row.resultKey}`);
      expect(retryOfTask(task), row.step).toEqual(RETRY.STANDARD);
    }
  });
});

describe('the per-partition chain as Express or Standard child workflows', () => {
  it('is Express by default: its worst case, read from the rendered timeouts and retries, fits five minutes with the margin', () => {
    // https://docs.aws.amazon.com/step-functions/latest/dg/concepts-standard-vs-express.html
    const worst = renderedWorstCase(childOf(definition));
    expect(worst).toBe(renderedWorstCase(itemProcessor));
    expect(worst).toBeLessThanOrEqual(EXPRESS_BUDGET_SECONDS);
    expect(EXPRESS_BUDGET_SECONDS).toBeLessThan(EXPRESS_MAX_SECONDS);
    // compact 2 x (36 + 12) + 1, four steps 2 x (9 + 12) + 1 each (cdk/child-budget.ts), on
    // either compact function's path.
    expect(worst).toBe(269);
    for (const name of [STATES.compact, STATES.compactSmall]) {
      const compact = itemProcessor.States[name] as State;
      expect(compact.TimeoutSeconds, name).toBe(48);
      expect(compact.Retry, name).toMatchObject([{ MaxAttempts: 1, IntervalSeconds: 1, MaxDelaySeconds: 1 }]);
    }
    // The parent's own tasks are Standard's: five retries, a minute beyond their Lambda.
    const plan = definition.States[STATES.plan] as State;
    expect(plan.TimeoutSeconds).toBe(300 + 60);
    expect(plan.Retry).toMatchObject([{ MaxAttempts: 5, IntervalSeconds: 2, MaxDelaySeconds: 60 }]);
  });

  it('is Standard when configured, with Standard retries and the bigger jobs’ timeouts', () => {
    const standard = rendered({ map: { childExecutionType: 'STANDARD' } });
    const map = standard.States[STATES.map] as State & Record<string, Record<string, unknown>>;
    expect(map.ItemProcessor?.ProcessorConfig).toEqual({ Mode: 'DISTRIBUTED', ExecutionType: 'STANDARD' });
    const processor = processorOf(standard);
    expect((processor.States[STATES.compact] as State).TimeoutSeconds).toBe(900 + 60);
    expect((processor.States[STATES.publish] as State).TimeoutSeconds).toBe(300 + 60);
    expect(processor.States[STATES.compact]?.Retry).toMatchObject([{ MaxAttempts: 5 }]);
    expect(renderedWorstCase(childOf(standard))).toBeGreaterThan(EXPRESS_MAX_SECONDS);
  });
});
