/**
 * Summary for an execution that stops without succeeding. Past its tolerance the Map fails the
 * execution, so the workflow's own Summary state never runs; this rule runs the same Summary
 * function on the execution's status change, and it reads the Map Run's results as the state
 * would. A redrive that then succeeds runs the Summary state, which adds to the metrics only
 * what the redrive changed (functions/core/run-summary.ts unrecorded).
 */

import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import { STOPPED_STATUSES } from '../../functions/lambda/events.ts';
import { STACK_DEFAULTS } from '../config-defaults.ts';

export interface FailureSummaryProps {
  readonly stateMachine: sfn.IStateMachine;
  /** The Summary step's function. */
  readonly summary: lambda.IFunction;
  /**
   * The Map's tolerance, reported beside the failures.
   * @default STACK_DEFAULTS.map.toleratedFailurePercentage (5)
   */
  readonly toleratedFailurePercentage?: number;
}

export class FailureSummary extends Construct {
  readonly rule: events.Rule;

  constructor(scope: Construct, id: string, props: FailureSummaryProps) {
    super(scope, id);
    // The event and its fields: https://docs.aws.amazon.com/step-functions/latest/dg/eventbridge-integration.html
    // (`input` is the execution's input as JSON text; the Lambda parses its tier from it; only
    // Standard workflows send it, and the compaction workflow is Standard). Its results are
    // written though the Map Run failed: ResultWriter's PENDING files hold "all child workflow
    // executions that weren't started because the Map Run failed or aborted"
    // (https://docs.aws.amazon.com/step-functions/latest/dg/input-output-resultwriter.html).
    this.rule = new events.Rule(this, 'Rule', {
      description: 'Runs Summary for a compaction execution that failed, timed out or was stopped.',
      eventPattern: {
        source: ['aws.states'],
        detailType: ['Step Functions Execution Status Change'],
        detail: {
          stateMachineArn: [props.stateMachine.stateMachineArn],
          status: [...STOPPED_STATUSES],
        },
      },
      targets: [
        new targets.LambdaFunction(props.summary, {
          event: events.RuleTargetInput.fromObject({
            executionId: events.EventField.fromPath('$.detail.executionArn'),
            executionName: events.EventField.fromPath('$.detail.name'),
            status: events.EventField.fromPath('$.detail.status'),
            input: events.EventField.fromPath('$.detail.input'),
            toleratedFailurePercentage:
              props.toleratedFailurePercentage ?? STACK_DEFAULTS.map.toleratedFailurePercentage,
          }),
        }),
      ],
    });
  }
}
