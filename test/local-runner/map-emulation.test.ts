import type { StateMachineDefinition } from 'aws-local-stepfunctions';
import { describe, expect, it } from 'vitest';
import type { JsonObject } from '../../functions/local-runner/asl-graph.ts';
import { emulateDistributedMaps } from '../../functions/local-runner/map-emulation.ts';

/** A parent with one Distributed Map that reads its items from S3 and writes its results there. */
function definition(map: JsonObject = {}): StateMachineDefinition {
  return {
    StartAt: 'Map',
    States: {
      Map: {
        Type: 'Map',
        ItemReader: {
          Resource: 'arn:aws:states:::s3:getObject',
          ReaderConfig: { InputType: 'JSON' },
          Parameters: { Bucket: 'b', 'Key.$': '$.itemsKey' },
        },
        ItemProcessor: {
          ProcessorConfig: { Mode: 'DISTRIBUTED', ExecutionType: 'EXPRESS' },
          StartAt: 'Work',
          States: { Work: { Type: 'Pass', End: true } },
        },
        ResultWriter: { Resource: 'arn:aws:states:::s3:putObject', Parameters: { Bucket: 'b', Prefix: 'r' } },
        ResultPath: '$.map',
        OutputPath: '$.map',
        Next: 'After',
        ...map,
      },
      After: { Type: 'Succeed' },
    },
  } as unknown as StateMachineDefinition;
}

describe('emulateDistributedMaps', () => {
  it("keeps items, results and the ResultWriter's answer in one field; a Pass applies the Map's ResultPath and OutputPath", () => {
    const { definition: rewritten, maps } = emulateDistributedMaps(definition());
    const states = (rewritten as unknown as { States: Record<string, JsonObject> }).States;
    expect(maps.map((m) => m.mapName)).toEqual(['Map']);
    expect(rewritten.StartAt).toBe('Map (ItemReader)');
    const field = states['Map (ItemReader)']?.ResultPath;
    expect(states.Map).toMatchObject({ ItemsPath: field, ResultPath: field, Next: 'Map (ResultWriter)' });
    expect(states.Map?.OutputPath).toBeUndefined();
    expect(states['Map (ResultWriter)']).toMatchObject({
      Parameters: { 'results.$': field },
      ResultPath: field,
      Next: 'Map (ResultPath)',
    });
    expect(states['Map (ResultPath)']).toEqual({
      Type: 'Pass',
      InputPath: field,
      ResultPath: '$.map',
      OutputPath: '$.map',
      Next: 'After',
    });
  });

  it('a null ResultPath stays null (the result discarded), not `$`', () => {
    const { definition: rewritten } = emulateDistributedMaps(definition({ ResultPath: null }));
    const states = (rewritten as unknown as { States: Record<string, JsonObject> }).States;
    expect(states['Map (ResultPath)']?.ResultPath).toBeNull();
  });

  it.each(['ResultSelector', 'Retry', 'Catch'])(
    'refuses a %s on the Map, which it does not emulate',
    (field) => {
      expect(() =>
        emulateDistributedMaps(definition({ [field]: field === 'ResultSelector' ? {} : [] })),
      ).toThrow(`Map Map: a ${field} on a Distributed Map with a ResultWriter is not emulated`);
    },
  );
});
