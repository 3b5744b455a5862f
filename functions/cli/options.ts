/**
 * The `compactor` command line's options: one strict parseArgs table for every command (an unknown
 * option fails before any command runs), and the parsed options' type.
 */

import { DOCTOR_CLI_OPTIONS } from './commands/doctor-options.ts';
import { SFN_CLI_OPTIONS, type SfnCliOptions } from './commands/sfn-options.ts';
import type { CliOptions } from './context.ts';

/** Every option of every command: parseArgs checks them all, strictly, before a command runs. */
export const OPTIONS = {
  // region, now, tier, state-machine, execution, wait
  ...SFN_CLI_OPTIONS,
  ...DOCTOR_CLI_OPTIONS,
  store: { type: 'string' },
  endpoint: { type: 'string' },
  layout: { type: 'string' },
  'min-files': { type: 'string' },
  'min-age': { type: 'string' },
  quiet: { type: 'string' },
  concurrency: { type: 'string' },
  'target-size': { type: 'string' },
  'row-group-size': { type: 'string' },
  'max-job-bytes': { type: 'string' },
  'max-job-files': { type: 'string' },
  'sort-keys': { type: 'string' },
  'time-column': { type: 'string' },
  'partition-segments': { type: 'string' },
  'data-suffix': { type: 'string' },
  'memory-limit': { type: 'string' },
  threads: { type: 'string' },
  'work-dir': { type: 'string' },
  retention: { type: 'string' },
  'retention-buffer': { type: 'string' },
  'unsafe-single-writer-store': { type: 'boolean' },
  dir: { type: 'string' },
  context: { type: 'string' },
  sql: { type: 'boolean' },
  format: { type: 'string' },
  'dry-run': { type: 'boolean' },
  monthly: { type: 'boolean' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** The options as parsed; each command reads its own. */
export type ParsedOptions = CliOptions &
  SfnCliOptions & {
    dir?: string;
    sql?: boolean;
    format?: string;
    json?: boolean;
    help?: boolean;
    context?: string;
    'dry-run'?: boolean;
  };
