/**
 * The CDK app: `npx cdk synth|deploy` runs this file on Node 22 (cdk.json). It parses the
 * `compactor` context once, builds the stack, tags everything, and with `-c nag=true` applies
 * the cdk-nag AwsSolutions checks. Tests and the local runner call `createApp` in-process.
 */

import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { App, Tags, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { ConfigError } from '../functions/core/errors.ts';
import { CompactorStack } from './compactor-stack.ts';
import { CONTEXT_KEY, parseStackConfig, type StackConfig } from './config.ts';
import { cdkJsonContext } from './config-context.ts';
import { isArm64Refusal } from './duckdb-arm64.ts';

// The local runner reads cdk.json through the app it synthesizes.
export { cdkJsonContext };

export const DEFAULT_STACK_NAME = 'ParquetCompactor';

export interface CreateAppOptions {
  /** Context over cdk.json's (the CLI's own context, when run by it, still wins). */
  readonly context?: Record<string, unknown>;
  /** @default - the CLI's (CDK_OUTDIR) or a temporary folder */
  readonly outdir?: string;
}

export interface CompactorApp {
  readonly app: App;
  readonly stack: CompactorStack;
  readonly config: StackConfig;
}

function truthy(value: unknown): boolean {
  return value === true || value === 'true';
}

export function createApp(options: CreateAppOptions = {}): CompactorApp {
  const app = new App({
    // cdk.json first, so an in-process synth uses the same feature flags as the CLI.
    context: { ...cdkJsonContext(), ...options.context },
    ...(options.outdir ? { outdir: options.outdir } : {}),
  });
  const config = parseStackConfig(app.node.tryGetContext(CONTEXT_KEY));
  const stackName = String(app.node.tryGetContext('stackName') ?? DEFAULT_STACK_NAME);
  const stack = new CompactorStack(app, stackName, { config });
  Tags.of(app).add('project', 'parquet-compactor');
  Tags.of(app).add('compactor:stack', stackName);
  // cdk-nag 3 is a policy-validation plugin: any unacknowledged finding fails the synth with a report.
  if (truthy(app.node.tryGetContext('nag'))) {
    Validations.of(app).addPlugins(new AwsSolutionsChecks(app, { verbose: true }));
  }
  return { app, stack, config };
}

// Run as the CDK app (not when imported by tests or the local runner).
if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    createApp().app.synth();
  } catch (error) {
    // A configuration mistake is the operator's to fix: one line naming the key, no stack trace.
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(1);
    }
    // The compact asset's DuckDB install has said what is missing and the fix, in one line.
    if (isArm64Refusal(error)) process.exit(1);
    throw error;
  }
}
