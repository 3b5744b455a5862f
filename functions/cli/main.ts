#!/usr/bin/env node
/** The `compactor` executable: runs one command and exits with its code. */

import { runCli } from './compactor.ts';

const code = await runCli(process.argv.slice(2), {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
});
process.exitCode = code;
