/** Deployment facts the cost model's tests price with: stated, so each test can compute the bill. */

import type { CostSettings, TransitionCount } from '../../functions/core/cost/index.ts';

/** A Standard child's 3 states around its jobs, a job's 7, the parent's 8, 4 per wave. */
export const TRANSITIONS: TransitionCount = {
  perItem: 3,
  itemStates: [],
  perPartition: 7,
  partitionStates: [],
  perExecution: 8,
  executionStates: [],
  perWave: 4,
  waveStates: [],
};

export const costSettings = (child: 'EXPRESS' | 'STANDARD'): CostSettings => ({
  childExecutionType: child,
  maxConcurrency: 10,
  memoryMb: { compact: 3008, partitionSteps: 512, others: 512 },
  targetFileBytes: 512 * 2 ** 20,
});
