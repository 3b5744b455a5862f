/**
 * The shapes the state machine passes to each Lambda, validated at the door so a wrong input
 * fails with a message naming the field instead of somewhere deep in the protocol.
 */

import { JOB_KINDS, type JobKind } from '../core/config.ts';
import { ConfigError } from '../core/errors.ts';
import type { JobItem } from '../core/plan-store.ts';
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
}

export function parseExecutionEvent(event: unknown): ExecutionEvent {
  const e = object(event, 'execution input');
  const now = e.now === undefined || e.now === null ? undefined : text(e.now, 'now', 'execution input');
  if (now !== undefined && Number.isNaN(Date.parse(now)))
    throw new ConfigError(`execution input: "now" is not a time`);
  const only = e.only === undefined || e.only === null ? undefined : text(e.only, 'only', 'execution input');
  const sweep = e.sweep === undefined || e.sweep === null ? undefined : e.sweep;
  if (sweep !== undefined && typeof sweep !== 'boolean')
    throw new ConfigError(`execution input: "sweep" must be true or false, got ${JSON.stringify(sweep)}`);
  return {
    tier: tier(e.tier, 'execution input'),
    executionId: text(e.executionId, 'executionId', 'execution input'),
    executionName: text(e.executionName, 'executionName', 'execution input'),
    ...(now !== undefined ? { now } : {}),
    ...(only !== undefined ? { only } : {}),
    ...(sweep !== undefined ? { sweep } : {}),
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
  };
}

export interface SummaryEvent {
  readonly tier: JobKind;
  readonly executionId: string;
  /** The Map state's ResultWriterDetails, absent when nothing was planned. */
  readonly resultsKey?: string;
  /** Percent of partitions that may fail before the execution fails (the stack's map setting). */
  readonly toleratedFailurePercentage: number;
}

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

export function parseSummaryEvent(event: unknown): SummaryEvent {
  const e = object(event, 'summary input');
  const details = e.map === undefined || e.map === null ? undefined : object(e.map, 'summary input "map"');
  const written = details?.ResultWriterDetails as Json | undefined;
  return {
    tier: tier(e.tier, 'summary input'),
    executionId: text(e.executionId, 'executionId', 'summary input'),
    toleratedFailurePercentage: percentage(e.toleratedFailurePercentage),
    ...(written ? { resultsKey: text(written.Key, 'map.ResultWriterDetails.Key', 'summary input') } : {}),
  };
}
