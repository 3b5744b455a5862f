/**
 * A Distributed Map's results, as the emulation shapes them: what a redrive re-runs (the items
 * that did not succeed), the results of every run merged, written to the store the way a
 * ResultWriter lays them out in S3, and the tolerated failure percentage applied to them.
 */

import { randomBytes } from 'node:crypto';
import { MAP_FAILED_ERROR } from '../contract.ts';
import type { ObjectStore } from '../core/object-store.ts';
import type { Json, JsonObject } from './asl-graph.ts';
import type { MapEmulation } from './map-emulation.ts';

export interface ItemResult {
  readonly Status: 'SUCCEEDED' | 'FAILED';
  readonly Item: Json;
  readonly Output?: Json;
  readonly Error?: string;
  readonly Cause?: string;
}

export class ExceedToleratedFailureThresholdError extends Error {
  override readonly name = MAP_FAILED_ERROR;
}

/** Redrive: only the items that did not succeed in the Map's last run run again. */
export function itemsToRun(items: Json[], previous: readonly ItemResult[] | undefined): Json[] {
  if (!previous) return items;
  const succeeded = new Set(
    previous.filter((r) => r.Status === 'SUCCEEDED').map((r) => JSON.stringify(r.Item)),
  );
  return items.filter((item) => !succeeded.has(JSON.stringify(item)));
}

/** This run's results after the items that succeeded in the runs before (a redrive's). */
export function mergeResults(
  previous: readonly ItemResult[] | undefined,
  results: readonly ItemResult[],
): ItemResult[] {
  const earlier = (previous ?? []).filter((r) => r.Status === 'SUCCEEDED');
  return [...earlier, ...results.map(stripInternals)];
}

/** Fails the Map, as AWS does, when more of its items failed than it tolerates. */
export function checkTolerance(map: MapEmulation, all: readonly ItemResult[]): void {
  const failed = all.filter((r) => r.Status === 'FAILED').length;
  if (all.length > 0 && (failed * 100) / all.length > map.tolerated) {
    throw new ExceedToleratedFailureThresholdError(
      `${failed} of ${all.length} items failed, above the tolerated ${map.tolerated}%; first: ${all.find((r) => r.Status === 'FAILED')?.Error}`,
    );
  }
}

function stripInternals(result: ItemResult): ItemResult {
  const item = { ...(result.Item as JsonObject) };
  delete item.__error;
  delete item.__result;
  return { ...result, Item: item };
}

/**
 * Writes results the way a Distributed Map's ResultWriter lays them out in S3: in a new Map
 * Run's folder, or again in the folder of the run whose manifest is `rewritten` (a redrive).
 */
export async function writeResults(
  store: ObjectStore,
  map: MapEmulation,
  executionName: string,
  results: readonly ItemResult[],
  rewritten?: string,
): Promise<{ ResultWriterDetails: { Bucket: string; Key: string } }> {
  const root = map.prefix.replace(/\/$/, '');
  const base =
    rewritten?.endsWith('/manifest.json') && rewritten.startsWith(`${root}/`)
      ? rewritten.slice(0, -'/manifest.json'.length)
      : `${root}/${executionName}-${randomBytes(4).toString('hex')}`;
  const files: Record<string, { Key: string; Size: number }[]> = { FAILED: [], PENDING: [], SUCCEEDED: [] };
  for (const status of ['SUCCEEDED', 'FAILED'] as const) {
    const entries = results
      .filter((r) => r.Status === status)
      .map((r) => ({
        Status: r.Status,
        Input: JSON.stringify(r.Item),
        ...(r.Output !== undefined ? { Output: JSON.stringify(r.Output) } : {}),
        ...(r.Error !== undefined ? { Error: r.Error, Cause: r.Cause ?? '' } : {}),
      }));
    if (entries.length === 0) continue;
    const key = `${base}/${status}_0.json`;
    const body = Buffer.from(JSON.stringify(entries));
    await store.put(key, body, { contentType: 'application/json' });
    files[status]?.push({ Key: key, Size: body.length });
  }
  const manifestKey = `${base}/manifest.json`;
  await store.put(
    manifestKey,
    Buffer.from(
      JSON.stringify({
        DestinationBucket: map.bucket,
        MapRunArn: `local:${base.slice(root.length + 1)}`,
        ResultFiles: files,
      }),
    ),
    { contentType: 'application/json' },
  );
  return { ResultWriterDetails: { Bucket: map.bucket, Key: manifestKey } };
}
