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
  type Observability,
} from './lambda/handler-kit.ts';

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
  tools.metrics?.addMetric(METRICS.failed, MetricUnit.Count, summary.failed);
  for (const failure of summary.failures) tools.logger.error('partition failed', { ...failure });
  tools.logger.info('summary', { ...summary, failures: summary.failures.length });
  return {
    tier: event.tier,
    ...summary,
    toleratedFailurePercentage: event.toleratedFailurePercentage,
    withinTolerance: withinTolerance(summary, event.toleratedFailurePercentage),
  };
}

export function createHandler(getDeps: DepsFactory, observability: Observability) {
  return createLambdaHandler(parseSummaryEvent, summaryStep, getDeps, observability);
}

export const handler = createHandler(envDeps(), envObservability());
