/**
 * The ResultWriter manifests of an execution's Map Runs (`HandlerDeps.mapRunManifests`), for the
 * Summary of an execution that stopped without succeeding. ListMapRuns names the Map Runs
 * (https://docs.aws.amazon.com/step-functions/latest/apireference/API_ListMapRuns.html); a Map
 * Run's results lie under the ResultWriter prefix, in a folder named by the Map Run's id, the
 * last part of its ARN (`...:mapRun:csvProcess/Map:ad9b5f27-...` writes
 * `csvProcessJobs/ad9b5f27-.../manifest.json` in the example of
 * https://docs.aws.amazon.com/step-functions/latest/dg/input-output-resultwriter.html).
 */

import { ListMapRunsCommand, type SFNClient } from '@aws-sdk/client-sfn';

/** `arn:...:mapRun:<machine>/<label>:<id>` -> `<id>`. */
export function mapRunId(mapRunArn: string): string {
  return mapRunArn.slice(mapRunArn.lastIndexOf(':') + 1);
}

export function sfnMapRunManifests(
  client: SFNClient,
  resultsFolder: string,
): (execution: { readonly id: string }) => Promise<readonly string[]> {
  return async ({ id }) => {
    const runs: { readonly arn: string; readonly started: number }[] = [];
    let nextToken: string | undefined;
    do {
      const page = await client.send(new ListMapRunsCommand({ executionArn: id, nextToken }));
      for (const run of page.mapRuns ?? []) {
        if (run.mapRunArn) runs.push({ arn: run.mapRunArn, started: run.startDate?.getTime() ?? 0 });
      }
      nextToken = page.nextToken;
    } while (nextToken);
    return runs
      .sort((a, b) => a.started - b.started)
      .map((run) => `${resultsFolder}${mapRunId(run.arn)}/manifest.json`);
  };
}
