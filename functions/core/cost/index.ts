/** The cost model: AWS's list prices and what a cycle of the workflow spends of them. Pure. */

export {
  type CostLine,
  type CostSettings,
  type CycleCost,
  chainSeconds,
  compactMemoryOf,
  cycleCost,
  type JobToPrice,
  jobCost,
  kindOf,
  scheduleSeconds,
} from './cycle.ts';
export {
  compactEstimateSeconds,
  compactSecondsAt,
  expireEstimateSeconds,
  MEASURED_AT_MB,
  MEASURED_COMPACT,
  S3_WAIT,
  STATED_SECONDS,
} from './durations.ts';
export { type FixCost, fixCost, type RepairFolderToPrice, repairCalls } from './fix.ts';
export {
  CHILD_START_TRANSITIONS,
  COMMAND_CLASS,
  expressBilledSeconds,
  expressDurationUsd,
  LIST_PAGE_KEYS,
  lambdaDurationUsd,
  lambdaRequestsUsd,
  PRICE_BASIS,
  PRICE_REGION,
  PRICES,
  type RequestClass,
  type RequestCounts,
  requestsOfListing,
  requestsUsd,
  STORE_CALL_CLASS,
  type StoreCall,
  transitionsUsd,
} from './prices.ts';
export { RequestCountingStore } from './request-counter.ts';
export {
  addCalls,
  addRequests,
  floorRequests,
  ITEM_RECORD_CALLS,
  JOB_RECORD_CALLS,
  type JobKindPriced,
  type JobShape,
  jobCalls,
  multipartRequests,
  NO_REQUESTS,
  outputSizes,
  PART_BYTES,
  RECOVER_CALLS,
  requestsOf,
  STEP_CALLS,
  type StoreCalls,
  SUMMARY_CALLS,
  scaleCalls,
  WAVE_CALLS,
} from './requests.ts';
export { countTransitions, type StateMachineStates, type TransitionCount } from './transitions.ts';
