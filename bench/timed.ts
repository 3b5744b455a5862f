/**
 * Thin wrappers that record when each store call and engine call ran, so a product run can say
 * where its wall time went (download, footer checks, merge, checksum + staging upload).
 * They add a performance.now() pair per call and nothing else.
 */

import type {
  ColumnStats,
  CompactOutput,
  CompactRequest,
  DistinctCount,
  DistinctRequest,
  Engine,
  InputInfo,
  MergeEngineName,
  MergeShape,
} from '../functions/core/engine.ts';
import { ForwardingStore, type PutFile, type WriteOptions } from '../functions/core/object-store.ts';
import { unionMs } from './stats.ts';

interface Span {
  readonly name: string;
  readonly start: number;
  readonly end: number;
}

class Spans {
  readonly list: Span[] = [];

  async time<T>(name: string, run: () => Promise<T>): Promise<T> {
    const start = performance.now();
    try {
      return await run();
    } finally {
      this.list.push({ name, start, end: performance.now() });
    }
  }

  /** First start to last end of the named calls (they may overlap), in ms. */
  span(name: string): number {
    const named = this.list.filter((s) => s.name === name);
    if (named.length === 0) return 0;
    return Math.max(...named.map((s) => s.end)) - Math.min(...named.map((s) => s.start));
  }

  /** Time during which at least one call was running (the union of the intervals), in ms. */
  busy(): number {
    return unionMs(this.list);
  }

  /** Sum of the named calls' durations, in ms. */
  sum(name: string): number {
    return this.list.filter((s) => s.name === name).reduce((total, s) => total + s.end - s.start, 0);
  }
}

export class TimedStore extends ForwardingStore {
  readonly #spans = new Spans();

  phases(_start: number): Record<string, number> {
    return {
      downloadMs: this.#spans.span('getToFile'),
      stagingPutMs: this.#spans.sum('put-staging'),
      manifestMs: this.#spans.sum('manifest'),
    };
  }

  override getBytes(key: string, options?: { readonly ifMatch?: string; readonly signal?: AbortSignal }) {
    return this.#spans.time('manifest', () => super.getBytes(key, options));
  }

  override getToFile(
    key: string,
    path: string,
    options?: { readonly ifMatch?: string; readonly signal?: AbortSignal },
  ) {
    return this.#spans.time('getToFile', () => super.getToFile(key, path, options));
  }

  override put(key: string, body: Buffer | PutFile, options?: WriteOptions) {
    const name = key.includes('/staging/') ? 'put-staging' : 'manifest';
    return this.#spans.time(name, () => super.put(key, body, options));
  }
}

export class TimedEngine implements Engine {
  readonly #inner: Engine;
  readonly #spans = new Spans();

  constructor(inner: Engine) {
    this.#inner = inner;
  }

  phases(start: number): Record<string, number> {
    const compact = this.#spans.list.find((s) => s.name === 'compact');
    return {
      inspectMs: this.#spans.span('inspect'),
      mergeMs: this.#spans.sum('compact'),
      // From the engine's end to the step's end: checksum, staging upload, manifest write.
      ...(compact ? { mergeEndsAtMs: compact.end - start } : {}),
    };
  }

  /** Wall time during which the engine was working (any call running), in ms. */
  busyMs(): number {
    return this.#spans.busy();
  }

  inspect(file: string): Promise<InputInfo> {
    return this.#spans.time('inspect', () => this.#inner.inspect(file));
  }

  compact(request: CompactRequest): Promise<CompactOutput[]> {
    return this.#spans.time('compact', () => this.#inner.compact(request));
  }

  mergeEngines(shape: MergeShape): readonly MergeEngineName[] {
    return this.#inner.mergeEngines?.(shape) ?? ['duckdb'];
  }

  countDistinct(request: DistinctRequest): Promise<DistinctCount> {
    return this.#spans.time('count-distinct', () => this.#inner.countDistinct(request));
  }

  columnStats(file: string): Promise<ColumnStats[]> {
    const inner = this.#inner;
    return this.#spans.time('column-stats', async () => (await inner.columnStats?.(file)) ?? []);
  }

  close(): Promise<void> {
    return this.#inner.close();
  }
}
