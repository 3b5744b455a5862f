/**
 * The job items a plan's items file carries, as the Map's children run them: each Map item's
 * jobs, or the item itself where the plan wrote one job an item (a Plan event without itemShape).
 */

import type { ObjectStore } from '../../functions/core/object-store.ts';
import type { JobItem, MapItem } from '../../functions/core/plan-store.ts';

export async function planJobItems(store: ObjectStore, itemsKey: string): Promise<JobItem[]> {
  const items = JSON.parse((await store.getBytes(itemsKey)).body.toString('utf8')) as (MapItem | JobItem)[];
  return items.flatMap((item) => ('jobs' in item ? item.jobs : [item]));
}
