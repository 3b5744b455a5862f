/**
 * How long each step's Lambda runs: the compact step from its measured rates (per input MB and
 * per input file, plus the wait on S3), the other steps at stated durations.
 */

import { LAMBDA_MB_PER_VCPU } from '../lambda-sizing.ts';

/**
 * The compact step's cost per input byte and per input file on Lambda, from one `npm run bench`
 * (bench/results.json, 2026-12-06, cost.rows: lambdaSeconds = max(wall, cpu / 1.7 vCPU)
 * of the compact path, each input fetched from the local folder store):
 * - (i) 200 files, 156,980,933 B: 2.1995 s -> 2.1995 / 156.98 MB = 0.014012 s/MB;
 * - (ii) 2,000 files, 21,030,571 B: 0.7342 s -> (0.7342 - 21.03 x 0.014012) / 2000 = 0.000220 s/file.
 * Rounded up. test/cdk/child-budget.test.ts derives them again from bench/results.json and fails
 * if a newer run is slower.
 */
export const MEASURED_COMPACT = { secondsPerMB: 0.0141, secondsPerFile: 0.00022 } as const;

/**
 * The S3 wait of a compact Lambda, which the local bench does not see: the latency-true S3
 * bench's stated first-byte latency and per-connection throughput (bench/s3-shaper.ts, from the
 * public measurements it cites; bench/results.json s3Latency), with the fewest downloads in
 * flight the compact step uses (downloadConcurrency: 8).
 */
export const S3_WAIT = { megabytesPerSecond: 90, firstByteMs: 25, minInFlight: 8 } as const;

/** The compact step's compute at the measured memory (s). */
function computeSeconds(bytes: number, files: number): number {
  return (bytes / 1e6) * MEASURED_COMPACT.secondsPerMB + files * MEASURED_COMPACT.secondsPerFile;
}

/** Estimated compact duration of a job with `bytes` of input in `files` files (s). */
export function compactEstimateSeconds(bytes: number, files: number): number {
  const s3 =
    bytes / 1e6 / S3_WAIT.megabytesPerSecond + (files * S3_WAIT.firstByteMs) / 1000 / S3_WAIT.minInFlight;
  return computeSeconds(bytes, files) + s3;
}

/** The compact Lambda's memory the rates were measured at (1.7 vCPUs: cpu / 1.7 above). */
export const MEASURED_AT_MB = 3008;

/**
 * The compact step's billed seconds at `memoryMb`: the measured compute stretches on fewer vCPUs
 * than it was measured with (Lambda gives CPU in proportion to memory) and is not assumed to
 * shrink on more; the S3 wait does not depend on memory.
 */
export function compactSecondsAt(memoryMb: number, bytes: number, files: number): number {
  const slower = Math.max(1, MEASURED_AT_MB / LAMBDA_MB_PER_VCPU / (memoryMb / LAMBDA_MB_PER_VCPU));
  return compactEstimateSeconds(bytes, files) + computeSeconds(bytes, files) * (slower - 1);
}

/**
 * A retention job's first step: a stated step, plus a HEAD of every input, at most 8 in flight
 * (expireStep), each waiting the S3 first-byte latency.
 */
export function expireEstimateSeconds(files: number): number {
  return STATED_SECONDS.partitionStep + (files * S3_WAIT.firstByteMs) / 1000 / 8;
}

/**
 * Stated, not measured in AWS: each of the chain's other steps (publish, verify, delete inputs,
 * clear manifest: a manifest read, one to three S3 calls and a manifest write), and each of the
 * execution's own steps (recover, plan, summary).
 */
export const STATED_SECONDS = { partitionStep: 0.5, executionStep: 2 } as const;
