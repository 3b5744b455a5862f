/**
 * The repository's own imports between files, read from the sources as text: every relative
 * `import ... from './x.ts'` and `export ... from './x.ts'` (type imports included, since a
 * circle of types is still a circle of files to read), and dynamic `import('./x.ts')`.
 */

import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

const IMPORT =
  /(?:^|\n)\s*(?:import|export)\b[^;]*?\bfrom\s+'(\.{1,2}\/[^']+)'|\bimport\(\s*'(\.{1,2}\/[^']+)'\s*\)/g;

function walk(dir: string, out: string[]): void {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) walk(path, out);
    else if (entry.name.endsWith('.ts')) out.push(path);
  }
}

/** File (relative to the repository) -> the repository files it imports. */
export function importGraph(roots: readonly string[]): Map<string, string[]> {
  const files: string[] = [];
  for (const root of roots) walk(join(REPO, root), files);
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const source = readFileSync(file, 'utf8');
    const targets = new Set<string>();
    for (const match of source.matchAll(IMPORT)) {
      const spec = match[1] ?? match[2];
      if (spec) targets.add(relative(REPO, resolve(dirname(file), spec)));
    }
    graph.set(relative(REPO, file), [...targets].sort());
  }
  return graph;
}

/** Every circle of files (each as its files in order), found once by a depth-first walk. */
export function importCycles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  const cycles: string[][] = [];
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (file: string) => {
    state.set(file, 'open');
    stack.push(file);
    for (const next of graph.get(file) ?? []) {
      if (!graph.has(next)) continue;
      if (state.get(next) === 'open') cycles.push([...stack.slice(stack.indexOf(next)), next]);
      else if (!state.has(next)) visit(next);
    }
    stack.pop();
    state.set(file, 'done');
  };
  for (const file of [...graph.keys()].sort()) if (!state.has(file)) visit(file);
  return cycles;
}
