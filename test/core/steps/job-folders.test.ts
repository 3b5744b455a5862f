import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { returnJobFolder, takeJobFolder } from '../../../functions/core/steps/job-folders.ts';

let root: string;
beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'job-folders-'));
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

/** What a job leaves in its folder: downloads, a folder of them, and an output. */
async function fill(folder: { dir: string; outDir: string }): Promise<void> {
  await writeFile(join(folder.dir, '0.parquet'), 'input');
  await mkdir(join(folder.dir, 'in-1'));
  await writeFile(join(folder.dir, 'in-1', '1.parquet'), 'input');
  await writeFile(join(folder.outDir, 'part-00000.parquet'), 'output');
}

describe('job folders', () => {
  it('hands out an empty folder with an empty outputs folder, made on first use', async () => {
    const workDir = join(root, 'work', 'scratch');
    const folder = takeJobFolder(workDir);
    expect(folder.outDir.startsWith(folder.dir)).toBe(true);
    expect(await readdir(folder.dir)).toEqual(['out']);
    expect(await readdir(folder.outDir)).toEqual([]);
  });

  it('empties a returned folder and hands the same one to the next job, not to two at once', async () => {
    const workDir = join(root, 'work');
    const first = takeJobFolder(workDir);
    const second = takeJobFolder(workDir);
    expect(second.dir).not.toBe(first.dir);
    await fill(first);
    returnJobFolder(workDir, first);
    expect(await readdir(first.dir)).toEqual(['out']);
    expect(await readdir(first.outDir)).toEqual([]);
    const third = takeJobFolder(workDir);
    expect(third).toEqual(first);
    // Kept per work folder: another work folder's job gets its own.
    expect(takeJobFolder(join(root, 'other')).dir.startsWith(join(root, 'other'))).toBe(true);
  });

  it('makes a new folder when a kept one is gone (the work folder was reset)', async () => {
    const workDir = join(root, 'work');
    const folder = takeJobFolder(workDir);
    returnJobFolder(workDir, folder);
    await rm(workDir, { recursive: true });
    const next = takeJobFolder(workDir);
    expect(existsSync(next.outDir)).toBe(true);
    expect(await readdir(next.outDir)).toEqual([]);
  });

  it('forgets a folder removed while its job ran, without an error', async () => {
    const workDir = join(root, 'work');
    const folder = takeJobFolder(workDir);
    await rm(folder.dir, { recursive: true });
    expect(() => returnJobFolder(workDir, folder)).not.toThrow();
    const next = takeJobFolder(workDir);
    expect(next.dir).not.toBe(folder.dir);
    expect(existsSync(next.outDir)).toBe(true);
  });
});
