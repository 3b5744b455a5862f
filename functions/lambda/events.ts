/**
 * The shapes the state machine passes to each Lambda, validated at the door so a wrong input
 * fails with a message naming the field instead of somewhere deep in the protocol.
 */

import { JOB_KINDS, type JobKind } from '../core/config.ts';
import { ConfigError } from '../core/errors.ts';
import { COMPACT_SIZES, DEFAULT_COMPACT_SIZE } from '../core/lambda-sizing.ts';
import { ITEM_SHAPES, type ItemShape, type JobItem } from '../core/plan-store.ts';
import type { JobRef } from '../core/protocol.ts';

type Json = Record<string, unknown>;

function object(event: unknown, what: string): Json {
  if (typeof event !== 'object' || event === null || Array.isArray(event)) {
    throw new ConfigError(`${what}: the input must be a JSON object`);
  }
  return event as Json;
}

function text(value: unknown, field: string, what: string): string {
  if (typeof value !== 'string' || value === '')
    throw new ConfigError(`${what}: "${field}" must be a non-empty string`);
  return value;
}

function tier(value: unknown, what: string): JobKind {
  if (!JOB_KINDS.includes(value as JobKind))
    throw new ConfigError(`${what}: "tier" must be one of ${JOB_KINDS.join(', ')}`);
  return value as JobKind;
}

export interface ExecutionEvent {
  readonly tier: JobKind;
  readonly executionId: string;
  readonly executionName: string;
  /** ISO time to plan as if at (tests, replays). */
  readonly now?: string;
  /**
   * Plan only this table (a table path under the data root, e.g. `mydb/cpu/`); the planner checks
   * it against the layout. Recovery is never scoped.
   */
  readonly only?: string;
  /** true: this cycle lists every table whole (a sweep), whatever the last sweep was. */
  readonly sweep?: boolean;
  /**
   * The Map items the calling definition reads (plan-store.ts ItemShape): a definition whose Plan
   * task does not say runs each item as one job.
   */
  readonly itemShape?: ItemShape;
}

export function parseExecutionEvent(event: unknown): ExecutionEvent {
  const e = object(event, 'execution input');
  const now = e.now === undefined || e.now === null ? undefined : text(e.now, 'now', 'execution input');
  if (now !== undefined && Number.isNaN(Date.parse(now)))
    throw new ConfigError(`execution input: "now" is not a time`);
  const only = e.only === undefined || e.only === null ? undefined : text(e.only, 'only', 'execution input');
  const sweep = e.sweep === undefined || e.sweep === null ? undefined : e.sweep;
  const itemShape = e.itemShape === undefined ? undefined : e.itemShape;
  if (itemShape !== undefined && !ITEM_SHAPES.includes(itemShape as ItemShape))
    throw new ConfigError(`execution input: "itemShape" must be one of ${ITEM_SHAPES.join(', ')}`);
  if (sweep !== undefined && typeof sweep !== 'boolean')
    throw new ConfigError(`execution input: "sweep" must be true or false, got ${JSON.stringify(sweep)}`);
  return {
    tier: tier(e.tier, 'execution input'),
    executionId: text(e.executionId, 'executionId', 'execution input'),
    executionName: text(e.executionName, 'executionName', 'execution input'),
    ...(now !== undefined ? { now } : {}),
    ...(only !== undefined ? { only } : {}),
    ...(sweep !== undefined ? { sweep } : {}),
    ...(itemShape !== undefined ? { itemShape: itemShape as ItemShape } : {}),
  };
}

export function parseJobRef(event: unknown): JobRef {
  const e = object(event, 'job');
  return {
    tier: tier(e.tier, 'job'),
    partition: text(e.partition, 'partition', 'job'),
    jobId: text(e.jobId, 'jobId', 'job'),
    executionId: text(e.executionId, 'executionId', 'job'),
  };
}

export function parseJobItem(event: unknown): JobItem {
  const e = object(event, 'job item');
  const ref = parseJobRef(e);
  return {
    ...ref,
    jobKey: text(e.jobKey, 'jobKey', 'job item'),
    inputFiles: Number(e.inputFiles ?? 0),
    inputBytes: Number(e.inputBytes ?? 0),
    // Items of a plan from before waves carry none: they were all a first job.
    wave: Number(e.wave ?? 0),
    // Items planned before sizes existed carry none: they ran on the one (large) function.
    compactSize: COMPACT_SIZES.find((size) => size === e.compactSize) ?? DEFAULT_COMPACT_SIZE,
  };
}

/** The statuses an execution stops in without succeeding: its Summary then comes from a rule. */
export const STOPPED_STATUSES = ['FAILED', 'TIMED_OUT', 'ABORTED'] as const;
export type StoppedStatus = (typeof STOPPED_STATUSES)[number];

interface SummaryEventBase {
  readonly tier: JobKind;
  readonly executionId: string;
  readonly executionName: string;
  /** Percent of partitions that may fail before the execution fails (the stack's map setting). */
  readonly toleratedFailurePercentage: number;
}

/**
 * Summary as the workflow's last state: the ResultWriter manifest of each wave's Map run, none
 * when nothing was planned.
 */
export interface MapSummaryEvent extends SummaryEventBase {
  readonly kind: 'map';
  readonly resultsKeys: readonly string[];
}

/**
 * Summary of an execution that stopped without succeeding, as the stack's EventBridge rule passes
 * it: fields of the "Step Functions Execution Status Change" event, whose `input` is the
 * execution's input as JSON text (https://docs.aws.amazon.com/step-functions/latest/dg/eventbridge-integration.html).
 */
export interface StoppedSummaryEvent extends SummaryEventBase {
  readonly kind: 'stopped';
  readonly status: StoppedStatus;
}

export type SummaryEvent = MapSummaryEvent | StoppedSummaryEvent;

/** Absent (a definition from before the setting reached Summary) means no failure is tolerated. */
function percentage(value: unknown): number {
  if (value === undefined) return 0;
  if (typeof value !== 'number' || !(value >= 0 && value <= 100)) {
    throw new ConfigError(
      `summary input: "toleratedFailurePercentage" must be a number from 0 to 100, got ${JSON.stringify(value)}`,
    );
  }
  return value;
}

/** An execution ARN ends with its name (`...:execution:<machine>:<name>`). */
function nameOf(executionId: string): string {
  return executionId.slice(executionId.lastIndexOf(':') + 1);
}

function stoppedTier(input: unknown): JobKind {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text(input, 'input', 'summary input'));
  } catch (error) {
    throw new ConfigError('summary input: "input" must be the execution input as JSON text', {
      cause: error,
    });
  }
  return tier(object(parsed, 'summary input "input"').tier, 'summary input "input"');
}

export function parseSummaryEvent(event: unknown): SummaryEvent {
  const e = object(event, 'summary input');
  const executionId = text(e.executionId, 'executionId', 'summary input');
  const base = {
    executionId,
    executionName:
      e.executionName === undefined
        ? nameOf(executionId)
        : text(e.executionName, 'executionName', 'summary input'),
    toleratedFailurePercentage: percentage(e.toleratedFailurePercentage),
  };
  if (e.status !== undefined) {
    if (!STOPPED_STATUSES.includes(e.status as StoppedStatus)) {
      throw new ConfigError(`summary input: "status" must be one of ${STOPPED_STATUSES.join(', ')}`);
    }
    return { kind: 'stopped', ...base, tier: stoppedTier(e.input), status: e.status as StoppedStatus };
  }
  return { kind: 'map', ...base, tier: tier(e.tier, 'summary input'), resultsKeys: resultsKeysOf(e) };
}

/**
 * The ResultWriter manifests of the waves' Map runs, oldest first: `maps` nests each wave's Map
 * result beside the list before it (the workflow's Next wave state); `map` is the one Map result
 * of a definition from before waves.
 */
function resultsKeysOf(e: Json): string[] {
  const keys: string[] = [];
  const add = (value: unknown, where: string) => {
    if (value === undefined || value === null) return;
    if (Array.isArray(value)) {
      for (const [i, inner] of value.entries()) add(inner, `${where}[${i}]`);
      return;
    }
    const written = object(value, `summary input "${where}"`).ResultWriterDetails;
    if (written === undefined) return;
    keys.push(
      text(
        object(written, `${where}.ResultWriterDetails`).Key,
        `${where}.ResultWriterDetails.Key`,
        'summary input',
      ),
    );
  };
  add(e.maps, 'maps');
  add(e.map, 'map');
  return keys.reverse();
}

/** What each step of the scheduled canary takes: its id, and the hour it was written in once seeded. */
export interface CanaryEvent {
  readonly id: string;
  readonly hourStart?: number;
}

export function parseCanaryEvent(event: unknown): CanaryEvent {
  const what = 'canary input';
  const e = object(event, what);
  const id = text(e.id, 'id', what);
  if (e.hourStart === undefined) return { id };
  if (typeof e.hourStart !== 'number' || !Number.isSafeInteger(e.hourStart))
    throw new ConfigError(
      `${what}: "hourStart" must be a time in milliseconds, got ${JSON.stringify(e.hourStart)}`,
    );
  return { id, hourStart: e.hourStart };
}
