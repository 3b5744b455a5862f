/**
 * sfnMapRunManifests against a mocked SFN client (aws-sdk-client-mock): there is no local Step
 * Functions API. It checks the requests (ListMapRuns by execution, every page) and that each Map
 * Run's manifest key is the ResultWriter layout of AWS's own example: `<prefix>/<map run id>/manifest.json`
 * for `...:mapRun:<machine>/<label>:<map run id>`.
 */

import { ListMapRunsCommand, SFNClient } from '@aws-sdk/client-sfn';
import { mockClient } from 'aws-sdk-client-mock';
import { describe, expect, it } from 'vitest';
import { mapRunId, sfnMapRunManifests } from '../../functions/adapters/sfn-map-runs.ts';

const EXECUTION = 'arn:aws:states:us-east-2:123456789012:execution:csvProcess:run-1';
const mapRun = (id: string) => `arn:aws:states:us-east-2:123456789012:mapRun:csvProcess/Map:${id}`;

describe('sfnMapRunManifests (mocked SFN client)', () => {
  it('takes the id of the ResultWriter example from its Map Run ARN', () => {
    expect(mapRunId(mapRun('ad9b5f27-090b-3ac6-9beb-243cd77144a7'))).toBe(
      'ad9b5f27-090b-3ac6-9beb-243cd77144a7',
    );
  });

  it('lists every page of the execution’s Map Runs and names their manifests, oldest first', async () => {
    const sfn = mockClient(SFNClient);
    sfn
      .on(ListMapRunsCommand, { executionArn: EXECUTION, nextToken: undefined })
      .resolves({
        mapRuns: [
          {
            executionArn: EXECUTION,
            mapRunArn: mapRun('b'),
            stateMachineArn: 's',
            startDate: new Date(2000),
          },
        ],
        nextToken: 'page-2',
      })
      .on(ListMapRunsCommand, { executionArn: EXECUTION, nextToken: 'page-2' })
      .resolves({
        mapRuns: [
          {
            executionArn: EXECUTION,
            mapRunArn: mapRun('a'),
            stateMachineArn: 's',
            startDate: new Date(1000),
          },
        ],
      });
    const manifests = await sfnMapRunManifests(
      new SFNClient({}),
      'lake/_compaction/results/',
    )({ id: EXECUTION });
    expect(manifests).toEqual([
      'lake/_compaction/results/a/manifest.json',
      'lake/_compaction/results/b/manifest.json',
    ]);
    expect(sfn.commandCalls(ListMapRunsCommand)).toHaveLength(2);
    sfn.restore();
  });

  it('names nothing for an execution that started no Map Run', async () => {
    const sfn = mockClient(SFNClient);
    sfn.on(ListMapRunsCommand).resolves({ mapRuns: [] });
    expect(await sfnMapRunManifests(new SFNClient({}), '_compaction/results/')({ id: EXECUTION })).toEqual(
      [],
    );
    sfn.restore();
  });
});
