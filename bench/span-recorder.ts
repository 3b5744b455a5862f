/**
 * Loaded with `node --import bench/span-recorder.ts` before a command: records the product's
 * timing spans (functions/local-runner/timing-spans.ts, Node's diagnostics channel) with their
 * nesting depth, and at exit writes them, with when this module ran and when the process exited
 * (ms since the process's time origin), as JSON to the file $COMPACTOR_SPAN_FILE.
 */

import { AsyncLocalStorage } from 'node:async_hooks';
import { tracingChannel } from 'node:diagnostics_channel';
import { writeFileSync } from 'node:fs';
import { SPAN_CHANNEL, type SpanContext } from '../functions/local-runner/timing-spans.ts';

/** What the recorder writes. */
export interface SpanRecord {
  /** When this module ran: Node's own start-up before it. */
  readonly loadedAtMs: number;
  /** Node's 'exit' event. */
  readonly exitAtMs: number;
  readonly spans: readonly {
    readonly name: string;
    readonly depth: number;
    readonly start: number;
    readonly end: number;
  }[];
}

const loadedAtMs = performance.now();
const file = process.env.COMPACTOR_SPAN_FILE;
if (!file) throw new Error('span-recorder: set COMPACTOR_SPAN_FILE to the file to write the spans to');
const spans: SpanRecord['spans'][number][] = [];
type Timed = SpanContext & { depth?: number; start?: number };
const depth = new AsyncLocalStorage<number>();
const channel = tracingChannel<number, Timed>(SPAN_CHANNEL);
// The span's depth: one more than the span it runs in (its caller's store, read before entering).
channel.start.bindStore(depth, (context) => {
  context.depth = (depth.getStore() ?? 0) + 1;
  return context.depth;
});
channel.subscribe({
  start(context) {
    context.start = performance.now();
  },
  end() {},
  asyncStart() {},
  asyncEnd(context) {
    spans.push({
      name: context.name,
      depth: context.depth ?? 1,
      start: context.start ?? 0,
      end: performance.now(),
    });
  },
  error() {},
});
process.on('exit', () => {
  const record: SpanRecord = { loadedAtMs, exitAtMs: performance.now(), spans };
  writeFileSync(file, JSON.stringify(record));
});
