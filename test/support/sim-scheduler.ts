/**
 * A deterministic scheduler for the seeded simulation. Every object-store call of every actor
 * (a cycle, a zombie step, a recovery) is an await point: the call waits until the scheduler,
 * once no actor is running, picks one pending call with the seeded PRNG and releases it. So only
 * one actor runs at a time, and a seed fixes the whole interleaving (and the injected faults).
 *
 * An actor is "blocked" when it waits on a call, "done" when its body settled, "parked" when it
 * is a zombie held before one of its calls until the driver resumes it. A released call's actor
 * runs until it makes its next call or finishes; when it still has other calls pending (the
 * parallel downloads of the compact step), its chain is over once a macrotask turn passes.
 */

/** mulberry32: a tiny, fast 32-bit PRNG, good enough to drive interleavings. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export class Rng {
  readonly #next: () => number;

  /**
   * `stream` picks an independent sequence of the same seed: draws added on another stream leave
   * the seed's stream 0 (its scenario and its interleaving) as it was.
   */
  constructor(seed: number, stream = 0) {
    // Spread small consecutive seeds apart.
    this.#next = mulberry32(
      (Math.imul(seed ^ 0x9e3779b9, 0x85ebca6b) ^ 0xc2b2ae35) + Math.imul(stream, 0x27d4eb2f),
    );
  }

  next(): number {
    return this.#next();
  }

  /** 0 .. n-1 */
  int(n: number): number {
    return Math.floor(this.#next() * n);
  }

  chance(p: number): boolean {
    return this.#next() < p;
  }

  pick<T>(items: readonly T[]): T {
    const item = items[this.int(items.length)];
    if (item === undefined) throw new Error('pick from an empty list');
    return item;
  }

  /** Picks by weight: [[value, weight], ...]. */
  weighted<T>(items: readonly (readonly [T, number])[]): T {
    const total = items.reduce((sum, [, w]) => sum + w, 0);
    let r = this.#next() * total;
    for (const [value, w] of items) {
      r -= w;
      if (r < 0) return value;
    }
    const last = items[items.length - 1];
    if (!last) throw new Error('weighted pick from an empty list');
    return last[0];
  }
}

interface Pending {
  readonly actor: SimActor;
  readonly seq: number;
  readonly op: string;
  readonly key: string;
  readonly release: () => void;
}

export class SimActor {
  readonly name: string;
  readonly pending: Pending[] = [];
  running = true;
  done = false;
  crashed = false;
  /** Calls requested so far (the parked one included). */
  calls = 0;
  /** Park (do not offer) the call with this number until `Scheduler.unpark`. */
  pauseAtCall: number | undefined;
  parked: Pending | undefined;
  /** Set once the actor was parked and resumed. */
  resumed = false;
  outcome: string | undefined;
  flushToken = 0;

  constructor(name: string) {
    this.name = name;
  }
}

/** Stabilises keys for the replay trace: attempts' staging names and ETag stamps are random. */
function normalize(key: string): string {
  return key.replace(/\/staging\/([^/]+)\/[0-9a-f]{8}-/g, '/staging/$1/*-').replace(/[0-9a-f]{16,}/g, '#');
}

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

export class Scheduler {
  readonly rng: Rng;
  tick = 0;
  readonly trace: string[] = [];
  readonly actors: SimActor[] = [];
  #seq = 0;
  #waiter: (() => void) | undefined;
  readonly #stallMs: number;

  constructor(rng: Rng, options: { readonly stallMs?: number } = {}) {
    this.rng = rng;
    this.#stallMs = options.stallMs ?? 60_000;
  }

  /** Starts an actor; it runs until its first store call. */
  spawn(name: string, body: (actor: SimActor) => Promise<string>, pauseAtCall?: number): SimActor {
    const actor = new SimActor(name);
    actor.pauseAtCall = pauseAtCall;
    this.actors.push(actor);
    void body(actor)
      .then(
        (outcome) => {
          actor.outcome = outcome;
        },
        (error: unknown) => {
          actor.outcome = `threw ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`;
        },
      )
      .finally(() => {
        actor.done = true;
        actor.running = false;
        this.#notify();
      });
    return actor;
  }

  /** A store call: resolves when the scheduler lets it proceed. */
  acquire(actor: SimActor, op: string, key: string): Promise<void> {
    actor.calls++;
    actor.flushToken++;
    return new Promise<void>((resolve) => {
      const pending: Pending = { actor, seq: ++this.#seq, op, key, release: resolve };
      if (actor.pauseAtCall === actor.calls) actor.parked = pending;
      else actor.pending.push(pending);
      actor.running = false;
      this.#notify();
    });
  }

  /** The released call returned (or threw) to the actor's code. */
  completed(actor: SimActor): void {
    if (actor.pending.length === 0 && actor.parked === undefined) return;
    // Another chain of the actor waits on a call: this chain is over once its microtasks ran.
    const token = ++actor.flushToken;
    setImmediate(() =>
      setImmediate(() => {
        if (actor.flushToken === token && actor.running) {
          actor.running = false;
          this.#notify();
        }
      }),
    );
  }

  /** Offers a parked call again (a zombie resumes). */
  unpark(actor: SimActor): void {
    const parked = actor.parked;
    if (!parked) return;
    actor.parked = undefined;
    actor.resumed = true;
    actor.pending.push(parked);
    this.note(`${this.tick} resume ${actor.name}`);
  }

  note(line: string): void {
    this.trace.push(line);
  }

  /**
   * Runs until every actor is done. `beforeTick` may spawn actors, unpark or change the world
   * between two calls; it runs when no actor is running.
   */
  async run(beforeTick: (tick: number) => Promise<void> | void, maxTicks: number): Promise<void> {
    for (;;) {
      await this.#settle();
      await beforeTick(this.tick);
      await this.#settle();
      const candidates = this.actors.flatMap((a) => a.pending);
      if (candidates.length === 0) {
        const parked = this.actors.find((a) => a.parked !== undefined);
        if (parked) {
          this.unpark(parked);
          continue;
        }
        if (this.actors.every((a) => a.done)) return;
        throw new Error(`scheduler stalled at tick ${this.tick}: ${this.describe()}`);
      }
      if (this.tick >= maxTicks) throw new Error(`more than ${maxTicks} calls: ${this.describe()}`);
      const chosen = candidates[this.rng.int(candidates.length)] as Pending;
      const { actor } = chosen;
      actor.pending.splice(actor.pending.indexOf(chosen), 1);
      actor.running = true;
      actor.flushToken++;
      this.trace.push(`${this.tick} ${actor.name} ${chosen.op} ${normalize(chosen.key)}`);
      this.tick++;
      chosen.release();
    }
  }

  describe(): string {
    return this.actors
      .map(
        (a) =>
          `${a.name}:${a.done ? 'done' : a.running ? 'running' : a.parked ? 'parked' : `blocked(${a.pending.length})`}`,
      )
      .join(' ');
  }

  #notify(): void {
    const waiter = this.#waiter;
    this.#waiter = undefined;
    waiter?.();
  }

  /** Waits until no actor is running (each is blocked, parked or done). */
  async #settle(): Promise<void> {
    const deadline = Date.now() + this.#stallMs;
    for (;;) {
      await turn();
      if (this.actors.every((a) => a.done || !a.running)) {
        await turn();
        if (this.actors.every((a) => a.done || !a.running)) return;
        continue;
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 100);
        this.#waiter = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      if (Date.now() > deadline) throw new Error(`an actor ran for ${this.#stallMs} ms: ${this.describe()}`);
    }
  }
}
