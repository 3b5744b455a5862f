/**
 * The simulation's lake, generated once: one day of one table with
 * - two hour folders of raw files (hourly partitions 05 and 06),
 * - two hourly outputs under Arc's names (hours 01 and 02: the daily tier's inputs),
 * - a job an operator has not resolved yet (hour 07): its raw input, the output that failed
 *   verification and the quarantine record that keeps both out of every plan and every delete,
 * - a `_SUCCESS` marker and a `.crc` file that are never data.
 * Every seed gets the lake as hard links to the template's files: the same inodes, so the same
 * bytes and the same ETags, at the cost of a few link() calls. The store never writes a file in
 * place (it renames new files over keys), so the template is never modified; `verifyTemplate`
 * checks that at the end of a run.
 */

import { mkdir, mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { type LocalFolderStore, RESERVED_DIR } from '../../functions/adapters/local-store/local-store.ts';
import { type CompactorConfig, type ConfigInput, parseConfig } from '../../functions/core/config.ts';
import {
  type Manifest,
  manifestKey,
  outputKey,
  quarantinedManifestKey,
  serializeManifest,
  stagingPrefix,
} from '../../functions/core/manifest/manifest.ts';
import { type LakeFile, writeLake } from './lake-harness.ts';
import { changedFiles, hashFiles, linkFiles } from './linked-tree.ts';
import { testStore } from './test-store.ts';

// The hive layout: three folder levels instead of Arc's six, so every listing (the store's, the
// planner's, the checkers' after every call) walks half the folders. The protocol is the same.
const DAY = 'cpu/dt=2025-01-14/';

export const SIM_FILES: readonly LakeFile[] = [
  { key: `${DAY}hour=01/cpu_20250114_010000_compacted.parquet`, rows: 6 },
  { key: `${DAY}hour=02/cpu_20250114_020000_compacted.parquet`, rows: 6 },
  { key: `${DAY}hour=05/cpu_20250114_050500_1.parquet`, rows: 5 },
  { key: `${DAY}hour=05/cpu_20250114_053000_2.parquet`, rows: 5 },
  { key: `${DAY}hour=06/cpu_20250114_060500_3.parquet`, rows: 5 },
  { key: `${DAY}hour=06/cpu_20250114_063000_4.parquet`, rows: 5 },
  // The unresolved quarantined job's input (ids 33..36).
  { key: `${DAY}hour=07/cpu_20250114_070500_9.parquet`, rows: 4 },
];

export const SIM_UNTOUCHED = [`${DAY}hour=05/_SUCCESS`, `${DAY}hour=05/.cpu_20250114_050500_1.parquet.crc`];

export const FIXTURE_JOB = '20250114T090000Z-0badf00d';
const FIXTURE_PARTITION = `${DAY}hour=07/`;
const FIXTURE_INPUT = `${FIXTURE_PARTITION}cpu_20250114_070500_9.parquet`;

export function simConfig(targetFileBytes: number, smallJobsPerItem?: number): CompactorConfig {
  const input: ConfigInput = {
    layout: 'hive',
    // Hive-shaped keys read by globs and the visible view only: no reader maps dt=/hour= to
    // partition columns, so the daily tier may write into dt=…/ (with hive's partitions it is refused).
    partitionSegments: [],
    tiers: {
      hourly: { minFiles: 2, minAgeSeconds: 3600 },
      daily: { enabled: true, minFiles: 2, minAgeSeconds: 3 * 3600 },
    },
    quietSeconds: 0,
    targetFileBytes,
    rowGroupSize: 2048,
    ...(smallJobsPerItem === undefined ? {} : { smallJobsPerItem }),
  };
  return parseConfig(input);
}

export interface SimTemplate {
  readonly dir: string;
  readonly totalRows: number;
  /** The quarantined job's keys: never planned, never deleted while its record exists. */
  readonly fixtureInput: string;
  readonly fixtureOutput: string;
  /** Content hash of every template file, to prove no seed wrote through a hard link. */
  readonly hashes: ReadonlyMap<string, string>;
}

/** Where lakes go: a RAM disk when there is one (the store fsyncs every write). */
export async function simRoot(): Promise<string> {
  for (const base of ['/dev/shm', tmpdir()]) {
    try {
      return await mkdtemp(join(base, 'compactor-sim-'));
    } catch {
      // not writable: try the next
    }
  }
  throw new Error('no writable temp folder');
}

export async function simTemplate(engine: DuckDbEngine, root: string): Promise<SimTemplate> {
  const dir = join(root, 'template');
  await mkdir(dir);
  const totalRows = await writeLake(engine, dir, SIM_FILES);
  const store = testStore(dir);
  await store.put(SIM_UNTOUCHED[0] as string, Buffer.from(''));
  await store.put(SIM_UNTOUCHED[1] as string, Buffer.from('crc'));
  // The unresolved job's published output: the same rows as its input (it failed verification).
  const config = simConfig(1 << 20);
  const probe = config.layout.parse(FIXTURE_INPUT);
  if (!probe) throw new Error('fixture input is not a data key');
  const fixtureOutput = outputKey(config.layout, 'hourly', probe, FIXTURE_JOB, 0);
  await store.put(fixtureOutput, { file: join(dir, FIXTURE_INPUT) });
  const hashes = await hashFiles(dir);
  return { dir, totalRows, fixtureInput: FIXTURE_INPUT, fixtureOutput, hashes };
}

/** A seed's lake: the template's data files as hard links (the store's own folder is not shared). */
export async function linkLake(template: SimTemplate, dir: string): Promise<void> {
  const data = [...template.hashes.keys()].filter((file) => file.split('/')[0] !== RESERVED_DIR);
  await linkFiles(template.dir, dir, data);
}

/** Throws if any template file changed (a write through a hard link would corrupt every seed). */
export async function verifyTemplate(template: SimTemplate): Promise<void> {
  const [file] = await changedFiles(template.dir, template.hashes);
  if (file !== undefined) throw new Error(`template file ${file} changed: a seed wrote through a hard link`);
}

/**
 * Writes the quarantine record of the unresolved job into a seed's lake (it names the store's
 * location, so it is per lake). The manifest it keeps validates: planner and visible view obey it.
 */
export async function writeFixtureRecord(
  store: LocalFolderStore,
  config: CompactorConfig,
  template: SimTemplate,
): Promise<string> {
  const input = await store.head(template.fixtureInput);
  const output = await store.head(template.fixtureOutput);
  if (!input || !output) throw new Error('fixture files missing');
  const partition = FIXTURE_PARTITION;
  const key = manifestKey(config.layout, 'hourly', partition);
  const manifest: Manifest = {
    version: 1,
    jobId: FIXTURE_JOB,
    executionId: 'exec-long-ago',
    tier: 'hourly',
    partition,
    location: store.location,
    state: 'verified',
    inputs: [{ key: input.key, size: input.size, etag: input.etag }],
    inputRows: 4,
    outputs: [
      {
        stagingKey: `${stagingPrefix(config.layout, FIXTURE_JOB)}00000000/${template.fixtureOutput.split('/').at(-1)}`,
        finalKey: output.key,
        size: output.size,
        rows: 4,
        checksum: { algorithm: 'CRC32', value: 'AAAAAA==' },
      },
    ],
    createdAt: '2025-01-14T09:00:00.000Z',
    updatedAt: '2025-01-14T09:05:00.000Z',
    leaseExpiresAt: '2025-01-14T09:25:00.000Z',
  };
  const recordKey = quarantinedManifestKey(config.layout, key, 'fixture');
  const record = {
    manifestKey: key,
    etag: 'fixture',
    reason: `published output ${output.key} does not match the manifest (checksum): an operator has not resolved it yet`,
    quarantinedAt: '2025-01-14T09:06:00.000Z',
    jobId: FIXTURE_JOB,
    manifest: serializeManifest(manifest).toString('utf8'),
  };
  await store.put(recordKey, Buffer.from(JSON.stringify(record, null, 2)));
  return recordKey;
}
