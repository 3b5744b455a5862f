/**
 * What a Lambda's memory gives the compact step's DuckDB: its vCPUs and its memory limit. Pure
 * (no aws-cdk-lib), so the stack, the cost model and the bench size it with the same numbers.
 */

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
