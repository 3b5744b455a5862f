/**
 * What a Lambda's memory gives the compact step's DuckDB: its vCPUs and its memory limit. Pure
 * (no aws-cdk-lib), so the stack, the cost model and the bench size it with the same numbers.
 */

import type { ExecutionType } from './pipeline.ts';

/**
 * "At 1,769 MB, a function has the equivalent of one vCPU (one vCPU-second of credits per
 * second)": https://docs.aws.amazon.com/lambda/latest/dg/configuration-memory.html
 */
export const LAMBDA_MB_PER_VCPU = 1769;

/** Lambda gives 1 vCPU per 1,769 MB of memory, up to 6: DuckDB's threads. */
export function vcpusFor(memoryMb: number): number {
  return Math.min(6, Math.max(1, Math.ceil(memoryMb / LAMBDA_MB_PER_VCPU)));
}

/** DuckDB gets about 75% of the memory, in whole 100 MB: Node, the SDK and buffers need the rest. */
export function duckDbMemoryLimit(memoryMb: number): string {
  return `${Math.max(100, Math.floor((memoryMb * 0.75) / 100) * 100)}MB`;
}

/**
 * The compact step's function sizes. Every job runs on the stack's `lambda.compact` function
 * ("large") unless it is small enough for the small one, which costs less per second: Lambda
 * bills GB-seconds ("the amount of memory you allocate to your function",
 * https://aws.amazon.com/lambda/pricing/), and a small job spends much of its run waiting on S3,
 * where memory it does not use is paid for all the same.
 */
export const COMPACT_SIZES = ['small', 'large'] as const;
export type CompactSize = (typeof COMPACT_SIZES)[number];

/** What an item planned without a size (by an older plan step) runs with: today's one function. */
export const DEFAULT_COMPACT_SIZE: CompactSize = 'large';

const MiB = 1024 * 1024;

/**
 * The small compact function: 1,024 MB (0.58 vCPU, DuckDB gets 1 thread and 700MB) for
 * compaction jobs of at most 64 MiB of input, and every retention job (which reads no data).
 * - Memory: the compact step's measured peak RSS (bench/results.json, 2 threads, DuckDB's limit
 *   2200MB) was 448 MB for 21 MB in 2,000 files and 882 MB for 157 MB in 200 files, so a job of
 *   64 MiB (about 600 MB between the two) stays well under 1,024 MB; DuckDB's memory_limit bounds
 *   its buffer manager (https://duckdb.org/docs/stable/operations_manual/limits.html), which
 *   spills past 700MB to its temp_directory (adapters/duckdb-engine) rather than failing.
 *   test/core/lambda-sizing.test.ts reads those figures again from bench/results.json.
 * - Time: on 0.58 vCPU the measured compute stretches 2.9x (cost/durations.ts compactSecondsAt);
 *   the largest small job (64 MiB in 2,000 files) is estimated at 11.1 s, under half of the
 *   Express compact timeout (cdk/child-budget.ts checks it at synth time for the stack's
 *   settings). At 128 MiB it would be 14.6 s, still under it, and at 256 MiB 21.6 s, over it:
 *   memory sets the bound, time would at 256 MiB.
 * - Disk: 512 MB, the free ephemeral storage: the inputs and the output, 128 MiB at most.
 */
export const SMALL_COMPACT = { memoryMb: 1024, ephemeralStorageMb: 512, maxJobBytes: 64 * MiB } as const;

/** What the small compact function's memory gives its DuckDB (a local run's helper thread's engine too). */
export const SMALL_ENGINE = {
  memoryLimit: duckDbMemoryLimit(SMALL_COMPACT.memoryMb),
  threads: vcpusFor(SMALL_COMPACT.memoryMb),
} as const;

/** The compact function a planned job runs on. */
export function compactSizeOf(job: { readonly tier: string; readonly inputBytes: number }): CompactSize {
  return job.tier === 'retention' || job.inputBytes <= SMALL_COMPACT.maxJobBytes ? 'small' : 'large';
}

/**
 * The small compact function's memory where the stack has one, else undefined: only for Express
 * children, and only when `lambda.compact` is larger. A Standard child would pay one more state
 * transition for the Choice between the two ($0.025 per 1,000, https://aws.amazon.com/step-functions/pricing/),
 * more than a small job saves in GB-seconds (docs/performance.md, "Compact function sizes").
 */
export function smallCompactMemoryMb(
  childExecutionType: ExecutionType,
  compactMemoryMb: number,
): number | undefined {
  return childExecutionType === 'EXPRESS' && SMALL_COMPACT.memoryMb < compactMemoryMb
    ? SMALL_COMPACT.memoryMb
    : undefined;
}
