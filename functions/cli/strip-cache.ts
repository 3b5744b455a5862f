/**
 * The CLI's TypeScript modules as JavaScript, kept between runs. Node 22 strips the types of
 * every .ts module it loads, each time, and its compile cache keeps only V8's code, not the
 * stripped source (https://nodejs.org/api/module.html#module-compile-cache): about 80 ms of
 * every command's start-up here. A load hook (module.registerHooks,
 * https://nodejs.org/api/module.html#synchronous-hooks-accepted-by-moduleregisterhooks) gives
 * Node each of the project's modules stripped once by module.stripTypeScriptTypes, the function
 * Node's own loader uses, from a file named by the hash of its URL, its source and the Node
 * version, so an edited module or another Node is a new entry. The URL is unchanged, so
 * import.meta.url, stack traces and relative imports are as without the hook.
 */

import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { type LoadFnOutput, type LoadHookContext, stripTypeScriptTypes } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { errorCode } from '../core/errors.ts';

type NextLoad = (url: string, context?: Partial<LoadHookContext>) => LoadFnOutput;

/**
 * The load hook: a `.ts` module under `root` (a file: URL ending in '/'), outside node_modules,
 * comes stripped from `cacheDir`, stripped and written there on a miss; any other module loads
 * as Node loads it. A cache it cannot read or write is skipped, as Node's compile cache is.
 */
export function stripCacheLoad(root: string, cacheDir: string) {
  return (url: string, context: LoadHookContext, nextLoad: NextLoad): LoadFnOutput => {
    if (!url.startsWith(root) || !url.endsWith('.ts') || url.includes('/node_modules/')) {
      return nextLoad(url, context);
    }
    const source = readFileSync(fileURLToPath(url), 'utf8');
    const hash = createHash('sha256').update(`${process.version}\0${url}\0`).update(source).digest('hex');
    const file = join(cacheDir, `${hash}.js`);
    try {
      return { format: 'module', source: readFileSync(file, 'utf8'), shortCircuit: true };
    } catch (error) {
      // A file-system error skips the cache; anything else is a bug.
      if (errorCode(error) === undefined) throw error;
    }
    const code = stripQuietly(source);
    try {
      mkdirSync(cacheDir, { recursive: true });
      // Written aside, then renamed: another run reading the entry sees all of it or none.
      const aside = `${file}.${process.pid}`;
      writeFileSync(aside, code);
      renameSync(aside, file);
    } catch (error) {
      if (errorCode(error) === undefined) throw error;
    }
    return { format: 'module', source: code, shortCircuit: true };
  };
}

/**
 * stripTypeScriptTypes without its one-time ExperimentalWarning: the CLI would print it on the
 * first run after each change, about a function that does what loading the module does anyway.
 */
function stripQuietly(source: string): string {
  const emitWarning = process.emitWarning;
  process.emitWarning = () => {};
  try {
    return stripTypeScriptTypes(source, { mode: 'strip' });
  } finally {
    process.emitWarning = emitWarning;
  }
}
