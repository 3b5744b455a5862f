/**
 * What every `compactor` command shares: its output streams, the store, config and clock it runs against,
 * and --json or text output.
 */

import type { CompactorConfig } from '../core/config.ts';
import type { Clock } from '../core/engine.ts';
import { buildClock, buildConfig, openStore, type StoreTarget } from './context.ts';
import type { ParsedOptions } from './options.ts';

export interface CliIo {
  readonly out: (line: string) => void;
  readonly err: (line: string) => void;
}

/** A command: runs with the parsed options, returns the exit code. */
export type Handler = (options: ParsedOptions, io: CliIo) => Promise<number>;

export interface CommandContext {
  readonly target: StoreTarget;
  readonly config: CompactorConfig;
  readonly clock: Clock;
}

/** The store, the config resolved as the deployed stack's (buildConfig) and the clock. */
export async function commandContext(options: ParsedOptions): Promise<CommandContext> {
  const target = await openStore(options);
  return {
    target,
    config: buildConfig(options, target.dataPrefix),
    clock: buildClock(options.now),
  };
}

/**
 * A folder named by --partition (a partition folder or one above it, with or without the data
 * prefix and the trailing '/') as the key prefix it stands for.
 */
export function partitionFolderOption(config: CompactorConfig, partition: string): string {
  const prefix = config.layout.dataPrefix;
  const folder = partition.endsWith('/') ? partition : `${partition}/`;
  return folder.startsWith(prefix) ? folder : `${prefix}${folder}`;
}

/** --json prints the value; otherwise the text. */
export function emit(io: CliIo, options: ParsedOptions, value: unknown, text: () => string): void {
  io.out(options.json ? JSON.stringify(value, null, 2) : text());
}
