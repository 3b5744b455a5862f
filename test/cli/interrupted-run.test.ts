/**
 * What an interrupted `compactor run` leaves and what `status` and `verify` say of it: the real
 * CLI process is killed with SIGKILL, or SIGINT as Ctrl-C sends (it says what resolves it, then
 * dies of the signal), as soon as a job's manifest is on disk; the next run removes a dead run's
 * scratch. Both commands then name the owner's liveness and the exact
 * `compactor recover` command, with the --store (and layout options) they were given; status exits
 * 1 for it, and for a failing partition. The same manifest owned by a Step Functions execution or
 * another host's process is described only as far as this host can know. And verify on a hive
 * lake read without --layout hive says which layout the lake reads as, as plan and run do.
 */

import { spawn } from 'node:child_process';
import { cp, mkdir, mkdtemp, readdir, readFile, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { beforeAll, describe, expect, it } from 'vitest';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { LocalFolderStore } from '../../functions/adapters/local-store/local-store.ts';
import { parseConfig } from '../../functions/core/config.ts';
import { systemClock } from '../../functions/core/engine.ts';
import { recordFailure } from '../../functions/core/failures.ts';
import { Layout } from '../../functions/core/layout.ts';
import { manifestsRoot } from '../../functions/core/manifest/manifest.ts';
import { cli, dayOfHours, idMismatch, lakeIds, spawnHourlyRun, stateKeys } from '../support/cli-lake.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { writeLake } from '../support/lake-harness.ts';

const ARC = Layout.fromName('arc');
const HOURS = 6;
const FILES_PER_HOUR = 3;
const SFN_OWNER = 'arn:aws:states:us-east-1:123456789012:execution:Compactor:hourly-1';

let engine: DuckDbEngine;
let root: string;
/** A copy of the lake a killed run left, with its one manifest: its key, text and owner pid. */
let killed: { dir: string; total: number; manifestKey: string; manifest: string; pid: number };

useEngineAndDir('cli-interrupted-', (e, dir) => {
  engine = e;
  root = dir;
});

async function manifestKeys(dir: string): Promise<string[]> {
  return (await stateKeys(dir)).filter((k) => k.startsWith(manifestsRoot(ARC)));
}

/**
 * Runs `compactor run --tier hourly` and sends it `signal` once a manifest is on disk: its pid and
 * stderr if the signal killed it with a manifest left, else undefined (the job had ended first).
 */
async function killMidJob(
  dir: string,
  signal: NodeJS.Signals,
): Promise<{ pid: number; stderr: string } | undefined> {
  // One job at a time (one an item, one item at once): a kill mid-job leaves one manifest.
  const { child, exit } = spawnHourlyRun(dir, join(root, 'work'), [
    '--concurrency',
    '1',
    '--context',
    '{"smallJobsPerItem":1}',
  ]);
  let running = true;
  void exit.then(() => {
    running = false;
  });
  const manifests = join(dir, manifestsRoot(ARC));
  while (running) {
    const found = await readdir(manifests, { recursive: true }).catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return [];
      throw error;
    });
    if (found.some((name) => name.endsWith('.json'))) {
      child.kill(signal);
      break;
    }
    await sleep(2);
  }
  const ended = await exit;
  return ended.signal === signal && (await manifestKeys(dir)).length > 0 && child.pid !== undefined
    ? { pid: child.pid, stderr: ended.stderr }
    : undefined;
}

beforeAll(async () => {
  const template = join(root, 'template');
  const files = dayOfHours(HOURS, FILES_PER_HOUR, () => 2000);
  const total = await writeLake(engine, template, files);
  const { dir, pid } = await interrupted('SIGKILL');
  const [manifestKey = ''] = await manifestKeys(dir);
  killed = { dir, total, manifestKey, manifest: await readFile(join(dir, manifestKey), 'utf8'), pid };
});

/** A copy of the template lake a run interrupted by `signal` left with one manifest. */
async function interrupted(signal: NodeJS.Signals): Promise<{ dir: string; pid: number; stderr: string }> {
  // A kill can land after the job cleared its manifest: take a fresh copy and try again.
  for (let attempt = 1; attempt <= 5; attempt++) {
    const dir = await mkdtemp(join(root, `${signal}-${attempt}-`));
    await cp(join(root, 'template'), dir, { recursive: true });
    const killedRun = await killMidJob(dir, signal);
    if (killedRun !== undefined && (await manifestKeys(dir)).length === 1) return { dir, ...killedRun };
  }
  throw new Error(
    `no ${signal} left one manifest in 5 attempts: the run finished its jobs before the signal landed`,
  );
}

/**
 * A copy of the killed lake, its manifest bound to the copy's folder (a manifest names its store)
 * and, given one, naming another owner.
 */
async function copyKilled(name: string, owner?: string): Promise<string> {
  const dir = await mkdtemp(join(root, `${name}-`));
  await cp(killed.dir, dir, { recursive: true });
  const manifest = JSON.parse(killed.manifest) as { executionId: string };
  await writeFile(
    join(dir, killed.manifestKey),
    JSON.stringify({
      ...manifest,
      location: new LocalFolderStore(dir).location,
      ...(owner === undefined ? {} : { executionId: owner }),
    }),
  );
  return dir;
}

function partitionOf(): string {
  return (JSON.parse(killed.manifest) as { partition: string }).partition;
}

describe('status and verify after a run killed mid-job', () => {
  it('status names the dead owner pid and the recover command with the same --store, and exits 1', async () => {
    const dir = await copyKilled('status');
    const fix = `\`compactor recover --store ${dir}\` resolves it now`;
    const status = await cli('status', '--store', dir);
    expect(status.code, status.text).toBe(1);
    expect(status.text).toMatch(/^live manifests: 1 \(1 whose owner is not running\)$/m);
    const line = status.text.split('\n').find((l) => l.includes(`pid ${killed.pid} is not running`));
    expect(line, status.text).toBeDefined();
    expect(line).toContain(partitionOf());
    expect(line).toContain(fix);
    const json = JSON.parse((await cli('status', '--store', dir, '--json')).text) as {
      live: { ownerAlive: boolean | null; ownerNote: string }[];
    };
    expect(json.live.map((l) => l.ownerAlive)).toEqual([false]);
    expect(json.live[0]?.ownerNote).toContain(fix);

    // The lake's options go into the command, so recover reads the lake as status did.
    const withLayout = await cli('status', '--store', dir, '--layout', 'arc');
    expect(withLayout.text).toContain(`\`compactor recover --store ${dir} --layout arc\` resolves it now`);

    // The command given resolves it: status is clean afterwards, every row still there once.
    const recovered = await cli('recover', '--store', dir);
    expect(recovered.code, recovered.err.join('\n')).toBe(0);
    expect(await manifestKeys(dir)).toEqual([]);
    const after = await cli('status', '--store', dir);
    expect(after.text).toMatch(/^live manifests: 0$/m);
    expect(idMismatch(await lakeIds(engine, dir), killed.total)).toBeUndefined();
  });

  it('after Ctrl-C (SIGINT) the run says what resolves it and dies of the signal; status says the same', async () => {
    const { dir, pid, stderr } = await interrupted('SIGINT');
    expect(stderr).toContain(
      `interrupted (SIGINT): partitions in flight keep their manifests; \`compactor recover --store ${dir} --context '{"smallJobsPerItem":1}'\` resolves them now`,
    );
    const status = await cli('status', '--store', dir);
    expect(status.code, status.text).toBe(1);
    expect(status.text).toContain(
      `owner pid ${pid} is not running: \`compactor recover --store ${dir}\` resolves it now`,
    );
  });

  it('verify names the dead owner and the recover command on the partition the manifest holds', async () => {
    const verify = await cli('verify', '--store', killed.dir);
    expect(verify.err).toEqual([]);
    const day = partitionOf().split('/').slice(0, 5).join('/');
    const row = verify.text.split('\n').find((l) => l.startsWith(`${day}/`));
    expect(row, verify.text).toBeDefined();
    expect(row).toContain(`pid ${killed.pid} is not running`);
    expect(row).toContain(`\`compactor recover --store ${killed.dir}\` resolves it now`);
    // Verify changed nothing: the manifest is still there.
    expect(await manifestKeys(killed.dir)).toEqual([killed.manifestKey]);
  });

  it('a Step Functions owner is described only as far as this host knows, and does not fail status', async () => {
    const dir = await copyKilled('sfn', SFN_OWNER);
    const status = await cli('status', '--store', dir);
    expect(status.code, status.text).toBe(0);
    const line = status.text.split('\n').find((l) => l.includes('Step Functions execution'));
    expect(line, status.text).toBeDefined();
    expect(line).toContain(partitionOf());
    expect(line).not.toContain('not running');
    expect(line).toContain(`\`compactor recover --store ${dir}\` resolves it once its lease expires`);
    // Past the lease, recover takes it over whatever the owner: the command resolves it now.
    const later = await cli(
      'status',
      '--store',
      dir,
      '--now',
      new Date(Date.now() + 3_600_000).toISOString(),
    );
    expect(later.text).toContain('resolves it now');
    const verify = await cli('verify', '--store', dir);
    expect(verify.text).toContain('Step Functions execution');
  });

  it("another host's process is not guessed at", async () => {
    const dir = await copyKilled('other-host', 'local:some-other-host:4242:0a1b2c3d');
    const status = await cli('status', '--store', dir);
    expect(status.code, status.text).toBe(0);
    expect(status.text).toContain('pid 4242 on host some-other-host');
    expect(status.text).not.toContain('not running');
  });
});

describe('the scratch a killed run leaves', () => {
  it('is removed by the next run in the same work dir, and only the dead owner’s', async () => {
    const work = join(root, 'work');
    // The pid of a process that has ended: what a killed run's scratch is named by.
    const ended = spawn(process.execPath, ['-e', '']);
    await new Promise((done) => ended.once('close', done));
    const dead = [`local-${hostname()}-${ended.pid}-1a2b3c4d`];
    await mkdir(join(work, dead[0] ?? '', 'job'), { recursive: true });
    // A folder of a live process (this one) is kept.
    const live = `local-${hostname()}-${process.pid}-0a0b0c0d`;
    await mkdir(join(work, live), { recursive: true });
    const dir = await copyKilled('sweep');
    const run = await cli('run', '--tier', 'hourly', '--store', dir, '--quiet', '0', '--work-dir', work);
    expect(run.code, run.text).toBe(0);
    const after = await readdir(work);
    for (const name of dead) expect(after).not.toContain(name);
    expect(after).toContain(live);
    expect(idMismatch(await lakeIds(engine, dir), killed.total)).toBeUndefined();
  }, 120_000);
});

describe('status exit code', () => {
  it('exits 1 for a failing partition, naming it', async () => {
    const dir = await mkdtemp(join(root, 'failing-'));
    await cp(join(root, 'template'), dir, { recursive: true });
    const clean = await cli('status', '--store', dir);
    expect(clean.code).toBe(0);
    const partition = 'db/cpu/2025/01/15/03/';
    const store = new LocalFolderStore(dir);
    await recordFailure(
      { store, config: parseConfig({}), clock: systemClock },
      'hourly',
      partition,
      'SchemaConflictError: x',
    );
    const failing = await cli('status', '--store', dir);
    expect(failing.code, failing.text).toBe(1);
    expect(failing.text).toContain(partition);
  });
});

describe('verify on a hive lake read without --layout hive', () => {
  it('says which layout the lake reads as, as plan and run do', async () => {
    const dir = await mkdtemp(join(root, 'hive-'));
    for (let h = 0; h < 2; h++) {
      const folder = join(dir, `events/dt=2026-12-01/hour=0${h}`);
      await mkdir(folder, { recursive: true });
      await engine.query(
        `COPY (SELECT (${h * 10} + i + 1)::BIGINT AS id, TIMESTAMPTZ '2026-12-01T0${h}:00:00Z' + to_seconds(i) AS time FROM range(10) t(i)) TO '${folder}/part-0.parquet' (FORMAT parquet)`,
      );
    }
    const hint = 'they read as hive: did you mean --layout hive?';
    const verify = await cli('verify', '--store', dir);
    expect(verify.text).toContain('(outside the layout)');
    expect(verify.err.join('\n')).toContain(hint);
    const right = await cli('verify', '--store', dir, '--layout', 'hive');
    expect(right.text).not.toContain('(outside the layout)');
    expect(right.err.join('\n')).not.toContain('did you mean --layout');
  });
});
