import { defineConfig } from 'vitest/config';
import SummaryReporter from './test/support/summary-reporter.ts';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // DuckDB and the sweep are CPU-bound; two workers match the 2-core machine.
    reporters: ['default', new SummaryReporter()],
    pool: 'forks',
    maxWorkers: 2,
  },
});
