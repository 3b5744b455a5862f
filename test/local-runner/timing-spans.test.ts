import { subscribe, tracingChannel, unsubscribe } from 'node:diagnostics_channel';
import { describe, expect, it } from 'vitest';
import { SPAN_CHANNEL, type SpanContext, timed } from '../../functions/local-runner/timing-spans.ts';

describe('timed', () => {
  it('with no subscriber is the plain call: its value, its error', async () => {
    expect(tracingChannel(SPAN_CHANNEL).hasSubscribers).toBe(false);
    await expect(timed('x', async () => 42)).resolves.toBe(42);
    await expect(timed('x', async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
  });

  it("tells a subscriber each span's name as it starts and ends, inner spans inside outer ones", async () => {
    const seen: string[] = [];
    const onStart = (message: unknown) => seen.push(`start ${(message as SpanContext).name}`);
    const onEnd = (message: unknown) => seen.push(`end ${(message as SpanContext).name}`);
    subscribe(`tracing:${SPAN_CHANNEL}:start`, onStart);
    subscribe(`tracing:${SPAN_CHANNEL}:asyncEnd`, onEnd);
    try {
      const value = await timed('outer', async () => {
        await timed('inner', async () => undefined);
        return 'done';
      });
      expect(value).toBe('done');
    } finally {
      unsubscribe(`tracing:${SPAN_CHANNEL}:start`, onStart);
      unsubscribe(`tracing:${SPAN_CHANNEL}:asyncEnd`, onEnd);
    }
    expect(seen).toEqual(['start outer', 'start inner', 'end inner', 'end outer']);
  });
});
