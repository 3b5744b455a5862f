/**
 * Named timing spans of a local run (the CLI's phases, each step handler, the interpreter),
 * published on Node's diagnostics channel `compactor:span` as a TracingChannel
 * (https://nodejs.org/api/diagnostics_channel.html#class-tracingchannel). With no subscriber, a
 * span is a plain call of its function: a profiler that wants them subscribes, e.g. from a module
 * loaded with `node --import` (bench/whole-process-profile.ts).
 */

import { type TracingChannel, tracingChannel } from 'node:diagnostics_channel';

export const SPAN_CHANNEL = 'compactor:span';

/** What each span's messages carry: its name (`cli: …`, `run: …`, `step: <step>`). */
export interface SpanContext {
  readonly name: string;
}

let channel: TracingChannel<unknown, SpanContext> | undefined;

/** Runs `run` as the span `name`. */
export function timed<T>(name: string, run: () => Promise<T>): Promise<T> {
  channel ??= tracingChannel<unknown, SpanContext>(SPAN_CHANNEL);
  return channel.tracePromise(run, { name });
}
