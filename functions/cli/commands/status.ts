/**
 * `compactor status`: the live and quarantined manifests and the failing partitions. Loads no engine or SDK
 * (test/cli/startup.test.ts).
 */

import { heldByBackoff, readFailures } from '../../core/failures.ts';
import { manifestsRoot, parseManifest, quarantineRoot } from '../../core/manifest/manifest.ts';
import { getBytesIfExists } from '../../core/object-store.ts';
import { describeQuarantineRecord, type QuarantineRecordRow } from '../../core/quarantine.ts';
import { type CliIo, commandContext, emit } from '../command.ts';
import { formatDuration, table } from '../format.ts';
import type { ParsedOptions } from '../options.ts';

export async function statusCommand(options: ParsedOptions, io: CliIo): Promise<number> {
  const ctx = await commandContext(options);
  const { store } = ctx.target;
  const now = ctx.clock.now().getTime();
  const live: {
    key: string;
    tier: string;
    state: string;
    job: string;
    owner: string;
    age: string;
    lease: string;
  }[] = [];
  for await (const object of store.list(manifestsRoot(ctx.config.layout))) {
    // A job cleared since the listing is no longer live: not an error.
    const got = await getBytesIfExists(store, object.key);
    if (!got) continue;
    const { body } = got;
    try {
      const m = parseManifest(ctx.config, store.location, object.key, body);
      const leaseLeft = Date.parse(m.leaseExpiresAt) - now;
      live.push({
        key: m.partition,
        tier: m.tier,
        state: m.state,
        job: m.jobId,
        owner: m.executionId,
        age: formatDuration(now - Date.parse(m.createdAt)),
        lease: leaseLeft > 0 ? `${formatDuration(leaseLeft)} left` : 'expired',
      });
    } catch (error) {
      if (!(error instanceof Error && error.name === 'InvalidManifestError')) throw error;
      live.push({
        key: object.key,
        tier: '?',
        state: 'INVALID',
        job: '?',
        owner: '?',
        age: '',
        lease: error.message,
      });
    }
  }
  const quarantined: ({ key: string } & QuarantineRecordRow)[] = [];
  for await (const object of store.list(quarantineRoot(ctx.config.layout))) {
    // Resolved by an operator since the listing: nothing to show.
    const body = (await getBytesIfExists(store, object.key))?.body;
    if (body === undefined) continue;
    quarantined.push({ key: object.key, ...describeQuarantineRecord(body) });
  }
  const failing = [...(await readFailures(store, ctx.config)).values()].map((f) => {
    const held = heldByBackoff(ctx.config, f, now);
    return {
      partition: f.partition,
      tier: f.tier,
      failures: f.consecutiveFailures,
      heldBack: held,
      // Not held back: the next run of its tier tries it again.
      nextAttemptAt: held ? f.nextAttemptAt : 'next run',
      lastError: f.lastError.split('\n')[0] ?? '',
    };
  });
  const heldBack = failing.filter((f) => f.heldBack).length;
  emit(io, options, { live, quarantined, failing }, () =>
    [
      `live manifests: ${live.length}`,
      ...(live.length > 0
        ? [
            table(
              ['partition', 'tier', 'state', 'job', 'owner', 'age', 'lease'],
              live.map((l) => Object.values(l)),
            ),
          ]
        : []),
      `quarantined: ${quarantined.length}`,
      ...(quarantined.length > 0
        ? [
            table(
              ['record', 'holds', 'since', 'reason'],
              quarantined.map((q) => [q.key, q.holds, q.at, q.reason]),
            ),
            'once the cause is fixed, `compactor release --partition P` (or --all) re-admits quarantined inputs; a record whose objects are gone is pruned by the next run',
          ]
        : []),
      `failing partitions: ${failing.length}${failing.length > 0 ? ` (${heldBack} held back: after ${ctx.config.failureBackoff.after} failures in a row a partition waits for its next attempt)` : ''}`,
      ...(failing.length > 0
        ? [
            table(
              ['partition', 'tier', 'failures', 'next attempt', 'last error'],
              failing.map((f) => [f.partition, f.tier, f.failures, f.nextAttemptAt, f.lastError]),
            ),
          ]
        : []),
    ].join('\n'),
  );
  return quarantined.length > 0 ? 1 : 0;
}
