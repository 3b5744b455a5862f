/**
 * Reads what a Powertools `Metrics` instance would flush as EMF, without flushing it: the
 * alarms (Quarantined >= 1, ...) are fed by exactly these values.
 */

import type { Metrics } from '@aws-lambda-powertools/metrics';

/** The total of one metric in the instance's buffer (a metric added twice is an array of values). */
export function metricTotal(metrics: Metrics, name: string): number {
  const emf = metrics.serializeMetrics() as unknown as Record<string, unknown>;
  const value = emf[name];
  if (value === undefined) return 0;
  const values = Array.isArray(value) ? value : [value];
  return values.reduce((sum: number, v) => sum + Number(v), 0);
}

/** The metric names the EMF document declares for the namespace. */
export function metricNames(metrics: Metrics): string[] {
  const emf = metrics.serializeMetrics() as unknown as {
    _aws: { CloudWatchMetrics: { Namespace: string; Metrics: { Name: string }[] }[] };
  };
  return emf._aws.CloudWatchMetrics.flatMap((d) => d.Metrics.map((m) => m.Name));
}
