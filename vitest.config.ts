import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // DuckDB and the sweep are CPU-bound; two workers match the 2-core machine.
    pool: 'forks',
    maxWorkers: 2,
  },
});
