/**
 * `compactor doctor --store FOLDER` end to end: the local folder store, and the state machine CDK
 * synthesizes run locally with every Lambda in-process. A real run: the canary is written,
 * compacted by an execution scoped to it, its rows read back exactly, no state left, removed; a
 * partition of the lake's own data that the hourly tier would take is left alone; the table is
 * printed with one row per check. Usage errors exit 2.
 */

import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { DuckDbEngine } from '../../functions/adapters/duckdb-engine/duckdb-engine.ts';
import { LocalFolderStore } from '../../functions/adapters/local-store/local-store.ts';
import { runCli } from '../../functions/cli/compactor.ts';
import { useEngineAndDir } from '../support/engine-fixture.ts';
import { writeLake } from '../support/lake-harness.ts';

let root: string;
let engine: DuckDbEngine;

useEngineAndDir('doctor-local-', (e, dir) => {
  engine = e;
  root = dir;
});

async function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(args, { out: (l) => out.push(l), err: (l) => err.push(l) });
  return { code, out: out.join('\n'), err: err.join('\n') };
}

async function keys(dir: string): Promise<string[]> {
  const out: string[] = [];
  for await (const o of new LocalFolderStore(dir).list('')) out.push(o.key);
  return out.sort();
}

describe('compactor doctor --store FOLDER (the synthesized definition run locally)', () => {
  it('passes every check, prints the table, leaves the lake as it was', async () => {
    const dir = join(root, 'lake');
    // Twelve raw files of an old hour: the hourly tier would compact them, but the canary's
    // execution is scoped to the canary table.
    await writeLake(
      engine,
      dir,
      Array.from({ length: 12 }, (_, i) => ({
        key: `db/cpu/2025/01/14/01/cpu_20250114_01${String(i).padStart(2, '0')}00_${i}.parquet`,
        rows: 7,
      })),
    );
    const before = await keys(dir);

    const { code, out, err } = await cli(['doctor', '--store', dir]);
    expect(code, `${out}\n${err}`).toBe(0);
    const lines = out.split('\n');
    expect(lines[0]).toMatch(/^check\s+result\s+detail\s+fix$/);
    const row = (check: string) => lines.find((l) => l.startsWith(`${check} `)) ?? '';
    expect(row('stack outputs')).toMatch(/\bn\/a\b.*a local run over file:\/\//);
    expect(row('state machine')).toMatch(/\bpass\b.*the definition cdk synthesizes/);
    expect(row('store probe')).toMatch(
      /\bpass\b.*put-if-absent, compare-and-swap, conditional-copy, conditional-delete, checksums honoured/,
    );
    expect(row('canary execution')).toMatch(
      /\bpass\b.*SUCCEEDED .*1 partition planned \(only _compactor_doctor\/canary-[0-9a-f]{8}\/\), compacted/,
    );
    // Ten raw files of ten rows (hourly minFiles 10): exactly ids 1..100 in one hourly output.
    expect(row('canary rows')).toMatch(
      /\bpass\b.*100 rows, ids 1\.\.100 once each, in 1 hourly output\(s\); 10 raw files deleted/,
    );
    expect(row('no state left')).toMatch(
      /\bpass\b.*no manifest, staging object, quarantine or failure record of the canary, and its receipt/,
    );
    // The hourly output and the job's receipt.
    expect(row('canary removed')).toMatch(
      /\bpass\b.*2 object\(s\) deleted \(its files and its jobs' receipts\); nothing left under _compactor_doctor\/canary-/,
    );
    expect(row('schedules')).toMatch(/\bn\/a\b.*a local run has no schedules/);
    expect(lines.at(-1)).toBe('doctor: every check passed (6 pass, 2 n/a)');
    expect(err).toMatch(
      /doctor: wrote canary table _compactor_doctor\/canary-[0-9a-f]{8}\/ \(10 raw files, 100 rows\)/,
    );
    expect(err).toMatch(/doctor: Plan \(/);

    // The lake's own data untouched, the canary gone, no state (run records, probe objects) left.
    expect(await keys(dir)).toEqual(before);
  });

  it('prints the checks as JSON with --json', async () => {
    const dir = join(root, 'json');
    await writeLake(engine, dir, [{ key: 'db/cpu/2025/01/14/01/cpu_20250114_010000_1.parquet', rows: 3 }]);
    const { code, out } = await cli(['doctor', '--store', dir, '--json', '--layout', 'hive']);
    expect(code).toBe(0);
    const report = JSON.parse(out) as {
      ok: boolean;
      checks: { check: string; result: string; detail: string }[];
    };
    expect(report.ok).toBe(true);
    expect(report.checks.map((c) => [c.check, c.result])).toEqual([
      ['stack outputs', 'n/a'],
      ['state machine', 'pass'],
      ['store probe', 'pass'],
      ['canary execution', 'pass'],
      ['canary rows', 'pass'],
      ['no state left', 'pass'],
      ['canary removed', 'pass'],
      ['schedules', 'n/a'],
    ]);
    // Hive names a table with one segment: the canary is one table of its own there too.
    expect(report.checks[3]?.detail).toMatch(/only _compactor_doctor-canary-[0-9a-f]{8}\//);
  });

  it('exits 2 on usage errors, naming the fix', async () => {
    const cases: [string[], RegExp][] = [
      [
        ['doctor'],
        /--stack NAME \(after cdk deploy\), --state-machine ARN --store s3:\/\/BUCKET\/PREFIX, or --store FOLDER/,
      ],
      [['doctor', '--stack', 'ParquetCompactor', '--store', root], /drop --state-machine and --store/],
      [['doctor', '--state-machine', 'not-an-arn', '--store', 's3://b/p'], /not a state machine ARN/],
      [
        [
          'doctor',
          '--state-machine',
          'arn:aws:states:eu-west-1:123456789012:stateMachine:C',
          '--store',
          root,
        ],
        /--state-machine needs --store s3:\/\/BUCKET\/PREFIX/,
      ],
      [
        ['doctor', '--stack', 'ParquetCompactor', '--region', 'eu-west-1', '--timeout', 'soon'],
        /--timeout soon: use a whole number/,
      ],
      // Options a form would ignore are refused, each naming why.
      [['doctor', '--store', root, '--timeout', '60'], /runs in this process: drop --timeout/],
      [
        ['doctor', '--stack', 'ParquetCompactor', '--region', 'eu-west-1', '--layout', 'hive'],
        /--layout: doctor --stack checks the settings the stack was deployed with: drop --layout/,
      ],
      [
        [
          'doctor',
          '--state-machine',
          'arn:aws:states:eu-west-1:123456789012:stateMachine:C',
          '--store',
          's3://b/p',
          '--endpoint',
          'http://127.0.0.1:9',
        ],
        /checks the deployed bucket on S3: drop --endpoint/,
      ],
      [['doctor', '--store', root, '--context', '[1]'], /--context must be a JSON object/],
    ];
    for (const [args, message] of cases) {
      const { code, err } = await cli(args);
      expect(code, args.join(' ')).toBe(2);
      expect(err, args.join(' ')).toMatch(message);
    }
  });
});
