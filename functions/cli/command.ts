/**
 * What every `compactor` command shares: its output streams, the store, config and clock it runs against,
 * and --json or text output.
 */

import { isAbsolute, relative, sep } from 'node:path';
import type { CompactorConfig } from '../core/config.ts';
import type { Clock } from '../core/engine.ts';
import { ConfigError } from '../core/errors.ts';
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
 * prefix and the trailing '/'; or as `visible` prints it: a path inside the store's folder, an
 * s3:// URL inside its bucket) as the key prefix it stands for.
 */
export function partitionFolderOption(ctx: CommandContext, partition: string): string {
  const prefix = ctx.config.layout.dataPrefix;
  const key = storeKeyOf(ctx.target, partition);
  const folder = key.endsWith('/') ? key : `${key}/`;
  return folder.startsWith(prefix) ? folder : `${prefix}${folder}`;
}

/** `given` as a key of the store: as given, or relative to the store's folder or bucket. */
function storeKeyOf(target: StoreTarget, given: string): string {
  const location = target.store.location;
  if (location.startsWith('s3://') && given.startsWith('s3://')) {
    const bucket = `${location.replace(/\/+$/, '')}/`;
    if (!given.startsWith(bucket)) {
      throw new ConfigError(
        `--partition ${given}: not in the store's bucket ${location}; give a partition folder such as mydb/cpu/2025/01/15/10/`,
      );
    }
    return given.slice(bucket.length);
  }
  if (target.localRoot === undefined || !isAbsolute(given)) return given;
  const inside = relative(target.localRoot, given);
  if (inside === '') {
    throw new ConfigError(
      `--partition ${given}: that is the store itself; name a partition folder in it, such as mydb/cpu/2025/01/15/10/`,
    );
  }
  if (inside.startsWith('..') || isAbsolute(inside)) {
    throw new ConfigError(
      `--partition ${given}: not inside the store's folder ${target.localRoot}; give a partition folder such as mydb/cpu/2025/01/15/10/`,
    );
  }
  return inside.split(sep).join('/') + (given.endsWith('/') ? '/' : '');
}

/** --json prints the value; otherwise the text. */
export function emit(io: CliIo, options: ParsedOptions, value: unknown, text: () => string): void {
  io.out(options.json ? JSON.stringify(value, null, 2) : text());
}
