/**
 * A TCP proxy (node:net) in front of an S3-protocol server that makes it answer like S3 seen
 * from a Lambda: every response's first byte waits until `firstByteLatencyMs` after the last
 * byte of its request, and each connection carries at most `bytesPerSecond` in each direction.
 *
 * Requests are found without parsing HTTP: the SDK's Node client never pipelines, so on one
 * connection the server's first bytes after client bytes start a response. An interim
 * `100 Continue` (sent before a request body) passes at once; the final response then waits.
 */

import { connect, createServer, type Server, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

export interface ShaperOptions {
  readonly targetHost: string;
  readonly targetPort: number;
  /** Added between a request's last byte and its response's first byte. */
  readonly firstByteLatencyMs: number;
  /** Per connection and per direction. */
  readonly bytesPerSecond: number;
}

export interface ShaperStats {
  /** TCP connections opened (keep-alive reuses them: fewer than requests). */
  readonly connections: number;
  /** Most connections open at once. */
  readonly maxOpenConnections: number;
  /** Responses started (each held for the first-byte latency), interim 100 Continue not counted. */
  readonly responses: number;
  /** Most requests waiting for their response's first byte at once. */
  readonly maxAwaitingRequests: number;
  readonly bytesToServer: number;
  readonly bytesToClient: number;
}

export interface Shaper {
  /** http://host:port of the proxy, for the S3 client's endpoint. */
  readonly endpoint: string;
  readonly options: ShaperOptions;
  stats(): ShaperStats;
  resetStats(): void;
  close(): Promise<void>;
}

/** Waits until performance.now() >= at: timers may fire a little early, never count that. */
async function sleepUntil(at: number): Promise<void> {
  for (let left = at - performance.now(); left > 0; left = at - performance.now()) {
    await sleep(Math.ceil(left));
  }
}

/** Backpressure: pause the sending socket while this many bytes wait in a pacer. */
const HIGH_WATER_BYTES = 256 * 1024;

/**
 * One direction of one connection: chunks leave in order, each no earlier than its `notBefore`
 * and no faster than the bandwidth (a chunk is released when its last byte would have arrived).
 */
class Pacer {
  readonly #bytesPerMs: number;
  readonly #from: Socket;
  readonly #to: Socket;
  #linkFreeAt = 0;
  #queued = 0;
  #chain: Promise<void> = Promise.resolve();

  constructor(bytesPerSecond: number, from: Socket, to: Socket) {
    this.#bytesPerMs = bytesPerSecond / 1000;
    this.#from = from;
    this.#to = to;
  }

  /** `notBefore` is read when the chunk reaches the head of the queue. */
  push(chunk: Buffer, notBefore: () => number, onSent?: () => void): void {
    this.#queued += chunk.length;
    if (this.#queued > HIGH_WATER_BYTES) this.#from.pause();
    this.#chain = this.#chain.then(async () => {
      const start = Math.max(performance.now(), notBefore(), this.#linkFreeAt);
      this.#linkFreeAt = start + chunk.length / this.#bytesPerMs;
      await sleepUntil(this.#linkFreeAt);
      if (!this.#to.destroyed) this.#to.write(chunk);
      onSent?.();
      this.#queued -= chunk.length;
      if (this.#queued <= HIGH_WATER_BYTES && this.#from.isPaused()) this.#from.resume();
    });
  }

  /** Resolves when everything pushed so far has been written. */
  drained(): Promise<void> {
    return this.#chain;
  }
}

const NOW = () => 0;
const CRLF2 = Buffer.from('\r\n\r\n');

/** The length of a leading interim `HTTP/1.1 100 ...` header block in `chunk`, or 0. */
function interimLength(chunk: Buffer): number {
  if (!chunk.subarray(0, 12).toString('latin1').startsWith('HTTP/1.1 100')) return 0;
  const end = chunk.indexOf(CRLF2);
  return end < 0 ? chunk.length : end + CRLF2.length;
}

export async function startShaper(options: ShaperOptions): Promise<Shaper> {
  if (!(options.firstByteLatencyMs >= 0) || !(options.bytesPerSecond > 0)) {
    throw new RangeError('firstByteLatencyMs must be >= 0 and bytesPerSecond > 0');
  }
  let stats = {
    connections: 0,
    maxOpenConnections: 0,
    responses: 0,
    maxAwaitingRequests: 0,
    bytesToServer: 0,
    bytesToClient: 0,
  };
  let open = 0;
  let active = 0;
  const sockets = new Set<Socket>();

  const server: Server = createServer((client) => {
    const upstream = connect(options.targetPort, options.targetHost);
    sockets.add(client);
    sockets.add(upstream);
    stats.connections++;
    open++;
    stats.maxOpenConnections = Math.max(stats.maxOpenConnections, open);
    const up = new Pacer(options.bytesPerSecond, client, upstream);
    const down = new Pacer(options.bytesPerSecond, upstream, client);
    // Client bytes seen since the server last answered: the next server bytes start a response.
    let requestOpen = false;
    let lastRequestByteAt = 0;
    let inFlight = false;

    client.on('data', (chunk: Buffer) => {
      stats.bytesToServer += chunk.length;
      if (!requestOpen) {
        requestOpen = true;
        if (!inFlight) {
          inFlight = true;
          active++;
          stats.maxAwaitingRequests = Math.max(stats.maxAwaitingRequests, active);
        }
      }
      up.push(chunk, NOW, () => {
        lastRequestByteAt = performance.now();
      });
    });
    upstream.on('data', (chunk: Buffer) => {
      stats.bytesToClient += chunk.length;
      let rest = chunk;
      if (requestOpen) {
        const interim = interimLength(rest);
        if (interim > 0) {
          down.push(rest.subarray(0, interim), NOW);
          rest = rest.subarray(interim);
          if (rest.length === 0) return;
        }
        requestOpen = false;
        stats.responses++;
        // Held from when the request's last byte reached the server (read when the chunk is
        // next to go, so later chunks of this response stay behind it).
        down.push(
          rest,
          () => lastRequestByteAt + options.firstByteLatencyMs,
          () => {
            if (inFlight && !requestOpen) {
              inFlight = false;
              active--;
            }
          },
        );
        return;
      }
      down.push(rest, NOW);
    });

    const close = () => {
      if (!sockets.delete(client)) return;
      sockets.delete(upstream);
      open--;
      if (inFlight) {
        inFlight = false;
        active--;
      }
      void Promise.all([up.drained(), down.drained()]).then(() => {
        client.end();
        upstream.end();
      });
    };
    client.on('end', close);
    upstream.on('end', close);
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    client.on('close', () => {
      close();
      upstream.destroy();
    });
    upstream.on('close', () => {
      close();
      void down.drained().then(() => client.destroy());
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('shaper: no TCP address');
  return {
    endpoint: `http://127.0.0.1:${address.port}`,
    options,
    stats: () => ({ ...stats }),
    resetStats() {
      stats = {
        connections: 0,
        maxOpenConnections: open,
        responses: 0,
        maxAwaitingRequests: active,
        bytesToServer: 0,
        bytesToClient: 0,
      };
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
