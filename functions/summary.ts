/**
 * Summary step: totals of the Map run (from its ResultWriter files) as the execution's output
 * and as metrics. Thin: validate, build deps, call one core function.
 */

import { MetricUnit } from '@aws-lambda-powertools/metrics';
import { METRICS } from './contract.ts';
import { EMPTY_SUMMARY, type RunSummary, summarizeMapRun, withinTolerance } from './core/run-summary.ts';
import { envDeps, envObservability } from './lambda/env-deps.ts';
import { parseSummaryEvent, type SummaryEvent } from './lambda/events.ts';
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
  /** False fails the execution after this step (the workflow's `Within tolerance?` choice). */
  readonly withinTolerance: boolean;
}

export async function summaryStep(
  event: SummaryEvent,
  deps: HandlerDeps,
  tools: HandlerTools,
): Promise<SummaryOutput> {
  const summary = event.resultsKey
    ? await summarizeMapRun(deps.store, deps.config.layout, event.tier, event.resultsKey)
    : EMPTY_SUMMARY;
  recordVerdicts(tools, summary);
  for (const failure of summary.failures) tools.logger.error('partition failed', { ...failure });
  tools.logger.info('summary', { ...summary, failures: summary.failures.length });
  return {
    tier: event.tier,
    ...summary,
    toleratedFailurePercentage: event.toleratedFailurePercentage,
    withinTolerance: withinTolerance(summary, event.toleratedFailurePercentage),
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
