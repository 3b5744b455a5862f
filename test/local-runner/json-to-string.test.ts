/**
 * States.JsonToString in a local run: the interpreter alone strips the backslashes of the JSON
 * text (so a value holding a quote comes out unreadable); through executeDefinition the text is
 * the value's JSON, as AWS returns it, at any depth and whatever the Pass state's other fields.
 */

import { StateMachine, type StateMachineDefinition } from 'aws-local-stepfunctions';
import { describe, expect, it } from 'vitest';
import { executeDefinition } from '../../functions/local-runner/workflow.ts';
import { useTempDir } from '../support/engine-fixture.ts';
import { testStore } from '../support/test-store.ts';

let root: string;
useTempDir('json-to-string-', (dir) => {
  root = dir;
});

const VALUE = [{ partition: 'db/cpu/', failure: { Error: 'E', Cause: 'column "value": a\\b' } }];

/** A Pass state stringifying `$.value`, inside an inline Map, then a Fail taking it as cause. */
const definition = {
  StartAt: 'Each',
  States: {
    Each: {
      Type: 'Map',
      ItemsPath: '$.items',
      ItemProcessor: {
        StartAt: 'Text',
        States: {
          Text: {
            Type: 'Pass',
            Parameters: { 'text.$': 'States.JsonToString($.value)', 'kept.$': '$.kept' },
            End: true,
          },
        },
      },
      ResultPath: '$.texts',
      Next: 'Cause',
    },
    Cause: {
      Type: 'Pass',
      Parameters: { 'cause.$': 'States.JsonToString($.texts)' },
      Next: 'Fail',
    },
    Fail: { Type: 'Fail', Error: 'Stringified', CausePath: '$.cause' },
  },
} as unknown as StateMachineDefinition;

const input = { items: [{ value: VALUE, kept: 1 }] };

describe('States.JsonToString', () => {
  it('is unreadable from the interpreter alone when the text holds a quote', async () => {
    const machine = new StateMachine(definition);
    const failure = await machine.run(input).result.catch((error: { cause?: { message?: string } }) => error);
    const cause = (failure as { cause?: { message?: string } }).cause?.message ?? '';
    expect(() => JSON.parse(cause)).toThrow(SyntaxError);
  });

  it('is the JSON text of the value in a local run, nested and beside other fields', async () => {
    const execution = await executeDefinition(
      definition,
      {
        store: testStore(root),
        bucket: 'local',
        invoke: async () => {
          throw new Error('no Lambda here');
        },
      },
      { input, executionId: 'local:json', executionName: 'json' },
    );
    expect(execution).toMatchObject({ status: 'FAILED', error: 'Stringified' });
    const texts = JSON.parse(execution.cause ?? '') as { text: string; kept: number }[];
    expect(texts).toEqual([{ text: JSON.stringify(VALUE), kept: 1 }]);
    expect(JSON.parse(texts[0]?.text ?? '')).toEqual(VALUE);
  });
});
