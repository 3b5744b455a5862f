/**
 * The price of fixing what `compactor audit` finds: `compactor repair`, then a cycle that compacts
 * the partitions still uncompacted. Repair runs where the CLI runs, so it costs S3 requests only;
 * the cycle is priced as `compactor plan` prices one (cycleCost).
 */

import { type CostSettings, type CycleCost, cycleCost, type JobToPrice } from './cycle.ts';
import { PRICE_BASIS, PRICE_REGION, type RequestCounts, requestsOfListing, requestsUsd } from './prices.ts';
import { addCalls, addRequests, jobCalls, requestsOf, type StoreCalls } from './requests.ts';
import type { TransitionCount } from './transitions.ts';

/** A folder repair checks: an output of its tier beside that tier's inputs (repair.ts findRepairs). */
export interface RepairFolderToPrice {
  /** Outputs of the folder: the evidence downloaded. */
  readonly outputs: number;
  /** Inputs of the folder not held by a job: each downloaded. */
  readonly inputs: number;
  /** Inputs every row of which the outputs hold: the ones repair deletes. */
  readonly duplicates: number;
}

/**
 * The store calls repair makes for one folder (repair.ts): findRepairs downloads every output and
 * input; where there are duplicates, repairPartition claims the folder (a manifest put, read back),
 * downloads the outputs and the duplicates again to re-check them on the versions it claimed, commits
 * the manifest as verified, then deletes the inputs and clears as every job does (a receipt).
 */
export function repairCalls(folder: RepairFolderToPrice): StoreCalls {
  const check: StoreCalls = { getToFile: folder.outputs + folder.inputs };
  if (folder.duplicates === 0) return check;
  const job = jobCalls({ inputs: folder.duplicates, outputs: 0 });
  return addCalls(
    check,
    { put: 1, getBytes: 1 },
    { getToFile: folder.outputs + folder.duplicates },
    { put: 1 },
    job['delete-inputs'],
    job['clear-manifest'],
  );
}

export interface FixCost {
  readonly region: string;
  readonly basis: string;
  readonly repair: {
    readonly folders: number;
    readonly duplicates: number;
    readonly requests: RequestCounts;
    readonly usd: number;
  };
  /** The cycle compacting the partitions left uncompacted; undefined when there are none. */
  readonly compaction: CycleCost | undefined;
  readonly requests: RequestCounts;
  readonly totalUsd: number;
}

/**
 * Repair's listing of the data root (`listedObjects` keys, one LIST per 1,000) and its folders,
 * then one cycle over `compactions` (its planning: the same listing, as a sweep lists every table
 * whole). `cycle` is needed only when there is something to compact.
 */
export function fixCost(input: {
  readonly listedObjects: number;
  readonly repairs: readonly RepairFolderToPrice[];
  readonly compactions: readonly JobToPrice[];
  readonly cycle?: { readonly settings: CostSettings; readonly transitions: TransitionCount };
}): FixCost {
  const listing: RequestCounts = { get: 0, put: 0, delete: 0, list: requestsOfListing(input.listedObjects) };
  const repairRequests =
    input.repairs.length === 0
      ? addRequests()
      : addRequests(listing, requestsOf(addCalls(...input.repairs.map(repairCalls))));
  const repair = {
    folders: input.repairs.length,
    duplicates: input.repairs.reduce((sum, f) => sum + f.duplicates, 0),
    requests: repairRequests,
    usd: requestsUsd(repairRequests),
  };
  let compaction: CycleCost | undefined;
  if (input.compactions.length > 0) {
    if (!input.cycle)
      throw new Error('fixCost: the compaction of a cycle needs its settings and transitions');
    compaction = cycleCost({ jobs: input.compactions, ...input.cycle, planning: listing });
  }
  return {
    region: PRICE_REGION,
    basis: PRICE_BASIS,
    repair,
    compaction,
    requests: addRequests(repair.requests, compaction?.total.requests ?? addRequests()),
    totalUsd: repair.usd + (compaction?.total.totalUsd ?? 0),
  };
}
