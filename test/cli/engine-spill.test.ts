/**
 * The CLI's engines spill apart: DuckDB names its spill files alike in every instance, so two
 * engines of one work dir (two runs, or a run and its helper thread) each get a spill folder of
 * their own, which DuckDB removes when it closes; a folder a killed process left is removed by
 * the next engine built there.
 */

import { mkdir, readdir } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { buildEngine } from '../../functions/cli/context.ts';
import { useTempDir } from '../support/engine-fixture.ts';

let root: string;
useTempDir('engine-spill-', (dir) => {
  root = dir;
});

/** A sort of about 150 MB of rows, under a 60MB limit: it spills. */
const SPILLING_SORT =
  "CREATE TABLE sorted AS SELECT * FROM (SELECT random() AS r, repeat('x', 50) AS s FROM range(2000000)) ORDER BY r";

it('spills two engines of one work dir at once, each to its own folder, and leaves none', async () => {
  const workDir = join(root, 'work');
  // A scratch folder of a process that is gone (no pid is this large).
  const gone = join(workDir, `local-${hostname()}-99999999-0badc0de`);
  await mkdir(join(gone, 'spill'), { recursive: true });
  const options = { 'work-dir': workDir, 'memory-limit': '60MB', threads: '1' };
  const a = await buildEngine(options);
  const b = await buildEngine(options);
  try {
    expect(await readdir(workDir)).toEqual([]);
    await Promise.all([a.engine.query(SPILLING_SORT), b.engine.query(SPILLING_SORT)]);
    // Each spilled, to a folder of its own.
    expect(await readdir(workDir)).toHaveLength(2);
  } finally {
    await a.engine.close();
    await b.engine.close();
  }
  expect(await readdir(workDir)).toEqual([]);
});
