/**
 * The deployed Lambda handlers, bound in-process for local runs: the same middy stack and code,
 * with dependencies for a local folder (or any S3-compatible endpoint) instead of the environment.
 */

import { Logger } from '@aws-lambda-powertools/logger';
import type { Context } from 'aws-lambda';
import { createHandler as clearManifest } from '../clear-manifest.ts';
import { createHandler as compact } from '../compact.ts';
import { createHandler as deleteInputs } from '../delete-inputs.ts';
import type { DepsFactory, Observability } from '../lambda/handler-kit.ts';
import { createHandler as plan } from '../plan.ts';
import { createHandler as recover } from '../recover.ts';
import { createHandler as summary } from '../summary.ts';
import { createHandler as upload } from '../upload.ts';
import { createHandler as verify } from '../verify.ts';
import type { LambdaInvoker } from './local-workflow.ts';

/** Step names as the stack tags each function (its COMPACTOR_STEP environment variable). */
export const STEP_HANDLERS = {
  recover,
  plan,
  compact,
  upload,
  verify,
  'delete-inputs': deleteInputs,
  'clear-manifest': clearManifest,
  summary,
} as const;

export type StepName = keyof typeof STEP_HANDLERS;

export function isStepName(name: string): name is StepName {
  return Object.hasOwn(STEP_HANDLERS, name);
}

/** Local runs log nothing through Powertools (the CLI prints progress) and emit no EMF. */
export function localObservability(): Observability {
  return { logger: new Logger({ serviceName: 'compactor', logLevel: 'SILENT' }) };
}

/**
 * An invoker that calls, for each function name the definition uses, the handler of the step
 * that function runs. An unknown function name is an error, never a silent no-op.
 */
export function localInvoker(
  functionSteps: ReadonlyMap<string, StepName>,
  getDeps: DepsFactory,
  onResult?: (step: StepName, payload: unknown, result: unknown) => void,
): LambdaInvoker {
  const observability = localObservability();
  const handlers = new Map(
    [...new Set(functionSteps.values())].map((step) => [step, STEP_HANDLERS[step](getDeps, observability)]),
  );
  let request = 0;
  return async (functionName, payload) => {
    const step = functionSteps.get(functionName);
    const handler = step ? handlers.get(step) : undefined;
    if (!step || !handler) throw new Error(`no local handler is bound to function ${functionName}`);
    const context = {
      functionName: `local-${step}`,
      functionVersion: '$LATEST',
      awsRequestId: `local-${++request}`,
      memoryLimitInMB: '0',
      invokedFunctionArn: functionName,
      callbackWaitsForEmptyEventLoop: false,
    } as unknown as Context;
    const result = (await handler(payload, context)) as never;
    onResult?.(step, payload, result);
    return result;
  };
}
