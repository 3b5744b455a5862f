/**
 * Recover step (first state of every execution, and on demand): resolves every manifest whose
 * owner is gone, per the recovery table. Thin: validate, build deps, probe the store (once per
 * container and a few minutes), call recover().
 */

import { MetricUnit } from '@aws-lambda-powertools/metrics';
import { METRICS } from './contract.ts';
import { RecoveryIncompleteError, type RecoveryReport, recover } from './core/recovery.ts';
import { truncateCause } from './core/run-summary.ts';
import { envDeps, envObservability } from './lambda/env-deps.ts';
import { type ExecutionEvent, parseExecutionEvent } from './lambda/events.ts';
import {
  createLambdaHandler,
  type DepsFactory,
  type HandlerDeps,
  type HandlerTools,
} from './lambda/handler-kit.ts';
import { assertHandlerStore } from './lambda/store-guarantees.ts';
import type { Observability } from './lambda/telemetry.ts';
import { onJobEvent } from './lambda/telemetry.ts';

export interface RecoverOutput {
  readonly examined: number;
  readonly leftAlone: number;
  readonly rolledBack: number;
  readonly rolledForward: number;
  readonly cleared: number;
  readonly quarantined: number;
  readonly orphanStagingDeleted: number;
  readonly uploadsAborted: number;
  /** Quarantine records removed because what they held is gone. */
  readonly quarantinePruned: number;
  /** Manifests recovery could not resolve this time: their partitions are skipped, the rest planned. */
  readonly unresolved: number;
  /** The first of them, with why (cut short: the execution's state is limited to 256 KiB). */
  readonly unresolvedManifests: readonly { readonly manifestKey: string; readonly reason: string }[];
}

const UNRESOLVED_LISTED = 20;

export function recoverOutput(report: RecoveryReport): RecoverOutput {
  const count = (action: string) => report.entries.filter((e) => e.action === action).length;
  return {
    examined: report.entries.length,
    leftAlone: count('left-alone'),
    rolledBack: count('rolled-back'),
    rolledForward: count('rolled-forward'),
    cleared: count('cleared'),
    quarantined: count('quarantined'),
    orphanStagingDeleted: report.orphanStagingDeleted,
    uploadsAborted: report.uploadsAborted,
    quarantinePruned: report.quarantinePruned,
    unresolved: count('failed'),
    unresolvedManifests: report.entries
      .filter((e) => e.action === 'failed')
      .slice(0, UNRESOLVED_LISTED)
      .map((e) => ({ manifestKey: e.manifestKey, reason: truncateCause(e.reason) })),
  };
}

export async function recoverStep(
  event: ExecutionEvent,
  deps: HandlerDeps,
  tools: HandlerTools,
): Promise<RecoverOutput> {
  // The first write of every execution is recovery's: a store lacking a guarantee is refused here.
  await assertHandlerStore(deps, tools);
  const report = await recover({
    ...deps,
    executionId: event.executionId,
    signal: tools.signal,
    onEvent: onJobEvent(tools),
  }).catch((error: unknown) => {
    // One manifest recovery cannot resolve (its owner's execution cannot be described, a key it
    // cannot decrypt, a copy S3 refuses) must not stop the whole lake: its partition keeps its
    // live manifest, which Plan and every claim respect, so it is skipped while the rest goes on.
    // The alarm on RecoveryUnresolved says so every execution until someone fixes the cause.
    if (error instanceof RecoveryIncompleteError) return error.report;
    throw error;
  });
  const output = recoverOutput(report);
  for (const entry of report.entries.filter((e) => e.action === 'failed')) {
    tools.logger.error('recovery could not resolve this manifest; its partition is skipped until it is', {
      ...entry,
    });
  }
  tools.metrics?.addMetric(METRICS.recoveryUnresolved, MetricUnit.Count, output.unresolved);
  for (const entry of report.entries.filter((e) => e.action !== 'left-alone'))
    tools.logger.info('recovered', { ...entry });
  tools.metrics?.addMetric(
    METRICS.recoveryActions,
    MetricUnit.Count,
    output.rolledBack + output.rolledForward + output.cleared + output.quarantined,
  );
  return output;
}

export function createHandler(getDeps: DepsFactory, observability: Observability) {
  return createLambdaHandler(parseExecutionEvent, recoverStep, getDeps, observability);
}

export const handler = createHandler(envDeps(), envObservability());
