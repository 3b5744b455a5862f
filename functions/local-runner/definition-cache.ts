/**
 * The cache of the synthesized state machine definition. `compactor run` executes the definition
 * `cdk deploy` would deploy, and synthesizing the CDK app takes seconds, so each synthesis is
 * kept under the work dir, keyed by a hash of everything it reads:
 *
 * - every source file the synthesis runs: the entry modules and, transitively, each file they
 *   import by a relative path (static, re-exported, dynamic: an over-approximation, never less);
 * - other files it reads (cdk.json, the local runner itself) and package-lock.json;
 * - the installed version of every package those sources import, and Node's version;
 * - the `compactor` context it is given (cdk.json's is in cdk.json) and the CDK_* environment
 *   variables the CDK App reads (CDK_CONTEXT_JSON adds context);
 * - the entry format's version.
 *
 * A change to any of these is a new key, so an entry can never be stale; it is only ever unused.
 */

import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { errorCode } from '../core/errors.ts';

/** Bumped whenever an entry's shape or meaning changes. */
const ENTRY_FORMAT = 1;

export interface DefinitionKeyInputs {
  /** The project root: the folder of package.json, cdk.json, cdk/ and functions/. */
  readonly root: string;
  /** Modules the synthesis runs, relative to root: hashed with everything they import. */
  readonly entries: readonly string[];
  /** Other files it reads, relative to root: hashed as they are. */
  readonly files: readonly string[];
  /** The `compactor` context the synthesis is given. */
  readonly context: Record<string, unknown>;
  readonly env: Readonly<Record<string, string | undefined>>;
}

// `from '...'`, `import '...'` and `import('...')` of a relative path.
const RELATIVE_IMPORT = /(?:\bfrom\s*|\bimport\s*\(?\s*)['"](\.{1,2}\/[^'"\n]+)['"]/g;
// The same of a package (not node: builtins, not relative): its name is the first one or two segments.
const PACKAGE_IMPORT = /(?:\bfrom\s*|\bimport\s*\(?\s*)['"]((?:@[\w.-]+\/)?\w[\w.-]*)(?:\/[^'"\n]*)?['"]/g;

function sha256(data: string | Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

/** The entries and every file they import by a relative path, transitively: root-relative, sorted. */
export async function sourceClosure(
  root: string,
  entries: readonly string[],
): Promise<{ files: Map<string, Buffer>; packages: Set<string> }> {
  const files = new Map<string, Buffer>();
  const packages = new Set<string>();
  const pending = entries.map((entry) => resolve(root, entry));
  for (let path = pending.pop(); path !== undefined; path = pending.pop()) {
    const name = relative(root, path).split(sep).join('/');
    if (files.has(name)) continue;
    let body: Buffer;
    try {
      body = await readFile(path);
    } catch (error) {
      // An entry must exist; a "relative import" that names no file is text the pattern matched
      // in a comment or string (a real one would fail the synthesis, which then caches nothing).
      if (errorCode(error) === 'ENOENT' && !entries.some((entry) => resolve(root, entry) === path)) continue;
      throw error;
    }
    files.set(name, body);
    const text = body.toString('utf8');
    for (const match of text.matchAll(RELATIVE_IMPORT))
      pending.push(resolve(dirname(path), match[1] as string));
    for (const match of text.matchAll(PACKAGE_IMPORT)) packages.add(match[1] as string);
  }
  return { files, packages };
}

/** The installed version of a package, as the project resolves it; undefined if it is not installed. */
function installedVersion(root: string, pkg: string): string | undefined {
  const require = createRequire(join(root, 'package.json'));
  let path: string;
  try {
    path = require.resolve(`${pkg}/package.json`);
  } catch (error) {
    // Not a package (the pattern matched other text) or one that hides its package.json: the
    // lock file's hash still covers its version.
    if (errorCode(error) === 'MODULE_NOT_FOUND' || errorCode(error) === 'ERR_PACKAGE_PATH_NOT_EXPORTED')
      return undefined;
    throw error;
  }
  return (JSON.parse(readFileSync(path, 'utf8')) as { version?: string }).version;
}

/** The hash of package-lock.json, which stands for every installed version (of an empty file without one). */
function lockFileHash(root: string): string {
  try {
    return sha256(readFileSync(join(root, 'package-lock.json')));
  } catch (error) {
    if (errorCode(error) === 'ENOENT') return sha256(Buffer.from(''));
    throw error;
  }
}

/** The cache key of one synthesis: a hash of everything it reads (see the file comment). */
export async function definitionKey(inputs: DefinitionKeyInputs): Promise<string> {
  const { files, packages } = await sourceClosure(inputs.root, inputs.entries);
  const hashed: [string, string][] = [...files].map(([name, body]) => [name, sha256(body)]);
  for (const file of inputs.files)
    hashed.push([`file:${file}`, sha256(await readFile(join(inputs.root, file)))]);
  hashed.push(['file:package-lock.json', lockFileHash(inputs.root)]);
  const env = Object.entries(inputs.env)
    .filter(([name, value]) => name.startsWith('CDK_') && value !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const versions = [...packages].sort().map((pkg) => [pkg, installedVersion(inputs.root, pkg) ?? null]);
  return sha256(
    JSON.stringify({
      format: ENTRY_FORMAT,
      node: process.version,
      files: hashed.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
      packages: versions,
      context: inputs.context,
      env,
    }),
  ).slice(0, 32);
}

/** The entry stored under `key`, or undefined (none yet, or unreadable: it is then made again). */
export async function readCachedDefinition(dir: string, key: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(join(dir, `${key}.json`), 'utf8');
  } catch (error) {
    if (errorCode(error) === 'ENOENT') return undefined;
    throw error;
  }
  let entry: unknown;
  try {
    entry = JSON.parse(text);
  } catch (error) {
    if (error instanceof SyntaxError) return undefined;
    throw error;
  }
  const record = entry as { key?: unknown; value?: unknown } | null;
  return typeof record === 'object' && record !== null && record.key === key ? record.value : undefined;
}

/** Stores `value` under `key`: written to a temp file and renamed, so a reader sees all or nothing. */
export async function writeCachedDefinition(dir: string, key: string, value: unknown): Promise<void> {
  await mkdir(dir, { recursive: true });
  const target = join(dir, `${key}.json`);
  const temp = `${target}.${randomBytes(4).toString('hex')}.tmp`;
  await writeFile(temp, JSON.stringify({ key, value }));
  await rename(temp, target);
}

/**
 * Definitions the ASL validator already accepted. aws-local-stepfunctions validates a definition
 * with asl-validator each time a StateMachine is built, which compiles the validator's JSON
 * schemas anew: about a third of `compactor run`'s start-up, for the same text every run. The
 * outcome depends only on the definition's text, the validation options and the installed
 * validator, so a marker keyed by a hash of all three (the lock file standing for the validator's
 * version, as it does for the definition cache) says it passed before. Only a definition that
 * passed is ever marked.
 */
export function validatedKey(root: string, definition: unknown, validationOptions: unknown): string {
  return sha256(
    JSON.stringify({ format: ENTRY_FORMAT, ...validatorIdentity(root), validationOptions, definition }),
  ).slice(0, 32);
}

/** The lock file's hash and the interpreter's version, read once per process and root. */
const validatorIdentities = new Map<string, { readonly lock: string; readonly interpreter: string | null }>();
function validatorIdentity(root: string): { readonly lock: string; readonly interpreter: string | null } {
  let identity = validatorIdentities.get(root);
  if (identity === undefined) {
    identity = {
      lock: lockFileHash(root),
      interpreter: installedVersion(root, 'aws-local-stepfunctions') ?? null,
    };
    validatorIdentities.set(root, identity);
  }
  return identity;
}

/** Whether a definition with this validatedKey passed validation before. */
export async function wasValidated(dir: string, key: string): Promise<boolean> {
  try {
    await readFile(join(dir, 'validated', key));
    return true;
  } catch (error) {
    if (errorCode(error) === 'ENOENT') return false;
    throw error;
  }
}

/** Marks a definition as validated (call only after the validator accepted it). */
export async function markValidated(dir: string, key: string): Promise<void> {
  await mkdir(join(dir, 'validated'), { recursive: true });
  await writeFile(join(dir, 'validated', key), '');
}
