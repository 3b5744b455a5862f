/**
 * Which job owners are Step Functions executions. Pure, so commands that load no SDK (status)
 * can tell them apart too.
 *
 * Standard executions (`execution:Machine:name`, Map Run children `execution:Machine/label:id`)
 * and Express executions (`express:Machine:name:id`; DescribeExecution answers for those a
 * Map Run dispatched). Any partition (aws, aws-cn, aws-us-gov).
 */
const EXECUTION_ARN = /^arn:aws[a-z-]*:states:[a-z0-9-]+:\d{12}:(?:execution|express):[^:]+:.+$/;

export function isExecutionArn(id: string): boolean {
  return EXECUTION_ARN.test(id);
}
