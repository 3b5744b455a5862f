/**
 * The docs stay true to the code: every CLI command, CLI flag and config key that docs/*.md and
 * README.md name exists, every command and every stack context key is documented in docs/, and
 * every relative link resolves (the file, and the heading when it names one).
 *
 * The lists come from the code itself: the commands from the CLI's own dispatch table
 * (COMMAND_NAMES), the flags from its usage text, the stack context keys from the walk of its
 * schema (cdk/config-reference.ts), the core keys from functions/core/config.ts's CONFIG_KEYS and DEFAULTS.
 *
 * The naming convention it checks (stated in docs/cli.md and docs/configuration.md):
 * - a command is named `compactor <command>` in a code span or code block; docs/cli.md has a
 *   heading "`compactor <command>`" for each;
 * - a config key is documented by a code span in the first column of a table whose first header
 *   is "key"; elsewhere a code span that starts with a dotted path whose first segment is a config
 *   key (`tiers.monthly.enabled`, `planning.listing: "full"`) names that key. `<tier>` and
 *   `<size>` stand for each tier and each Lambda size group.
 */

import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { stackSettingRows } from '../../cdk/config-reference.ts';
import { COMMAND_NAMES, runCli } from '../../functions/cli/compactor.ts';
import { CONFIG_KEYS, DEFAULTS, TIERS } from '../../functions/core/config.ts';

const REPO = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const DOCS = join(REPO, 'docs');

interface Page {
  readonly path: string;
  readonly text: string;
}

function pages(): Page[] {
  const files = readdirSync(DOCS)
    .filter((f) => f.endsWith('.md'))
    .map((f) => join(DOCS, f));
  return [...files, join(REPO, 'README.md')].map((path) => ({ path, text: readFileSync(path, 'utf8') }));
}

const isDoc = (page: Page) => page.path.startsWith(`${DOCS}/`);
const name = (page: Page) => relative(REPO, page.path);

/** Fenced code blocks' contents, and the text without them. */
function splitFences(text: string): { code: string[]; prose: string } {
  const code: string[] = [];
  const prose = text.replace(/^```[^\n]*\n([\s\S]*?)^```$/gm, (_all, body: string) => {
    code.push(body);
    return '';
  });
  return { code, prose };
}

function codeSpans(prose: string): string[] {
  return [...prose.matchAll(/`([^`\n]+)`/g)].map((m) => m[1] ?? '');
}

// ---- the code's own lists ----

async function cliFlags(): Promise<Set<string>> {
  const out: string[] = [];
  await runCli(['--help'], { out: (l) => out.push(l), err: () => {} });
  return new Set([...out.join('\n').matchAll(/(?<![\w-])(--[a-z][a-z-]*|-h)\b/g)].map((m) => m[1] ?? ''));
}

/** The stack context's keys, sections included, walked from its schema. */
function stackKeys(): Set<string> {
  return new Set(stackSettingRows().map((row) => row.key));
}

function coreKeys(): Set<string> {
  return new Set([
    ...CONFIG_KEYS,
    ...Object.keys(DEFAULTS.planning).map((k) => `planning.${k}`),
    ...Object.keys(DEFAULTS.failureBackoff).map((k) => `failureBackoff.${k}`),
  ]);
}

/** `tiers.<tier>.minFiles` -> one path per tier; `lambda.<size>.memoryMb` -> one per size. */
function expand(path: string, sizes: readonly string[]): string[] {
  let paths = [path];
  for (const [token, values] of [
    ['<tier>', TIERS],
    ['<size>', sizes],
  ] as const) {
    paths = paths.flatMap((p) => (p.includes(token) ? values.map((v) => p.replace(token, v)) : [p]));
  }
  return paths;
}

// ---- what the docs name ----

function commandsNamed(page: Page): string[] {
  const { code, prose } = splitFences(page.text);
  const texts = [...code, ...codeSpans(prose)];
  return texts.flatMap((t) => [...t.matchAll(/\bcompactor (?:-- )?([a-z][a-z-]*)/g)].map((m) => m[1] ?? ''));
}

/** Code spans in the first column of tables headed "key". */
function tableKeys(page: Page): string[] {
  const keys: string[] = [];
  let inKeyTable = false;
  for (const line of splitFences(page.text).prose.split('\n')) {
    if (!line.startsWith('|')) {
      inKeyTable = false;
      continue;
    }
    const first = line.split('|')[1]?.trim() ?? '';
    if (first === 'key') inKeyTable = true;
    else if (inKeyTable && !/^-+$/.test(first)) keys.push(...codeSpans(first));
  }
  return keys;
}

function dottedKeysNamed(page: Page, tops: ReadonlySet<string>): string[] {
  return codeSpans(splitFences(page.text).prose).flatMap((span) => {
    const m = /^([A-Za-z]+(?:\.(?:[A-Za-z]+|<tier>|<size>))+)(?![\w.(<])/.exec(span);
    const path = m?.[1];
    return path !== undefined && tops.has(path.split('.')[0] ?? '') ? [path] : [];
  });
}

/** GitHub's heading anchors. */
function anchors(text: string): Set<string> {
  const { prose } = splitFences(text);
  return new Set(
    [...prose.matchAll(/^#{1,6} (.+)$/gm)].map((m) =>
      (m[1] ?? '')
        .toLowerCase()
        .replace(/[^\p{L}\p{N} _-]/gu, '')
        .replace(/ /g, '-'),
    ),
  );
}

function brokenLinks(page: Page): string[] {
  const broken: string[] = [];
  const { prose } = splitFences(page.text);
  for (const m of prose.matchAll(/\]\(([^)\s]+)\)/g)) {
    const target = m[1] ?? '';
    if (/^[a-z]+:/.test(target)) continue; // https:, mailto:
    const [file = '', anchor] = target.split('#');
    const path = file === '' ? page.path : resolve(dirname(page.path), file);
    if (!existsSync(path)) {
      broken.push(`${target}: no file ${relative(REPO, path)}`);
      continue;
    }
    if (anchor !== undefined && path.endsWith('.md') && !anchors(readFileSync(path, 'utf8')).has(anchor)) {
      broken.push(`${target}: no heading #${anchor} in ${relative(REPO, path)}`);
    }
  }
  return broken;
}

// ---- the checks ----

describe('docs name what the code has', () => {
  const all = pages();
  const stack = stackKeys();
  const core = coreKeys();
  const sizes = [...stack].filter((k) => /^lambda\.[^.]+$/.test(k)).map((k) => k.slice('lambda.'.length));
  const known = new Set([...stack, ...core]);
  const tops = new Set([...known].map((k) => k.split('.')[0] ?? ''));

  it('derives the lists from the code', async () => {
    // Guards on the derivation itself: an empty list would make every check below pass.
    expect(COMMAND_NAMES).toEqual(expect.arrayContaining(['run', 'plan', 'doctor', 'start']));
    expect([...stack]).toEqual(
      expect.arrayContaining([
        'bucket.kmsKeyArn',
        'tiers.hourly.minFiles',
        'lambda.compact.memoryMb',
        'map.childExecutionType',
      ]),
    );
    expect(stack.has('planning')).toBe(true);
    expect([...core]).toEqual(
      expect.arrayContaining(['leaseSeconds', 'planning.listing', 'failureBackoff.after']),
    );
    expect(all.filter(isDoc).length).toBeGreaterThanOrEqual(8);
  });

  it('every `compactor <command>` in docs/ and README.md is a CLI command', async () => {
    const commands = new Set(COMMAND_NAMES);
    const unknown = all.flatMap((p) =>
      commandsNamed(p)
        .filter((c) => !commands.has(c))
        .map((c) => `${name(p)}: compactor ${c}`),
    );
    expect(unknown).toEqual([]);
  });

  it('every CLI command has a `compactor <command>` heading in docs/cli.md', async () => {
    const cli = readFileSync(join(DOCS, 'cli.md'), 'utf8');
    const headed = new Set([...cli.matchAll(/^#{2,4} `compactor ([a-z-]+)`$/gm)].map((m) => m[1]));
    expect(COMMAND_NAMES.filter((c) => !headed.has(c))).toEqual([]);
  });

  it('every flag docs/cli.md names is one the CLI takes, and every flag it takes is in docs/', async () => {
    const flags = await cliFlags();
    const cliPage = readFileSync(join(DOCS, 'cli.md'), 'utf8');
    const named = (text: string) =>
      new Set([...text.matchAll(/(?<![\w-])(--[a-z][a-z-]*)/g)].map((m) => m[1] ?? ''));
    expect([...named(cliPage)].filter((f) => !flags.has(f))).toEqual([]);
    const docs = named(
      all
        .filter(isDoc)
        .map((p) => p.text)
        .join('\n'),
    );
    expect([...flags].filter((f) => f !== '-h' && !docs.has(f))).toEqual([]);
  });

  it('every config key in docs/ and README.md exists in the stack or core parser', () => {
    const unknown = all.flatMap((p) =>
      [...tableKeys(p), ...dottedKeysNamed(p, tops)]
        .filter((k) => expand(k, sizes).some((e) => !known.has(e)))
        .map((k) => `${name(p)}: ${k}`),
    );
    expect(unknown).toEqual([]);
  });

  it('every stack context key and core config key is in a key table in docs/', () => {
    const documented = new Set(
      all.filter(isDoc).flatMap((p) => tableKeys(p).flatMap((k) => expand(k, sizes))),
    );
    expect([...stack, ...core].filter((k) => !documented.has(k))).toEqual([]);
  });

  it('every relative link in docs/ and README.md resolves', () => {
    expect(all.flatMap((p) => brokenLinks(p).map((b) => `${name(p)}: ${b}`))).toEqual([]);
  });
});
