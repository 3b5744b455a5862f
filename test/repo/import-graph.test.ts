/**
 * The shape of the house, read from the imports themselves (test/support/import-graph.ts): no
 * circle of files anywhere in functions/, cdk/ or bench/ (type imports count: a circle of types is
 * still a circle to read), and within functions/ only the local runner and the CLI import cdk/
 * (as biome.json's rule says; this checks the files that exist, the rule the ones to come).
 */

import { describe, expect, it } from 'vitest';
import { CANARY_STEPS, STEPS } from '../../functions/contract.ts';
import { importCycles, importGraph } from '../support/import-graph.ts';

describe('the imports', () => {
  const graph = importGraph(['functions', 'cdk', 'bench']);

  it('form no circle of files', () => {
    expect(graph.size).toBeGreaterThan(100);
    expect(importCycles(graph).map((c) => c.join(' -> '))).toEqual([]);
  });

  it('find a circle when there is one', () => {
    const circle = new Map([
      ['a.ts', ['b.ts']],
      ['b.ts', ['c.ts']],
      ['c.ts', ['a.ts']],
    ]);
    expect(importCycles(circle)).toEqual([['a.ts', 'b.ts', 'c.ts', 'a.ts']]);
  });

  it('reach cdk/ from functions/ only in the local runner and the CLI', () => {
    const crossing = [...graph]
      .filter(([file]) => file.startsWith('functions/'))
      .flatMap(([file, targets]) =>
        targets.filter((t) => t.startsWith('cdk/')).map((t) => `${file} -> ${t}`),
      );
    expect(crossing.length).toBeGreaterThan(0);
    expect(
      crossing.filter((c) => !c.startsWith('functions/local-runner/') && !c.startsWith('functions/cli/')),
    ).toEqual([]);
  });

  it("leave the CLI and the stack out of every deployed Lambda's bundle (the canary's included)", () => {
    const entries = [...graph.keys()].filter(
      (f) => /^functions\/[^/]+\.ts$/.test(f) && f !== 'functions/contract.ts',
    );
    // Every deployed Lambda's entry, the canary's three included, and nothing else.
    expect([...entries].sort()).toEqual(
      [...STEPS, ...CANARY_STEPS].map((step) => `functions/${step}.ts`).sort(),
    );
    for (const entry of entries) {
      const seen = new Set<string>();
      const visit = (file: string) => {
        if (seen.has(file)) return;
        seen.add(file);
        for (const target of graph.get(file) ?? []) visit(target);
      };
      visit(entry);
      expect(
        [...seen].filter(
          (f) =>
            f.startsWith('functions/cli/') || f.startsWith('functions/local-runner/') || f.startsWith('cdk/'),
        ),
        entry,
      ).toEqual([]);
    }
  });
});
