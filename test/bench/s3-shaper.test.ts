/**
 * The bench's S3 shaper (bench/s3-shaper.ts) in front of fauxqs, driven by the product's S3Store
 * and the real SDK. Only lower bounds on time are asserted (a loaded machine is slower, never
 * faster): without the shaper each of these calls takes about a millisecond here.
 */

import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { URL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Shaper, startShaper } from '../../bench/s3-shaper.ts';
import { createS3Client, S3Store } from '../../functions/adapters/s3-store/s3-store.ts';
import { useTempDir } from '../support/engine-fixture.ts';
import { type FauxqsS3, startFauxqsS3 } from '../support/fauxqs-server.ts';

const LATENCY_MS = 60;
const BYTES_PER_SECOND = 4_000_000;

let s3: FauxqsS3;
let shaper: Shaper;
let store: S3Store;
let dir: string;

useTempDir('s3-shaper-', (d) => {
  dir = d;
});

beforeAll(async () => {
  s3 = await startFauxqsS3('shaped');
  const target = new URL(s3.endpoint);
  shaper = await startShaper({
    targetHost: target.hostname,
    targetPort: Number(target.port),
    firstByteLatencyMs: LATENCY_MS,
    bytesPerSecond: BYTES_PER_SECOND,
  });
  const client = createS3Client({
    endpoint: shaper.endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
  });
  store = new S3Store({ client, bucket: s3.bucket });
});

afterAll(async () => {
  await shaper?.close();
  await s3?.stop();
});

describe('the bench S3 shaper (TCP proxy) in front of fauxqs', () => {
  it('holds every response for the first-byte latency: N sequential requests take at least N x latency', async () => {
    await store.put('small/a', Buffer.from('x'));
    shaper.resetStats();
    const n = 8;
    const start = performance.now();
    for (let i = 0; i < n; i++) expect(await store.head('small/a')).toBeDefined();
    const elapsed = performance.now() - start;
    expect(elapsed).toBeGreaterThanOrEqual(n * LATENCY_MS);
    const stats = shaper.stats();
    // One held response per request, on a connection kept alive between them.
    expect(stats.responses).toBe(n);
    expect(stats.connections).toBeLessThan(n);
  });

  it('limits each connection to the stated bandwidth: a download of B bytes takes at least B / rate', async () => {
    const body = randomBytes(2_000_000);
    await store.put('big/b', body);
    shaper.resetStats();
    const start = performance.now();
    const path = join(dir, 'b');
    await store.getToFile('big/b', path);
    const elapsed = performance.now() - start;
    expect((await readFile(path)).equals(body)).toBe(true);
    expect(elapsed).toBeGreaterThanOrEqual((body.length / BYTES_PER_SECOND) * 1000 + LATENCY_MS);
    expect(shaper.stats().bytesToClient).toBeGreaterThanOrEqual(body.length);
  });

  it('limits uploads too: a PUT of B bytes takes at least B / rate, then the latency', async () => {
    const body = randomBytes(1_000_000);
    const start = performance.now();
    await store.put('big/c', body);
    const elapsed = performance.now() - start;
    expect(elapsed).toBeGreaterThanOrEqual((body.length / BYTES_PER_SECOND) * 1000 + LATENCY_MS);
    expect((await store.getBytes('big/c')).body.equals(body)).toBe(true);
  });

  it('shapes per connection, not in total: 8 concurrent downloads take far less than 8 x B / rate', async () => {
    const body = randomBytes(1_200_000);
    const keys = Array.from({ length: 8 }, (_, i) => `par/${i}`);
    await Promise.all(keys.map((key) => store.put(key, body)));
    shaper.resetStats();
    const start = performance.now();
    await Promise.all(keys.map((key, i) => store.getToFile(key, join(dir, `par-${i}`))));
    const elapsed = performance.now() - start;
    const oneMs = (body.length / BYTES_PER_SECOND) * 1000;
    expect(elapsed).toBeGreaterThanOrEqual(oneMs + LATENCY_MS);
    // A shared limit would need 8 x 300 ms; per connection about 360 ms is expected.
    expect(elapsed).toBeLessThan(keys.length * oneMs);
    const stats = shaper.stats();
    expect(stats.maxAwaitingRequests).toBe(keys.length);
    expect(stats.maxOpenConnections).toBeGreaterThanOrEqual(keys.length);
  });
});
