/**
 * The data lake bucket: created here (TLS only, private, encrypted, access-logged, retained) or
 * imported by name. Lifecycle rules only touch what is safe to lose: incomplete multipart uploads
 * and the Map's plan and result files. Manifests, staging and quarantine are never expired: a
 * manifest is the protocol's record of a job, and recovery needs every one of them.
 */

import { Annotations, Duration, RemovalPolicy } from 'aws-cdk-lib';
import * as s3 from 'aws-cdk-lib/aws-s3';
import { Construct } from 'constructs';
import { acknowledge } from '../nag.ts';

export interface DataBucketProps {
  /**
   * Create the bucket (true) or import `bucketName` (false).
   * @default true
   */
  readonly create?: boolean;
  /**
   * Physical name: required when importing, optional when creating.
   * @default - a generated name when creating
   */
  readonly bucketName?: string;
  /**
   * Data root ('' or ending with '/'); the state root is `<dataPrefix>_compaction/`.
   * @default ''
   */
  readonly dataPrefix?: string;
  /**
   * RETAIN keeps the bucket (and its data) when the stack is deleted. DESTROY also empties it.
   * @default RemovalPolicy.RETAIN
   */
  readonly removalPolicy?: RemovalPolicy;
  /**
   * How long plan and result files of the Map stay. A redrive re-reads them, and Step Functions
   * redrives up to 14 days after an execution stopped, so keep them a day longer.
   * @default Duration.days(15)
   */
  readonly stateFilesExpiration?: Duration;
  /**
   * Incomplete multipart uploads are aborted after this (recovery aborts the compactor's own
   * sooner; this is the backstop for every writer of the bucket).
   * @default Duration.days(2)
   */
  readonly abortIncompleteMultipartUploadAfter?: Duration;
  /**
   * Expiry of the server access logs.
   * @default Duration.days(90)
   */
  readonly accessLogsExpiration?: Duration;
}

export class DataBucket extends Construct {
  readonly bucket: s3.IBucket;
  /** True when this stack owns the bucket (and its lifecycle rules). */
  readonly created: boolean;
  /** The server access log bucket, when the data bucket is created here. */
  readonly accessLogsBucket: s3.Bucket | undefined;

  constructor(scope: Construct, id: string, props: DataBucketProps = {}) {
    super(scope, id);
    const create = props.create ?? true;
    const dataPrefix = props.dataPrefix ?? '';
    this.created = create;

    if (!create) {
      if (!props.bucketName) throw new Error('DataBucket: bucketName is required to import a bucket');
      this.bucket = s3.Bucket.fromBucketName(this, 'Bucket', props.bucketName);
      this.accessLogsBucket = undefined;
      Annotations.of(this).addInfo(
        `Imported bucket ${props.bucketName}: set its lifecycle yourself (abort incomplete multipart uploads; expire ${dataPrefix}_compaction/plans/ and results/ after 15 days; never expire the rest of _compaction/).`,
      );
      return;
    }

    const removalPolicy = props.removalPolicy ?? RemovalPolicy.RETAIN;
    const destroy = removalPolicy === RemovalPolicy.DESTROY;
    const stateRoot = `${dataPrefix}_compaction/`;
    const stateFilesExpiration = props.stateFilesExpiration ?? Duration.days(15);

    this.accessLogsBucket = new s3.Bucket(this, 'AccessLogs', {
      enforceSSL: true,
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      encryption: s3.BucketEncryption.S3_MANAGED,
      objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
      lifecycleRules: [
        { id: 'expire-access-logs', expiration: props.accessLogsExpiration ?? Duration.days(90) },
      ],
      removalPolicy,
      autoDeleteObjects: destroy,
    });
    acknowledge(
      this.accessLogsBucket,
      'AwsSolutions-S1',
      'This is the server access log target of the data bucket; logging it to itself would loop.',
    );

    this.bucket = new s3.Bucket(this, 'Bucket', {
      ...(props.bucketName ? { bucketName: props.bucketName } : {}),
      enforceSSL: true,
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      encryption: s3.BucketEncryption.S3_MANAGED,
      objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
      serverAccessLogsBucket: this.accessLogsBucket,
      serverAccessLogsPrefix: 'data-bucket/',
      lifecycleRules: [
        {
          id: 'abort-incomplete-multipart-uploads',
          abortIncompleteMultipartUploadAfter: props.abortIncompleteMultipartUploadAfter ?? Duration.days(2),
        },
        { id: 'expire-map-plans', prefix: `${stateRoot}plans/`, expiration: stateFilesExpiration },
        { id: 'expire-map-results', prefix: `${stateRoot}results/`, expiration: stateFilesExpiration },
      ],
      removalPolicy,
      autoDeleteObjects: destroy,
    });
  }
}
