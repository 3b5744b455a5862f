/** Bounded concurrency for the steps, the planner's listings and the bench, and the calls in flight. */

/**
 * Runs fn over items with at most `limit` calls in flight. After the first failure no new item
 * starts, and every started call settles before the error is rethrown: nothing of a failed step
 * runs on behind its back.
 */
export async function forEachLimit<T>(
  items: readonly T[],
  limit: number,
  fn: (item: T, index: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  let failed = false;
  const workers = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (!failed && next < items.length) {
      const index = next++;
      try {
        await fn(items[index] as T, index);
      } catch (error) {
        failed = true;
        throw error;
      }
    }
  });
  const settled = await Promise.allSettled(workers);
  const rejected = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (rejected) throw rejected.reason;
}

/**
 * The calls in flight through something that closes (an engine, a store): `idle` resolves once
 * none is, for whoever closes it to wait on after refusing new calls.
 */
export class CallsInFlight {
  #count = 0;
  #waiting: (() => void)[] = [];

  /** Runs `work` as one call in flight; counted from this call on, until it settles. */
  async run<T>(work: () => Promise<T>): Promise<T> {
    this.#count++;
    try {
      return await work();
    } finally {
      if (--this.#count === 0) for (const resolve of this.#waiting.splice(0)) resolve();
    }
  }

  /** Resolves once no call is in flight (at once when none is). */
  idle(): Promise<void> {
    if (this.#count === 0) return Promise.resolve();
    return new Promise((resolve) => this.#waiting.push(resolve));
  }
}
