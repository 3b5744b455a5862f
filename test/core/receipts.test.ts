/**
 * Receipts on real Parquet in a real LocalFolderStore with DuckDB: what a committed job's receipt
 * holds, that it is written once whatever retries and crashes come, that a job rolled back leaves
 * none, and how they are listed.
 */

import { describe, expect, it } from 'vitest';
import { runCycle } from '../../functions/core/cycle.ts';
import { KEYS_HASH_ALGORITHM } from '../../functions/core/engine.ts';
import { PreconditionFailedError, TransientStoreError } from '../../functions/core/errors.ts';
import { receiptKey, receiptOf, receiptsRoot } from '../../functions/core/manifest/manifest.ts';
import { ForwardingStore, type PutFile, type WriteOptions } from '../../functions/core/object-store.ts';
import {
  listReceipts,
  parseReceipt,
  type Receipt,
  settingsHash,
  writeReceipt,
} from '../../functions/core/receipts.ts';
import { recover } from '../../functions/core/recovery.ts';
import { type CallRecord, CrashedError, FaultStore } from '../support/fault-store.ts';
import {
  HOURLY_HOUR_10,
  HOURLY_HOUR_11,
  HOURLY_IN_10,
  LakeChecker,
  sweepDeps,
  useHourlyTemplate,
} from '../support/lake-harness.ts';

const fixture = useHourlyTemplate('receipts-');
const lake = () => fixture.lake();

async function receiptsIn(l: Awaited<ReturnType<typeof lake>>): Promise<Receipt[]> {
  const listed = await listReceipts(l.store, l.config);
  return listed.map((r) => {
    if (!('receipt' in r)) throw new Error(r.invalid);
    return r.receipt;
  });
}

describe('a committed job', () => {
  it('leaves one receipt: inputs with ETags and rows, outputs with ETags, checksums and column ranges, settings and times', async () => {
    const l = await lake();
    const before = new Map<string, string>();
    for (const key of HOURLY_IN_10) before.set(key, (await l.store.head(key))?.etag ?? '');
    const report = await runCycle(
      sweepDeps(l.store, l.config, fixture.engine, fixture.workDir, 'exec-1', new Set()),
      'hourly',
    );
    expect(report.jobs.map((j) => j.outcome.status)).toEqual(['compacted', 'compacted']);

    const receipts = await receiptsIn(l);
    expect(receipts.map((r) => r.partition)).toEqual([HOURLY_HOUR_10, HOURLY_HOUR_11]);
    const [hour10] = receipts;
    const job = report.jobs.find((j) => j.job.partition === HOURLY_HOUR_10)?.job;
    expect(hour10).toMatchObject({
      version: 1,
      jobId: job?.jobId,
      tier: 'hourly',
      location: l.store.location,
      executionId: 'exec-1',
      inputRows: 120,
      settingsHash: settingsHash(l.config),
    });
    // The versions the job read, and each one's rows from its footer.
    expect(hour10?.inputs.map((i) => [i.key, i.etag, i.rows])).toEqual(
      HOURLY_IN_10.map((key) => [key, before.get(key), 40]),
    );
    // The sweep's small target splits the hour into outputs, in sort order.
    const outputs = hour10?.outputs ?? [];
    expect(outputs.length).toBeGreaterThan(1);
    expect(outputs.reduce((sum, o) => sum + o.rows, 0)).toBe(120);
    for (const output of outputs) {
      const head = await l.store.head(output.key);
      expect(output).toMatchObject({ size: head?.size, etag: head?.etag, checksum: head?.checksum });
    }
    // The ranges a reader prunes by: ids 1..120 across the parts (sorted by time, not id), all in
    // the hour, no NULLs.
    const ids = outputs.map((o) => o.columns?.find((c) => c.name === 'id'));
    expect(ids.every((c) => c?.nulls === 0)).toBe(true);
    expect(Math.min(...ids.map((c) => Number(c?.min)))).toBe(1);
    expect(Math.max(...ids.map((c) => Number(c?.max)))).toBe(120);
    for (const output of outputs) {
      const time = output.columns?.find((c) => c.name === 'time');
      expect(time?.min?.startsWith('2025-01-15 10:')).toBe(true);
      expect(time?.max?.startsWith('2025-01-15 10:')).toBe(true);
    }
    for (const at of [hour10?.claimedAt, hour10?.inputsDeletedAt, hour10?.writtenAt]) {
      expect(Number.isNaN(Date.parse(at ?? ''))).toBe(false);
    }
    await new LakeChecker(
      fixture.engine,
      l.dir,
      l.store,
      l.config,
      fixture.template.totalRows,
    ).assertQuiescent();
  });

  it('is written once: a clear retried, redriven or finished by recovery after a crash finds it and leaves it', async () => {
    const l = await lake();
    // The clear step's first attempt dies after its receipt, before the manifest goes.
    const clearsStaging = (call: CallRecord) =>
      call.op === 'deleteMany' && (call.deletes ?? []).some((d) => d.key.includes('/staging/'));
    const crashing = new FaultStore(l.store, { fault: { at: clearsStaging, kind: 'crash' } });
    const dead = sweepDeps(crashing, l.config, fixture.engine, fixture.workDir, 'exec-dead', new Set());
    await runCycle(dead, 'hourly').catch((error: unknown) => {
      if (!(error instanceof CrashedError)) throw error;
    });
    expect(crashing.crashed).toBe(true);
    const [first] = await receiptsIn(l);
    const firstHead = await l.store.head(
      receiptKey(l.config.layout, 'hourly', first?.partition ?? '', first?.jobId ?? ''),
    );
    const report = await recover({
      ...sweepDeps(l.store, l.config, fixture.engine, fixture.workDir, 'exec-rec', new Set()),
    });
    expect(report.entries.some((e) => e.action === 'cleared')).toBe(true);
    const [after] = await receiptsIn(l);
    expect(after).toEqual(first);
    expect(
      (await l.store.head(receiptKey(l.config.layout, 'hourly', after?.partition ?? '', after?.jobId ?? '')))
        ?.etag,
    ).toBe(firstHead?.etag);
  });

  it('a put-if-absent refused by a 409 (nothing written) is an error to retry; a 412 (it exists) is done', async () => {
    const l = await lake();
    await runCycle(
      sweepDeps(l.store, l.config, fixture.engine, fixture.workDir, 'exec-1', new Set()),
      'hourly',
    );
    const [receipt] = await receiptsIn(l);
    if (!receipt) throw new Error('no receipt');
    const key = receiptKey(l.config.layout, receipt.tier, receipt.partition, receipt.jobId);
    const manifest = {
      version: 1 as const,
      jobId: receipt.jobId,
      executionId: 'exec-2',
      tier: receipt.tier,
      partition: receipt.partition,
      location: receipt.location,
      state: 'inputs-deleted' as const,
      inputs: receipt.inputs,
      createdAt: receipt.claimedAt,
      updatedAt: receipt.inputsDeletedAt,
      leaseExpiresAt: receipt.inputsDeletedAt,
    };
    /** Refuses every conditional put as S3 does on a concurrent conditional write (409). */
    class Conflicting extends ForwardingStore {
      override async put(k: string, body: Buffer | PutFile, options?: WriteOptions) {
        if (options?.ifNoneMatch)
          throw new PreconditionFailedError(k, { cause: new Error('409 (injected)') });
        return super.put(k, body, options);
      }
    }
    const deps = { store: new Conflicting(l.store), config: l.config, clock: { now: () => new Date() } };
    // It exists: the refusal is a 412 and the receipt stays as it was.
    const before = await l.store.head(key);
    await expect(writeReceipt(deps, manifest)).resolves.toBe(key);
    expect((await l.store.head(key))?.etag).toBe(before?.etag);
    // It does not: the step must not go on as if it were written.
    await l.store.deleteMany([{ key }]);
    await expect(writeReceipt(deps, manifest)).rejects.toThrow(TransientStoreError);
  });
});

describe('a job rolled back', () => {
  it('leaves no receipt', async () => {
    const l = await lake();
    // The run dies at its first manifest update (claimed -> staged): recovery rolls the claim back.
    const crashing = new FaultStore(l.store, {
      fault: { at: (call) => call.ifMatch === true, kind: 'crash' },
    });
    await runCycle(
      sweepDeps(crashing, l.config, fixture.engine, fixture.workDir, 'exec-dead', new Set()),
      'hourly',
    ).catch((error: unknown) => {
      if (!(error instanceof CrashedError)) throw error;
    });
    const report = await recover({
      ...sweepDeps(l.store, l.config, fixture.engine, fixture.workDir, 'exec-rec', new Set()),
    });
    expect(report.entries.map((e) => e.action)).toEqual(['rolled-back']);
    expect(await receiptsIn(l)).toEqual([]);
  });
});

describe('listing', () => {
  it('by folder and by job start; a file that is not a receipt is named, not thrown', async () => {
    const l = await lake();
    await runCycle(
      sweepDeps(l.store, l.config, fixture.engine, fixture.workDir, 'exec-1', new Set()),
      'hourly',
    );
    const all = await receiptsIn(l);
    expect(all).toHaveLength(2);
    const hour = await listReceipts(l.store, l.config, { under: HOURLY_HOUR_11 });
    expect(hour.map((r) => ('receipt' in r ? r.receipt.partition : r.invalid))).toEqual([HOURLY_HOUR_11]);
    const day = await listReceipts(l.store, l.config, { under: 'db/cpu/2025/01/15/' });
    expect(day).toHaveLength(2);
    expect(await listReceipts(l.store, l.config, { since: new Date(Date.now() + 3_600_000) })).toEqual([]);
    expect(await listReceipts(l.store, l.config, { since: new Date(Date.now() - 3_600_000) })).toHaveLength(
      2,
    );

    const [one] = all;
    const key = receiptKey(l.config.layout, 'hourly', one?.partition ?? '', one?.jobId ?? '');
    expect(receiptOf(l.config.layout, key)).toEqual({
      partition: one?.partition,
      jobId: one?.jobId,
      tier: 'hourly',
    });
    await l.store.put(key, Buffer.from('{"version": 1}'));
    const listed = await listReceipts(l.store, l.config);
    expect(listed.filter((r) => 'invalid' in r).map((r) => r.key)).toEqual([key]);
    // A stray object under receipts/ is not a receipt key: never read.
    await l.store.put(`${receiptsRoot(l.config.layout)}README`, Buffer.from('notes'));
    expect(await listReceipts(l.store, l.config)).toHaveLength(2);
    expect(() => parseReceipt(l.config, key, Buffer.from('not json'))).toThrow(/not valid JSON/);
  });
});

describe('with dedup', () => {
  it('records the hash of the kept keys, as the inputs and the outputs both gave it', async () => {
    const l = await lake();
    const config = { ...l.config, dedup: new Map([['db/cpu/', { mode: 'exact' as const }]]) };
    await runCycle(
      sweepDeps(l.store, config, fixture.engine, fixture.workDir, 'exec-1', new Set()),
      'hourly',
    );
    const [receipt] = await receiptsIn({ ...l, config });
    expect(receipt?.dedup).toEqual({ mode: 'exact' });
    expect(receipt?.distinctRows).toBe(120);
    expect(receipt?.keysHash?.algorithm).toBe(KEYS_HASH_ALGORITHM);
    expect(receipt?.keysHash?.value).toMatch(/^[0-9]+$/);
  });
});
