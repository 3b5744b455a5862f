/**
 * The Distributed Map's ItemReader and ResultWriter, with the state machine's S3 grants scoped
 * to the state root. CDK's own classes grant `s3:GetObject` and `s3:PutObject` on every object
 * of the bucket (the item key is a run-time path), which for a data bucket means the state
 * machine could overwrite data files. These grant the same actions on `<keyPrefix>*` only; the
 * rendered ASL is CDK's, unchanged.
 */

import * as iam from 'aws-cdk-lib/aws-iam';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';

export interface StateRootJsonItemReaderProps {
  readonly bucket: s3.IBucket;
  /** The item file's key (usually a JSONPath, e.g. `sfn.JsonPath.stringAt('$.plan.Payload.itemsKey')`). */
  readonly key: string;
  /** Every key the reader may be given starts with this, e.g. `<prefix>_compaction/plans/`. */
  readonly keyPrefix: string;
  /** @default - no limit */
  readonly maxItems?: number;
}

/** `S3JsonItemReader` granting `s3:GetObject` on `<keyPrefix>*` instead of the whole bucket. */
export class StateRootJsonItemReader extends sfn.S3JsonItemReader {
  readonly #objects: string;

  constructor(props: StateRootJsonItemReaderProps) {
    super({
      bucket: props.bucket,
      key: props.key,
      ...(props.maxItems !== undefined ? { maxItems: props.maxItems } : {}),
    });
    this.#objects = props.bucket.arnForObjects(`${props.keyPrefix}*`);
  }

  override providePolicyStatements(): iam.PolicyStatement[] {
    return [new iam.PolicyStatement({ actions: ['s3:GetObject'], resources: [this.#objects] })];
  }
}

export interface StateRootResultWriterProps {
  readonly bucket: s3.IBucket;
  /** Where results go, e.g. `<prefix>_compaction/results` (Step Functions appends `/<map run id>/...`). */
  readonly prefix: string;
  /** @default - CDK's default writer config */
  readonly writerConfig?: sfn.WriterConfig;
}

/** `ResultWriterV2` granting its S3 actions on `<prefix>/*` instead of the whole bucket. */
export class StateRootResultWriter extends sfn.ResultWriterV2 {
  readonly #objects: string;

  constructor(props: StateRootResultWriterProps) {
    super({
      bucket: props.bucket,
      prefix: props.prefix,
      ...(props.writerConfig ? { writerConfig: props.writerConfig } : {}),
    });
    this.#objects = props.bucket.arnForObjects(`${props.prefix.replace(/\/+$/, '')}/*`);
  }

  override providePolicyStatements(): iam.PolicyStatement[] {
    // The actions CDK grants for a result writer, on the results prefix only.
    return [
      new iam.PolicyStatement({
        actions: ['s3:PutObject', 's3:GetObject', 's3:ListMultipartUploadParts', 's3:AbortMultipartUpload'],
        resources: [this.#objects],
      }),
    ];
  }
}
