/**
 * StepFunctionsOwners against a mocked SFN client (aws-sdk-client-mock). There is no local
 * Step Functions API to run these against, so they check which requests are made and how the
 * documented DescribeExecution answers and errors map to "may the owner still act".
 */

import {
  DescribeExecutionCommand,
  type DescribeExecutionOutput,
  ExecutionDoesNotExist,
  SFNClient,
  SFNServiceException,
} from '@aws-sdk/client-sfn';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import { isExecutionArn } from '../../functions/adapters/execution-arn.ts';
import { LocalOwners, newLocalExecutionId } from '../../functions/adapters/local-owner.ts';
import { StepFunctionsOwners } from '../../functions/adapters/sfn-owners.ts';
import type { Clock } from '../../functions/core/engine.ts';
import { ConfigError } from '../../functions/core/errors.ts';

const NOW = new Date('2025-01-15T12:00:00Z');
const clock: Clock = { now: () => NOW };
const MACHINE = 'arn:aws:states:eu-west-1:123456789012:stateMachine:Compactor';
const arn = (name: string) => `arn:aws:states:eu-west-1:123456789012:execution:Compactor:${name}`;
const secondsAgo = (s: number) => new Date(NOW.getTime() - s * 1000);

function execution(status: DescribeExecutionOutput['status'], stopDate?: Date): DescribeExecutionOutput {
  return {
    executionArn: arn('x'),
    stateMachineArn: MACHINE,
    status,
    startDate: secondsAgo(7200),
    ...(stopDate ? { stopDate } : {}),
  };
}

function serviceError(name: string, fault: 'client' | 'server' = 'client'): SFNServiceException {
  return new SFNServiceException({
    name,
    $fault: fault,
    $metadata: { httpStatusCode: 400 },
    message: `${name} (mocked)`,
  });
}

describe('StepFunctionsOwners (mocked Step Functions API: no local Step Functions service)', () => {
  const client = new SFNClient({ region: 'eu-west-1' });
  const sfn = mockClient(client);
  const owners = (local?: LocalOwners) =>
    new StepFunctionsOwners({ client, zombieGraceSeconds: 900, clock, ...(local ? { local } : {}) });

  beforeEach(() => sfn.reset());

  it('a RUNNING execution is alive', async () => {
    sfn.on(DescribeExecutionCommand, { executionArn: arn('run') }).resolves(execution('RUNNING'));
    await expect(owners().isAlive(arn('run'))).resolves.toBe(true);
    expect(sfn.commandCalls(DescribeExecutionCommand)[0]?.args[0].input).toEqual({
      executionArn: arn('run'),
    });
  });

  it('a PENDING_REDRIVE execution is alive (it is about to run again)', async () => {
    sfn.on(DescribeExecutionCommand).resolves(execution('PENDING_REDRIVE', secondsAgo(5000)));
    await expect(owners().isAlive(arn('redrive'))).resolves.toBe(true);
  });

  it('an execution that succeeded long ago is dead', async () => {
    sfn.on(DescribeExecutionCommand).resolves(execution('SUCCEEDED', secondsAgo(7200)));
    await expect(owners().isAlive(arn('done'))).resolves.toBe(false);
  });

  it('an execution that failed 10 s ago is alive with a 900 s grace: its Lambdas may still run', async () => {
    sfn.on(DescribeExecutionCommand).resolves(execution('FAILED', secondsAgo(10)));
    await expect(owners().isAlive(arn('failed-recently'))).resolves.toBe(true);
  });

  it('the grace ends exactly zombieGraceSeconds after the stop, for every stopped status', async () => {
    for (const status of ['FAILED', 'TIMED_OUT', 'ABORTED', 'SUCCEEDED'] as const) {
      sfn.reset();
      sfn
        .on(DescribeExecutionCommand, { executionArn: arn('in') })
        .resolves(execution(status, secondsAgo(899)));
      sfn
        .on(DescribeExecutionCommand, { executionArn: arn('out') })
        .resolves(execution(status, secondsAgo(900)));
      const o = owners();
      await expect(o.isAlive(arn('in')), status).resolves.toBe(true);
      await expect(o.isAlive(arn('out')), status).resolves.toBe(false);
    }
  });

  it('a stopped execution without a stop date is treated as alive (wait for the lease)', async () => {
    sfn.on(DescribeExecutionCommand).resolves(execution('ABORTED'));
    await expect(owners().isAlive(arn('no-stop-date'))).resolves.toBe(true);
  });

  it('ExecutionDoesNotExist is no answer (DescribeExecution is eventually consistent): alive, so recovery waits for the lease', async () => {
    sfn
      .on(DescribeExecutionCommand)
      .rejects(new ExecutionDoesNotExist({ $metadata: {}, message: 'Execution Does Not Exist (mocked)' }));
    await expect(owners().isAlive(arn('not-yet-visible'))).resolves.toBe(true);
  });

  it('AccessDenied throws, never "dead"; the failed lookup is not cached', async () => {
    sfn
      .on(DescribeExecutionCommand)
      .rejectsOnce(serviceError('AccessDeniedException'))
      .resolves(execution('RUNNING'));
    const o = owners();
    await expect(o.isAlive(arn('denied'))).rejects.toMatchObject({ name: 'AccessDeniedException' });
    await expect(o.isAlive(arn('denied'))).resolves.toBe(true);
    expect(sfn.commandCalls(DescribeExecutionCommand)).toHaveLength(2);
  });

  it('throttling throws too', async () => {
    sfn.on(DescribeExecutionCommand).rejects(serviceError('ThrottlingException'));
    await expect(owners().isAlive(arn('throttled'))).rejects.toMatchObject({ name: 'ThrottlingException' });
  });

  it('asks once per execution id for the life of the instance, also for concurrent asks', async () => {
    sfn.on(DescribeExecutionCommand, { executionArn: arn('a') }).resolves(execution('RUNNING'));
    sfn
      .on(DescribeExecutionCommand, { executionArn: arn('b') })
      .resolves(execution('SUCCEEDED', secondsAgo(9999)));
    const o = owners();
    const answers = await Promise.all([o.isAlive(arn('a')), o.isAlive(arn('a')), o.isAlive(arn('b'))]);
    expect(answers).toEqual([true, true, false]);
    expect(await o.isAlive(arn('a'))).toBe(true);
    expect(await o.isAlive(arn('b'))).toBe(false);
    expect(sfn.commandCalls(DescribeExecutionCommand).map((c) => c.args[0].input.executionArn)).toEqual([
      arn('a'),
      arn('b'),
    ]);
    // A new instance (the next recovery pass) asks again.
    expect(await owners().isAlive(arn('a'))).toBe(true);
    expect(sfn.commandCalls(DescribeExecutionCommand)).toHaveLength(3);
  });

  it('Map Run child and Express ARNs are described too; a Map Run ARN is not an execution', async () => {
    const child = 'arn:aws:states:eu-west-1:123456789012:execution:Compactor/CompactPartitions:0b1c2d3e-4f';
    const express = 'arn:aws:states:eu-west-1:123456789012:express:Compactor/CompactPartitions:abc:def';
    const govCloud = 'arn:aws-us-gov:states:us-gov-west-1:123456789012:execution:Compactor:run';
    const mapRun = 'arn:aws:states:eu-west-1:123456789012:mapRun:Compactor/CompactPartitions:0b1c';
    expect([child, express, govCloud].map(isExecutionArn)).toEqual([true, true, true]);
    expect(isExecutionArn(mapRun)).toBe(false);
    sfn.on(DescribeExecutionCommand).resolves(execution('SUCCEEDED', secondsAgo(9999)));
    const o = owners();
    expect(await o.isAlive(child)).toBe(false);
    expect(await o.isAlive(express)).toBe(false);
    // Not an execution: no request, alive (wait for the lease).
    expect(await o.isAlive(mapRun)).toBe(true);
    expect(sfn.commandCalls(DescribeExecutionCommand)).toHaveLength(2);
  });

  it('local ids are delegated to LocalOwners, without any Step Functions request', async () => {
    const local = new LocalOwners();
    const id = newLocalExecutionId();
    const end = local.begin(id);
    const o = owners(local);
    expect(await o.isAlive(id)).toBe(true);
    end();
    // Not cached: the local answer follows the process.
    expect(await o.isAlive(id)).toBe(false);
    // Without LocalOwners, a local owner is unknown: alive, so recovery waits for the lease.
    expect(await owners().isAlive(id)).toBe(true);
    expect(sfn.commandCalls(DescribeExecutionCommand)).toHaveLength(0);
  });

  it('an unknown kind of owner is alive (wait for the lease), without a request', async () => {
    expect(await owners().isAlive('someone-else:42')).toBe(true);
    expect(await owners().isAlive('')).toBe(true);
    expect(sfn.commandCalls(DescribeExecutionCommand)).toHaveLength(0);
  });

  it('rejects a negative or non-finite grace', () => {
    expect(() => new StepFunctionsOwners({ client, zombieGraceSeconds: -1, clock })).toThrow(ConfigError);
    expect(() => new StepFunctionsOwners({ client, zombieGraceSeconds: Number.NaN, clock })).toThrow(
      ConfigError,
    );
  });
});
