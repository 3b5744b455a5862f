/**
 * The seeded simulation's context for a test file: made before its tests and closed after them.
 * Closing also proves no seed wrote through a hard link into the shared template.
 */

import { afterAll, beforeAll } from 'vitest';
import { createSimContext, type SimContext } from './sim-run.ts';

export function useSimContext(ready: (ctx: SimContext) => void): void {
  let ctx: SimContext | undefined;
  beforeAll(async () => {
    ctx = await createSimContext();
    ready(ctx);
  });
  afterAll(async () => {
    await ctx?.close();
  });
}
