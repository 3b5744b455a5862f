/**
 * The compaction workflow: Recover -> Plan -> Distributed Map over Map items, each one job or
 * several small jobs of one table run at once (per job: compact -> staged? -> publish -> verify
 * -> delete inputs -> clear manifest), once per wave -> Summary.
 *
 * A partition holding more than one job bound gets several jobs (planner-jobs.ts), one per wave:
 * the Map runs wave k's items (every partition's k-th job) only after wave k-1's Map run ended,
 * so one partition's jobs run one after another, each its own manifest, and a backlog drains in
 * one execution. Each wave's results are kept in `$.wave.maps` for Summary.
 *
 * Written in JSONPath (the local interpreter ignores JSONata). Every Lambda task retries only
 * the errors that are transient, by name; every other error fails the partition, and the Map
 * tolerates a configured share of failed partitions. Past it the Map fails the execution, so a
 * redrive re-runs its failed partitions (a Map Run redrive), and Summary runs from an EventBridge
 * rule instead (failure-summary.ts). Each step is idempotent, so a redrive never compacts a
 * succeeded partition twice.
 *
 * The per-partition chain runs as the Map's child workflows, EXPRESS by default: its tasks'
 * timeouts and retries then follow cdk/child-budget.ts, which keeps a whole chain under five
 * minutes (cdk/config.ts refuses settings that would not).
 */

import { Duration, RemovalPolicy, Stack } from 'aws-cdk-lib';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import * as tasks from 'aws-cdk-lib/aws-stepfunctions-tasks';
import { Construct } from 'constructs';
import {
  ITEM_FAILED_ERROR,
  MAP_FAILED_ERROR,
  STEP_STATE_NAMES,
  type StepName,
  TRANSIENT_ERRORS,
} from '../../functions/contract.ts';
import { MAX_SMALL_JOBS_PER_ITEM } from '../../functions/core/config-schema.ts';
import type { CompactSize } from '../../functions/core/lambda-sizing.ts';
import {
  DEFAULT_CHILD_EXECUTION_TYPE,
  type LambdaSizeClass,
  PARTITION_STEPS,
  type PartitionStep,
  stepRow,
  stepsThrough,
} from '../../functions/core/pipeline.ts';
import { type ItemShape, JOB_FIELD } from '../../functions/core/plan-store.ts';
import { stateFolder, stateRootOf } from '../../functions/core/state-root.ts';
import { CHILD_DEFAULTS, type ChildExecutionType, childRetry, taskTimeoutSeconds } from '../child-budget.ts';
import { STACK_DEFAULTS } from '../config-defaults.ts';
import { StateRootJsonItemReader, StateRootResultWriter } from './state-root-map-io.ts';

/** Each step's function, by step name. */
export type WorkflowFunctions = Readonly<Record<StepName, lambda.IFunction>>;

export interface CompactionWorkflowProps {
  readonly functions: WorkflowFunctions;
  /**
   * The small jobs' compact function: a Choice sends each item whose `compactSize` is "small"
   * to it, every other item (an item planned without a size among them) to `functions.compact`.
   * It has the compact Lambda's timeout.
   * @default - none: every item runs on `functions.compact`
   */
  readonly compactSmall?: lambda.IFunction;
  /** The data bucket: the Map reads its items from and writes its results to the state root. */
  readonly bucket: s3.IBucket;
  /** Data prefix, '' or ending in '/'. */
  readonly dataPrefix: string;
  /**
   * Map items run at once; each runs its jobs (up to `smallJobsPerItem` small ones) at once.
   * @default STACK_DEFAULTS.map.maxConcurrency (10)
   */
  readonly maxConcurrency?: number;
  /**
   * Share of partitions (percent) that may fail before the Map, and with it the execution, fails.
   * @default STACK_DEFAULTS.map.toleratedFailurePercentage (5)
   */
  readonly toleratedFailurePercentage?: number;
  /**
   * Whole-execution timeout.
   * @default Duration.hours(12)
   */
  readonly timeout?: Duration;
  /**
   * The compact Lambda's timeout; its task waits `taskSlackSeconds(childExecutionType)` longer.
   * @default CHILD_DEFAULTS[childExecutionType].compactTimeoutSeconds (Express 36 s, Standard 900 s)
   */
  readonly compactTimeout?: Duration;
  /**
   * Recover's, Plan's and Summary's Lambda timeout; their tasks wait a minute longer.
   * @default STACK_DEFAULTS.lambda.others.timeoutSeconds (300 s)
   */
  readonly stepTimeout?: Duration;
  /**
   * Timeout of the chain's steps after compact (publish, verify, delete inputs, clear manifest).
   * @default CHILD_DEFAULTS[childExecutionType].partitionStepTimeoutSeconds (Express 9 s, Standard 300 s)
   */
  readonly partitionStepTimeout?: Duration;
  /**
   * The Map's child workflows. Their tasks wait their Lambda's timeout plus
   * `taskSlackSeconds(type)` and retry as `childRetry(type)` (cdk/child-budget.ts).
   * @default DEFAULT_CHILD_EXECUTION_TYPE ('EXPRESS', functions/core/pipeline.ts)
   */
  readonly childExecutionType?: ChildExecutionType;
  /**
   * Small jobs of one table a Map item carries (plan-store.ts mapItems), which its child runs at
   * once, each chain catching its failure. At 1 the child is one job's chain, with no states of
   * its own, and the Plan step writes one job an item.
   * @default CHILD_DEFAULTS[childExecutionType].smallJobsPerItem (Express 10, Standard 1)
   */
  readonly smallJobsPerItem?: number;
  /**
   * Execution log retention.
   * @default logs.RetentionDays.THREE_MONTHS
   */
  readonly logRetention?: logs.RetentionDays;
}

/** The errors each step's Retry names (the contract lists them). */
export { TRANSIENT_ERRORS };

export const RESULT_WRITER_V2_FLAG = '@aws-cdk/aws-stepfunctions:useDistributedMapResultWriterV2';

const compactRow = PARTITION_STEPS[0];

/** State names, used by the local runner and tests; the steps' own come from core/pipeline.ts. */
export const STATES = {
  defaults: 'Defaults',
  input: 'Read input',
  recover: STEP_STATE_NAMES.recover,
  plan: STEP_STATE_NAMES.plan,
  anything: 'Anything to compact?',
  nothing: 'Nothing to compact',
  waves: 'Waves',
  waveItems: 'Wave items',
  map: 'Compact partitions',
  nextWave: 'Next wave',
  moreWaves: 'More waves?',
  jobs: 'Jobs',
  jobFailed: 'Job failed',
  anyFailed: 'Any job failed?',
  itemFailure: 'Item failure',
  itemFailed: 'Item failed',
  itemDone: 'Item done',
  compactSize: 'Compact size?',
  compact: STEP_STATE_NAMES.compact,
  compactSmall: `${STEP_STATE_NAMES.compact} small`,
  staged: compactRow.endsOn.choice,
  skipped: compactRow.endsOn.endState,
  publish: STEP_STATE_NAMES.publish,
  verify: STEP_STATE_NAMES.verify,
  deleteInputs: STEP_STATE_NAMES['delete-inputs'],
  clearManifest: STEP_STATE_NAMES['clear-manifest'],
  done: 'Partition done',
  summary: STEP_STATE_NAMES.summary,
  output: 'Output',
} as const;

/** The error the Map fails the execution with past its tolerance (functions/contract.ts). */
export { MAP_FAILED_ERROR };

export class CompactionWorkflow extends Construct {
  readonly stateMachine: sfn.StateMachine;

  constructor(scope: Construct, id: string, props: CompactionWorkflowProps) {
    super(scope, id);
    // Without this flag CDK silently drops resultWriterV2 from the rendered Map state.
    this.node.setContext(RESULT_WRITER_V2_FLAG, true);
    // Defaults first, each the stack's own, so the construct alone makes a chain the stack accepts.
    const f = props.functions;
    const childType = props.childExecutionType ?? DEFAULT_CHILD_EXECUTION_TYPE;
    const child = CHILD_DEFAULTS[childType];
    const timeouts: Record<LambdaSizeClass, Duration> = {
      compact: props.compactTimeout ?? Duration.seconds(child.compactTimeoutSeconds),
      partitionSteps: props.partitionStepTimeout ?? Duration.seconds(child.partitionStepTimeoutSeconds),
      others: props.stepTimeout ?? Duration.seconds(STACK_DEFAULTS.lambda.others.timeoutSeconds),
    };
    const maxConcurrency = props.maxConcurrency ?? STACK_DEFAULTS.map.maxConcurrency;
    const toleratedFailurePercentage =
      props.toleratedFailurePercentage ?? STACK_DEFAULTS.map.toleratedFailurePercentage;

    // The parent is always Standard; tasks of the chain run as the Map's children.
    // Each step's task: its state name, function, result path and timeout from its pipeline row.
    const invoke = (
      step: StepName,
      payload: Record<string, unknown> | string,
      type: ChildExecutionType = 'STANDARD',
      // Another function running the same step, in its own state.
      other?: { readonly fn: lambda.IFunction; readonly stateName: string },
    ) => {
      const row = stepRow(step);
      const retry = childRetry(type);
      const stateName = other?.stateName ?? row.stateName;
      return new tasks.LambdaInvoke(this, stateName, {
        stateName,
        lambdaFunction: other?.fn ?? f[step],
        payload:
          typeof payload === 'string'
            ? sfn.TaskInput.fromJsonPathAt(payload)
            : sfn.TaskInput.fromObject(payload),
        payloadResponseOnly: false,
        resultSelector: { 'Payload.$': '$.Payload' },
        resultPath: `$.${row.resultKey}`,
        // Retries are explicit below: transient errors only, by name.
        retryOnServiceExceptions: false,
        // At least the Lambda's own timeout, so the execution never moves on while it still runs.
        taskTimeout: sfn.Timeout.duration(
          Duration.seconds(taskTimeoutSeconds(timeouts[row.size].toSeconds(), type)),
        ),
      }).addRetry({
        errors: [...TRANSIENT_ERRORS],
        interval: Duration.seconds(retry.intervalSeconds),
        backoffRate: retry.backoffRate,
        maxAttempts: retry.maxAttempts,
        maxDelay: Duration.seconds(retry.maxDelaySeconds),
        jitterStrategy: sfn.JitterType.FULL,
      });
    };

    const execution = {
      'tier.$': '$.args.tier',
      'now.$': '$.args.now',
      'executionId.$': '$$.Execution.Id',
      'executionName.$': '$$.Execution.Name',
    };
    // A job's chain keeps its item under one field, so each step's payload is one path to an
    // object, not four to strings (on the local interpreter a string result is a thrown error).
    const JOB = `$.${JOB_FIELD}`;
    const jobItem = { [`${JOB_FIELD}.$`]: '$$.Map.Item.Value' };
    // What names a job in its outcome, a failed one's too: Summary matches it to the planned job.
    const jobName = { 'partition.$': `${JOB}.partition`, 'jobId.$': `${JOB}.jobId` };

    // Optional input fields get defaults, so the schedule only has to pass {"tier": ...}.
    // `only` scopes planning to one table (compactor doctor's canary); null plans the whole lake.
    // `sweep` true lists every table whole this cycle; null leaves it to planning.sweepEveryHours.
    const defaults = new sfn.Pass(this, STATES.defaults, {
      stateName: STATES.defaults,
      result: sfn.Result.fromObject({ now: null, only: null, sweep: null }),
      resultPath: '$.defaults',
    });
    const readInput = new sfn.Pass(this, STATES.input, {
      stateName: STATES.input,
      parameters: { 'args.$': 'States.JsonMerge($.defaults, $$.Execution.Input, false)' },
    });
    const recover = invoke('recover', execution);
    // Recovery is never scoped: every manifest left anywhere is resolved first.
    // `sweep: true` makes the plan list every table whole (planner.ts): late data, backfills.
    // The items this definition's Map reads (plan-store.ts ItemShape): several jobs each, or one.
    const batched = (props.smallJobsPerItem ?? child.smallJobsPerItem) > 1;
    const itemShape: ItemShape = batched ? 'jobs' : 'job';
    const plan = invoke('plan', {
      ...execution,
      'only.$': '$.args.only',
      'sweep.$': '$.args.sweep',
      itemShape,
    });

    // One job: the pipeline's partition steps in order. Its input is { job: the job's item
    // ({ tier, partition, jobId, executionId, jobKey, ... }) }, which the Map's ItemSelector makes
    // (https://docs.aws.amazon.com/step-functions/latest/dg/input-output-itemselector.html); every
    // step takes the item (the job's ref and what compact needs). Its output holds each step's
    // result under its result key. A failure the task's Retry does not absorb ends the job's chain
    // with the error recorded, so the item's other jobs finish; the item then fails with it (below).
    const outcome = (rows: readonly PartitionStep[]) => ({
      ...jobName,
      ...Object.fromEntries(rows.map((r) => [`${r.resultKey}.$`, `$.${r.resultKey}.Payload`])),
    });
    const done = new sfn.Pass(this, STATES.done, {
      stateName: STATES.done,
      parameters: outcome(PARTITION_STEPS),
    });
    const jobFailed = batched
      ? new sfn.Pass(this, STATES.jobFailed, {
          stateName: STATES.jobFailed,
          parameters: { ...jobName, 'failure.$': '$.failure' },
        })
      : undefined;
    const caught = (task: sfn.TaskStateBase) =>
      jobFailed ? task.addCatch(jobFailed, { errors: [sfn.Errors.ALL], resultPath: '$.failure' }) : task;
    let chain: sfn.IChainable = done;
    for (const row of [...PARTITION_STEPS].reverse() as PartitionStep[]) {
      const isCompact = row === compactRow;
      const task = caught(invoke(row.step as StepName, JOB, childType));
      // Small jobs' own compact task, beside the large one, both followed by the same states.
      const small =
        isCompact && props.compactSmall
          ? caught(
              invoke(row.step as StepName, JOB, childType, {
                fn: props.compactSmall,
                stateName: STATES.compactSmall,
              }),
            )
          : undefined;
      const rest = chain;
      let next: sfn.IChainable = rest;
      if (row.endsOn) {
        const ended = new sfn.Pass(this, row.endsOn.endState, {
          stateName: row.endsOn.endState,
          parameters: outcome(stepsThrough(row)),
        });
        next = new sfn.Choice(this, row.endsOn.choice, { stateName: row.endsOn.choice })
          .when(
            sfn.Condition.or(
              ...row.endsOn.statuses.map((status) =>
                sfn.Condition.stringEquals(`$.${row.resultKey}.Payload.status`, status),
              ),
            ),
            ended,
          )
          .otherwise(rest);
      }
      chain = task.next(next);
      if (small) {
        small.next(next);
        // The Default is the large function: an item without a size still runs.
        const smallSize: CompactSize = 'small';
        chain = new sfn.Choice(this, STATES.compactSize, { stateName: STATES.compactSize })
          .when(
            sfn.Condition.and(
              sfn.Condition.isPresent(`${JOB}.compactSize`),
              sfn.Condition.stringEquals(`${JOB}.compactSize`, smallSize),
            ),
            small,
          )
          .otherwise(task);
      }
    }

    // One Map item: its jobs (plan-store.ts MapItem), each its own chain, all at once. Its output
    // is their outcomes. When a job failed the item fails, so the Map's tolerance and a redrive
    // see it, with the cause holding every job's outcome, for Summary: a Fail state takes its
    // cause from a path (https://docs.aws.amazon.com/step-functions/latest/dg/state-fail.html).
    // The Choice tests each possible job by a definite path: an IsPresent on a missing element is
    // false (https://docs.aws.amazon.com/step-functions/latest/dg/state-choice.html), where a
    // filter's empty match is not one shape everywhere. With one job an item, the item is the chain.
    const itemOfJobs = (jobChain: sfn.IChainable): sfn.IChainable => {
      const jobs = new sfn.Map(this, STATES.jobs, {
        stateName: STATES.jobs,
        itemsPath: '$.jobs',
        itemSelector: jobItem,
        resultPath: '$.outcomes',
      });
      jobs.itemProcessor(jobChain);
      return jobs.next(
        new sfn.Choice(this, STATES.anyFailed, { stateName: STATES.anyFailed })
          .when(
            sfn.Condition.or(
              ...Array.from({ length: MAX_SMALL_JOBS_PER_ITEM }, (_, i) =>
                sfn.Condition.isPresent(`$.outcomes[${i}].failure`),
              ),
            ),
            new sfn.Pass(this, STATES.itemFailure, {
              stateName: STATES.itemFailure,
              parameters: { 'cause.$': 'States.JsonToString($.outcomes)' },
            }).next(
              new sfn.Fail(this, STATES.itemFailed, {
                stateName: STATES.itemFailed,
                error: ITEM_FAILED_ERROR,
                causePath: '$.cause',
              }),
            ),
          )
          .otherwise(
            new sfn.Pass(this, STATES.itemDone, { stateName: STATES.itemDone, inputPath: '$.outcomes' }),
          ),
      );
    };

    const map = new sfn.DistributedMap(this, STATES.map, {
      stateName: STATES.map,
      // CDK's own reader and writer would grant the state machine every object of the data bucket.
      itemReader: new StateRootJsonItemReader({
        bucket: props.bucket,
        key: sfn.JsonPath.stringAt('$.wave.itemsKey'),
        keyPrefix: stateFolder(stateRootOf(props.dataPrefix), 'plans'),
      }),
      maxConcurrency,
      // Failed items past the tolerance fail the Map Run and the execution: that is what a console
      // Redrive replays. Its results are written all the same, for the rule's Summary to read.
      toleratedFailurePercentage,
      resultWriterV2: new StateRootResultWriter({
        bucket: props.bucket,
        // Without the folder's slash: Step Functions appends `/<map run id>/...`.
        prefix: stateFolder(stateRootOf(props.dataPrefix), 'results').slice(0, -1),
      }),
      // Express children: billed by duration instead of per transition, at most five minutes
      // each, at-least-once; Step Functions keeps no history of them, CloudWatch Logs does (the
      // state machine's logging below). See cdk/child-budget.ts.
      mapExecutionType:
        childType === 'EXPRESS' ? sfn.StateMachineType.EXPRESS : sfn.StateMachineType.STANDARD,
      resultPath: '$.map',
      // With one job an item, the item is the job's chain.
      ...(batched ? {} : { itemSelector: jobItem }),
    });
    map.itemProcessor(batched ? itemOfJobs(chain) : chain);

    const summary = invoke('summary', {
      'tier.$': '$.args.tier',
      'executionId.$': '$$.Execution.Id',
      'executionName.$': '$$.Execution.Name',
      // Each wave's Map result, the latest first, each beside the list before it: JSONPath can
      // build an array (States.Array) but not append to one; Summary flattens it.
      'maps.$': '$.wave.maps',
      toleratedFailurePercentage,
    });
    // The wave loop: Pass states take intrinsics in Parameters (States.ArrayGetItem, States.MathAdd,
    // States.Array: https://docs.aws.amazon.com/step-functions/latest/dg/intrinsic-functions.html),
    // and a Choice compares two paths with NumericLessThanPath
    // (https://docs.aws.amazon.com/step-functions/latest/dg/state-choice.html). Each wave adds a
    // handful of events to the Standard parent's history, far under its 25,000
    // (https://docs.aws.amazon.com/step-functions/latest/dg/service-quotas.html) at the 100 waves
    // maxJobsPerPartition allows.
    const noWaves = { index: 0, maps: [] };
    const nothing = new sfn.Pass(this, STATES.nothing, {
      stateName: STATES.nothing,
      result: sfn.Result.fromObject(noWaves),
      resultPath: '$.wave',
    });
    const waves = new sfn.Pass(this, STATES.waves, {
      stateName: STATES.waves,
      result: sfn.Result.fromObject(noWaves),
      resultPath: '$.wave',
    });
    const waveItems = new sfn.Pass(this, STATES.waveItems, {
      stateName: STATES.waveItems,
      parameters: {
        'index.$': '$.wave.index',
        'maps.$': '$.wave.maps',
        'itemsKey.$': 'States.ArrayGetItem($.plan.Payload.itemsKeys, $.wave.index)',
      },
      resultPath: '$.wave',
    });
    const nextWave = new sfn.Pass(this, STATES.nextWave, {
      stateName: STATES.nextWave,
      parameters: {
        'index.$': 'States.MathAdd($.wave.index, 1)',
        'maps.$': 'States.Array($.map, $.wave.maps)',
      },
      resultPath: '$.wave',
    });
    const output = new sfn.Pass(this, STATES.output, {
      stateName: STATES.output,
      parameters: {
        'tier.$': '$.args.tier',
        'recovery.$': '$.recovery.Payload',
        'plan.$': '$.plan.Payload',
        'summary.$': '$.summary.Payload',
      },
    });
    summary.next(output);
    waveItems
      .next(map)
      .next(nextWave)
      .next(
        new sfn.Choice(this, STATES.moreWaves, { stateName: STATES.moreWaves })
          .when(sfn.Condition.numberLessThanJsonPath('$.wave.index', '$.plan.Payload.waves'), waveItems)
          .otherwise(summary),
      );

    const definition = defaults
      .next(readInput)
      .next(recover)
      .next(plan)
      .next(
        new sfn.Choice(this, STATES.anything, { stateName: STATES.anything })
          .when(sfn.Condition.numberGreaterThan('$.plan.Payload.jobs', 0), waves.next(waveItems))
          .otherwise(nothing.next(summary)),
      );

    this.stateMachine = new sfn.StateMachine(this, 'StateMachine', {
      definitionBody: sfn.DefinitionBody.fromChainable(definition),
      queryLanguage: sfn.QueryLanguage.JSON_PATH,
      timeout: props.timeout ?? Duration.hours(12),
      tracingEnabled: true,
      // ALL with execution data, a cost chosen for operators: Step Functions keeps an Express
      // child's response and status (concepts-statemachines.html), but its states, inputs and
      // outputs only in these logs (https://docs.aws.amazon.com/step-functions/latest/dg/cw-logs.html).
      logs: {
        destination: new logs.LogGroup(this, 'Logs', {
          // "prefix your CloudWatch Logs log group names with /aws/vendedlogs/", or enabling logging
          // can hit the Logs resource policy's size limit (https://docs.aws.amazon.com/step-functions/latest/dg/bp-cwl.html).
          logGroupName: `/aws/vendedlogs/states/${Stack.of(this).stackName}-${this.node.id}`,
          retention: props.logRetention ?? logs.RetentionDays.THREE_MONTHS,
          removalPolicy: RemovalPolicy.RETAIN,
        }),
        level: sfn.LogLevel.ALL,
        includeExecutionData: true,
      },
    });
  }
}
