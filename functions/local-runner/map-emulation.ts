/**
 * The rewrite of a Distributed Map into states aws-local-stepfunctions runs (workflow.ts's
 * header lists what each emulates): a Task before the Map that reads its items (ItemReader), an
 * item processor of one Task that runs each item as a child execution and catches its failure,
 * a Task after the Map that writes the results and applies the tolerated failure percentage
 * (ResultWriter), and a Pass that puts what it wrote where the Map's ResultPath says. The items and
 * then the results are kept in one field of the state, each replacing the one before and the
 * ResultWriter's small answer replacing the results: in AWS neither is ever in the execution's
 * state (a Map that exports its results outputs where it wrote them,
 * https://docs.aws.amazon.com/step-functions/latest/dg/input-output-resultwriter.html), and every
 * state the interpreter enters copies its whole input, so states after the Map carrying every item
 * and result would cost each execution time in proportion to the lake. The states' `__local`
 * parameter tells workflow.ts which handler each one gets.
 */

import type { StateMachineDefinition } from 'aws-local-stepfunctions';
import { type Json, type JsonObject, redirect, type StateDef } from './asl-graph.ts';

export const ITEM_READER_SUFFIX = ' (ItemReader)';
export const RESULT_WRITER_SUFFIX = ' (ResultWriter)';
const RESULT_PATH_SUFFIX = ' (ResultPath)';
/** Where the emulation keeps a Map's items, then its results, then the ResultWriter's answer. */
const MAP_FIELD = '$.__map';
const ITEM_STATE = 'Item';
const ITEM_FAILED_STATE = 'Item failed';
const ITEM_SUCCEEDED_STATE = 'Item succeeded';

export interface MapEmulation {
  readonly mapName: string;
  readonly bucket: string;
  readonly prefix: string;
  readonly tolerated: number;
  /** The item processor without its ProcessorConfig: one child execution's definition. */
  readonly processor: JsonObject;
  readonly executionType: 'EXPRESS' | 'STANDARD';
}

/** Rewrites Distributed Map features the interpreter ignores into states it runs (see above). */
export function emulateDistributedMaps(definition: StateMachineDefinition): {
  definition: StateMachineDefinition;
  maps: MapEmulation[];
} {
  const def = structuredClone(definition) as unknown as JsonObject;
  const states = def.States as Record<string, StateDef>;
  const maps: MapEmulation[] = [];
  for (const [name, state] of Object.entries({ ...states })) {
    if (state.Type !== 'Map' || !state.ItemReader) continue;
    const reader = state.ItemReader as JsonObject;
    const writer = state.ResultWriter as JsonObject | undefined;
    const writerParams = (writer?.Parameters ?? {}) as JsonObject;
    const processor = (state.ItemProcessor ?? state.Iterator) as JsonObject;
    const { ProcessorConfig: config, ...plainProcessor } = processor;
    const executionType =
      (config as JsonObject | undefined)?.ExecutionType === 'EXPRESS' ? 'EXPRESS' : 'STANDARD';
    maps.push({
      mapName: name,
      bucket: String(writerParams.Bucket ?? ''),
      prefix: String(writerParams.Prefix ?? ''),
      tolerated: Number(state.ToleratedFailurePercentage ?? 0),
      processor: plainProcessor,
      executionType,
    });

    const readerState = `${name}${ITEM_READER_SUFFIX}`;
    const writerState = `${name}${RESULT_WRITER_SUFFIX}`;
    const placeState = `${name}${RESULT_PATH_SUFFIX}`;
    redirect(states, name, readerState);
    if (def.StartAt === name) def.StartAt = readerState;
    states[readerState] = {
      Type: 'Task',
      Resource: 'arn:aws:states:::s3:getObject',
      Parameters: { ...(reader.Parameters as JsonObject), __local: 'ItemReader' },
      ResultPath: MAP_FIELD,
      Next: name,
    };
    // What the Map would do with the ResultWriter's outcome (select from it, retry or catch its
    // tolerance failure) is not emulated: refused rather than run differently from AWS.
    for (const field of ['ResultSelector', 'Retry', 'Catch']) {
      if (state[field] !== undefined)
        throw new Error(`Map ${name}: a ${field} on a Distributed Map with a ResultWriter is not emulated`);
    }
    const original = { ...state };
    const outputPath = original.OutputPath;
    delete original.OutputPath;
    delete original.ItemReader;
    delete original.ResultWriter;
    delete original.ToleratedFailurePercentage;
    delete original.ItemBatcher;
    const next = original.Next;
    const end = original.End;
    states[name] = {
      ...original,
      ItemsPath: MAP_FIELD,
      ItemProcessor: {
        StartAt: ITEM_STATE,
        States: {
          // One child execution (child-executions.ts, bound by executeDefinition's ChildExecution handler).
          [ITEM_STATE]: {
            Type: 'Task',
            Resource: 'arn:aws:states:::states:startExecution',
            Parameters: { 'item.$': '$', __local: 'ChildExecution', map: name },
            ResultPath: '$.__result',
            Catch: [{ ErrorEquals: ['States.ALL'], ResultPath: '$.__error', Next: ITEM_FAILED_STATE }],
            Next: ITEM_SUCCEEDED_STATE,
          },
          [ITEM_SUCCEEDED_STATE]: {
            Type: 'Pass',
            Parameters: { Status: 'SUCCEEDED', 'Output.$': '$.__result', 'Item.$': '$' },
            End: true,
          },
          [ITEM_FAILED_STATE]: {
            Type: 'Pass',
            Parameters: {
              Status: 'FAILED',
              'Error.$': '$.__error.Error',
              'Cause.$': '$.__error.Cause',
              'Item.$': '$',
            },
            End: true,
          },
        },
      },
      ResultPath: MAP_FIELD,
      Next: writerState,
    };
    delete (states[name] as JsonObject).End;
    states[writerState] = {
      Type: 'Task',
      Resource: 'arn:aws:states:::s3:putObject',
      Parameters: { 'results.$': MAP_FIELD, __local: 'ResultWriter', map: name },
      ResultPath: MAP_FIELD,
      Next: placeState,
    };
    // The interpreter applies the Map's own ResultPath (a Pass's ResultPath merges its result,
    // here the ResultWriter's answer, into its raw input), as the Map would have.
    states[placeState] = {
      Type: 'Pass',
      InputPath: MAP_FIELD,
      // An absent ResultPath is `$`; a null one discards the result.
      ResultPath: 'ResultPath' in original ? (original.ResultPath as Json) : '$',
      ...(outputPath !== undefined ? { OutputPath: outputPath } : {}),
      ...(end ? { End: true } : { Next: next as Json }),
    };
  }
  return { definition: def as unknown as StateMachineDefinition, maps };
}
