/** The ConfigError `run` throws (any other error propagates; no error fails the test). */

import { ConfigError } from '../../functions/core/errors.ts';

export function configError(run: () => unknown): ConfigError {
  try {
    run();
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error('expected a ConfigError');
}
