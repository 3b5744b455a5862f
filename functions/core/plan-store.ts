/**
 * Plans as the state machine sees them. The plan step writes one small item per job (what a
 * Map iteration carries, well below Step Functions' 256 KiB payload limit) and the job's input
 * list to its own object, which the compact step reads. Both live under `_compaction/plans/`
 * (expired by a lifecycle rule) and stay in place so a redrive sees the same jobs.
 */

import type { JobKind } from './config.ts';
import { ConfigError, NotFoundError } from './errors.ts';
import type { Job, JobRef } from './job.ts';
import type { Layout } from './layout.ts';
import type { InputRef } from './manifest/manifest.ts';
import type { ObjectStore } from './object-store.ts';
import { RUN_RECORD_DAYS, stateFolder } from './state-root.ts';

/** One Map item: the job and where its inputs are. */
export interface JobItem extends JobRef {
  readonly jobKey: string;
  readonly inputFiles: number;
  readonly inputBytes: number;
}

export function plansPrefix(layout: Layout, executionName: string): string {
  if (!/^[A-Za-z0-9_.:-]{1,80}$/.test(executionName)) {
    throw new ConfigError(`execution name "${executionName}" is not usable in a key`);
  }
  return `${stateFolder(layout.stateRoot, 'plans')}${executionName.replaceAll(':', '-')}/`;
}

export async function writePlan(
  store: ObjectStore,
  layout: Layout,
  executionName: string,
  jobs: readonly Job[],
): Promise<{ readonly itemsKey: string; readonly items: readonly JobItem[] }> {
  const prefix = plansPrefix(layout, executionName);
  const items: JobItem[] = [];
  for (const job of jobs) {
    const jobKey = `${prefix}jobs/${job.jobId}.json`;
    await store.put(jobKey, Buffer.from(JSON.stringify({ ...job, inputs: job.inputs })), {
      contentType: 'application/json',
    });
    items.push({
      tier: job.tier,
      partition: job.partition,
      jobId: job.jobId,
      executionId: job.executionId,
      jobKey,
      inputFiles: job.inputs.length,
      inputBytes: job.inputs.reduce((sum, input) => sum + input.size, 0),
    });
  }
  const itemsKey = `${prefix}items.json`;
  await store.put(itemsKey, Buffer.from(JSON.stringify(items)), { contentType: 'application/json' });
  return { itemsKey, items };
}

/** Reads a job's inputs back; the item must name the same job the file holds. */
export async function readJob(store: ObjectStore, layout: Layout, item: JobItem): Promise<Job> {
  if (!item.jobKey.startsWith(stateFolder(layout.stateRoot, 'plans'))) {
    throw new ConfigError(`job file ${item.jobKey} is outside ${stateFolder(layout.stateRoot, 'plans')}`);
  }
  let body: Buffer;
  try {
    ({ body } = await store.getBytes(item.jobKey));
  } catch (error) {
    if (error instanceof NotFoundError) {
      throw new ConfigError(
        `job file ${item.jobKey} is gone (plans expire after ${RUN_RECORD_DAYS} days): start a new execution`,
        {
          cause: error,
        },
      );
    }
    throw error;
  }
  const job = JSON.parse(body.toString('utf8')) as Job & { inputs: InputRef[] };
  if (job.jobId !== item.jobId || job.partition !== item.partition || job.tier !== item.tier) {
    throw new ConfigError(`job file ${item.jobKey} does not describe job ${item.jobId}`);
  }
  return {
    tier: item.tier as JobKind,
    partition: item.partition,
    jobId: item.jobId,
    executionId: item.executionId,
    inputs: job.inputs,
  };
}
