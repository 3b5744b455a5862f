/**
 * docs/protocol.md's table of the workflow's steps is generated from functions/core/pipeline.ts,
 * the list the state machine and the cycle are built from. A change to the pipeline fails this
 * test until the table is written again: `UPDATE_DOCS=1 npx vitest run test/repo/pipeline-docs.test.ts`.
 */

import { readFileSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { PARTITION_STEPS, RETRY, WORKFLOW_STEPS } from '../../functions/core/pipeline.ts';

const DOC = new URL('../../docs/protocol.md', import.meta.url);
const START = '<!-- pipeline-steps:start -->';
const END = '<!-- pipeline-steps:end -->';

function render(): string {
  const partition = new Set<string>(PARTITION_STEPS.map((s) => s.step));
  const rows = WORKFLOW_STEPS.map((s) => {
    const moves = 'from' in s ? `${s.from} -> ${s.to}` : '';
    const ends = 'endsOn' in s && s.endsOn ? `; ${s.endsOn.statuses.join(' or ')} ends the chain` : '';
    return `| \`${s.step}\` | ${s.stateName} | \`$.${s.resultKey}\` | ${moves}${ends} | \`lambda.${s.size}\` | ${partition.has(s.step) ? "the Map's child type" : 'Standard (the parent)'} |`;
  });
  const retry = (type: keyof typeof RETRY) =>
    `${RETRY[type].maxAttempts} retr${RETRY[type].maxAttempts === 1 ? 'y' : 'ies'} from ${RETRY[type].intervalSeconds} s, x${RETRY[type].backoffRate}, at most ${RETRY[type].maxDelaySeconds} s apart`;
  return [
    START,
    '| step (`functions/<step>.ts`) | state | result | manifest | size | retried as |',
    '| --- | --- | --- | --- | --- | --- |',
    ...rows,
    '',
    `Retries, transient errors only, full jitter: Express ${retry('EXPRESS')}; Standard ${retry('STANDARD')}.`,
    END,
  ].join('\n');
}

describe('docs/protocol.md', () => {
  it('lists the steps as functions/core/pipeline.ts does', () => {
    const text = readFileSync(DOC, 'utf8');
    const start = text.indexOf(START);
    const end = text.indexOf(END);
    expect(start, `docs/protocol.md has no ${START} block`).toBeGreaterThanOrEqual(0);
    const current = text.slice(start, end + END.length);
    if (process.env.UPDATE_DOCS && current !== render()) {
      writeFileSync(DOC, text.replace(current, render()));
      return;
    }
    expect(current).toBe(render());
  });
});
