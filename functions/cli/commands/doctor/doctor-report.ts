/**
 * `compactor doctor`'s report (doctor.ts): one row per check with its result and what to fix,
 * an AWS API error turned into a FAIL row (not a crash), and how the rows print: a table and a
 * one-line verdict, or JSON with --json.
 */

import { CloudFormationServiceException } from '@aws-sdk/client-cloudformation';
import { SchedulerServiceException } from '@aws-sdk/client-scheduler';
import { SFNServiceException } from '@aws-sdk/client-sfn';
import type { CliIo } from '../../command.ts';
import { oneLine, table } from '../../format.ts';

export type Result = 'pass' | 'FAIL' | 'n/a' | 'skipped';

export interface DoctorRow {
  readonly check: string;
  readonly result: Result;
  readonly detail: string;
  readonly fix: string;
}

/** Errors of the AWS APIs themselves (denied, throttled, not found): a failed check, not a crash. */
function isServiceError(error: unknown): error is Error {
  return (
    error instanceof SFNServiceException ||
    error instanceof CloudFormationServiceException ||
    error instanceof SchedulerServiceException
  );
}

const PERMISSIONS =
  'your credentials need cloudformation:DescribeStacks and ListStackResources, states:DescribeStateMachine, ' +
  'StartExecution, DescribeExecution and ListExecutions, scheduler:ListSchedules and GetSchedule, and ' +
  's3:ListBucket, GetObject, PutObject and DeleteObject on the bucket';

function serviceFix(error: Error): string {
  if (/AccessDenied|UnauthorizedOperation|not authorized/i.test(`${error.name} ${error.message}`))
    return PERMISSIONS;
  if (error.name === 'ThrottlingException' || error.name === 'Throttling')
    return 'run compactor doctor again in a minute';
  return 'check the region and the names the stack outputs';
}

export class Report {
  readonly rows: DoctorRow[] = [];
  add(check: string, result: Result, detail: string, fix = ''): void {
    this.rows.push({ check, result, detail, fix });
  }
  failed(): boolean {
    return this.rows.some((r) => r.result === 'FAIL');
  }
}

/** Runs `body`; an AWS API error becomes a FAIL row for `check` (and undefined), anything else propagates. */
export async function guard<T>(
  report: Report,
  check: string,
  body: () => Promise<T>,
): Promise<T | undefined> {
  try {
    return await body();
  } catch (error) {
    if (!isServiceError(error)) throw error;
    report.add(check, 'FAIL', `${error.name}: ${oneLine(error.message, 300)}`, serviceFix(error));
    return undefined;
  }
}

/** Prints the rows: a table and a one-line verdict, or JSON with --json. */
export function printReport(report: Report, json: boolean | undefined, io: CliIo): void {
  if (json) {
    io.out(JSON.stringify({ ok: !report.failed(), checks: report.rows }, null, 2));
  } else {
    io.out(
      table(
        ['check', 'result', 'detail', 'fix'],
        report.rows.map((r) => [r.check, r.result, r.detail, r.fix]),
      ),
    );
    const failed = report.rows.filter((r) => r.result === 'FAIL').length;
    io.out(
      failed === 0
        ? `doctor: every check passed (${report.rows.filter((r) => r.result === 'pass').length} pass, ${report.rows.filter((r) => r.result !== 'pass').length} n/a)`
        : `doctor: ${failed} check(s) FAILED: see the fix column`,
    );
  }
}
