/**
 * `compactor run --tier TIER`: one cycle, the synthesized state machine run locally
 * (functions/local-runner/), reported per partition.
 */

import { availableParallelism } from 'node:os';
import { MAP_FAILED_ERROR } from '../../contract.ts';
import { behindWarning } from '../../core/backlog.ts';
import type { JobKind } from '../../core/config.ts';
import { compareKeys } from '../../core/object-store.ts';
import {
  endsChain,
  isCommitted,
  PARTITION_STEPS,
  type PartitionOutcome,
  partitionVerdict,
  type StepNumbers,
} from '../../core/pipeline.ts';
import { candidateFiles } from '../../core/planner/planner.ts';
import type { StepResult } from '../../core/protocol.ts';
import { QUARANTINED_INPUT_FIX } from '../../core/quarantine.ts';
import { UNMATCHED_RULE, unmatchedRuleWarning } from '../../core/retention.ts';
import { judgeMapItem, type SummaryScope, settleByReceipts } from '../../core/run-summary.ts';
import type { Json } from '../../local-runner/asl-graph.ts';
import type { LogSink, StepObserver } from '../../local-runner/lambdas.ts';
import type { LocalRunResult } from '../../local-runner/run.ts';
import { timed } from '../../local-runner/timing-spans.ts';
import type { WorkflowExecution } from '../../local-runner/workflow.ts';
import type { SummaryOutput } from '../../summary.ts';
import { type CliIo, commandContext, emit } from '../command.ts';
import {
  buildEngine,
  flagThatSet,
  parseStackContext,
  parseTier,
  parseWhole,
  requireRetentionRules,
} from '../context.ts';
import { deployedWorkflow } from '../deployed-workflow.ts';
import { formatBytes, formatCount, formatDuration, quarantinePrunedNote, table } from '../format.ts';
import { layoutHint } from '../layout-hint.ts';
import { LOCAL_CONCURRENCY, type ParsedOptions } from '../options.ts';
import { assertCliStore } from '../store-guard.ts';
import { localRunDeps } from '../thread-deps.ts';
import { recoverCommand } from './status.ts';

export async function runCommand(options: ParsedOptions, io: CliIo): Promise<number> {
  const tier = parseTier(options.tier);
  const stackContext = parseStackContext(options.context);
  const { runWorkflowLocally, CHILD_THREAD_FAILED } = await timed(
    'cli: modules of the local runner',
    () => import('../../local-runner/run.ts'),
  );
  const ctx = await timed('cli: settings and store check', async () => {
    // The steps get what COMPACTOR_CONFIG carries to the Lambdas: cdk.json's `compactor` context,
    // then --context, then the flags (commandContext).
    const ctx = await commandContext(options);
    // A tier that is off or that the layout refuses fails here, before Recover writes anything.
    if (tier !== 'retention')
      (await import('../../core/planner/planner.ts')).assertTierRuns(ctx.config, tier);
    else requireRetentionRules(ctx.config);
    await assertCliStore(ctx, io.err);
    return ctx;
  });
  const concurrency =
    options.concurrency === undefined ? LOCAL_CONCURRENCY : parseWhole('concurrency', options.concurrency, 1);
  // Engine options are checked before the seconds a synthesis can take.
  const { engine, workDir } = await timed('cli: engine', () => buildEngine(options));
  const quiet = sayOnInterrupt(io, options);
  try {
    // The definition `cdk deploy` would deploy (cdk.json's `compactor` context, then --context),
    // with this run's Map concurrency.
    const { workflow, cacheDir: definitionCacheDir } = await timed(
      'cli: definition (cache or synthesis)',
      () =>
        deployedWorkflow(
          {
            ...stackContext,
            // The Map's ItemReader and ResultWriter work under the store's data root, as a stack deployed
            // with this dataPrefix would (an s3://bucket/prefix store).
            dataPrefix: ctx.target.dataPrefix,
            map: {
              ...(stackContext.map as Record<string, unknown> | undefined),
              maxConcurrency: concurrency,
            },
          },
          options,
          io.err,
        ),
    );
    const { execution, output, stoppedSummary } = await timed('cli: workflow run', () =>
      runWorkflowLocally(
        workflow,
        {
          ...localRunDeps(ctx, { engine, workDir }),
          // Small jobs also run in a helper thread with an engine of its own (thread-deps.ts): the
          // run's JavaScript is one thread otherwise, which bounds a run of many small partitions.
          ...(availableParallelism() > 1
            ? {
                threadRecipe: () => ({
                  module: new URL('../thread-deps.ts', import.meta.url).href,
                  // --now read now, so the thread's clock is the run's.
                  data: {
                    ...options,
                    ...(options.now ? { now: ctx.clock.now().toISOString() } : {}),
                  } as Json,
                }),
              }
            : {}),
        },
        {
          tier,
          definitionCacheDir,
          ...(options.now ? { now: new Date(ctx.clock.now()).toISOString() } : {}),
          ...(options.json
            ? {}
            : { onLog: printLog(io, CHILD_THREAD_FAILED), onStep: printProgress(io, tier) }),
        },
      ),
    );
    // One row per Map item, for the JSON and the text alike.
    const partitions = await partitionRows(execution, {
      store: ctx.target.store,
      config: ctx.config,
      tier,
      executionId: execution.executionId,
    });
    if (execution.status === 'FAILED' || !output) {
      emit(
        io,
        options,
        {
          status: execution.status,
          execution: execution.executionName,
          error: execution.error,
          cause: execution.cause,
          failedState: execution.failedState?.name,
          ...(stoppedSummary ? { summary: stoppedSummary } : {}),
          states: execution.statesEntered,
          partitions,
        },
        () => formatFailedExecution(execution, tier, partitions, stoppedSummary),
      );
      return 1;
    }
    const { plan } = output;
    if (plan.jobs === 0 && plan.skipped === 0 && plan.objectsListed > 0) {
      const hint = await layoutHint(ctx.target.store, ctx.config);
      if (hint !== undefined) io.err(`warning: ${hint}`);
    }
    await timed('cli: report', async () =>
      emit(io, options, { ...output, partitions }, () => formatRun(output, execution, partitions, options)),
    );
    // A backlog that does not drain is what the stack's backlog alarm reports: said the same way.
    const behind = tier === 'retention' || !plan.backlog ? undefined : behindWarning(tier, plan.backlog);
    if (behind !== undefined) io.err(`warning: ${behind}`);
    // A quarantine (by recovery, or of a corrupt input) is a problem found, as for `recover`; so is a
    // partition a setting's value made skip.
    const quarantined =
      output.recovery.quarantined > 0 || partitions.some((p) => (p.quarantinedInputs ?? 0) > 0);
    const misconfigured = partitions.some((p) => p.misconfigured !== undefined);
    return quarantined || misconfigured || output.summary.failed > 0 ? 1 : 0;
  } finally {
    quiet();
    await timed('cli: engine close', () => engine.close());
  }
}

/**
 * On Ctrl-C (or a TERM) says what the run leaves and what resolves it, then dies of the signal
 * as it would have. Returns the function that stops listening.
 */
function sayOnInterrupt(io: CliIo, options: ParsedOptions): () => void {
  const signals = ['SIGINT', 'SIGTERM'] as const;
  const say = (signal: NodeJS.Signals) => {
    stop();
    io.err(
      `interrupted (${signal}): partitions in flight keep their manifests; \`${recoverCommand(options)}\` resolves them now (else the next run does)`,
    );
    process.kill(process.pid, signal);
  };
  const stop = () => {
    for (const signal of signals) process.off(signal, say);
  };
  for (const signal of signals) process.once(signal, say);
  return stop;
}

/**
 * Prints the warnings and quarantines the handlers log, as they happen, and a failed helper
 * thread (`childThreadFailed`: the local runner's message for it, loaded with the runner).
 */
function printLog(io: CliIo, childThreadFailed: string): LogSink {
  return (_level, message, details) => {
    if (message === childThreadFailed) {
      io.err(
        `warning: the run's helper thread failed (${details.reason}); the children it had started failed with it, the rest run in the main thread`,
      );
    }
    if (message === UNMATCHED_RULE) {
      io.err(unmatchedRuleWarning(String(details.rule), (details.tablesSeen as string[] | undefined) ?? []));
    }
    if (message === 'quarantined') {
      const where =
        details.type === 'input-quarantined'
          ? `input ${details.key} (partition ${details.partition})`
          : details.key;
      io.err(`QUARANTINED ${where}: ${details.reason}`);
    }
  };
}

/**
 * Prints `[done/planned] partition verdict (time)` as each chain ends, judged as Summary judges it;
 * the time is the chain's steps' own.
 */
function printProgress(io: CliIo, tier: JobKind): StepObserver {
  let planned = 0;
  let done = 0;
  const chains = new Map<string, PartitionOutcome>();
  // The chain's own time: its steps' handler times, without the Map's queueing or retry waits.
  const busyMs = new Map<string, number>();
  return (step, payload, result, elapsedMs) => {
    const r = result as StepResult & { jobs?: number };
    if (step === 'plan') planned = r.jobs ?? 0;
    const row = PARTITION_STEPS.find((p) => p.step === step);
    if (!row) return;
    // The chain's results so far, judged as Summary judges the item once it ends.
    const { partition = r.partition, jobId = r.jobId } = payload as { partition?: string; jobId?: string };
    const outcome = { ...(chains.get(jobId) ?? { partition, jobId }), [row.resultKey]: r };
    chains.set(jobId, outcome);
    const busy = (busyMs.get(jobId) ?? 0) + elapsedMs;
    busyMs.set(jobId, busy);
    if (!endsChain(row, r) && row !== PARTITION_STEPS.at(-1)) return;
    chains.delete(jobId);
    busyMs.delete(jobId);
    done++;
    const status = partitionVerdict(tier, outcome);
    io.err(`[${done}/${planned}] ${partition} ${status} (${formatDuration(busy)})`);
  };
}

interface PartitionRow {
  readonly partition: string;
  readonly result: string;
  readonly inputs: number;
  readonly inputBytes: number;
  readonly outputs: number;
  readonly outputBytes: number;
  /** The outputs' rows; absent where nothing was written (an expired day, a skip). */
  readonly rows?: number;
  readonly quarantinedInputs?: number;
  /** The setting whose value made the partition skip (compact's `misconfigured`). */
  readonly misconfigured?: string;
  readonly note: string;
}

/**
 * One row per job of each Map item, judged as Summary judges it (judgeMapItem: the pipeline's one
 * verdict; settleByReceipts for the jobs of a child that failed whole).
 */
async function partitionRows(execution: WorkflowExecution, scope: SummaryScope): Promise<PartitionRow[]> {
  const rows: PartitionRow[] = [];
  for (const results of execution.mapRunResults) {
    const judgedJobs = await settleByReceipts(
      scope,
      results.flatMap((r) => judgeMapItem(scope.tier, r)),
    );
    for (const judged of judgedJobs) {
      const item = judged.job ?? {};
      const compact = judged.compact;
      const committed = isCommitted(judged.verdict);
      rows.push({
        partition: judged.partition,
        result: judged.verdict,
        inputs: compact?.inputs ?? item.inputFiles ?? 0,
        inputBytes: compact?.inputBytes ?? item.inputBytes ?? 0,
        outputs: committed ? (compact?.outputs ?? 0) : 0,
        outputBytes: committed ? (compact?.outputBytes ?? 0) : 0,
        ...(committed && compact?.outputRows !== undefined ? { rows: compact.outputRows } : {}),
        ...(compact?.quarantinedInputs ? { quarantinedInputs: compact.quarantinedInputs } : {}),
        ...(compact?.misconfigured ? { misconfigured: compact.misconfigured } : {}),
        note:
          judged.verdict === 'failed'
            ? `${judged.error}: ${judged.cause}`
            : judged.verdict === 'superseded' && compact?.status !== 'superseded'
              ? 'rolled back or taken over by recovery meanwhile'
              : (compact?.reason ?? committedNote(committed, compact)),
      });
    }
  }
  return rows.sort((a, b) => compareKeys(a.partition, b.partition));
}

/** A row's note; a skip a setting made says which flag set it, when a flag did. */
function settingSource(row: PartitionRow, options: ParsedOptions): string {
  const flag = row.misconfigured === undefined ? undefined : flagThatSet(options, row.misconfigured);
  return flag === undefined ? row.note : `${row.note}; here ${row.misconfigured} is ${flag}`;
}

/**
 * What a committed job did beyond merging: the rows dedup dropped (the inputs' rows beyond their
 * distinct ones), the sort keys it could not sort by.
 */
function committedNote(committed: boolean, compact: StepNumbers | undefined): string {
  if (!committed || compact === undefined) return '';
  const { inputRows, distinctRows, unsortedBy } = compact;
  return [
    ...(inputRows !== undefined && distinctRows !== undefined
      ? [
          `dedup: ${formatCount(inputRows)} rows in, ${formatCount(inputRows - distinctRows)} duplicate(s) dropped`,
        ]
      : []),
    ...(unsortedBy && unsortedBy.length > 0
      ? [
          `not sorted by ${unsortedBy.join(', ')}: no input has ${unsortedBy.length > 1 ? 'them' : 'it'} (sortKeys)`,
        ]
      : []),
  ].join('; ');
}

function formatRun(
  output: NonNullable<LocalRunResult['output']>,
  execution: WorkflowExecution,
  partitions: readonly PartitionRow[],
  options: ParsedOptions,
): string {
  const { recovery: r, plan } = output;
  const lines = [
    `recovery: ${r.examined} manifest(s) examined (${r.rolledBack} rolled back, ${r.rolledForward} rolled forward, ${r.cleared} cleared, ${r.quarantined} quarantined, ${r.leftAlone} left alone), ${r.orphanStagingDeleted} orphan staging object(s) removed, ${r.uploadsAborted} incomplete upload(s) aborted${quarantinePrunedNote(r.quarantinePruned)}`,
    '',
    `${output.tier} cycle at ${plan.plannedAt}: ${plan.objectsListed} objects listed, ${plan.jobs} job(s) planned${plan.waves > 1 ? ` (a partition's several jobs one after another: ${plan.waves} waves)` : ''}, ${plan.skipped} skipped${plan.settled > 0 ? `, ${plan.settled} already one ${output.tier} file` : ''} (execution ${execution.executionName}, the synthesized state machine run locally)`,
  ];
  // The plan's skips beside the chains' verdicts, so every skipped partition says why; a skip took
  // no input and wrote nothing: its candidates are in its note, as `plan` counts them.
  const rows: { partition: string; cells: (string | number)[] }[] = [
    ...partitions.map((p) => ({
      partition: p.partition,
      cells: [
        p.partition,
        p.result,
        p.inputs,
        formatBytes(p.inputBytes),
        p.outputs,
        formatBytes(p.outputBytes),
        p.rows === undefined ? '' : formatCount(p.rows),
        [settingSource(p, options), p.quarantinedInputs ? `${p.quarantinedInputs} input(s) quarantined` : '']
          .filter(Boolean)
          .join('; '),
      ],
    })),
    ...plan.skippedPartitions.map((s) => ({
      partition: s.partition,
      cells: [
        s.partition,
        'skipped',
        '',
        '',
        '',
        '',
        '',
        `not planned: ${s.reason}${s.candidates ? ` (${candidateFiles(s.candidates)})` : ''}`,
      ],
    })),
  ].sort((a, b) => compareKeys(a.partition, b.partition));
  if (rows.length > 0) {
    lines.push(
      table(
        ['partition', 'result', 'inputs', 'in bytes', 'outputs', 'out bytes', 'rows', 'note'],
        rows.map((r) => r.cells),
      ),
    );
  }
  const unlisted = plan.skipped - plan.skippedPartitions.length;
  if (unlisted > 0) {
    lines.push(
      `… and ${unlisted} more skipped by the plan: \`compactor plan --tier ${output.tier}\` lists them all`,
    );
  }
  const s = output.summary;
  // Summary counts the Map's items; the plan's skips never reached the Map.
  const skipped = `${s.skipped + plan.skipped} skipped${plan.skipped > 0 ? ` (${plan.skipped} by the plan)` : ''}`;
  lines.push(
    output.tier === 'retention'
      ? `summary: ${s.expired} day(s) expired (${s.filesIn} files, ${formatBytes(s.bytesIn)} removed), ${skipped}, ${s.superseded} superseded, ${s.failed} failed`
      : `summary: ${s.compacted} compacted (${s.filesIn} files -> ${s.filesOut}), ${skipped}, ${s.superseded} superseded, ${s.failed} failed`,
  );
  const quarantined = partitions.reduce((n, p) => n + (p.quarantinedInputs ?? 0), 0);
  if (quarantined > 0) {
    lines.push(
      `${quarantined} input(s) quarantined, left in place and never merged: \`compactor status\` gives each reason; ${QUARANTINED_INPUT_FIX}`,
    );
  }
  return lines.join('\n');
}

/** A failed execution, its failed partitions, and what the stack's rule made Summary count. */
function formatFailedExecution(
  execution: WorkflowExecution,
  tier: JobKind,
  partitions: readonly PartitionRow[],
  s: SummaryOutput | undefined,
): string {
  const rows = partitions.filter((p) => p.result === 'failed');
  return [
    `execution ${execution.executionName} FAILED${execution.failedState ? ` in state "${execution.failedState.name}"` : ''}: ${execution.error}: ${execution.cause}`,
    ...rows.map((p) => `  ${p.partition}: ${p.note}`),
    ...(s
      ? [
          `summary: ${s.compacted + s.expired} committed, ${s.skipped} skipped, ${s.superseded} superseded, ${s.failed} failed of ${s.partitions} (tolerated: ${s.toleratedFailurePercentage}%)`,
        ]
      : []),
    ...(execution.error === MAP_FAILED_ERROR
      ? [
          `fix the cause, then run \`compactor run --tier ${tier}\` again: it recovers what the failed partitions left and compacts them (a deployed execution: \`compactor redrive\` re-runs only its failed partitions)`,
        ]
      : []),
  ].join('\n');
}
