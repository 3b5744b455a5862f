/**
 * Recover step (first state of every execution, and on demand): resolves every manifest whose
 * owner is gone, per the recovery table. Thin: validate, build deps, call recover().
 */

import { MetricUnit } from '@aws-lambda-powertools/metrics';
import { type RecoveryReport, recover } from './core/recovery.ts';
import { envDeps, envObservability } from './lambda/env-deps.ts';
import { type ExecutionEvent, parseExecutionEvent } from './lambda/events.ts';
import {
  createLambdaHandler,
  type DepsFactory,
  type HandlerDeps,
  type HandlerTools,
  type Observability,
} from './lambda/handler-kit.ts';
import { METRICS, onJobEvent } from './lambda/telemetry.ts';

export interface RecoverOutput {
  readonly examined: number;
  readonly leftAlone: number;
  readonly rolledBack: number;
  readonly rolledForward: number;
  readonly cleared: number;
  readonly quarantined: number;
  readonly orphanStagingDeleted: number;
  readonly uploadsAborted: number;
}

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
  };
}

export async function recoverStep(
  event: ExecutionEvent,
  deps: HandlerDeps,
  tools: HandlerTools,
): Promise<RecoverOutput> {
  const report = await recover({
    ...deps,
    executionId: event.executionId,
    signal: tools.signal,
    onEvent: onJobEvent(tools),
  });
  const output = recoverOutput(report);
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
