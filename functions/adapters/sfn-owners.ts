/**
 * Owner liveness for jobs owned by Step Functions executions (`RecoveryDeps.isOwnerAlive`).
 *
 * An execution that has stopped is not yet harmless: a Lambda it invoked keeps running until
 * its own timeout, even after the execution failed, timed out or was stopped. So an execution
 * counts as alive until `zombieGraceSeconds` (at least the longest Lambda timeout) after it
 * stopped. Every doubt answers "alive": recovery then waits for the manifest's lease instead
 * of taking over a job someone may still be writing. Only a definite answer makes an owner dead.
 */

import { DescribeExecutionCommand, ExecutionDoesNotExist, type SFNClient } from '@aws-sdk/client-sfn';
import type { Clock } from '../core/engine.ts';
import { ConfigError } from '../core/errors.ts';
import { isExecutionArn } from './execution-arn.ts';
import { isLocalExecutionId, type LocalOwners } from './local-owner.ts';

export interface StepFunctionsOwnersOptions {
  readonly client: SFNClient;
  /** How long after it stopped an execution may still act: at least the longest Lambda timeout. */
  readonly zombieGraceSeconds: number;
  readonly clock: Clock;
  /** Answers for `local:host:pid:nonce` owners; without it they count as alive (wait for the lease). */
  readonly local?: LocalOwners;
}

export class StepFunctionsOwners {
  readonly #client: SFNClient;
  readonly #graceMs: number;
  readonly #clock: Clock;
  readonly #local: LocalOwners | undefined;
  /**
   * One lookup per execution for this instance's life (one recovery pass): many manifests
   * usually share an owner. Promises are cached so concurrent asks share one request.
   */
  readonly #answers = new Map<string, Promise<boolean>>();

  constructor(options: StepFunctionsOwnersOptions) {
    if (!Number.isFinite(options.zombieGraceSeconds) || options.zombieGraceSeconds < 0) {
      throw new ConfigError(
        `zombieGraceSeconds ${options.zombieGraceSeconds}: use a whole number of seconds, at least the longest Lambda timeout`,
      );
    }
    this.#client = options.client;
    this.#graceMs = options.zombieGraceSeconds * 1000;
    this.#clock = options.clock;
    this.#local = options.local;
  }

  /** Whether the owner may still act; an arrow property so it can be passed as `isOwnerAlive`. */
  isAlive = async (executionId: string): Promise<boolean> => {
    if (isLocalExecutionId(executionId)) {
      // Not cached: the local answer is a cheap, current check of this host's processes.
      return this.#local ? this.#local.isAlive(executionId) : true;
    }
    // An owner we cannot ask about (another runner, a Map Run ARN): wait for its lease.
    if (!isExecutionArn(executionId)) return true;
    let answer = this.#answers.get(executionId);
    if (!answer) {
      answer = this.#describe(executionId);
      this.#answers.set(executionId, answer);
      // A failed lookup is not an answer: drop it so a later ask tries again.
      answer.catch(() => this.#answers.delete(executionId));
    }
    return answer;
  };

  async #describe(executionArn: string): Promise<boolean> {
    let execution: { status?: string | undefined; stopDate?: Date | undefined };
    try {
      execution = await this.#client.send(new DescribeExecutionCommand({ executionArn }));
    } catch (error) {
      // Not an answer either. DescribeExecution "is eventually consistent" and "may not reflect
      // very recent updates" (https://docs.aws.amazon.com/step-functions/latest/apireference/API_DescribeExecution.html):
      // recovery asks only while the lease is live, just when a new execution may not show yet.
      // So it counts as alive and recovery waits for the lease; an execution truly gone (out of
      // history, another account) costs that wait and nothing else. Any other error (access
      // denied, throttling) propagates: an unanswered question must never read as "dead".
      if (error instanceof ExecutionDoesNotExist) return true;
      throw error;
    }
    switch (execution.status) {
      case 'RUNNING':
      case 'PENDING_REDRIVE':
        return true;
      case 'SUCCEEDED':
      case 'FAILED':
      case 'TIMED_OUT':
      case 'ABORTED': {
        // Its Lambdas may outlive it by up to their timeout.
        if (!execution.stopDate) return true;
        return this.#clock.now().getTime() - execution.stopDate.getTime() < this.#graceMs;
      }
      default:
        // A status this code does not know yet: treat as alive and wait for the lease.
        return true;
    }
  }
}
