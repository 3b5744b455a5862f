/**
 * Summary step: totals of the Map run (from its ResultWriter files) as the execution's output
 * and as metrics. Runs as the workflow's last state, and from the stack's EventBridge rule when an
 * execution stops without succeeding. Thin: validate, build deps, call one core function.
 */

import { MetricUnit } from '@aws-lambda-powertools/metrics';
import { METRICS } from './contract.ts';
import { ConfigError } from './core/errors.ts';
import {
  type RunSummary,
  readRecordedSummary,
  summarizeMapRuns,
  unrecorded,
  withinTolerance,
  writeRecordedSummary,
} from './core/run-summary.ts';
import { envDeps, envObservability } from './lambda/env-deps.ts';
import { parseSummaryEvent, type StoppedSummaryEvent, type SummaryEvent } from './lambda/events.ts';
import {
  createLambdaHandler,
  type DepsFactory,
  type HandlerDeps,
  type HandlerTools,
} from './lambda/handler-kit.ts';
import type { Observability } from './lambda/telemetry.ts';

export interface SummaryOutput extends RunSummary {
  readonly tier: string;
  readonly toleratedFailurePercentage: number;
  /** Whether the failed partitions are within the tolerance (the Map fails the execution otherwise). */
  readonly withinTolerance: boolean;
  /** How the execution ended when a rule, not its last state, ran this Summary. */
  readonly executionStatus?: StoppedSummaryEvent['status'];
}

/**
 * The Map results to summarize, one manifest per wave's Map Run: the waves' own, or those of every
 * Map Run of a stopped execution (a redriven Map Run keeps its ARN, so its folder, and its
 * results hold every item: https://docs.aws.amazon.com/step-functions/latest/apireference/API_MapRunRedrivenEventDetails.html).
 */
async function resultsKeysOf(event: SummaryEvent, deps: HandlerDeps): Promise<readonly string[]> {
  if (event.kind === 'map') return event.resultsKeys;
  if (!deps.mapRunManifests)
    throw new ConfigError('summary of a stopped execution: no way to find its Map Runs');
  const manifests = await deps.mapRunManifests({ id: event.executionId, name: event.executionName });
  return [...new Set(manifests)];
}

export async function summaryStep(
  event: SummaryEvent,
  deps: HandlerDeps,
  tools: HandlerTools,
): Promise<SummaryOutput> {
  const { store, config } = deps;
  const summary = await summarizeMapRuns(
    { store, config, tier: event.tier, executionId: event.executionId },
    await resultsKeysOf(event, deps),
  );
  const recorded = await readRecordedSummary(store, config.layout, event.executionName);
  recordVerdicts(tools, unrecorded(summary, recorded));
  await writeRecordedSummary(store, config.layout, event.executionName, summary);
  for (const failure of summary.failures) tools.logger.error('partition failed', { ...failure });
  const stopped = event.kind === 'stopped' ? { executionStatus: event.status } : {};
  tools.logger.info('summary', { ...summary, failures: summary.failures.length, ...stopped });
  return {
    tier: event.tier,
    ...summary,
    toleratedFailurePercentage: event.toleratedFailurePercentage,
    withinTolerance: withinTolerance(summary, event.toleratedFailurePercentage),
    ...stopped,
  };
}

/**
 * The run's partitions and totals as metrics, once per execution, from the same verdicts as the
 * Summary output: compacted counts the jobs this execution committed (for retention, the days it
 * expired), skipped those it did not (skipped or superseded), failed the failed ones.
 */
function recordVerdicts(tools: HandlerTools, summary: RunSummary): void {
  const m = tools.metrics;
  if (!m) return;
  m.addMetric(METRICS.compacted, MetricUnit.Count, summary.compacted + summary.expired);
  m.addMetric(METRICS.skipped, MetricUnit.Count, summary.skipped + summary.superseded);
  m.addMetric(METRICS.failed, MetricUnit.Count, summary.failed);
  m.addMetric(METRICS.filesIn, MetricUnit.Count, summary.filesIn);
  m.addMetric(METRICS.filesOut, MetricUnit.Count, summary.filesOut);
  m.addMetric(METRICS.bytesIn, MetricUnit.Bytes, summary.bytesIn);
  m.addMetric(METRICS.bytesOut, MetricUnit.Bytes, summary.bytesOut);
  m.addMetric(METRICS.rowsIn, MetricUnit.Count, summary.rowsIn);
  m.addMetric(METRICS.rowsOut, MetricUnit.Count, summary.rows);
}

export function createHandler(getDeps: DepsFactory, observability: Observability) {
  return createLambdaHandler(parseSummaryEvent, summaryStep, getDeps, observability);
}

export const handler = createHandler(envDeps(), envObservability());
