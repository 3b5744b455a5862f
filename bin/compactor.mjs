#!/usr/bin/env node
// The `compactor` command from any folder, on any Node: it starts the CLI (TypeScript, run by
// Node 22's type stripping) on the Node 22 the project installs (the `node` devDependency) unless
// this Node already is one, in the folder it was called from. Plain JavaScript, so an older Node
// (the system's 20) runs it.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const main = join(root, 'functions', 'cli', 'main.ts');
const [major, minor] = process.versions.node.split('.').map(Number);
const installed = join(root, 'node_modules', 'node', 'bin', 'node');
const node = major > 22 || (major === 22 && minor >= 18) ? process.execPath : installed;
if (!existsSync(node)) {
  process.stderr.write(
    `compactor: Node ${process.versions.node} cannot run it and ${installed} is missing: run npm ci in ${root}\n`,
  );
  process.exit(2);
}
// npm runs a script in the package's folder; INIT_CWD "holds the full path you were in when you
// ran npm run" (https://docs.npmjs.com/cli/v10/commands/npm-run-script), where relative paths
// belong. Anything else started it in the folder it was called from.
const byNpm = process.env.npm_lifecycle_event !== undefined && process.cwd() === root;
const cwd = byNpm && process.env.INIT_CWD ? process.env.INIT_CWD : process.cwd();
const child = spawn(node, [main, ...process.argv.slice(2)], { cwd, stdio: 'inherit' });
const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'];
const forward = (signal) => child.kill(signal);
for (const signal of SIGNALS) process.on(signal, forward);
child.on('exit', (code, signal) => {
  if (signal) {
    // Die of the child's signal, as a shell expects (exit 128 + n): with our forwarding handler
    // still installed, the signal would be caught and this process would exit 0.
    for (const s of SIGNALS) process.off(s, forward);
    process.kill(process.pid, signal);
  } else process.exit(code ?? 1);
});
