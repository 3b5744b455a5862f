import { describe, expect, it } from 'vitest';
import type { Comparison, ToolSummary } from '../../bench/compare.ts';
import { targets } from '../../bench/report-targets.ts';
import type { BenchResults } from '../../bench/results.ts';
import type { Tool } from '../../bench/worker.ts';

const MIB = 2 ** 20;

function tool(name: Tool, wallMs: number, outputMiB: number, phases?: Record<string, number>): ToolSummary {
  return {
    tool: name,
    runs: 5,
    wallMs,
    cpuMs: wallMs,
    maxRssBytes: 100 * MIB,
    outputBytes: outputMiB * MIB,
    mbPerS: 1,
    rowsPerS: 1,
    ratioVsDuckDb: wallMs / 3000,
    ...(phases ? { phases } : {}),
  };
}

/** Dataset (i)'s shape with the product on DuckDB, slower than polars and under 4 M rows/s. */
function results(dataset: Partial<Comparison['dataset']> = {}): BenchResults {
  const comparison: Comparison = {
    dataset: { id: 'i', title: '(i)', files: 200, rows: 10_000_000, columns: 6, bytes: 157e6, ...dataset },
    tools: [
      tool('product', 2900, 22.8, { mergeMs: 2750 }),
      tool('duckdb', 3000, 64.2),
      tool('polars-sink', 2400, 34.2),
      tool('write', 700, 22.8),
    ],
    polarsModes: [],
    polarsBest: 'polars-sink',
    samples: [],
  };
  return {
    environment: {} as BenchResults['environment'],
    settings: { runs: 5, threads: 2, productMemoryLimit: '2200MB' },
    comparisons: [comparison],
  };
}

const named = (all: ReturnType<typeof targets>, prefix: string) => all.find((t) => t.name.startsWith(prefix));

describe('targets', () => {
  it("explains a missed rows/s target by the merge's share and the engines' own rates", () => {
    const row = named(targets(results()), 'i: one compact job');
    expect(row?.met).toBe(false);
    expect(row?.cause).toMatch(
      /^the merge takes 2,750 of the job's 2,900 ms \(3\.64 M rows\/s by itself, raw DuckDB's whole run 3\.33 M rows\/s, polars best \(scan\+sink\) 4\.17 M rows\/s\); the merge is DuckDB's own/,
    );
  });

  it("names the merge rule's bound that keeps a job on DuckDB, and polars' larger output", () => {
    const narrow = named(targets(results()), "i: product's merge");
    expect(narrow?.cause).toMatch(
      /keeps this job on DuckDB: 6 columns, fewer than 12, and polars' run here writes 34\.2 MiB where the product writes 22\.8 MiB$/,
    );
    const small = named(targets(results({ columns: 20, files: 2000, bytes: 21e6 })), "i: product's merge");
    expect(small?.cause).toMatch(/keeps this job on DuckDB: inputs of 10 KiB on average, under 128 KiB,/);
    const large = named(targets(results({ columns: 20, bytes: 400 * MIB })), "i: product's merge");
    expect(large?.cause).toMatch(/keeps this job on DuckDB: 400 MiB of input, over 192 MiB,/);
  });
});
