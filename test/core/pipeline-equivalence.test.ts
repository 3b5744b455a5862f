/**
 * The in-process cycle (core/cycle.ts, which the sweeps, the simulation and the bench run) against
 * the synthesized state machine run by the local runner (what AWS runs), on copies of one lake
 * with the same seeded fault: both must make the same protocol writes in the same order, give
 * every step the same result, and reach the same verdict per partition. Run records (the plan
 * items the Map reads, the results it writes) exist only in the state machine's run and are left
 * out of the comparison, as are the store probe the Lambdas make before their first write and the
 * local run's listing of old receipts to expire; reads
 * are compared as a multiset, since the compact step downloads its
 * inputs in parallel. The state machine runs the small jobs of one table at once, in one Map
 * item; the cycle runs them one after another: with one job an item both have one order, and with
 * the default items both make the same writes and give the same results in another order.
 */

import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { LocalOwners } from '../../functions/adapters/local-owner.ts';
import { systemClock } from '../../functions/core/engine.ts';
import { PARTITION_STEPS, partitionVerdict } from '../../functions/core/pipeline.ts';
import { judgeMapItem } from '../../functions/core/run-summary.ts';
import {
  runWorkflowLocally,
  type SynthesizedWorkflow,
  synthesizeWorkflow,
} from '../../functions/local-runner/run.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { type CallRecord, type FaultKind, FaultStore, MUTATING_OPS } from '../support/fault-store.ts';
import { HANG_GUARD_MS } from '../support/hang-guard.ts';
import { copyLake, hourlyTemplate, runCycle, sweepDeps, type TemplateLake } from '../support/lake-harness.ts';
import { Rng } from '../support/sim-scheduler.ts';
import { testStore } from '../support/test-store.ts';

let engine: DuckDbEngine;
let workDir: string;
let template: TemplateLake;
let workflow: SynthesizedWorkflow;

useEngineAndDir('equivalence-', async (e, dir) => {
  engine = e;
  workDir = dir;
  template = await hourlyTemplate(engine);
  // One partition at a time in both, so their writes have one order.
  workflow = await synthesizeWorkflow({ map: { maxConcurrency: 1 } });
});

/** Job ids and each attempt's staging names are random: compare their shape. */
function normalise(key: string): string {
  return key
    .replace(/[0-9]{8}T[0-9]{6}Z-[0-9a-f]{8,32}/g, '<job>')
    .replace(/staging\/<job>\/[0-9a-f]+-/g, 'staging/<job>/<attempt>-');
}

interface Trace {
  readonly writes: string[];
  readonly reads: string[];
  readonly steps: string[];
  readonly verdicts: string[];
}

/** The nth protocol write faults, and so do the next `repeats` attempts of that same write. */
type Fault = { readonly kind: FaultKind; readonly nthWrite: number; readonly repeats: number };

/** A store that faults the nth protocol write and records the protocol's calls. */
function tracedStore(dir: string, fault: Fault | undefined, trace: Trace): FaultStore {
  const root = template.config.layout.stateRoot;
  // The Lambdas also probe the store once before their first write (lambda/store-guarantees.ts).
  const runRecords = [`${root}plans/`, `${root}results/`, `${root}probe/`];
  // The local run lists the receipts to expire old ones, as the bucket's lifecycle rule does on
  // AWS; the receipts the protocol writes are compared.
  const expiry = (call: CallRecord) => call.op === 'list' && call.key === `${root}receipts/`;
  const isProtocol = (call: CallRecord) => !runRecords.some((p) => call.key.startsWith(p)) && !expiry(call);
  let writes = 0;
  let target: string | undefined;
  let left = 0;
  const faults = (call: CallRecord): boolean => {
    if (!MUTATING_OPS.has(call.op) || !isProtocol(call)) return false;
    const line = `${call.op} ${call.key}`;
    if (target === line && left > 0) {
      left--;
      return true;
    }
    if (++writes !== fault?.nthWrite) return false;
    target = line;
    left = fault.repeats;
    return true;
  };
  return new FaultStore(testStore(dir), {
    ...(fault
      ? {
          fault: {
            kind: fault.kind,
            at: faults,
          },
        }
      : {}),
    beforeCall: async (call) => {
      if (!isProtocol(call)) return;
      // A batch delete's keys come in listing order, which random attempt folders change.
      const keys =
        call.op === 'deleteMany' ? call.key.split(',').map(normalise).sort().join(',') : normalise(call.key);
      const line = `${call.op} ${keys}`;
      (MUTATING_OPS.has(call.op) ? trace.writes : trace.reads).push(line);
    },
  });
}

function stepLine(step: string, result: { partition?: string; status?: string; state?: string }): string {
  return `${step} ${result.partition} ${result.status} ${result.state}`;
}

/** One job a Map item: the state machine's order is the cycle's. */
const oneJobItems = () => ({ ...template.config, smallJobsPerItem: 1 });

async function throughCycle(fault: Fault | undefined, config = oneJobItems()): Promise<Trace> {
  const trace: Trace = { writes: [], reads: [], steps: [], verdicts: [] };
  const dir = await copyLake(template);
  const store = tracedStore(dir, fault, trace);
  const report = await runCycle(
    {
      ...sweepDeps(store, config, engine, join(workDir, 'cycle'), 'exec-cycle', new Set(['exec-cycle'])),
      onStep: (step, _job, result) => trace.steps.push(stepLine(step, result)),
    },
    'hourly',
  );
  for (const { job, outcome } of report.jobs) trace.verdicts.push(`${job.partition} ${outcome.status}`);
  return trace;
}

async function throughStateMachine(fault: Fault | undefined, config = oneJobItems()): Promise<Trace> {
  const trace: Trace = { writes: [], reads: [], steps: [], verdicts: [] };
  const dir = await copyLake(template);
  const store = tracedStore(dir, fault, trace);
  const { execution } = await runWorkflowLocally(
    workflow,
    {
      store,
      config,
      clock: systemClock,
      engine: async () => engine,
      workDir: join(workDir, 'machine'),
      owners: new LocalOwners(),
    },
    {
      tier: 'hourly',
      retryIntervalMs: 0,
      onStep: (step, _payload, result) => {
        if (PARTITION_STEPS.some((s) => s.step === step)) trace.steps.push(stepLine(step, result as never));
      },
    },
  );
  for (const results of execution.mapResults.values()) {
    for (const judged of results.flatMap((r) => judgeMapItem('hourly', r))) {
      trace.verdicts.push(`${judged.partition} ${judged.verdict}`);
    }
  }
  trace.verdicts.sort();
  return trace;
}

/**
 * Summary (and the CLI's table) read the receipt of each job whose child failed whole, to see
 * whether it committed first (run-summary.ts settleByReceipts): a run-level read the in-process
 * cycle has no counterpart for. Those reads, of jobs judged failed and absent from the cycle's
 * reads, are set aside; every other read is compared.
 */
function protocolReads(machine: Trace, cycle: Trace): string[] {
  const root = template.config.layout.stateRoot;
  const failed = machine.verdicts
    .filter((v) => v.endsWith(' failed'))
    .map((v) => v.slice(0, -' failed'.length));
  const settleRead = (line: string) =>
    !cycle.reads.includes(line) && failed.some((p) => line.startsWith(`getBytes ${root}receipts/${p}`));
  return machine.reads.filter((line) => !settleRead(line));
}

function expectSame(cycle: Trace, machine: Trace, what: string): void {
  expect(machine.writes, `${what}: protocol writes`).toEqual(cycle.writes);
  expect(machine.steps, `${what}: step results`).toEqual(cycle.steps);
  expect(protocolReads(machine, cycle).sort(), `${what}: protocol reads`).toEqual([...cycle.reads].sort());
  expect(machine.verdicts, `${what}: verdicts`).toEqual([...cycle.verdicts].sort());
}

describe('the in-process cycle and the synthesized state machine', () => {
  it(
    'walk the same steps with the same writes, results and verdicts, clean and under seeded faults',
    async () => {
      const clean = await throughCycle(undefined);
      expectSame(clean, await throughStateMachine(undefined), 'clean');
      expect(clean.verdicts.every((v) => v.endsWith(' compacted'))).toBe(true);
      // Transient faults, which both retry by the same numbers (pipeline.ts RETRY); a crash ends
      // both runs differently by design (an execution's Summary still runs) and is the sweeps' part.
      const kinds: FaultKind[] = ['fail-before', 'fail-after', 'lost-response'];
      const rng = new Rng(2026);
      for (let seed = 0; seed < 16; seed++) {
        const fault: Fault = {
          kind: rng.pick(kinds),
          nthWrite: 1 + rng.int(clean.writes.length),
          // Past one retry the Express chain gives up: the retry numbers must agree too.
          repeats: rng.int(3),
        };
        const what = `seed ${seed}: ${fault.kind} at protocol write ${fault.nthWrite}, ${fault.repeats} more time(s)`;
        expectSame(await throughCycle(fault), await throughStateMachine(fault), what);
      }
    },
    HANG_GUARD_MS,
  );

  it(
    "with the default Map items (the hour's two partitions in one), make the same writes with the same results and verdicts",
    async () => {
      const cycle = await throughCycle(undefined, template.config);
      const machine = await throughStateMachine(undefined, template.config);
      expect(template.config.smallJobsPerItem).toBeGreaterThan(1);
      expect([...machine.writes].sort()).toEqual([...cycle.writes].sort());
      expect([...machine.steps].sort()).toEqual([...cycle.steps].sort());
      expect([...machine.reads].sort()).toEqual([...cycle.reads].sort());
      expect(machine.verdicts).toEqual([...cycle.verdicts].sort());
      expect(cycle.verdicts.every((v) => v.endsWith(' compacted'))).toBe(true);
    },
    HANG_GUARD_MS,
  );

  it('judge a partition by one verdict: a job rolled back between Compact and Publish is superseded in both', () => {
    const outcome = {
      partition: 'db/cpu/2025/01/15/10/',
      compact: { status: 'done', state: 'staged' },
      publish: { status: 'superseded', state: 'none' },
      verify: { status: 'superseded', state: 'none' },
      deleteInputs: { status: 'superseded', state: 'none' },
      clearManifest: { status: 'already-done', state: 'cleared' },
    };
    expect(partitionVerdict('hourly', outcome)).toBe('superseded');
    expect(
      judgeMapItem('hourly', { Status: 'SUCCEEDED', Output: JSON.stringify([outcome]) }).map(
        (j) => j.verdict,
      ),
    ).toEqual(['superseded']);
  });
});
