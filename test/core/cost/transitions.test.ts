/**
 * Transitions counted on a definition (functions/core/cost/transitions.ts): on the state machine
 * `cdk deploy` deploys, synthesized (cached), a compacting partition enters its chain's states
 * (pipeline.ts) and the execution enters its wave loop once per wave; on a hand-made definition
 * without a loop, every state once.
 */

import { describe, expect, it } from 'vitest';
import { countTransitions } from '../../../functions/core/cost/index.ts';
import { PARTITION_STEPS } from '../../../functions/core/pipeline.ts';
import { synthesizeWorkflow } from '../../../functions/local-runner/run.ts';

describe('countTransitions', () => {
  it('counts the deployed definition: the chain, the states once, the wave loop', async () => {
    const { definition } = await synthesizeWorkflow();
    const count = countTransitions(definition as unknown as Parameters<typeof countTransitions>[0]);
    // Every task of the chain, the Choice of the compact function (Express children, the default),
    // the Choice after Compact, and the state that ends the item.
    for (const step of PARTITION_STEPS) expect(count.partitionStates).toContain(step.stateName);
    expect(count.partitionStates).toContain('Compact size?');
    expect(count.partitionStates).toContain('Staged?');
    expect(count.partitionStates).not.toContain('Skipped');
    expect(count.perPartition).toBe(PARTITION_STEPS.length + 3);
    expect(count.executionStates).toEqual(expect.arrayContaining(['Recover', 'Plan', 'Summary']));
    expect(count.waveStates).toContain('Compact partitions');
    expect(count.executionStates).not.toContain('Compact partitions');
    // The path that compacts, not the one that finds nothing.
    expect(count.executionStates).not.toContain('Nothing to compact');
    expect(count.perExecution + count.perWave).toBe(count.executionStates.length + count.waveStates.length);
  });

  it('counts a definition without a wave loop once, taking the Choice branch that reaches the Map', () => {
    const count = countTransitions({
      StartAt: 'A',
      States: {
        A: { Type: 'Choice', Choices: [{ Next: 'Done' }], Default: 'M' },
        M: {
          Type: 'Map',
          Next: 'Done',
          ItemProcessor: {
            StartAt: 'T',
            States: {
              T: { Type: 'Task', Next: 'C' },
              C: { Type: 'Choice', Choices: [{ Next: 'X' }], Default: 'U' },
              U: { Type: 'Task', End: true },
              X: { Type: 'Pass', End: true },
            },
          },
        },
        Done: { Type: 'Succeed' },
      },
    });
    expect(count).toMatchObject({
      partitionStates: ['T', 'C', 'U'],
      executionStates: ['A', 'M', 'Done'],
      perWave: 0,
    });
  });
});
