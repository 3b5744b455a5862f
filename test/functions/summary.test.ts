/**
 * The Summary step, run both ways the stack runs it:
 * - by the EventBridge rule for a stopped execution: the rule's input (tier inside the execution
 *   input's JSON text) parsed, the results found through the execution's Map Runs;
 * - as the workflow's last state after a redrive: it counts every partition, and its metrics add
 *   only what the redrive changed to what the failure's Summary recorded.
 */

import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { describe, expect, it } from 'vitest';
import type { LocalFolderStore } from '../../functions/adapters/local-store/local-store.ts';
import { METRICS } from '../../functions/contract.ts';
import { parseConfig } from '../../functions/core/config.ts';
import { systemClock } from '../../functions/core/engine.ts';
import { ConfigError } from '../../functions/core/errors.ts';
import { recordedSummaryKey } from '../../functions/core/run-summary.ts';
import { parseSummaryEvent } from '../../functions/lambda/events.ts';
import type { HandlerDeps, HandlerTools } from '../../functions/lambda/handler-kit.ts';
import { summaryStep } from '../../functions/summary.ts';
import { metricTotal } from '../support/emf.ts';
import { useTempDir } from '../support/engine-fixture.ts';
import { testStore } from '../support/test-store.ts';

const config = parseConfig({});
let store: LocalFolderStore;
let root: string;
useTempDir('summary-step-', (dir) => {
  root = dir;
  store = testStore(dir);
});

const committed = (partition: string) => ({
  partition,
  status: 'cleared',
  compact: {
    status: 'done',
    state: 'staged',
    inputs: 2,
    outputs: 1,
    inputBytes: 20,
    outputBytes: 10,
    outputRows: 7,
  },
  publish: { status: 'done', state: 'published' },
  clearManifest: { status: 'done', state: 'cleared' },
});

/** Map results as ResultWriter lays them out: `compacted` partitions succeeded, `failed` failed. */
async function mapRun(id: string, compacted: readonly string[], failed: readonly string[]): Promise<string> {
  const base = `_compaction/results/${id}`;
  const files: Record<string, { Key: string }[]> = { SUCCEEDED: [], FAILED: [], PENDING: [] };
  const write = async (kind: 'SUCCEEDED' | 'FAILED', entries: readonly object[]) => {
    if (entries.length === 0) return;
    const key = `${base}/${kind}_0.json`;
    await store.put(key, Buffer.from(JSON.stringify(entries)));
    files[kind]?.push({ Key: key });
  };
  const input = (p: string) => JSON.stringify({ partition: p });
  await write(
    'SUCCEEDED',
    compacted.map((p) => ({ Status: 'SUCCEEDED', Input: input(p), Output: JSON.stringify(committed(p)) })),
  );
  await write(
    'FAILED',
    failed.map((p) => ({
      Status: 'FAILED',
      Input: input(p),
      Error: 'SchemaConflictError',
      Cause: `${p}: column id is VARCHAR in one file, BIGINT in another`,
    })),
  );
  const key = `${base}/manifest.json`;
  await store.put(key, Buffer.from(JSON.stringify({ ResultFiles: files })));
  return key;
}

function deps(manifests: readonly string[]): HandlerDeps {
  return {
    store,
    bucket: 'local-data-bucket',
    config,
    clock: systemClock,
    engine: async () => {
      throw new Error('Summary needs no engine');
    },
    workDir: root,
    isOwnerAlive: async () => false,
    randomHex: () => '00000000',
    mapRunManifests: async () => manifests,
  };
}

function tools(): HandlerTools & { metrics: Metrics } {
  return {
    logger: new Logger({ logLevel: 'SILENT' }),
    metrics: new Metrics({ namespace: 'summary-test', serviceName: 'compactor' }),
    signal: new AbortController().signal,
  };
}

const ARN = 'arn:aws:states:eu-west-1:123456789012:execution:Workflow:hourly-20250115T1000-ab12';
const parts = (n: number) =>
  Array.from({ length: n }, (_, i) => `db/cpu/2025/01/15/${String(i).padStart(2, '0')}/`);

describe('Summary of an execution that failed, from the rule, then after its redrive', () => {
  it('counts 7 compacted and 3 failed from the Map Run; after the redrive counts 10, its metrics add 3', async () => {
    const all = parts(10);
    const failedOnes = [all[3], all[5], all[8]] as string[];
    const firstRun = await mapRun(
      'map-run-1',
      all.filter((p) => !failedOnes.includes(p)),
      failedOnes,
    );
    // The rule's input: the InputTransformer's template filled from the status-change event.
    const ruleEvent = parseSummaryEvent({
      executionId: ARN,
      executionName: 'hourly-20250115T1000-ab12',
      status: 'FAILED',
      input: '{"tier":"hourly"}',
      toleratedFailurePercentage: 5,
    });
    const first = tools();
    const failedSummary = await summaryStep(ruleEvent, deps([firstRun]), first);
    expect(failedSummary).toMatchObject({
      tier: 'hourly',
      partitions: 10,
      compacted: 7,
      failed: 3,
      withinTolerance: false,
      executionStatus: 'FAILED',
    });
    expect(failedSummary.failures.map((f) => f.partition).sort()).toEqual(failedOnes);
    expect(metricTotal(first.metrics, METRICS.compacted)).toBe(7);
    expect(metricTotal(first.metrics, METRICS.failed)).toBe(3);
    expect(metricTotal(first.metrics, METRICS.rowsOut)).toBe(49);
    expect(await store.head(recordedSummaryKey(config.layout, 'hourly-20250115T1000-ab12'))).toBeDefined();

    // The redrive re-ran the three; the Map's results now hold all ten.
    const redriven = await mapRun('map-run-1-redrive', all, []);
    const stateEvent = parseSummaryEvent({
      tier: 'hourly',
      executionId: ARN,
      executionName: 'hourly-20250115T1000-ab12',
      map: { ResultWriterDetails: { Bucket: 'local-data-bucket', Key: redriven } },
      toleratedFailurePercentage: 5,
    });
    const second = tools();
    const after = await summaryStep(stateEvent, deps([]), second);
    expect(after).toMatchObject({ partitions: 10, compacted: 10, failed: 0, withinTolerance: true });
    expect(after.executionStatus).toBeUndefined();
    // The dashboards count each partition once: 7 + 3 compacted, the 3 failures seen once.
    expect(metricTotal(second.metrics, METRICS.compacted)).toBe(3);
    expect(metricTotal(second.metrics, METRICS.failed)).toBe(0);
    expect(metricTotal(second.metrics, METRICS.rowsOut)).toBe(21);
  });

  it("as the last state after waves: every wave's Map run counted once, from the list the workflow nests", async () => {
    const waveOne = await mapRun('wave-0', ['db/cpu/2025/01/15/10/', 'db/cpu/2025/01/15/11/'], []);
    const waveTwo = await mapRun('wave-1', ['db/cpu/2025/01/15/10/'], ['db/cpu/2025/01/15/11/']);
    const waveThree = await mapRun('wave-2', ['db/cpu/2025/01/15/10/'], []);
    const details = (key: string) => ({ ResultWriterDetails: { Bucket: 'local-data-bucket', Key: key } });
    // As States.Array($.map, $.wave.maps) builds it: the latest wave first, beside the list before it.
    const event = parseSummaryEvent({
      tier: 'hourly',
      executionId: ARN,
      executionName: 'hourly-waves',
      maps: [details(waveThree), [details(waveTwo), [details(waveOne), []]]],
      toleratedFailurePercentage: 50,
    });
    expect(event).toMatchObject({ kind: 'map', resultsKeys: [waveOne, waveTwo, waveThree] });
    const summary = await summaryStep(event, deps([]), tools());
    expect(summary).toMatchObject({ partitions: 5, compacted: 4, failed: 1, filesIn: 8, rows: 28 });
    // Nothing planned: no wave ran.
    const none = parseSummaryEvent({
      tier: 'hourly',
      executionId: ARN,
      maps: [],
      toleratedFailurePercentage: 5,
    });
    expect(none).toMatchObject({ kind: 'map', resultsKeys: [] });
  });

  it('an execution that failed before its Map (no Map Run) is summarized as empty', async () => {
    const event = parseSummaryEvent({
      executionId: ARN,
      executionName: 'hourly-failed-in-plan',
      status: 'TIMED_OUT',
      input: '{"tier":"daily","now":"2025-01-16T00:00:00Z"}',
    });
    const summary = await summaryStep(event, deps([]), tools());
    expect(summary).toMatchObject({ tier: 'daily', partitions: 0, failed: 0, executionStatus: 'TIMED_OUT' });
  });

  it.each([
    [
      { executionId: ARN, status: 'FAILED', input: 'not json' },
      '"input" must be the execution input as JSON text',
    ],
    [{ executionId: ARN, status: 'FAILED', input: '{"tier":"weekly"}' }, '"tier" must be one of'],
    [
      { executionId: ARN, status: 'RUNNING', input: '{"tier":"hourly"}' },
      '"status" must be one of FAILED, TIMED_OUT, ABORTED',
    ],
  ])('refuses a rule input it cannot read, naming the field: %j', (event, message) => {
    expect(() => parseSummaryEvent(event)).toThrow(ConfigError);
    expect(() => parseSummaryEvent(event)).toThrow(message);
  });

  it('takes an execution name the input omits from the execution ARN', () => {
    expect(parseSummaryEvent({ tier: 'hourly', executionId: ARN }).executionName).toBe(
      'hourly-20250115T1000-ab12',
    );
  });
});
