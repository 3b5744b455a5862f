/**
 * Memoisation of the real DuckDB engine for the seeded simulation. Every seed starts from the
 * SAME Parquet bytes (hard links to one template), so the same merges recur thousands of times:
 * the first time a (content of the inputs, request) pair is seen, the real DuckDB engine runs;
 * later the same output bytes are written again. Results are keyed by the SHA-1 of the input
 * files' contents, so a changed file is never served a stale answer. Errors are never cached.
 */

import { createHash } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import type { SqlRunner } from '../../functions/adapters/sample-data.ts';
import type {
  ColumnStats,
  CompactOutput,
  CompactRequest,
  DistinctCount,
  DistinctRequest,
  Engine,
  InputInfo,
} from '../../functions/core/engine.ts';

async function contentHash(path: string): Promise<string> {
  return createHash('sha1')
    .update(await readFile(path))
    .digest('hex');
}

export interface MemoStats {
  inspectHits: number;
  inspectRuns: number;
  compactHits: number;
  compactRuns: number;
  queryHits: number;
  queryRuns: number;
}

export class MemoEngine implements Engine {
  readonly #inner: Engine;
  readonly #inspected = new Map<string, InputInfo>();
  readonly #compacted = new Map<string, { name: string; bytes: Buffer; rows: number }[]>();
  readonly stats: MemoStats;

  constructor(inner: Engine, stats: MemoStats) {
    this.#inner = inner;
    this.stats = stats;
  }

  async inspect(file: string): Promise<InputInfo> {
    const hash = await contentHash(file);
    const known = this.#inspected.get(hash);
    if (known) {
      this.stats.inspectHits++;
      return known;
    }
    this.stats.inspectRuns++;
    const info = await this.#inner.inspect(file);
    this.#inspected.set(hash, info);
    return info;
  }

  async compact(request: CompactRequest): Promise<CompactOutput[]> {
    const hashes = await Promise.all(request.inputs.map(contentHash));
    const key = JSON.stringify({
      hashes,
      columns: request.columns,
      sortBy: request.sortBy,
      targetFileBytes: request.targetFileBytes,
      rowGroupSize: request.rowGroupSize,
      dedup: request.dedup,
    });
    const known = this.#compacted.get(key);
    if (known) {
      this.stats.compactHits++;
      request.signal?.throwIfAborted();
      await mkdir(request.outputDir, { recursive: true });
      const outputs: CompactOutput[] = [];
      for (const out of known) {
        const path = join(request.outputDir, out.name);
        await writeFile(path, out.bytes, { flag: 'wx' });
        outputs.push({ path, rows: out.rows, bytes: out.bytes.length });
      }
      return outputs;
    }
    this.stats.compactRuns++;
    const outputs = await this.#inner.compact(request);
    const saved = await Promise.all(
      outputs.map(async (o) => ({ name: basename(o.path), bytes: await readFile(o.path), rows: o.rows })),
    );
    this.#compacted.set(key, saved);
    return outputs;
  }

  countDistinct(request: DistinctRequest): Promise<DistinctCount> {
    return this.#inner.countDistinct(request);
  }

  async columnStats(file: string): Promise<ColumnStats[]> {
    return (await this.#inner.columnStats?.(file)) ?? [];
  }

  close(): Promise<void> {
    return this.#inner.close();
  }
}

/**
 * A SqlRunner for the invariant checker's id reads (`readIds`): the query is keyed by the
 * content of every local file it names, so re-reading the same bytes under another path or in
 * another seed costs nothing.
 */
export function memoQueries(engine: DuckDbEngine, stats: MemoStats): SqlRunner {
  const cache = new Map<string, Awaited<ReturnType<DuckDbEngine['query']>>>();
  return {
    async query(sql: string) {
      const parts: string[] = [];
      let last = 0;
      for (const match of sql.matchAll(/'((?:[^']|'')*)'/g)) {
        const literal = (match[1] ?? '').replaceAll("''", "'");
        if (!literal.startsWith('/')) continue;
        const path = literal.replace(/\[(.)\]/g, '$1');
        parts.push(sql.slice(last, match.index), `'sha1:${await contentHash(path)}'`);
        last = (match.index ?? 0) + match[0].length;
      }
      if (parts.length === 0) return engine.query(sql);
      parts.push(sql.slice(last));
      const key = parts.join('');
      const known = cache.get(key);
      if (known) {
        stats.queryHits++;
        return known;
      }
      stats.queryRuns++;
      const rows = await engine.query(sql);
      cache.set(key, rows);
      return rows;
    },
  };
}
