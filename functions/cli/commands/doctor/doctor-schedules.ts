/**
 * `compactor doctor`'s schedule check: each schedule that starts the state machine must have
 * started an execution, with its own input, within its last two periods.
 *
 * - Schedules: ListSchedules (in the stack's group, else every group; paged by NextToken)
 *   https://docs.aws.amazon.com/scheduler/latest/APIReference/API_ListSchedules.html, then
 *   GetSchedule for the expression, time zone, state, start and target input
 *   https://docs.aws.amazon.com/scheduler/latest/APIReference/API_GetSchedule.html.
 * - When it fires: rate and cron expressions as the Scheduler documents them (rate(value unit),
 *   cron(minutes hours day-of-month month day-of-week year), a rate schedule without StartDate
 *   starting at once, 60-second precision)
 *   https://docs.aws.amazon.com/scheduler/latest/UserGuide/schedule-types.html; cron fields and
 *   wildcards https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-cron-expressions.html.
 *   L, W and # are not evaluated here: such a schedule gets an "n/a" row.
 * - Executions: ListExecutions, newest first (running ones by start or redrive date, the rest by
 *   stop date), paged by nextToken
 *   https://docs.aws.amazon.com/step-functions/latest/apireference/API_ListExecutions.html, and
 *   DescribeExecution for each one's input
 *   https://docs.aws.amazon.com/step-functions/latest/apireference/API_DescribeExecution.html.
 *   Both are eventually consistent, so a start is only due a few minutes after its time.
 */

import { GetScheduleCommand, ListSchedulesCommand, type SchedulerClient } from '@aws-sdk/client-scheduler';
import { DescribeExecutionCommand, ListExecutionsCommand, type SFNClient } from '@aws-sdk/client-sfn';

const MINUTE = 60_000;
/** Scheduler's 60 s precision plus the listings' eventual consistency. */
export const START_GRACE_MS = 5 * MINUTE;
/** Executions described at most per run (each is one DescribeExecution). */
const MAX_DESCRIBED = 300;
/** How far back a cron expression is searched for its last two times. */
const MAX_CRON_DAYS = 800;

export type ParsedExpression =
  | { readonly kind: 'rate'; readonly periodMs: number }
  | { readonly kind: 'cron'; readonly fields: CronFields }
  | { readonly kind: 'unsupported'; readonly reason: string };

interface CronFields {
  readonly minutes: ReadonlySet<number>;
  readonly hours: ReadonlySet<number>;
  /** undefined: `?` (the other day field decides). */
  readonly daysOfMonth: ReadonlySet<number> | undefined;
  readonly months: ReadonlySet<number>;
  /** 1 = Sunday .. 7 = Saturday; undefined: `?`. */
  readonly daysOfWeek: ReadonlySet<number> | undefined;
  readonly years: ReadonlySet<number>;
}

const MONTHS = ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'];
const DAYS = ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'];

class Unsupported extends Error {}

function value(text: string, names: readonly string[] | undefined, base: number): number {
  const named = names?.indexOf(text.toUpperCase()) ?? -1;
  if (named >= 0) return named + base;
  if (!/^\d+$/.test(text)) throw new Unsupported(`"${text}"`);
  return Number(text);
}

/** One cron field as the set of values it allows; `?` gives undefined. */
function field(
  text: string,
  min: number,
  max: number,
  names?: readonly string[],
  base = 1,
): Set<number> | undefined {
  if (text === '?') return undefined;
  if (/[LW#]/i.test(text.replace(/[A-Z]{3}/gi, (m) => (names?.includes(m.toUpperCase()) ? '' : m)))) {
    throw new Unsupported(`"${text}" (L, W and # are not evaluated here)`);
  }
  const out = new Set<number>();
  for (const part of text.split(',')) {
    const [range = '', stepText] = part.split('/');
    const step = stepText === undefined ? 1 : value(stepText, undefined, 0);
    if (step < 1) throw new Unsupported(`"${part}"`);
    let lo: number;
    let hi: number;
    if (range === '*') {
      lo = min;
      hi = max;
    } else if (range.includes('-')) {
      const [a = '', b = ''] = range.split('-');
      lo = value(a, names, base);
      hi = value(b, names, base);
    } else {
      lo = value(range, names, base);
      // `5/15` runs from 5 to the end of the field; a plain `5` is that one value.
      hi = stepText === undefined ? lo : max;
    }
    if (lo < min || hi > max || lo > hi) throw new Unsupported(`"${part}" is outside ${min}-${max}`);
    for (let v = lo; v <= hi; v += step) out.add(v);
  }
  return out;
}

export function parseScheduleExpression(expression: string): ParsedExpression {
  const rate = /^rate\((\d+)\s+(minute|minutes|hour|hours|day|days)\)$/.exec(expression.trim());
  if (rate) {
    const n = Number(rate[1]);
    const unit = rate[2]?.startsWith('minute')
      ? MINUTE
      : rate[2]?.startsWith('hour')
        ? 60 * MINUTE
        : 1440 * MINUTE;
    if (n < 1) return { kind: 'unsupported', reason: `${expression}: a rate must be positive` };
    return { kind: 'rate', periodMs: n * unit };
  }
  const cron = /^cron\((.*)\)$/.exec(expression.trim());
  if (!cron) return { kind: 'unsupported', reason: `${expression} is not a rate() or cron() expression` };
  const parts = (cron[1] ?? '').trim().split(/\s+/);
  if (parts.length !== 6)
    return { kind: 'unsupported', reason: `${expression}: a cron expression has 6 fields` };
  const [mi = '', h = '', dom = '', mo = '', dow = '', y = ''] = parts;
  try {
    const fields: CronFields = {
      minutes: field(mi, 0, 59) ?? new Set(),
      hours: field(h, 0, 23) ?? new Set(),
      daysOfMonth: field(dom, 1, 31),
      months: field(mo, 1, 12, MONTHS) ?? new Set(),
      daysOfWeek: field(dow, 1, 7, DAYS),
      years: field(y, 1970, 2199) ?? new Set(),
    };
    if (
      fields.minutes.size === 0 ||
      fields.hours.size === 0 ||
      fields.months.size === 0 ||
      fields.years.size === 0
    ) {
      return { kind: 'unsupported', reason: `${expression}: only the day fields may be "?"` };
    }
    return { kind: 'cron', fields };
  } catch (error) {
    if (!(error instanceof Unsupported)) throw error;
    return { kind: 'unsupported', reason: `${expression}: ${error.message}` };
  }
}

function dayMatches(fields: CronFields, day: Date): boolean {
  if (!fields.years.has(day.getUTCFullYear()) || !fields.months.has(day.getUTCMonth() + 1)) return false;
  const dom = fields.daysOfMonth?.has(day.getUTCDate());
  const dow = fields.daysOfWeek?.has(day.getUTCDay() + 1);
  if (dom === undefined) return dow ?? true;
  if (dow === undefined) return dom;
  return dom || dow;
}

/**
 * The most recent `count` times the schedule fires in (after, until], newest first. A rate
 * schedule fires at its start and every period after; a cron one at every matching minute (UTC).
 */
export function lastFireTimes(
  expression: Exclude<ParsedExpression, { kind: 'unsupported' }>,
  options: { readonly start: number; readonly until: number; readonly count: number },
): number[] {
  const { start, until, count } = options;
  const out: number[] = [];
  if (until < start) return out;
  if (expression.kind === 'rate') {
    for (let k = Math.floor((until - start) / expression.periodMs); k >= 0 && out.length < count; k--) {
      out.push(start + k * expression.periodMs);
    }
    return out;
  }
  const { fields } = expression;
  const minutes = [...fields.minutes].sort((a, b) => b - a);
  const hours = [...fields.hours].sort((a, b) => b - a);
  const firstDay = Math.floor(until / (1440 * MINUTE)) * 1440 * MINUTE;
  for (let d = 0; d < MAX_CRON_DAYS && out.length < count; d++) {
    const dayStart = firstDay - d * 1440 * MINUTE;
    if (dayStart + 1440 * MINUTE <= start) break;
    if (!dayMatches(fields, new Date(dayStart))) continue;
    for (const h of hours) {
      for (const m of minutes) {
        const at = dayStart + (h * 60 + m) * MINUTE;
        if (at <= until && at >= start && out.length < count) out.push(at);
      }
    }
  }
  return out;
}

export interface ScheduleRow {
  readonly check: string;
  readonly result: 'pass' | 'FAIL' | 'n/a';
  readonly detail: string;
  readonly fix: string;
}

export interface ScheduleCheckDeps {
  readonly scheduler: SchedulerClient;
  readonly sfn: SFNClient;
  readonly stateMachineArn: string;
  /** The stack's schedule group; undefined: every group (schedules are matched by their target). */
  readonly group?: string;
  /** Job kinds whose schedule the stack's settings enable (a row each, found or not). */
  readonly expected: readonly string[];
  readonly now: number;
}

interface Due {
  readonly check: string;
  readonly input: unknown;
  readonly expression: string;
  readonly fires: readonly number[];
}

function parseJson(text: string | undefined): unknown {
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text);
  } catch (error) {
    if (error instanceof SyntaxError) return undefined;
    throw error;
  }
}

function sameJson(a: unknown, b: unknown): boolean {
  const canon = (v: unknown): unknown =>
    v !== null && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(
          Object.entries(v as Record<string, unknown>)
            .sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0))
            .map(([k, w]) => [k, canon(w)]),
        )
      : v;
  return JSON.stringify(canon(a)) === JSON.stringify(canon(b));
}

const iso = (ms: number) => `${new Date(ms).toISOString().slice(0, 16)}Z`;

/** One row per schedule of the state machine (and per expected tier with none). */
export async function checkSchedules(deps: ScheduleCheckDeps): Promise<ScheduleRow[]> {
  const rows: ScheduleRow[] = [];
  const due: Due[] = [];
  const seen = new Set<string>();
  for (const summary of await schedulesOf(deps)) {
    const judged = await judgeSchedule(deps, summary);
    if (judged.tier !== undefined) seen.add(judged.tier);
    if ('row' in judged) rows.push(judged.row);
    else due.push(judged.due);
  }
  for (const tier of deps.expected) {
    if (seen.has(tier)) continue;
    rows.push({
      check: `schedule ${tier}`,
      result: 'FAIL',
      detail: `no schedule${deps.group ? ` in group ${deps.group}` : ''} starts ${deps.stateMachineArn} with {"tier":"${tier}"}`,
      fix: 'cdk deploy the stack (the tier is enabled in its settings); if it is, check the stack events',
    });
  }
  if (due.length === 0) return rows;
  const starts = await findStarts(deps, due);
  return [...rows, ...due.map((d) => dueRow(d, starts))];
}

interface ScheduleSummary {
  readonly name: string;
  readonly group: string | undefined;
}

/** The schedules (every page of ListSchedules) whose target is the state machine. */
async function schedulesOf(deps: ScheduleCheckDeps): Promise<ScheduleSummary[]> {
  const summaries: ScheduleSummary[] = [];
  let nextToken: string | undefined;
  do {
    const page = await deps.scheduler.send(
      new ListSchedulesCommand({
        ...(deps.group !== undefined ? { GroupName: deps.group } : {}),
        ...(nextToken !== undefined ? { NextToken: nextToken } : {}),
      }),
    );
    for (const s of page.Schedules ?? []) {
      if (s.Target?.Arn === deps.stateMachineArn && s.Name !== undefined) {
        summaries.push({ name: s.Name, group: s.GroupName });
      }
    }
    nextToken = page.NextToken;
  } while (nextToken);
  return summaries;
}

/**
 * One schedule: its row when it cannot be judged by its executions (disabled, an expression or
 * time zone this cannot follow, not yet due), else when it was due. `tier`: the one its input names.
 */
async function judgeSchedule(
  deps: ScheduleCheckDeps,
  summary: ScheduleSummary,
): Promise<{ readonly tier: string | undefined } & ({ readonly row: ScheduleRow } | { readonly due: Due })> {
  const got = await deps.scheduler.send(
    new GetScheduleCommand({
      Name: summary.name,
      ...(summary.group !== undefined ? { GroupName: summary.group } : {}),
    }),
  );
  const input = parseJson(got.Target?.Input);
  const tier =
    input !== null && typeof input === 'object' && 'tier' in input && typeof input.tier === 'string'
      ? input.tier
      : undefined;
  const check = `schedule ${tier ?? summary.name}`;
  const expression = got.ScheduleExpression ?? '';
  if (got.State === 'DISABLED') {
    return {
      tier,
      row: {
        check,
        result: 'n/a',
        detail: `${summary.name} (${expression}) is disabled`,
        fix: 'enable it in the Scheduler console, or set the tier enabled in cdk.json and cdk deploy',
      },
    };
  }
  const parsed = parseScheduleExpression(expression);
  const zone = got.ScheduleExpressionTimezone;
  if (
    parsed.kind === 'unsupported' ||
    (parsed.kind === 'cron' && zone !== undefined && !/^(Etc\/)?UTC$/.test(zone))
  ) {
    return {
      tier,
      row: {
        check,
        result: 'n/a',
        detail: `cannot tell when ${summary.name} fires: ${parsed.kind === 'unsupported' ? parsed.reason : `time zone ${zone}`}`,
        fix: "look at the schedule's invocations in the Scheduler console",
      },
    };
  }
  const created = (got.StartDate ?? got.CreationDate)?.getTime() ?? 0;
  const fires = lastFireTimes(parsed, { start: created, until: deps.now - START_GRACE_MS, count: 2 });
  if (fires.length === 0) {
    return {
      tier,
      row: {
        check,
        result: 'n/a',
        detail: `${summary.name} (${expression}) has not been due yet: created ${iso(created)}`,
        fix: 'run compactor doctor again after its next scheduled time',
      },
    };
  }
  return { tier, due: { check, input, expression, fires } };
}

interface Starts {
  /** The execution each due schedule started, by its input. */
  readonly found: ReadonlyMap<
    Due,
    { readonly name: string; readonly startDate: number; readonly status: string }
  >;
  /** MAX_DESCRIBED executions were read before every schedule was found. */
  readonly exhausted: boolean;
  /** The start of the oldest window searched. */
  readonly oldest: number;
}

/** Newest first, until the oldest window: each execution's input names the schedule that started it. */
async function findStarts(deps: ScheduleCheckDeps, due: readonly Due[]): Promise<Starts> {
  const found = new Map<Due, { name: string; startDate: number; status: string }>();
  const oldest = Math.min(...due.map((d) => d.fires[d.fires.length - 1] ?? deps.now)) - MINUTE;
  let described = 0;
  let token: string | undefined;
  do {
    const page = await deps.sfn.send(
      new ListExecutionsCommand({
        stateMachineArn: deps.stateMachineArn,
        maxResults: 100,
        ...(token !== undefined ? { nextToken: token } : {}),
      }),
    );
    for (const execution of page.executions ?? []) {
      // "Running executions are sorted by their startDate or redriveDate, and other executions
      // are sorted by their stopDate" (API_ListExecutions): the scan ends at the first sort date
      // before the oldest window, and passes over one that stopped late but started before it.
      const sortDate = (execution.stopDate ?? execution.redriveDate ?? execution.startDate)?.getTime() ?? 0;
      if (sortDate < oldest) return { found, exhausted: false, oldest };
      const startDate = execution.startDate?.getTime() ?? 0;
      if (startDate < oldest || !execution.executionArn) continue;
      if (described >= MAX_DESCRIBED) return { found, exhausted: true, oldest };
      described++;
      const full = await deps.sfn.send(
        new DescribeExecutionCommand({ executionArn: execution.executionArn }),
      );
      const input = parseJson(full.input);
      for (const d of due) {
        const windowStart = (d.fires[d.fires.length - 1] ?? deps.now) - MINUTE;
        if (found.has(d) || startDate < windowStart || !sameJson(input, d.input)) continue;
        found.set(d, {
          name: execution.name ?? execution.executionArn,
          startDate,
          status: full.status ?? '?',
        });
      }
      if (found.size === due.length) return { found, exhausted: false, oldest };
    }
    token = page.nextToken;
  } while (token);
  return { found, exhausted: false, oldest };
}

/** A due schedule's row: the execution it started, or why none was found. */
function dueRow(d: Due, starts: Starts): ScheduleRow {
  const times = d.fires.map(iso).join(' and ');
  const hit = starts.found.get(d);
  if (hit) {
    return {
      check: d.check,
      result: 'pass',
      detail: `${d.expression}: started ${hit.name} at ${iso(hit.startDate)} (${hit.status}); due ${times}`,
      fix: '',
    };
  }
  if (starts.exhausted) {
    return {
      check: d.check,
      result: 'n/a',
      detail: `${MAX_DESCRIBED} executions since ${iso(starts.oldest)} read without finding input ${JSON.stringify(d.input)}`,
      fix: 'look for it with compactor watch, or in the Step Functions console',
    };
  }
  return {
    check: d.check,
    result: 'FAIL',
    detail: `${d.expression} was due ${times}, and no execution with input ${JSON.stringify(d.input)} started since`,
    fix: "the schedule cannot start the state machine: check its dead-letter queue, the Scheduler role's trust policy (aws:SourceArn is the schedule group's ARN) and its states:StartExecution grant; then cdk deploy",
  };
}

export interface ScheduledCanaryDeps {
  readonly scheduler: SchedulerClient;
  readonly sfn: SFNClient;
  /** The stack's CanaryStateMachineArn output; undefined: the stack has none. */
  readonly canaryStateMachineArn: string | undefined;
  readonly group?: string;
  readonly now: number;
}

/**
 * The scheduled canary (the stack's `canary.enabled`): a schedule that starts its state machine
 * and started it within its last two periods (checkSchedules, its input `{}`), and its last
 * execution that ended (ListExecutions lists the newest first, running ones among them) succeeded.
 */
export async function checkScheduledCanary(deps: ScheduledCanaryDeps): Promise<ScheduleRow[]> {
  const arn = deps.canaryStateMachineArn;
  if (arn === undefined) {
    return [
      {
        check: 'canary',
        result: 'FAIL',
        detail: 'canary.enabled is set, but the stack has no CanaryStateMachineArn output',
        fix: 'cdk deploy the stack with these settings (a stack deployed before the output, or with the canary off, has none)',
      },
    ];
  }
  const schedules = await checkSchedules({
    scheduler: deps.scheduler,
    sfn: deps.sfn,
    stateMachineArn: arn,
    ...(deps.group !== undefined ? { group: deps.group } : {}),
    expected: [],
    now: deps.now,
  });
  const rows: ScheduleRow[] =
    schedules.length === 0
      ? [
          {
            check: 'canary schedule',
            result: 'FAIL',
            detail: `no schedule${deps.group ? ` in group ${deps.group}` : ''} starts ${arn}`,
            fix: 'cdk deploy the stack (canary.enabled adds the schedule); if it is deployed, check the stack events',
          },
        ]
      : schedules.map((row) => ({ ...row, check: 'canary schedule' }));
  const page = await deps.sfn.send(new ListExecutionsCommand({ stateMachineArn: arn, maxResults: 100 }));
  const last = (page.executions ?? []).find((e) => e.status !== 'RUNNING' && e.status !== 'PENDING_REDRIVE');
  const check = 'canary last execution';
  if (last === undefined) {
    rows.push({
      check,
      result: 'n/a',
      detail: `no canary execution has ended yet (${(page.executions ?? []).length} running)`,
      fix: 'run compactor doctor again after the canary schedule has fired',
    });
    return rows;
  }
  const when = last.stopDate ? ` at ${iso(last.stopDate.getTime())}` : '';
  rows.push(
    last.status === 'SUCCEEDED'
      ? { check, result: 'pass', detail: `${last.name} SUCCEEDED${when}`, fix: '' }
      : {
          check,
          result: 'FAIL',
          detail: `${last.name} ${last.status}${when}: the deployed compactor did not compact the canary table exactly, or a canary step failed`,
          fix: `open ${last.executionArn} in the Step Functions console: the failed state and its cause say what; compactor doctor runs the same check by hand`,
        },
  );
  return rows;
}
