/**
 * The `compactor` command line: demo, run, plan, recover, status, verify, visible, repair, retention.
 * Exit codes: 0 ok; 1 the command ran and found a problem (a failed partition, a quarantine,
 * a suspect partition); 2 bad usage or configuration, or the command could not run.
 */

import { randomBytes } from 'node:crypto';
import { readdir, rm } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { LocalOwners, newLocalExecutionId } from '../adapters/local-owner.ts';
import { LocalFolderStore } from '../adapters/local-store.ts';
import type { CompactorConfig, ConfigInput, TierName } from '../core/config.ts';
import type { Clock } from '../core/engine.ts';
import { ConfigError, TransientStoreError } from '../core/errors.ts';
import { readFailures } from '../core/failures.ts';
import { manifestsRoot, parseManifest, quarantineRoot } from '../core/manifest.ts';
import { compareKeys, getBytesIfExists, type ObjectStore, type ObjectSummary } from '../core/object-store.ts';
import type { JobEvent, StepResult } from '../core/protocol.ts';
import {
  athenaStatement,
  athenaTables,
  athenaViewsRoot,
  clickhouseStatement,
  duckdbStatement,
  pathOf,
  polarsStatement,
  sparkStatement,
  unionColumns,
  VIEW_FORMATS,
  type ViewFormat,
  type ViewTarget,
  writeAthenaManifests,
} from '../core/reader-views.ts';
import type { RecoveryReport } from '../core/recovery.ts';
import type { repairPartition } from '../core/repair.ts';
import type { RetentionPlan } from '../core/retention.ts';
import { type VisibleView, visibleFiles } from '../core/visible.ts';
import type { StepOutput } from '../lambda/events.ts';
import type { LocalRunResult } from '../local-runner/run.ts';
import type { LocalExecution } from '../local-runner/workflow.ts';
import type { SummaryOutput } from '../summary.ts';
import type { DoctorOptions } from './commands/doctor.ts';
import { DOCTOR_CLI_OPTIONS, DOCTOR_USAGE } from './commands/doctor-options.ts';
import {
  buildClock,
  buildConfig,
  buildEngine,
  type CliOptions,
  openStore,
  parseStackContext,
  parseTier,
  parseWhole,
  type StoreTarget,
  workDirOf,
} from './context.ts';
import type { generateDemoLake } from './demo-lake.ts';
import { formatBytes, formatCount, formatDuration, table } from './format.ts';
import { footerRows, listData } from './lake-stats.ts';
import { SFN_CLI_OPTIONS, SFN_COMMAND_NAMES, SFN_USAGE, type SfnCliOptions } from './sfn-options.ts';

export interface CliIo {
  readonly out: (line: string) => void;
  readonly err: (line: string) => void;
}

const USAGE = `compactor: crash-safe compaction of time-partitioned Parquet files

Usage: compactor <command> [options]

Commands:
  demo [--dir DIR]            generate an Arc-layout lake of small files, compact it hourly then
                              daily, and show that row counts are equal
  run --tier TIER             one cycle: the synthesized state machine (recover, plan, compact every
                              eligible partition or expire every expired day, summary) run locally;
                              TIER is hourly, daily, monthly (with --monthly) or retention
  plan --tier TIER            dry run: what a cycle would compact (or expire) and why the rest is skipped
  recover                     resolve manifests left by crashed or stopped runs
  status                      live and quarantined manifests
  verify                      row counts per partition: plain glob vs the visible view
  visible [--format F]        the files a consistent reader should read, or a statement that reads
                              exactly them: F is duckdb (--sql), clickhouse, polars, spark or athena
                              (athena writes SymlinkTextInputFormat manifests under the state root's
                              views/athena/ and prints a CREATE EXTERNAL TABLE per table)
  repair [--dry-run]          find raw files whose rows an output next to them already holds (what a
                              non-atomic compactor leaves), report the duplicated rows, and remove
                              them through the protocol (checked by content, never by name)
  retention [--dry-run]       delete whole files older than their table's retention (--retention),
                              through the protocol; --dry-run prints per day the files, bytes and
                              cutoff and changes nothing

Options:
  --store <folder | s3://bucket/prefix>   the lake (required except for demo)
  --endpoint URL              S3-compatible endpoint (path-style), with an s3:// store
  --region REGION             AWS region (default $AWS_REGION or us-east-1)
  --layout arc|hive|firehose|TEMPLATE  partition layout (default arc), e.g. '{table}/dt={YYYY}-{MM}-{DD}/hour={HH}/'
  --partition-segments a,b    the template segments your readers map to partition columns (default the
                              layout's; '' for glob readers only): no tier writes above the finest one
  --data-suffix SUFFIX        suffix of raw input names (default the layout's; '' = any name, read as
                              Parquet by its magic and footer)
  --now ISO-TIME              act as if at this time (plans against it; leases still run in real time)
  --tier TIER                 hourly, daily, monthly or retention (run, plan; a compaction tier also
                              scopes --min-files/--min-age)
  --monthly                   turn the opt-in monthly tier on (cdk.json: tiers.monthly.enabled);
                              then the daily tier hands a month's daily files to it
  --min-files N               files a folder needs before it is compacted (hourly 10, daily 2, monthly 2)
  --min-age SECONDS           how long after its period ends a folder becomes eligible (3600 / 10800 / 86400)
  --quiet SECONDS             skip folders holding a file written less than this ago (300)
  --concurrency N             partitions compacted at once (2): the state machine's Map MaxConcurrency
  --context JSON              run with these settings of the deployed stack over cdk.json's
                              "compactor" context, e.g. '{"map":{"toleratedFailurePercentage":20}}'
                              or '{"dedup":{"mydb/cpu/":{"mode":"exact"}}}' (the table settings dedup,
                              naiveTimestampsUtc and timeUnits reach the steps this way)
  --target-size SIZE          split outputs at about this size (512MiB)
  --row-group-size N          output row group size in rows (122880)
  --max-job-bytes SIZE        input bytes one job may take (2GiB)
  --max-job-files N           input files one job may take (5000)
  --sort-keys a,b             sort keys after the time column
  --time-column NAME          time column (time)
  --retention RULES           days to keep per table path, most specific wins; * for every other
                              table, e.g. 'mydb/cpu/=30,mydb/=90,*=365' (default: none, retention off)
  --retention-buffer HOURS    a file goes only once its hour/day ended this long after its days (24)
  --memory-limit SIZE         DuckDB memory limit (e.g. 1GB; spills beyond it)
  --threads N                 DuckDB threads
  --work-dir DIR              local scratch folder (default: system temp)
  --unsafe-single-writer-store
                              skip the store probe (run, recover, repair, retention refuse a store
                              that ignores conditional writes, copies or deletes); only for a store
                              nothing else writes to or compacts; warned on every run
  --json                      machine-readable output
  -h, --help                  this text

${SFN_USAGE}

After cdk deploy:
${DOCTOR_USAGE}

Exit codes: 0 ok, 1 a partition failed or a problem was found, 2 usage or runtime error.`;

const OPTIONS = {
  // region, now, tier, state-machine, execution, wait
  ...SFN_CLI_OPTIONS,
  ...DOCTOR_CLI_OPTIONS,
  store: { type: 'string' },
  endpoint: { type: 'string' },
  layout: { type: 'string' },
  'min-files': { type: 'string' },
  'min-age': { type: 'string' },
  quiet: { type: 'string' },
  concurrency: { type: 'string' },
  'target-size': { type: 'string' },
  'row-group-size': { type: 'string' },
  'max-job-bytes': { type: 'string' },
  'max-job-files': { type: 'string' },
  'sort-keys': { type: 'string' },
  'time-column': { type: 'string' },
  'partition-segments': { type: 'string' },
  'data-suffix': { type: 'string' },
  'memory-limit': { type: 'string' },
  threads: { type: 'string' },
  'work-dir': { type: 'string' },
  retention: { type: 'string' },
  'retention-buffer': { type: 'string' },
  'unsafe-single-writer-store': { type: 'boolean' },
  dir: { type: 'string' },
  context: { type: 'string' },
  sql: { type: 'boolean' },
  format: { type: 'string' },
  'dry-run': { type: 'boolean' },
  monthly: { type: 'boolean' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

type Parsed = CliOptions &
  SfnCliOptions & {
    dir?: string;
    sql?: boolean;
    format?: string;
    json?: boolean;
    help?: boolean;
    context?: string;
    'dry-run'?: boolean;
  };

/** Runs one command; returns the exit code. Never calls process.exit (tests call it in-process). */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  let command: string | undefined;
  let options: Parsed;
  try {
    const parsed = parseArgs({ args: [...argv], options: OPTIONS, allowPositionals: true, strict: true });
    options = parsed.values as Parsed;
    command = parsed.positionals[0];
    if (parsed.positionals.length > 1) throw new Error(`unexpected argument "${parsed.positionals[1]}"`);
  } catch (error) {
    io.err(`compactor: ${(error as Error).message}. See compactor --help.`);
    return 2;
  }
  if (options.help || command === undefined || command === 'help') {
    io.out(USAGE);
    return command === undefined && !options.help ? 2 : 0;
  }
  const handler = COMMANDS[command];
  if (!handler) {
    io.err(`compactor: unknown command "${command}". Commands: ${Object.keys(COMMANDS).join(', ')}.`);
    return 2;
  }
  try {
    return await handler(options, io);
  } catch (error) {
    // The one place every failure becomes a one-line reason and an exit code.
    const e = error instanceof Error ? error : new Error(String(error));
    io.err(`compactor ${command}: ${e.name}: ${e.message}`);
    return 2;
  }
}

type Handler = (options: Parsed, io: CliIo) => Promise<number>;

const COMMANDS: Record<string, Handler> = {
  demo: demoCommand,
  run: runCommand,
  plan: planCommand,
  recover: recoverCommand,
  status: statusCommand,
  verify: verifyCommand,
  visible: visibleCommand,
  repair: repairCommand,
  retention: retentionCommand,
  ...Object.fromEntries(
    SFN_COMMAND_NAMES.map((name): [string, Handler] => [
      name,
      async (options, io) => (await import('./sfn-commands.ts')).SFN_COMMANDS[name](options, io),
    ]),
  ),
  doctor: async (options, io) =>
    (await import('./commands/doctor.ts')).doctorCommand(options as DoctorOptions, io),
};

/**
 * The store probe (store-guard.ts) of the commands that write. It and the other modules only some
 * commands need (the synthesized stack and its interpreter, the planner and protocol, DuckDB, the
 * AWS SDKs) are loaded by those commands: `--help`, `status` and `visible` start without them.
 */
async function assertCliStore(...args: Parameters<typeof import('./store-guard.ts').assertCliStore>) {
  await (await import('./store-guard.ts')).assertCliStore(...args);
}

interface Context {
  readonly target: StoreTarget;
  readonly config: CompactorConfig;
  readonly clock: Clock;
}

async function context(options: Parsed, overrides: ConfigInput = {}): Promise<Context> {
  const target = await openStore(options);
  return {
    target,
    config: buildConfig(options, target.dataPrefix, overrides),
    clock: buildClock(options.now),
  };
}

function emit(io: CliIo, options: Parsed, value: unknown, text: () => string): void {
  io.out(options.json ? JSON.stringify(value, null, 2) : text());
}

// ---- run ----

async function runCommand(options: Parsed, io: CliIo): Promise<number> {
  const tier = parseTier(options.tier);
  const stackContext = parseStackContext(options.context);
  const { runWorkflowLocally, stackStepSettings, synthesizeWorkflow } = await import(
    '../local-runner/run.ts'
  );
  // The stack's table settings (dedup, naiveTimestampsUtc, timeUnits) and monthly tier (cdk.json's
  // `compactor` context, then --context) reach the steps, as COMPACTOR_CONFIG carries them to the
  // Lambdas; the other protocol settings come from the options.
  const ctx = await context(options, await stackStepSettings(stackContext));
  // A tier that is off or that the layout refuses fails here, before Recover writes anything.
  if (tier !== 'retention') (await import('../core/planner.ts')).assertTierRuns(ctx.config, tier);
  await assertCliStore(ctx, io.err);
  const concurrency =
    options.concurrency === undefined ? 2 : Math.max(1, parseWhole('concurrency', options.concurrency));
  // The definition `cdk deploy` would deploy (cdk.json's `compactor` context, then --context),
  // with this run's Map concurrency.
  const workflow = await synthesizeWorkflow(
    {
      ...stackContext,
      // The Map's ItemReader and ResultWriter work under the store's data root, as a stack deployed
      // with this dataPrefix would (an s3://bucket/prefix store).
      dataPrefix: ctx.target.dataPrefix,
      map: { ...(stackContext.map as Record<string, unknown> | undefined), maxConcurrency: concurrency },
    },
    // Cached in the work dir, keyed by everything the synthesis reads (definition-cache.ts).
    { cacheDir: join(workDirOf(options), 'definitions') },
  );
  const { engine, workDir } = await buildEngine(options);
  const started = Date.now();
  let planned = 0;
  let done = 0;
  try {
    const { execution, output } = await runWorkflowLocally(
      workflow,
      { store: ctx.target.store, config: ctx.config, clock: ctx.clock, engine: async () => engine, workDir },
      {
        tier,
        ...(options.now ? { now: new Date(ctx.clock.now()).toISOString() } : {}),
        onError: options.json
          ? undefined
          : (message, details) => {
              if (message === 'quarantined') {
                const where =
                  details.type === 'input-quarantined'
                    ? `input ${details.key} (partition ${details.partition})`
                    : details.key;
                io.err(`QUARANTINED ${where}: ${details.reason}`);
              }
            },
        onStep: options.json
          ? undefined
          : (step, payload, result) => {
              const r = result as StepOutput & { jobs?: number };
              if (step === 'plan') planned = r.jobs ?? 0;
              const finished =
                step === 'clear-manifest' ||
                (step === 'compact' && (r.status === 'skipped' || r.status === 'superseded'));
              if (!finished) return;
              done++;
              const status = step === 'compact' ? r.status : tier === 'retention' ? 'expired' : 'compacted';
              const partition = (payload as { partition?: string }).partition ?? r.partition;
              io.err(`[${done}/${planned}] ${partition} ${status} (${formatDuration(Date.now() - started)})`);
            },
      },
    );
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
          ...(failedSummary(execution) ? { summary: failedSummary(execution) } : {}),
          states: execution.statesEntered,
          partitions: partitionRows(execution, tier),
        },
        () => formatFailedExecution(execution, tier),
      );
      return 1;
    }
    emit(io, options, { ...output, partitions: partitionRows(execution, tier) }, () =>
      formatRun(output, execution),
    );
    // A quarantine (by recovery, or of a corrupt input) is a problem found, as for `recover`.
    const quarantined =
      output.recovery.quarantined > 0 ||
      partitionRows(execution, tier).some((p) => (p.quarantinedInputs ?? 0) > 0);
    return quarantined || output.summary.failed > 0 ? 1 : 0;
  } finally {
    await engine.close();
  }
}

function logEvent(io: CliIo, event: JobEvent): void {
  if (event.type === 'quarantined') io.err(`QUARANTINED ${event.key}: ${event.reason}`);
  if (event.type === 'input-quarantined') {
    io.err(`QUARANTINED input ${event.key} (partition ${event.partition}): ${event.reason}`);
  }
  if (event.type === 'failure-not-recorded') io.err(`warning: ${event.reason}`);
}

interface PartitionRow {
  readonly partition: string;
  readonly result: string;
  readonly inputs: number;
  readonly inputBytes: number;
  readonly outputs: number;
  readonly outputBytes: number;
  readonly rows: number;
  readonly quarantinedInputs?: number;
  readonly note: string;
}

/** One row per Map item, from the items' results (as the ResultWriter files hold them). */
function partitionRows(execution: LocalExecution, tier: string): PartitionRow[] {
  // A retention job's committed result is the expiry of its files, not a merge.
  const done = tier === 'retention' ? 'expired' : 'compacted';
  const rows: PartitionRow[] = [];
  for (const results of execution.mapResults.values()) {
    for (const r of results) {
      const item = r.Item as { partition?: string; inputFiles?: number; inputBytes?: number };
      const out = (r.Output ?? {}) as { status?: string; compact?: StepOutput; clear?: StepOutput };
      const compact = out.compact;
      const compacted = out.clear?.state === 'cleared';
      rows.push({
        partition: item.partition ?? '?',
        result: r.Status === 'FAILED' ? 'failed' : compacted ? done : (compact?.status ?? 'skipped'),
        inputs: compact?.inputs ?? item.inputFiles ?? 0,
        inputBytes: compact?.inputBytes ?? item.inputBytes ?? 0,
        outputs: compacted ? (compact?.outputs ?? 0) : 0,
        outputBytes: compacted ? (compact?.outputBytes ?? 0) : 0,
        rows: compacted ? (compact?.outputRows ?? 0) : 0,
        ...(compact?.quarantinedInputs ? { quarantinedInputs: compact.quarantinedInputs } : {}),
        note: r.Status === 'FAILED' ? `${r.Error}: ${r.Cause}` : (compact?.reason ?? ''),
      });
    }
  }
  return rows.sort((a, b) => compareKeys(a.partition, b.partition));
}

function formatRun(output: NonNullable<LocalRunResult['output']>, execution: LocalExecution): string {
  const r = output.recovery;
  const lines = [
    `recovery: ${r.examined} manifest(s) examined (${r.rolledBack} rolled back, ${r.rolledForward} rolled forward, ${r.cleared} cleared, ${r.quarantined} quarantined, ${r.leftAlone} left alone), ${r.orphanStagingDeleted} orphan staging object(s) removed, ${r.uploadsAborted} incomplete upload(s) aborted`,
    '',
    `${output.tier} cycle at ${output.plan.plannedAt}: ${output.plan.objectsListed} objects listed, ${output.plan.jobs} partition(s) planned, ${output.plan.skipped} skipped (execution ${execution.executionName}, the synthesized state machine run locally)`,
  ];
  const rows = partitionRows(execution, output.tier);
  if (rows.length > 0) {
    lines.push(
      table(
        ['partition', 'result', 'inputs', 'in bytes', 'outputs', 'out bytes', 'rows', 'note'],
        rows.map((p) => [
          p.partition,
          p.result,
          p.inputs,
          formatBytes(p.inputBytes),
          p.outputs,
          formatBytes(p.outputBytes),
          formatCount(p.rows),
          p.note,
        ]),
      ),
    );
  }
  const s = output.summary;
  lines.push(
    output.tier === 'retention'
      ? `summary: ${s.compacted} day(s) expired (${s.filesIn} files, ${formatBytes(s.bytesIn)} removed), ${s.skipped} skipped, ${s.failed} failed`
      : `summary: ${s.compacted} compacted (${s.filesIn} files -> ${s.filesOut}), ${s.skipped} skipped, ${s.failed} failed`,
  );
  return lines.join('\n');
}

/** The Summary step's output when the execution failed after it (too many failed partitions). */
function failedSummary(execution: LocalExecution): SummaryOutput | undefined {
  const input = execution.failedState?.input as { summary?: { Payload?: SummaryOutput } } | undefined;
  return input?.summary?.Payload;
}

function formatFailedExecution(execution: LocalExecution, tier: string): string {
  const rows = partitionRows(execution, tier).filter((p) => p.result === 'failed');
  const s = failedSummary(execution);
  return [
    `execution ${execution.executionName} FAILED${execution.failedState ? ` in state "${execution.failedState.name}"` : ''}: ${execution.error}: ${execution.cause}`,
    ...rows.map((p) => `  ${p.partition}: ${p.note}`),
    ...(s
      ? [
          `summary: ${s.compacted} compacted, ${s.skipped} skipped, ${s.failed} failed of ${s.partitions} (tolerated: ${s.toleratedFailurePercentage}%)`,
        ]
      : []),
  ].join('\n');
}

// ---- plan ----

async function planCommand(options: Parsed, io: CliIo): Promise<number> {
  const tier = parseTier(options.tier);
  const ctx = await context(options);
  const { planJobs } = await import('../core/cycle.ts');
  const plan = await planJobs(ctx.target.store, ctx.config, ctx.clock, tier);
  emit(io, options, plan, () => {
    const rows = [
      ...plan.jobs.map((j) => [
        j.partition,
        tier === 'retention' ? 'expire' : 'compact',
        j.inputs.length,
        j.candidates,
        formatBytes(j.inputBytes),
        j.reason,
      ]),
      ...plan.skipped.map((s) => [s.partition, 'skip', 0, 0, '', s.reason]),
    ];
    return [
      `${tier} plan at ${plan.now} (dry run): ${plan.objectsListed} objects listed`,
      rows.length > 0
        ? table(['partition', 'action', 'inputs', 'candidates', 'bytes', 'why'], rows)
        : tier === 'retention' && ctx.config.retention.rules.length === 0
          ? 'nothing to do: no retention rule (--retention)'
          : 'nothing to do',
    ].join('\n');
  });
  return 0;
}

// ---- recover ----

async function recoverCommand(options: Parsed, io: CliIo): Promise<number> {
  const ctx = await context(options);
  await assertCliStore(ctx, io.err);
  return asLocalExecution(ctx, async (deps) => {
    const { recover } = await import('../core/recovery.ts');
    const report = await recover({ ...deps, onEvent: (event) => logEvent(io, event) });
    emit(io, options, report, () => formatRecovery(report));
    return report.entries.some((e) => e.action === 'quarantined') ? 1 : 0;
  });
}

/**
 * Runs a command's protocol work as one local execution: registered as live while it runs (so the
 * recovery of a concurrent run leaves its manifests alone), with the step deps every command shares.
 */
async function asLocalExecution<T>(
  ctx: Context,
  work: (deps: {
    readonly store: ObjectStore;
    readonly config: CompactorConfig;
    readonly clock: Clock;
    readonly executionId: string;
    readonly isOwnerAlive: LocalOwners['isAlive'];
    readonly randomHex: () => string;
  }) => Promise<T>,
): Promise<T> {
  const owners = new LocalOwners();
  const executionId = newLocalExecutionId();
  const end = owners.begin(executionId);
  try {
    return await work({
      store: ctx.target.store,
      config: ctx.config,
      clock: ctx.clock,
      executionId,
      isOwnerAlive: owners.isAlive,
      randomHex: () => randomBytes(8).toString('hex'),
    });
  } finally {
    end();
  }
}

function formatRecovery(report: RecoveryReport): string {
  const head = `recovery: ${report.entries.length} manifest(s) examined, ${report.orphanStagingDeleted} orphan staging object(s) removed, ${report.uploadsAborted} incomplete upload(s) aborted`;
  if (report.entries.length === 0) return head;
  return `${head}\n${table(
    ['manifest', 'state', 'action', 'why'],
    report.entries.map((e) => [e.manifestKey, e.state ?? '?', e.action, e.reason]),
  )}`;
}

// ---- status ----

async function statusCommand(options: Parsed, io: CliIo): Promise<number> {
  const ctx = await context(options);
  const { store } = ctx.target;
  const now = ctx.clock.now().getTime();
  const live: {
    key: string;
    tier: string;
    state: string;
    job: string;
    owner: string;
    age: string;
    lease: string;
  }[] = [];
  for await (const object of store.list(manifestsRoot(ctx.config.layout))) {
    // A job cleared since the listing is no longer live: not an error.
    const got = await getBytesIfExists(store, object.key);
    if (!got) continue;
    const { body } = got;
    try {
      const m = parseManifest(ctx.config, store.location, object.key, body);
      const leaseLeft = Date.parse(m.leaseExpiresAt) - now;
      live.push({
        key: m.partition,
        tier: m.tier,
        state: m.state,
        job: m.jobId,
        owner: m.executionId,
        age: formatDuration(now - Date.parse(m.createdAt)),
        lease: leaseLeft > 0 ? `${formatDuration(leaseLeft)} left` : 'expired',
      });
    } catch (error) {
      if (!(error instanceof Error && error.name === 'InvalidManifestError')) throw error;
      live.push({
        key: object.key,
        tier: '?',
        state: 'INVALID',
        job: '?',
        owner: '?',
        age: '',
        lease: error.message,
      });
    }
  }
  const quarantined: { key: string; holds: string; reason: string; at: string }[] = [];
  for await (const object of store.list(quarantineRoot(ctx.config.layout))) {
    // Resolved by an operator since the listing: nothing to show.
    const body = (await getBytesIfExists(store, object.key))?.body;
    if (body === undefined) continue;
    let reason = 'unreadable quarantine record';
    let at = '';
    let holds = '';
    try {
      const record = JSON.parse(body.toString('utf8')) as {
        reason?: string;
        quarantinedAt?: string;
        key?: string;
        manifestKey?: string;
      };
      reason = record.reason ?? reason;
      at = record.quarantinedAt ?? '';
      // The input or manifest it holds (a hash-named record's own key does not say).
      holds = record.key ?? record.manifestKey ?? '';
    } catch {
      // Shown as unreadable; the record stays for the operator.
    }
    quarantined.push({ key: object.key, holds, reason, at });
  }
  const failing = [...(await readFailures(store, ctx.config)).values()].map((f) => ({
    partition: f.partition,
    tier: f.tier,
    failures: f.consecutiveFailures,
    nextAttemptAt: f.nextAttemptAt,
    lastError: f.lastError.split('\n')[0] ?? '',
  }));
  emit(io, options, { live, quarantined, failing }, () =>
    [
      `live manifests: ${live.length}`,
      ...(live.length > 0
        ? [
            table(
              ['partition', 'tier', 'state', 'job', 'owner', 'age', 'lease'],
              live.map((l) => Object.values(l)),
            ),
          ]
        : []),
      `quarantined: ${quarantined.length}`,
      ...(quarantined.length > 0
        ? [
            table(
              ['record', 'holds', 'since', 'reason'],
              quarantined.map((q) => [q.key, q.holds, q.at, q.reason]),
            ),
          ]
        : []),
      `failing partitions: ${failing.length}${failing.length > 0 ? ` (skipped with backoff after ${ctx.config.failureBackoff.after} failures in a row)` : ''}`,
      ...(failing.length > 0
        ? [
            table(
              ['partition', 'tier', 'failures', 'next attempt', 'last error'],
              failing.map((f) => [f.partition, f.tier, f.failures, f.nextAttemptAt, f.lastError]),
            ),
          ]
        : []),
    ].join('\n'),
  );
  return quarantined.length > 0 ? 1 : 0;
}

// ---- verify ----

interface PartitionRows {
  partition: string;
  files: number;
  rows: number;
  visibleFiles: number;
  visibleRows: number;
  unreadable: number;
  note: string;
}

async function verifyCommand(options: Parsed, io: CliIo): Promise<number> {
  const ctx = await context(options);
  const { layout } = ctx.config;
  const { engine } = await buildEngine(options);
  try {
    const { view, all, rows } = await stableSnapshot(ctx, engine);
    const visible = new Set(view.files.map((f) => `${f.key}\0${f.etag}`));
    const byPartition = new Map<string, PartitionRows>();
    const modified = new Map(all.map((o) => [o.key, o.lastModified.getTime()]));
    for (const [i, file] of rows.entries()) {
      const parsed = layout.parse(file.key);
      // Monthly outputs count under their month folder.
      const partition = parsed?.dayFolder ?? parsed?.monthFolder ?? '(outside the layout)';
      const entry = byPartition.get(partition) ?? {
        partition,
        files: 0,
        rows: 0,
        visibleFiles: 0,
        visibleRows: 0,
        unreadable: 0,
        note: '',
      };
      entry.files++;
      entry.rows += file.rows ?? 0;
      if (file.rows === undefined) entry.unreadable++;
      const object = all[i];
      if (object && visible.has(`${object.key}\0${object.etag}`)) {
        entry.visibleFiles++;
        entry.visibleRows += file.rows ?? 0;
      }
      byPartition.set(partition, entry);
    }
    // An output next to inputs older than itself, with no job holding them, is what a
    // non-atomic compactor leaves behind (the seed bug): flag it.
    const suspects = new Set<string>();
    const hours = new Map<string, { outputs: number[]; inputs: number[]; day: string }>();
    for (const object of all) {
      const parsed = layout.parse(object.key);
      if (!parsed?.hourFolder || !visible.has(`${object.key}\0${object.etag}`)) continue;
      const h = hours.get(parsed.hourFolder) ?? {
        outputs: [],
        inputs: [],
        day: parsed.dayFolder ?? parsed.hourFolder,
      };
      (parsed.level === 0 ? h.inputs : h.outputs).push(modified.get(object.key) ?? 0);
      hours.set(parsed.hourFolder, h);
    }
    for (const h of hours.values()) {
      if (h.outputs.length > 0 && h.inputs.some((t) => t < Math.max(...h.outputs))) suspects.add(h.day);
    }
    const result = [...byPartition.values()].map((p) => ({
      ...p,
      note: [
        p.rows !== p.visibleRows
          ? `plain glob sees ${p.rows - p.visibleRows} rows more (a job is in flight)`
          : '',
        p.unreadable > 0 ? `${p.unreadable} unreadable file(s)` : '',
        suspects.has(p.partition) ? 'SUSPECT: an output coexists with older raw files' : '',
      ]
        .filter(Boolean)
        .join('; '),
    }));
    const problems = result.filter((p) => p.note.includes('SUSPECT') || p.unreadable > 0).length;
    emit(io, options, { partitions: result, problems, visibleView: view }, () =>
      [
        table(
          ['partition', 'files', 'rows', 'visible files', 'visible rows', 'note'],
          result.map((p) => [
            p.partition,
            p.files,
            formatCount(p.rows),
            p.visibleFiles,
            formatCount(p.visibleRows),
            p.note,
          ]),
        ),
        `total: ${formatCount(result.reduce((s, p) => s + p.visibleRows, 0))} visible rows in ${view.files.length} files; ${view.liveManifests} live and ${view.quarantinedManifests} quarantined manifest(s); ${problems} partition(s) need attention`,
      ].join('\n'),
    );
    return problems > 0 ? 1 : 0;
  } finally {
    await engine.close();
  }
}

/**
 * The visible view, the plain listing and their footers, taken again until nothing changed while
 * they were read: a cycle running meanwhile deletes files between the listing and the reading,
 * which would otherwise show as unreadable files and wrong row counts.
 */
async function stableSnapshot(ctx: Context, engine: Awaited<ReturnType<typeof buildEngine>>['engine']) {
  const { store, localRoot } = ctx.target;
  const { layout } = ctx.config;
  const list = () => listData(store, (k) => layout.isDataKey(k), layout.dataPrefix);
  const same = (a: readonly ObjectSummary[], b: readonly ObjectSummary[]) =>
    a.length === b.length && a.every((o, i) => o.key === b[i]?.key && o.etag === b[i]?.etag);
  // The view's own retries can run out while a cycle moves many jobs: that is a change too.
  const viewOrChanged = (): Promise<VisibleView | undefined> =>
    visibleFiles(store, ctx.config).catch((error: unknown) => {
      if (error instanceof TransientStoreError) return undefined;
      throw error;
    });
  for (let attempt = 1; ; attempt++) {
    const view = await viewOrChanged();
    const all = await list();
    const rows = await footerRows(store, localRoot, engine, all);
    const viewAfter = await viewOrChanged();
    if (view && viewAfter && same(view.files, viewAfter.files) && same(all, await list()))
      return { view, all, rows };
    if (attempt >= VERIFY_ATTEMPTS) {
      throw new TransientStoreError(
        `the lake changed while it was read, ${VERIFY_ATTEMPTS} times (a cycle is running?); try again`,
      );
    }
    await sleep(250 * attempt);
  }
}

const VERIFY_ATTEMPTS = 8;

// ---- visible ----

async function visibleCommand(options: Parsed, io: CliIo): Promise<number> {
  const format = parseViewFormat(options);
  const ctx = await context(options);
  const view = await visibleFiles(ctx.target.store, ctx.config);
  const viewTarget = viewTargetOf(ctx, options);
  const keys = view.files.map((f) => f.key);
  if (format === undefined) {
    emit(io, options, view, () => keys.map((k) => pathOf(viewTarget, k)).join('\n'));
    return 0;
  }
  if (format === 'athena') return athenaView(ctx, options, io, view, viewTarget);
  const paths = keys.map((k) => pathOf(viewTarget, k));
  const statement =
    format === 'duckdb'
      ? duckdbStatement(paths)
      : format === 'clickhouse'
        ? clickhouseStatement(viewTarget, keys)
        : format === 'polars'
          ? polarsStatement(paths)
          : sparkStatement(viewTarget, keys);
  emit(io, options, { format, statement, paths, files: view.files.length }, () => statement);
  return 0;
}

function parseViewFormat(options: Parsed): ViewFormat | undefined {
  const format = options.format;
  if (format !== undefined && !VIEW_FORMATS.includes(format as ViewFormat)) {
    throw new ConfigError(`--format ${format}: use ${VIEW_FORMATS.join(', ')}`);
  }
  if (options.sql && format !== undefined && format !== 'duckdb') {
    throw new ConfigError(`--sql is --format duckdb; it cannot be combined with --format ${format}`);
  }
  return options.sql ? 'duckdb' : (format as ViewFormat | undefined);
}

function viewTargetOf(ctx: Context, options: Parsed): ViewTarget {
  const { dataPrefix, stateRoot } = ctx.config.layout;
  if (ctx.target.localRoot) return { kind: 'local', root: ctx.target.localRoot, dataPrefix, stateRoot };
  return {
    kind: 's3',
    bucket: ctx.target.store.location.replace(/^s3:\/\//, ''),
    region: options.region ?? process.env.AWS_REGION ?? 'us-east-1',
    ...(options.endpoint ? { endpoint: options.endpoint } : {}),
    dataPrefix,
    stateRoot,
  };
}

/**
 * Athena, Trino, Redshift Spectrum: writes one SymlinkTextInputFormat manifest per table under
 * <stateRoot>views/athena/ (the only format that writes; it says so on stderr) and prints a
 * CREATE EXTERNAL TABLE per table, its columns read from the files' footers.
 */
async function athenaView(
  ctx: Context,
  options: Parsed,
  io: CliIo,
  view: VisibleView,
  target: ViewTarget,
): Promise<number> {
  const files = view.files.map((f) => ({
    key: f.key,
    table: ctx.config.layout.parse(f.key)?.table ?? f.key.slice(0, f.key.lastIndexOf('/') + 1),
  }));
  const tables = athenaTables(target, files);
  if (tables.length === 0)
    throw new ConfigError('--format athena: no visible files, so no columns to declare');
  const byKey = new Map(view.files.map((f) => [f.key, f]));
  const { engine } = await buildEngine(options);
  const statements: string[] = [];
  try {
    for (const t of tables) {
      const objects = t.files.map((k) => byKey.get(k) as ObjectSummary);
      const read = await footerRows(ctx.target.store, ctx.target.localRoot, engine, objects);
      const bad = read.find((r) => r.columns === undefined);
      if (bad) {
        throw new TransientStoreError(`--format athena: ${bad.key}: ${bad.error ?? 'unreadable'}; try again`);
      }
      statements.push(athenaStatement(t, unionColumns(read.map((r) => r.columns ?? []))));
    }
  } finally {
    await engine.close();
  }
  const written = await writeAthenaManifests(ctx.target.store, ctx.config.layout.stateRoot, tables);
  io.err(
    `compactor visible --format athena wrote ${written.written.length} manifest(s) under ${athenaViewsRoot(ctx.config.layout.stateRoot)}` +
      `${written.removed.length ? ` and removed ${written.removed.length} stale one(s)` : ''}; ` +
      'they list the files visible now: write them again after each compaction run',
  );
  emit(
    io,
    options,
    {
      format: 'athena',
      statement: statements.join('\n\n'),
      tables: tables.map((t) => ({
        table: t.table,
        name: t.name,
        manifest: t.manifestKey,
        location: t.location,
        files: t.files.length,
      })),
      manifestsWritten: written.written,
      manifestsRemoved: written.removed,
    },
    () => statements.join('\n\n'),
  );
  return 0;
}

// ---- repair ----

async function repairCommand(options: Parsed, io: CliIo): Promise<number> {
  const ctx = await context(options);
  if (!options['dry-run']) await assertCliStore(ctx, io.err);
  const { engine, workDir } = await buildEngine(options);
  try {
    return await asLocalExecution(ctx, (base) =>
      repairWith(options, io, {
        ...base,
        engine,
        workDir: join(workDir, base.executionId.replaceAll(':', '-')),
      }),
    );
  } finally {
    await engine.close();
  }
}

async function repairWith(
  options: Parsed,
  io: CliIo,
  deps: Parameters<typeof repairPartition>[0],
): Promise<number> {
  const { findRepairs, repairPartition } = await import('../core/repair.ts');
  const candidates = await findRepairs(deps);
  const results: { partition: string; result: StepResult }[] = [];
  for (const candidate of options['dry-run'] ? [] : candidates.filter((c) => c.inputs.length > 0)) {
    results.push({ partition: candidate.partition, result: await repairPartition(deps, candidate) });
  }
  await rm(deps.workDir, { recursive: true, force: true });
  const duplicated = candidates.reduce((sum, c) => sum + c.duplicatedRows, 0);
  emit(io, options, { dryRun: Boolean(options['dry-run']), candidates, results }, () =>
    [
      candidates.length === 0
        ? 'no output coexists with raw files whose rows it holds'
        : table(
            ['partition', 'tier', 'duplicate files', 'duplicated rows', 'kept', 'why kept'],
            candidates.map((c) => [
              c.partition,
              c.tier,
              c.inputs.length,
              formatCount(c.duplicatedRows),
              c.kept.length,
              c.kept[0] ? `${c.kept[0].key}: ${c.kept[0].reason}` : '',
            ]),
          ),
      options['dry-run']
        ? `dry run: ${formatCount(duplicated)} duplicated rows in ${candidates.filter((c) => c.inputs.length > 0).length} partition(s); nothing changed`
        : `repaired ${results.filter((r) => r.result.status === 'done').length} partition(s), ${formatCount(duplicated)} duplicated rows removed; ${results.filter((r) => r.result.status !== 'done').length} skipped`,
    ].join('\n'),
  );
  const refused = candidates.some((c) => c.kept.length > 0);
  return refused || results.some((r) => r.result.status !== 'done') ? 1 : 0;
}

// ---- retention ----

interface RetentionRow {
  readonly partition: string;
  readonly rule: string;
  readonly cutoff: string;
  readonly files: readonly string[];
  readonly bytes: number;
  /** Applied runs only: what the job did. */
  readonly result?: string;
  readonly removed?: number;
  readonly kept?: number;
  readonly note?: string;
}

async function retentionCommand(options: Parsed, io: CliIo): Promise<number> {
  const ctx = await context(options);
  const { rules, bufferHours } = ctx.config.retention;
  if (rules.length === 0) {
    throw new ConfigError(
      'no retention rule: pass --retention TABLE=DAYS[,...], e.g. --retention "mydb/cpu/=30,mydb/=90,*=365"',
    );
  }
  const dryRun = Boolean(options['dry-run']);
  if (!dryRun) await assertCliStore(ctx, io.err);
  return asLocalExecution(ctx, async (base) => {
    const deps = { ...base, onEvent: (event: JobEvent) => logEvent(io, event) };
    // An applied run first resolves what an earlier one left, as every cycle does.
    const [{ recover }, { planRetention }, { assignJobs, runJob }] = await Promise.all([
      import('../core/recovery.ts'),
      import('../core/retention.ts'),
      import('../core/cycle.ts'),
    ]);
    const recovery = dryRun ? undefined : await recover(deps);
    const plan: RetentionPlan = await planRetention(ctx.target.store, ctx.config, ctx.clock);
    const rows: RetentionRow[] = [];
    let failed = 0;
    const specs = assignJobs(plan, deps);
    for (const [i, job] of plan.jobs.entries()) {
      const row: RetentionRow = {
        partition: job.partition,
        rule: job.rule,
        cutoff: job.cutoff,
        files: job.inputs.map((input) => input.key),
        bytes: job.inputBytes,
      };
      const spec = specs[i];
      if (dryRun || !spec) {
        rows.push(row);
        continue;
      }
      const outcome = await runJob(deps, spec);
      const committed = outcome.steps[0];
      const deleted = outcome.steps.find((r) => r.state === 'inputs-deleted' || r.state === 'cleared');
      // Inputs set aside at the commit are not in the committed inputs; those kept at the delete are.
      const keptAtDelete = Math.max(0, (deleted?.keptInputs ?? 0) - (committed?.keptInputs ?? 0));
      if (outcome.status === 'failed') failed++;
      rows.push({
        ...row,
        result: outcome.status === 'compacted' ? 'expired' : outcome.status,
        removed: outcome.status === 'compacted' ? (committed?.inputs ?? 0) - keptAtDelete : 0,
        kept: deleted?.keptInputs ?? committed?.keptInputs ?? 0,
        note:
          outcome.status === 'failed'
            ? `${outcome.error.name}: ${outcome.error.message}`
            : (committed?.reason ?? ''),
      });
    }
    const files = rows.reduce((sum, r) => sum + (dryRun ? r.files.length : (r.removed ?? 0)), 0);
    const bytes = rows.reduce((sum, r) => sum + (dryRun || r.result === 'expired' ? r.bytes : 0), 0);
    const report = {
      dryRun,
      now: plan.now,
      rules,
      bufferHours,
      objectsListed: plan.objectsListed,
      partitions: rows,
      skipped: plan.skipped,
      unmatchedRules: plan.unmatchedRules,
      ...(recovery ? { recovery } : {}),
    };
    emit(io, options, report, () =>
      [
        `retention at ${plan.now}${dryRun ? ' (dry run)' : ''}: rules ${rules.map((r) => `${r.table}=${r.days}d`).join(', ')}, buffer ${bufferHours} h; ${plan.objectsListed} objects listed`,
        rows.length === 0
          ? 'no expired file'
          : table(
              dryRun
                ? ['partition', 'rule', 'cutoff', 'files', 'bytes']
                : ['partition', 'rule', 'cutoff', 'files', 'bytes', 'result', 'removed', 'kept', 'note'],
              rows.map((r) => [
                r.partition,
                r.rule,
                r.cutoff,
                r.files.length,
                formatBytes(r.bytes),
                ...(dryRun ? [] : [r.result ?? '', r.removed ?? 0, r.kept ?? 0, r.note ?? '']),
              ]),
            ),
        ...plan.skipped.map((s) => `skipped ${s.partition}: ${s.reason}`),
        ...plan.unmatchedRules.map(
          (rule) =>
            `warning: retention rule "${rule}" matches no data file, so it expires nothing; a rule names a table path under the data prefix${plan.tablesSeen.length > 0 ? ` (tables here include ${plan.tablesSeen.join(', ')})` : ' (no table found)'}`,
        ),
        dryRun
          ? `dry run: ${files} file(s), ${formatBytes(bytes)} in ${rows.length} day(s) would be removed; nothing changed`
          : `removed ${files} file(s), ${formatBytes(bytes)} in ${rows.filter((r) => r.result === 'expired').length} day(s); ${failed} failed`,
      ].join('\n'),
    );
    return failed > 0 ? 1 : 0;
  });
}

// ---- demo ----

/** What a demo lake's folder holds: the demo may replace a folder holding only these. */
const DEMO_ENTRIES = new Set(['telemetry', '_compaction', '.compactor-store']);

async function demoCommand(options: Parsed, io: CliIo): Promise<number> {
  const dir = resolve(options.dir ?? '.demo/lake');
  // The folder is wiped first: only ever an earlier demo lake, never someone's data.
  const existing = await readdir(dir).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return [];
    throw error;
  });
  const foreign = existing.filter((name) => !DEMO_ENTRIES.has(name));
  if (foreign.length > 0) {
    throw new ConfigError(
      `--dir ${dir} holds ${foreign.slice(0, 3).join(', ')}${foreign.length > 3 ? ', ...' : ''}: the demo replaces only an earlier demo lake; use a new or empty folder`,
    );
  }
  await rm(dir, { recursive: true, force: true });
  const store: ObjectStore = new LocalFolderStore(dir);
  const { engine } = await buildEngine(options);
  const today = new Date();
  today.setUTCHours(0, 0, 0, 0);
  const firstDay = new Date(today.getTime() - 3 * 86_400_000);
  io.out(`Generating an Arc-layout lake in ${dir}`);
  io.out(
    `  db "telemetry", measurements cpu, mem, disk; 2 days from ${firstDay.toISOString().slice(0, 10)}; 3 to 14 files an hour`,
  );
  const started = Date.now();
  let lake: Awaited<ReturnType<typeof generateDemoLake>>;
  try {
    lake = await (await import('./demo-lake.ts')).generateDemoLake(
      engine,
      store,
      {
        database: 'telemetry',
        measurements: ['cpu', 'mem', 'disk'],
        firstDay,
        days: 2,
        filesPerHour: (h) => 3 + ((h * 5) % 12),
        rowsPerFile: 250,
        dataPrefix: '',
      },
      (written, total) => {
        if (written % 250 === 0 || written === total) io.err(`  wrote ${written}/${total} files`);
      },
    );
  } finally {
    await engine.close();
  }
  io.out(
    `  ${formatCount(lake.files)} files, ${formatBytes(lake.bytes)}, ${formatCount(lake.rows)} rows in ${formatDuration(Date.now() - started)}`,
  );

  // The files were just written; act as if the writers went quiet a little while ago.
  const base: Parsed = { ...options, store: dir, quiet: options.quiet ?? '0' };
  const before = await lakeSummary(base);
  // The default tiers (the monthly one is opt-in; the demo's days are too recent for it anyway).
  for (const tier of ['hourly', 'daily'] as const) {
    io.out(`\n== ${tier} cycle ==`);
    const code = await runCommand({ ...base, tier }, io);
    if (code !== 0) return code;
  }
  const after = await lakeSummary(base);
  io.out('\n== before / after ==');
  io.out(
    table(
      ['', 'files', 'bytes', 'rows'],
      [
        ['before', before.files, formatBytes(before.bytes), formatCount(before.rows)],
        ['after', after.files, formatBytes(after.bytes), formatCount(after.rows)],
      ],
    ),
  );
  const equal = before.rows === after.rows && after.rows === lake.rows;
  io.out(
    equal
      ? `rows equal: ${formatCount(after.rows)} before and after; files ${before.files} -> ${after.files} (${(before.files / Math.max(1, after.files)).toFixed(0)}x fewer)`
      : `ROWS DIFFER: generated ${lake.rows}, before ${before.rows}, after ${after.rows}`,
  );
  io.out(`\nTry: compactor status --store ${dir}   compactor visible --sql --store ${dir}`);
  return equal ? 0 : 1;
}

async function lakeSummary(options: Parsed): Promise<{ files: number; bytes: number; rows: number }> {
  const ctx = await context(options);
  const view = await visibleFiles(ctx.target.store, ctx.config);
  const { engine } = await buildEngine(options);
  try {
    const rows = await footerRows(ctx.target.store, ctx.target.localRoot, engine, view.files);
    return {
      files: rows.length,
      bytes: rows.reduce((s, r) => s + r.size, 0),
      rows: rows.reduce((s, r) => s + (r.rows ?? 0), 0),
    };
  } finally {
    await engine.close();
  }
}

export type { TierName };
