/**
 * The core's boundary (functions/core never imports the AWS SDK, CDK, DuckDB, an adapter or a
 * Lambda/CLI module, and never reads process.env) is a lint rule in biome.json, so `npm run lint`
 * fails on a deliberate violation. Run here on probe files laid out as the repository is, with the
 * repository's own biome.json, so the rule is tested as configured.
 */

import { execFile } from 'node:child_process';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { useTempDir } from '../support/engine-fixture.ts';

const REPO = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const BIOME = join(REPO, 'node_modules', '.bin', 'biome');

let dir: string;

useTempDir('core-boundary-', async (d) => {
  dir = d;
  const config = JSON.parse(await readFile(join(REPO, 'biome.json'), 'utf8')) as Record<string, unknown>;
  delete config.$schema;
  await writeFile(join(dir, 'biome.json'), JSON.stringify(config));
});

/** Lints one probe file at `path` (relative to the repository root); resolves to the diagnostics. */
async function lint(path: string, source: string): Promise<{ failed: boolean; output: string }> {
  const file = join(dir, path);
  await mkdir(dirname(file), { recursive: true });
  await writeFile(file, source);
  try {
    const { stdout, stderr } = await promisify(execFile)(BIOME, ['lint', '--max-diagnostics=50', path], {
      cwd: dir,
    });
    return { failed: false, output: stdout + stderr };
  } catch (error) {
    const { stdout, stderr } = error as { stdout: string; stderr: string };
    return { failed: true, output: stdout + stderr };
  } finally {
    await rm(file);
  }
}

describe('the core boundary lint rule (biome.json overrides for functions/core/**)', () => {
  it.each([
    [
      'the AWS SDK',
      "import { S3Client } from '@aws-sdk/client-s3';\n\nexport const client = new S3Client({});\n",
    ],
    [
      'Smithy',
      "import { StandardRetryStrategy } from '@smithy/util-retry';\n\nexport const s = StandardRetryStrategy;\n",
    ],
    ['CDK', "import { Stack } from 'aws-cdk-lib';\n\nexport const s = Stack;\n"],
    ['DuckDB', "import { DuckDBInstance } from '@duckdb/node-api';\n\nexport const d = DuckDBInstance;\n"],
    ['an adapter', "import { S3Store } from '../adapters/s3-store.ts';\n\nexport const s = S3Store;\n"],
    ['a CLI module', "import { main } from '../cli/main.ts';\n\nexport const m = main;\n"],
    ['a Lambda handler', "import { handler } from '../compact.ts';\n\nexport const h = handler;\n"],
    ['powertools', "import { Logger } from '@aws-lambda-powertools/logger';\n\nexport const l = Logger;\n"],
  ])('fails a core module that imports %s', async (_what, source) => {
    const { failed, output } = await lint('functions/core/probe.ts', source);
    expect(failed).toBe(true);
    expect(output).toContain('lint/style/noRestrictedImports');
    expect(output).toContain('functions/core is the pure protocol');
  });

  it('fails a module one folder down in core (core/steps/) that leaves core', async () => {
    const { failed, output } = await lint(
      'functions/core/steps/probe.ts',
      "import { S3Store } from '../../adapters/s3-store.ts';\n\nexport const s = S3Store;\n",
    );
    expect(failed).toBe(true);
    expect(output).toContain('functions/core is the pure protocol');
  });

  it('fails a core module that reads process.env', async () => {
    const { failed, output } = await lint(
      'functions/core/probe.ts',
      'export const region = process.env.AWS_REGION;\n',
    );
    expect(failed).toBe(true);
    expect(output).toContain('lint/style/noProcessEnv');
  });

  it('passes a core module importing Node and other core modules, and an adapter importing the SDK', async () => {
    const pure =
      "import { join } from 'node:path';\nimport { ConfigError } from './errors.ts';\n\nexport const x = [join('a'), ConfigError];\n";
    expect(
      await lint('functions/core/steps/probe.ts', pure.replace('./errors.ts', '../errors.ts')),
    ).toMatchObject({ failed: false });
    expect(await lint('functions/core/probe.ts', pure)).toMatchObject({ failed: false });
    const adapter =
      "import { S3Client } from '@aws-sdk/client-s3';\n\nexport const client = new S3Client({});\n";
    expect(await lint('functions/adapters/probe.ts', adapter)).toMatchObject({ failed: false });
  });
});

describe('only the local runner and the CLI import the stack (biome.json override for functions/**)', () => {
  const stack = "import { STACK_DEFAULTS } from '%s';\n\nexport const d = STACK_DEFAULTS;\n";
  it.each([
    ['functions/probe.ts', '../cdk/config-defaults.ts'],
    ['functions/lambda/probe.ts', '../../cdk/config-defaults.ts'],
    ['functions/adapters/probe.ts', '../../cdk/config-defaults.ts'],
  ])('fails %s importing cdk/', async (path, spec) => {
    const { failed, output } = await lint(path, stack.replace('%s', spec));
    expect(failed).toBe(true);
    expect(output).toContain('Only the local runner and the CLI import the stack');
  });

  it.each([
    ['functions/local-runner/probe.ts', '../../cdk/config-defaults.ts'],
    ['functions/cli/commands/probe.ts', '../../../cdk/config-defaults.ts'],
  ])('passes %s importing cdk/', async (path, spec) => {
    expect(await lint(path, stack.replace('%s', spec))).toMatchObject({ failed: false });
  });
});
