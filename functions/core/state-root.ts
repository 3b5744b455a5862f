/**
 * The state root's key scheme, written once: where under `<dataPrefix>_compaction/` each kind of
 * state lives, and how long the run records are kept. The core's keys (manifests, staging,
 * quarantine, plans, results, failures, the store probe), the stack's grants, lifecycle rules and
 * Map reader and writer, the local runner and the docs all take them from here. Pure.
 */

/** The state root's folder under the data root: never matched by a data glob. */
export const STATE_ROOT_FOLDER = '_compaction/';

/** The state root of a data root ('' or ending with '/'). */
export function stateRootOf(dataPrefix: string): string {
  return `${dataPrefix}${STATE_ROOT_FOLDER}`;
}

/** The folders under the state root, each ending with '/'. */
export const STATE_FOLDERS = {
  /** One live manifest per tier and partition: the lease. */
  manifests: 'manifests/',
  /** Each job's staged outputs, `staging/{jobId}/...`. */
  staging: 'staging/',
  quarantine: 'quarantine/',
  /** The Map's items (one per job) and the sweep markers: run records. */
  plans: 'plans/',
  /** The Map's ResultWriter output: run records. */
  results: 'results/',
  /** Consecutive failures per partition (backoff). */
  failures: 'failures/',
  /** The store probe's objects. */
  probe: 'probe/',
  /** One immutable receipt per committed job, `receipts/{partition}/{jobId}.{tier}.json`. */
  receipts: 'receipts/',
} as const;
export type StateFolder = keyof typeof STATE_FOLDERS;

/** A folder of the state root, e.g. `stateFolder('lake/_compaction/', 'plans')` = `lake/_compaction/plans/`. */
export function stateFolder(stateRoot: string, folder: StateFolder): string {
  return `${stateRoot}${STATE_FOLDERS[folder]}`;
}

/**
 * How long a run's records (plans/, results/) are kept: the bucket's lifecycle rule expires them
 * after this many days, and a local run removes its own as old. Step Functions redrives
 * executions that stopped "in the last 14 days"
 * (https://docs.aws.amazon.com/step-functions/latest/apireference/API_RedriveExecution.html), and a redrive
 * reads its plan again, so they are kept a day longer.
 */
export const RUN_RECORD_DAYS = 15;

/** A folder of the state root whose objects expire some days after they were written. */
export interface StateExpiry {
  /** The bucket's lifecycle rule's id. */
  readonly id: string;
  readonly folder: StateFolder;
  readonly days: number;
}

/**
 * What expires from the state root: the bucket's lifecycle rules (cdk/constructs/data-bucket.ts),
 * which a local run applies itself to a store that has none (local-runner/run.ts). Nothing else
 * under the state root ever expires.
 */
export function stateExpiries(days: {
  readonly runRecords: number;
  readonly receipts: number;
}): StateExpiry[] {
  return [
    { id: 'expire-map-plans', folder: 'plans', days: days.runRecords },
    { id: 'expire-map-results', folder: 'results', days: days.runRecords },
    { id: 'expire-receipts', folder: 'receipts', days: days.receipts },
  ];
}

const DAY_MS = 86_400_000;

/**
 * When an object written at `lastModifiedMs` expires under a rule of `days`: as S3 reckons it,
 * the days added to its creation time and rounded up to the next midnight UTC
 * (https://docs.aws.amazon.com/AmazonS3/latest/userguide/intro-lifecycle-rules.html, "Lifecycle
 * rules: Based on an object's age").
 */
export function expiresAtMs(lastModifiedMs: number, days: number): number {
  return Math.ceil((lastModifiedMs + days * DAY_MS) / DAY_MS) * DAY_MS;
}

/** The longest a redrive can come after its execution stopped (the same page). */
export const REDRIVE_WINDOW_DAYS = RUN_RECORD_DAYS - 1;
