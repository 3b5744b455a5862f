/**
 * Runs the seeded simulation from the command line (Node 22 type stripping):
 *   node test/support/simulate.ts --seed 42              replay one seed and print its trace
 *   node test/support/simulate.ts --seeds 10000          seeds 1..10000
 *   node test/support/simulate.ts --seeds 500 --from 9000 [--concurrency 4] [--visible-every 1]
 *     [--overlap-tiers] [--conflict-on-copy] [--drop-delete-etags] [--trace]
 * Exit code 1 when any seed violates an invariant; each failure prints the command replaying it.
 */

import { parseArgs } from 'node:util';
import { createSimContext, REPLAY, runSeeds, type SeedOptions, type SeedResult } from './sim-run.ts';

const { values } = parseArgs({
  options: {
    seed: { type: 'string' },
    seeds: { type: 'string' },
    from: { type: 'string' },
    concurrency: { type: 'string' },
    'visible-every': { type: 'string' },
    'conflict-on-copy': { type: 'boolean' },
    'overlap-tiers': { type: 'boolean' },
    'drop-delete-etags': { type: 'boolean' },
    trace: { type: 'boolean' },
    quiet: { type: 'boolean' },
  },
});

const single = values.seed === undefined ? undefined : Number(values.seed);
const from = single ?? Number(values.from ?? 1);
const count = single === undefined ? Number(values.seeds ?? 100) : 1;
const seeds = Array.from({ length: count }, (_, i) => from + i);
const options: SeedOptions = {
  ...(values['visible-every'] ? { visibleEvery: Number(values['visible-every']) } : {}),
  ...(values['conflict-on-copy'] ? { conflictOnCopy: true } : {}),
  ...(values['overlap-tiers'] ? { overlapTiers: true } : {}),
  ...(values['drop-delete-etags'] ? { dropDeleteEtags: true } : {}),
};

function printTrace(result: SeedResult): void {
  console.log(`seed ${result.seed}: ${result.scenario}`);
  console.log(`plan ${JSON.stringify(result.plan)}`);
  console.log(result.trace.join('\n'));
  console.log(`zombie: ${result.zombie ?? 'none'}`);
  console.log(
    `jobs ${JSON.stringify(result.jobOutcomes)} items ${JSON.stringify(result.items)} recovery ${JSON.stringify(result.recoveryActions)}`,
  );
  console.log(`faults ${JSON.stringify(result.faults)}; ${result.ticks} calls, ${result.ms.toFixed(0)} ms`);
  for (const v of result.violations) console.log(`VIOLATION ${v}`);
}

const ctx = await createSimContext();
const started = performance.now();
let done = 0;
let failed = 0;
let results: SeedResult[] = [];
try {
  results = await runSeeds(
    ctx,
    seeds,
    single === undefined ? Number(values.concurrency ?? 4) : 1,
    options,
    (r) => {
      done++;
      if (single !== undefined || values.trace) printTrace(r);
      if (r.violations.length > 0) {
        failed++;
        console.log(
          `FAIL seed ${r.seed} (${r.scenario}): ${r.violations[0]}\n  replay: ${REPLAY(r.seed, options)}`,
        );
      }
      if (!values.quiet && single === undefined && done % 250 === 0) {
        console.log(
          `${done}/${count} seeds, ${failed} failed, ${((performance.now() - started) / 1000).toFixed(0)} s`,
        );
      }
    },
  );
} finally {
  await ctx.close();
}
const failures = results.filter((r) => r.violations.length > 0);
const scenarios = new Set(results.map((r) => r.scenario));
const seconds = (performance.now() - started) / 1000;
console.log(
  `${count} seeds, ${scenarios.size} scenarios, ${failures.length} failed in ${seconds.toFixed(1)} s (${((seconds * 1000) / count).toFixed(0)} ms/seed)`,
);
const items: Record<string, number> = {};
for (const r of results) for (const [k, v] of Object.entries(r.items)) items[k] = (items[k] ?? 0) + v;
console.log(`Map items ${JSON.stringify(items)}`);
for (const f of failures.slice(0, 20))
  console.log(`  seed ${f.seed}: ${f.violations.join(' | ')}\n    ${REPLAY(f.seed, options)}`);
process.exitCode = failures.length > 0 ? 1 : 0;
