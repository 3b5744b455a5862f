#!/usr/bin/env node
/** The `compactor` executable: runs one command and exits with its code. */

import { enableCompileCache, registerHooks } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stripCacheLoad } from './strip-cache.ts';

// Node's module compile cache keeps V8's compiled code of the modules a command loads, so a run
// after the first loads them faster (in the OS temp folder unless NODE_COMPILE_CACHE names one;
// NODE_DISABLE_COMPILE_CACHE=1 turns it off). It never throws: a cache it cannot use is skipped.
// https://nodejs.org/api/module.html#moduleenablecompilecacheoptions
enableCompileCache();
// The project's modules with their types stripped, kept in the OS temp folder too
// (strip-cache.ts); NODE_DISABLE_COMPILE_CACHE=1 turns this off as well.
if (process.env.NODE_DISABLE_COMPILE_CACHE !== '1') {
  const stripped = join(tmpdir(), 'compactor-stripped-modules');
  registerHooks({ load: stripCacheLoad(new URL('../../', import.meta.url).href, stripped) });
}
// Imported after the cache is on, so every module of the CLI goes through it.
const { runCli } = await import('./compactor.ts');

const code = await runCli(process.argv.slice(2), {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
});
process.exitCode = code;
