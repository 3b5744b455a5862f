/**
 * Where the `compactor` context comes from: cdk.json (read here, once per call) and a context
 * merged over it, as `compactor run --context` and the local commands layer them. Pure of
 * aws-cdk-lib, so the light CLI commands (status, visible) can resolve settings without the stack.
 */

import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { isPlainObject } from '../functions/core/is-plain-object.ts';

const CDK_JSON = fileURLToPath(new URL('../cdk.json', import.meta.url));

/** The context of cdk.json (feature flags and defaults), which the CDK CLI would pass. */
export function cdkJsonContext(): Record<string, unknown> {
  const json = JSON.parse(readFileSync(CDK_JSON, 'utf8')) as { context?: Record<string, unknown> };
  return json.context ?? {};
}

/** `over` merged into `base` object by object; any other value (lists too) replaces. */
export function mergeContext(
  base: Record<string, unknown>,
  over: Record<string, unknown>,
): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(over)) {
    const current = out[key];
    out[key] = isPlainObject(current) && isPlainObject(value) ? mergeContext(current, value) : value;
  }
  return out;
}

/** cdk.json's `compactor` context with `over` merged over it. */
export function compactorContextOver(over: Record<string, unknown> = {}): Record<string, unknown> {
  const base = cdkJsonContext().compactor;
  return mergeContext(isPlainObject(base) ? base : {}, over);
}
