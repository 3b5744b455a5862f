/**
 * `compactor plan`'s price block: the planned cycle priced by the cost model (functions/core/cost)
 * with the deployed settings, and the transitions counted on the state machine `cdk deploy` would
 * deploy with them.
 */

import type { StackConfig } from '../../cdk/config.ts';
import type {
  CostLine,
  CostSettings,
  CycleCost,
  StateMachineStates,
  TransitionCount,
} from '../core/cost/index.ts';
import { smallCompactMemoryMb } from '../core/lambda-sizing.ts';
import { type CliOptions, parseStackContext, resolveStackConfig } from './context.ts';
import { deployedWorkflow } from './deployed-workflow.ts';
import { formatBytes, table } from './format.ts';

/** The settings the price depends on, as the stack deploys them. */
export function costSettings(stack: StackConfig): CostSettings {
  return {
    childExecutionType: stack.map.childExecutionType,
    maxConcurrency: stack.map.maxConcurrency,
    memoryMb: {
      compact: stack.lambda.compact.memoryMb,
      partitionSteps: stack.lambda.partitionSteps.memoryMb,
      others: stack.lambda.others.memoryMb,
    },
    smallCompactMemoryMb: smallCompactMemoryMb(stack.map.childExecutionType, stack.lambda.compact.memoryMb),
    targetFileBytes: stack.targetFileBytes,
  };
}

/**
 * The transitions of the definition `cdk deploy` would deploy with these settings (the stack
 * context, --context, and the store's data prefix), synthesized as `run` does.
 */
export async function deployedTransitions(
  stackContext: Record<string, unknown>,
  dataPrefix: string,
  options: Pick<CliOptions, 'work-dir'>,
  say: (line: string) => void,
): Promise<TransitionCount> {
  const { countTransitions } = await import('../core/cost/index.ts');
  const { workflow } = await deployedWorkflow({ ...stackContext, dataPrefix }, options, say);
  return countTransitions(workflow.definition as unknown as StateMachineStates);
}

/**
 * What a cycle's price needs of the deployment: the settings and the transitions of the definition
 * `cdk deploy` would deploy with this command's options.
 */
export async function deployedCycle(
  options: CliOptions,
  dataPrefix: string,
  say: (line: string) => void,
): Promise<{ settings: CostSettings; transitions: TransitionCount }> {
  return {
    settings: costSettings(resolveStackConfig(options)),
    transitions: await deployedTransitions(parseStackContext(options.context), dataPrefix, options, say),
  };
}

/** Dollars as the price block prints them. */
export const usd = (n: number) => `$${n.toFixed(6)}`;
const seconds = (s: number) => (s < 600 ? `${s.toFixed(1)} s` : `${(s / 60).toFixed(1)} min`);

/** The price block printed after the plan table. */
export function formatCost(cost: CycleCost): string {
  const row = (name: string, line: CostLine & { readonly seconds: number }, jobs = true) => [
    name,
    jobs ? line.jobs : '',
    jobs ? line.inputFiles : '',
    jobs ? formatBytes(line.inputBytes) : '',
    usd(line.lambdaUsd),
    usd(line.s3Usd),
    usd(line.stepFunctionsUsd),
    usd(line.totalUsd),
    jobs ? usd(line.floorUsd) : '',
    seconds(line.seconds),
  ];
  return [
    `estimated cost of this cycle, ${cost.basis}: ${cost.childExecutionType} children, Map concurrency ${cost.maxConcurrency}, ${cost.waves} wave(s)`,
    'floor: what any compactor pays for the same jobs (one GET per input, one PUT per output)',
    table(
      [
        '',
        'jobs',
        'input files',
        'input bytes',
        'Lambda',
        'S3 requests',
        'Step Functions',
        'total',
        'floor',
        'time',
      ],
      [
        ...cost.tiers.map((t) => row(t.tier, t)),
        row('execution', cost.execution, false),
        row('total', cost.total),
      ],
    ),
  ].join('\n');
}
