/**
 * Step Functions state transitions per partition and per execution, counted by the cost model
 * (functions/core/cost countTransitions) on the state machine `cdk deploy` deploys (synthesized
 * locally, as `compactor run` does). The bench's executions run one wave: the states entered once
 * and the wave loop's once.
 */

import { countTransitions as countOn, type StateMachineStates } from '../functions/core/cost/index.ts';
import { synthesizeWorkflow } from '../functions/local-runner/run.ts';

export interface TransitionCount {
  /** States one Map item's child enters besides its jobs' chains. */
  readonly perItem: number;
  /** States one partition's job enters (its chain, inside its item's child). */
  readonly perPartition: number;
  readonly partitionStates: readonly string[];
  /** States the parent execution of one wave enters (the Map counted once). */
  readonly perExecution: number;
  readonly executionStates: readonly string[];
}

/**
 * Counted on the definition with Standard children: only they are billed per state, and theirs
 * has no Choice of compact function (functions/core/lambda-sizing.ts smallCompactMemoryMb).
 */
export async function countTransitions(): Promise<TransitionCount> {
  const { definition } = await synthesizeWorkflow({ map: { childExecutionType: 'STANDARD' } });
  const count = countOn(definition as unknown as StateMachineStates);
  return {
    perItem: count.perItem,
    perPartition: count.perPartition,
    partitionStates: count.partitionStates,
    perExecution: count.perExecution + count.perWave,
    executionStates: [...count.executionStates, ...count.waveStates],
  };
}
