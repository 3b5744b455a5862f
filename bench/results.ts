/**
 * What one `npm run bench` measured, as bench/results.json holds it: the run's machine and each
 * section's results. The entry script (run.ts) fills it; the report, the chart and the summary
 * blocks read it.
 */

import type { AuditLakeResult } from './audit-lake.ts';
import type { BacklogResult } from './backlog.ts';
import type { Comparison } from './compare.ts';
import type { CostModel } from './cost.ts';
import type { MemoryResult } from './memory.ts';
import type { OrchestrationResult } from './orchestration.ts';
import type { PartitionProfile } from './partition-profile.ts';
import type { PlannerLakeResult, PlannerScaleResult } from './planner-scale.ts';
import type { ReadersResult } from './readers.ts';
import type { RequestAccounting } from './requests.ts';
import type { S3LatencyResult } from './s3-latency.ts';
import type { SmallPartitionsResult } from './small-partitions.ts';
import type { TransitionCount } from './transitions.ts';

export interface Environment {
  readonly node: string;
  readonly cpu: string;
  readonly cores: number;
  readonly memoryBytes: number;
  readonly arch: string;
  readonly duckdb: string;
  readonly polars: string;
  readonly loadAverageStart: readonly number[];
  readonly loadAverageEnd: readonly number[];
  readonly startedAt: string;
  readonly durationS: number;
}

export interface BenchResults {
  readonly environment: Environment;
  readonly settings: { readonly runs: number; readonly threads: number; readonly productMemoryLimit: string };
  readonly comparisons: readonly Comparison[];
  readonly requests?: RequestAccounting;
  readonly orchestration?: OrchestrationResult;
  readonly planner?: PlannerScaleResult;
  readonly plannerLake?: PlannerLakeResult;
  readonly auditLake?: AuditLakeResult;
  readonly memory?: MemoryResult;
  readonly transitions?: TransitionCount;
  readonly s3Latency?: S3LatencyResult;
  readonly backlog?: BacklogResult;
  readonly partitions?: SmallPartitionsResult;
  readonly readers?: ReadersResult;
  /** One partition's chain in that lake, split into buckets (ms per partition). */
  readonly partitionsProfile?: PartitionProfile;
  readonly cost?: CostModel;
}
