/** Job events and step results as logs and EMF metrics (the dashboard and alarms read these). */

import type { Logger } from '@aws-lambda-powertools/logger';
import type { Metrics } from '@aws-lambda-powertools/metrics';
import { MetricUnit } from '@aws-lambda-powertools/metrics';
import { METRICS } from '../contract.ts';
import type { Backlog } from '../core/backlog.ts';
import type { JobEvent } from '../core/protocol.ts';

/** Where a handler logs and records metrics. */
export interface Observability {
  readonly logger: Logger;
  /** Absent in local runs, which print no EMF. */
  readonly metrics?: Metrics;
}

export function onJobEvent(tools: Observability): (event: JobEvent) => void {
  return (event) => {
    if (event.type === 'quarantined' || event.type === 'input-quarantined') {
      tools.logger.error('quarantined', { ...event });
      tools.metrics?.addMetric(METRICS.quarantined, MetricUnit.Count, 1);
      return;
    }
    if (event.type === 'failure-not-recorded') {
      tools.logger.warn(event.type, {
        jobId: event.job.jobId,
        partition: event.job.partition,
        reason: event.reason,
      });
      return;
    }
    tools.logger.info(event.type, {
      jobId: event.job.jobId,
      partition: event.job.partition,
      ...('reason' in event ? { reason: event.reason } : {}),
    });
  };
}

/**
 * One per execution that reached Plan, with dimension `tier`: the stack's missed-start alarm per
 * tier watches it (executions of every tier share one state machine, whose own metrics cannot
 * tell them apart). A compaction tier's plan adds its backlog (backlog.ts), which the backlog
 * alarm per tier watches: the age only where it stands (ageStands). Plan records no other metric, so the dimension marks only these.
 */
export function recordExecutionPlanned(
  tools: Observability,
  tier: string,
  backlog?: { readonly figures: Backlog; readonly ageStands: boolean },
): void {
  tools.metrics?.addDimension('tier', tier);
  tools.metrics?.addMetric(METRICS.executionsPlanned, MetricUnit.Count, 1);
  if (backlog === undefined) return;
  const { figures } = backlog;
  // A plan that cannot vouch for older folders (no covering backlog record) publishes no age: the
  // alarm keeps its state.
  if (backlog.ageStands)
    tools.metrics?.addMetric(METRICS.oldestEligibleAge, MetricUnit.Seconds, figures.oldestEligibleAgeSeconds);
  tools.metrics?.addMetric(METRICS.eligiblePartitions, MetricUnit.Count, figures.eligiblePartitions);
}
