/**
 * What the stack's compact Lambda runs with, so the bench runs the product (and its peers) as
 * deployed: its memory, and the DuckDB memory limit and threads the stack sets from it.
 */

import { STACK_DEFAULTS } from '../cdk/config-defaults.ts';
import { duckDbMemoryLimit, vcpusFor } from '../functions/core/lambda-sizing.ts';

export const LAMBDA_MEMORY_MB = STACK_DEFAULTS.lambda.compact.memoryMb;
export const PRODUCT_MEMORY_LIMIT = duckDbMemoryLimit(LAMBDA_MEMORY_MB);
export const THREADS = vcpusFor(LAMBDA_MEMORY_MB);
