/**
 * Express child workflows (cdk/child-budget.ts, cdk/config.ts `map.childExecutionType`):
 * - the setting, its default (EXPRESS) and its validation, errors naming the key;
 * - synth refuses Express settings whose chain could outlast five minutes (a 900 s compact
 *   timeout, long partition steps) or whose job bound the measured throughput says would not
 *   finish in half the compact timeout; Standard accepts them and keeps its bigger jobs;
 * - the measured rates are no more optimistic than bench/results.json, and the default Express
 *   bound is the largest power of two of MiB that those rates allow.
 */

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  CHILD_DEFAULTS,
  chainWorstCase,
  EXPRESS_BUDGET_SECONDS,
  JOB_TIMEOUT_SHARE,
} from '../../cdk/child-budget.ts';
import { parseStackConfig } from '../../cdk/config.ts';
import { compactEstimateSeconds, MEASURED_COMPACT, S3_WAIT } from '../../functions/core/cost/index.ts';

const MiB = 1024 * 1024;

describe('map.childExecutionType', () => {
  it('defaults to EXPRESS with Express job bounds and timeouts', () => {
    const config = parseStackConfig(undefined);
    expect(config.map.childExecutionType).toBe('EXPRESS');
    expect(config.maxJobBytes).toBe(256 * MiB);
    expect(config.maxJobFiles).toBe(2000);
    expect(config.lambda.compact.timeoutSeconds).toBe(36);
    expect(config.lambda.partitionSteps.timeoutSeconds).toBe(9);
    // recover, plan and summary run in the (Standard) parent: unchanged.
    expect(config.lambda.others.timeoutSeconds).toBe(300);
  });

  it('STANDARD keeps the bigger jobs and the Lambda maximum', () => {
    const config = parseStackConfig({ map: { childExecutionType: 'STANDARD' } });
    expect(config).toMatchObject({
      maxJobBytes: 2048 * MiB,
      maxJobFiles: 5000,
      lambda: { compact: { timeoutSeconds: 900 }, partitionSteps: { timeoutSeconds: 300 } },
    });
  });

  it('rejects anything else, naming the key and the choices', () => {
    expect(() => parseStackConfig({ map: { childExecutionType: 'express' } })).toThrow(
      /context compactor\.map\.childExecutionType must be "EXPRESS" or "STANDARD" \(per-partition chains of at most five minutes, or bigger jobs\), got "express"/,
    );
    expect(() => parseStackConfig({ map: { childExecutionType: 1 } })).toThrow(
      /compactor\.map\.childExecutionType must be "EXPRESS" or "STANDARD" .*, got 1$/,
    );
  });
});

describe('synth refuses Express children that could outlast five minutes', () => {
  it('a 900 s compact timeout: the error names the key, the chain’s worst case and the way out', () => {
    const attempt = () => parseStackConfig({ lambda: { compact: { timeoutSeconds: 900 } } });
    expect(attempt).toThrow(/context compactor\.map\.childExecutionType is "EXPRESS"/);
    expect(attempt).toThrow(/can take 1997 s \(compact 2 x 912 s \+ 1 s, publish 2 x 21 s \+ 1 s/);
    expect(attempt).toThrow(/lower lambda\.compact\.timeoutSeconds \(900\)/);
    expect(attempt).toThrow(/set map\.childExecutionType to "STANDARD"/);
    // The same timeout with Standard children is fine.
    expect(
      parseStackConfig({
        map: { childExecutionType: 'STANDARD' },
        lambda: { compact: { timeoutSeconds: 900 } },
      }).lambda.compact.timeoutSeconds,
    ).toBe(900);
  });

  it('partition steps of a minute each do not fit either', () => {
    expect(() => parseStackConfig({ lambda: { partitionSteps: { timeoutSeconds: 60 } } })).toThrow(
      /compactor\.map\.childExecutionType .* can take 677 s .*lambda\.partitionSteps\.timeoutSeconds \(60\)/,
    );
  });

  it('the largest settings that fit are accepted, one second more is not', () => {
    // 2 x (T + 12) + 1 + 172 <= 270 -> T <= 36.
    expect(
      parseStackConfig({ lambda: { compact: { timeoutSeconds: 36 } } }).lambda.compact.timeoutSeconds,
    ).toBe(36);
    expect(() => parseStackConfig({ lambda: { compact: { timeoutSeconds: 37 } } })).toThrow(/can take 271 s/);
  });

  it('a job bound the measured throughput cannot finish in half the compact timeout', () => {
    expect(() => parseStackConfig({ maxJobBytes: 1024 * MiB })).toThrow(
      /context compactor\.maxJobBytes \(1073741824\) with maxJobFiles \(2000\) makes a job of about 33\.8 s .* more than 50% of lambda\.compact\.timeoutSeconds \(36\)/,
    );
    expect(() => parseStackConfig({ maxJobFiles: 5000 })).toThrow(
      /compactor\.maxJobBytes .*maxJobFiles \(5000\)/,
    );
    // Standard: the compact timeout is 900 s, 1 GiB is well within it.
    expect(
      parseStackConfig({ map: { childExecutionType: 'STANDARD' }, maxJobBytes: 1024 * MiB }).maxJobBytes,
    ).toBe(1024 * MiB);
  });

  it('the small compact function’s largest job, slower on its 0.58 vCPU, must fit the same share of the timeout', () => {
    // 64 MiB in 2,000 files: 8.4 s on the large function (under 10.5 s), 11.1 s on the small one.
    const tight = { maxJobBytes: 64 * MiB, lambda: { compact: { timeoutSeconds: 21 } } };
    expect(() => parseStackConfig(tight)).toThrow(
      /compactor\.lambda\.compact\.timeoutSeconds \(21\) is also the small compact function's \(1024 MB\), whose largest job \(67108864 bytes in maxJobFiles 2000 files\) is estimated at 11\.1 s/,
    );
    // Without a small function (lambda.compact no larger) the large one's bound alone applies.
    expect(
      parseStackConfig({ ...tight, lambda: { compact: { timeoutSeconds: 21, memoryMb: 1024 } } }).maxJobBytes,
    ).toBe(64 * MiB);
  });
});

describe('the Express job bound is derived from the measured throughput', () => {
  type CostRow = { scenario: string; inputBytes: number; files: number; lambdaSeconds: number };
  const results = JSON.parse(readFileSync(new URL('../../bench/results.json', import.meta.url), 'utf8')) as {
    cost: { rows: CostRow[] };
    s3Latency: { firstByteLatencyMs: number; bytesPerSecond: number };
  };
  const row = (prefix: string) => {
    const found = results.cost.rows.find((r) => r.scenario.startsWith(prefix));
    if (!found) throw new Error(`bench/results.json has no cost row ${prefix}`);
    return found;
  };

  it('the rates in the code are no faster than the last bench run measured', () => {
    // (i) 200 large files: per byte; (ii) 2,000 small files: what is left per file.
    const big = row('(i) 200 files');
    const small = row('(ii) 2,000 files');
    const perMB = big.lambdaSeconds / (big.inputBytes / 1e6);
    const perFile = (small.lambdaSeconds - (small.inputBytes / 1e6) * perMB) / small.files;
    expect(MEASURED_COMPACT.secondsPerMB).toBeGreaterThanOrEqual(perMB);
    expect(MEASURED_COMPACT.secondsPerFile).toBeGreaterThanOrEqual(perFile);
    // Rounded up, not padded: within 2% and 5% of the measurement.
    expect(MEASURED_COMPACT.secondsPerMB).toBeLessThan(perMB * 1.02);
    expect(MEASURED_COMPACT.secondsPerFile).toBeLessThan(perFile * 1.05);
    // The S3 wait is the latency-true S3 bench's, as printed with the results.
    expect(S3_WAIT.megabytesPerSecond).toBe(results.s3Latency.bytesPerSecond / 1e6);
    expect(S3_WAIT.firstByteMs).toBe(results.s3Latency.firstByteLatencyMs);
  });

  it('the default Express bound is the largest power of two of MiB finishing in half the compact timeout', () => {
    const d = CHILD_DEFAULTS.EXPRESS;
    const allowed = d.compactTimeoutSeconds * JOB_TIMEOUT_SHARE;
    expect(compactEstimateSeconds(d.maxJobBytes, d.maxJobFiles)).toBeCloseTo(13.46, 1);
    expect(compactEstimateSeconds(d.maxJobBytes, d.maxJobFiles)).toBeLessThanOrEqual(allowed);
    expect(compactEstimateSeconds(2 * d.maxJobBytes, d.maxJobFiles)).toBeGreaterThan(allowed);
    // And its chain fits: 269 s.
    expect(
      chainWorstCase({
        type: 'EXPRESS',
        compactTimeoutSeconds: d.compactTimeoutSeconds,
        partitionStepTimeoutSeconds: d.partitionStepTimeoutSeconds,
      }).totalSeconds,
    ).toBe(269);
    expect(269).toBeLessThanOrEqual(EXPRESS_BUDGET_SECONDS);
  });
});

describe('a local run takes the stack’s job bounds', () => {
  it('Express bounds by default, Standard’s when configured (the steps then fit the definition’s task timeouts)', async () => {
    const { buildConfig } = await import('../../functions/cli/context.ts');
    const local = (context: object) => buildConfig({ context: JSON.stringify(context) }, '');
    expect(local({})).toMatchObject({ maxJobBytes: 256 * MiB, maxJobFiles: 2000 });
    expect(local({ map: { childExecutionType: 'STANDARD' } })).toMatchObject({
      maxJobBytes: 2048 * MiB,
      maxJobFiles: 5000,
    });
  });
});
