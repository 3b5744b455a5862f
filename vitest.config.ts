import { defineConfig } from 'vitest/config';
import SummaryReporter from './test/support/summary-reporter.ts';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Hang guards, not budgets: a loaded 2-core machine stretches every test several times over.
    // The long sweeps use test/support/hang-guard.ts.
    testTimeout: 300_000,
    hookTimeout: 300_000,
    // DuckDB and the sweep are CPU-bound; two workers match the 2-core machine.
    reporters: ['default', new SummaryReporter()],
    // Scratch on tmpfs when there is one: the sweeps are file-system-metadata bound.
    globalSetup: ['test/support/scratch-on-tmpfs.ts'],
    pool: 'forks',
    maxWorkers: 2,
  },
});
