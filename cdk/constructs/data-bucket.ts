/**
 * The data lake bucket: created here (TLS only, private, encrypted, access-logged, retained) or
 * imported by name. Encrypted with SSE-S3, or SSE-KMS under a customer managed key (created here
 * unless one is named); the steps are granted the key by `encryptionKey`. Lifecycle rules only touch what is safe to lose: incomplete multipart uploads
 * and the Map's plan and result files. Manifests, staging and quarantine are never expired: a
 * manifest is the protocol's record of a job, and recovery needs every one of them.
 */

import { Annotations, Duration, RemovalPolicy } from 'aws-cdk-lib';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as s3 from 'aws-cdk-lib/aws-s3';
import { Construct } from 'constructs';
import { DEFAULTS } from '../../functions/core/config.ts';
import { RUN_RECORD_DAYS, stateExpiries, stateFolder, stateRootOf } from '../../functions/core/state-root.ts';
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
   * Default encryption of a created bucket: SSE-S3, or SSE-KMS under `kmsKeyArn` (or a key
   * created here). Of an imported bucket, what it already uses.
   * @default 's3'
   */
  readonly encryption?: 's3' | 'kms';
  /**
   * The SSE-KMS key: an imported bucket's own key, or the key a created `kms` bucket uses.
   * @default - a key created here for a created `kms` bucket
   */
  readonly kmsKeyArn?: string;
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
   * @default Duration.days(RUN_RECORD_DAYS) (15, functions/core/state-root.ts)
   */
  readonly stateFilesExpiration?: Duration;
  /**
   * How long each committed job's receipt (under the state root's receipts/) stays.
   * @default Duration.days(DEFAULTS.receiptDays) (400, functions/core/config.ts)
   */
  readonly receiptsExpiration?: Duration;
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
  /**
   * The SSE-KMS key of the bucket's objects, when it has one: every principal that reads or writes
   * them needs kms:Decrypt and kms:GenerateDataKey on it.
   */
  readonly encryptionKey: kms.IKey | undefined;

  constructor(scope: Construct, id: string, props: DataBucketProps = {}) {
    super(scope, id);
    const create = props.create ?? true;
    const dataPrefix = props.dataPrefix ?? '';
    this.created = create;
    const encryption = props.encryption ?? 's3';
    if (encryption === 's3' && props.kmsKeyArn) throw new Error('DataBucket: kmsKeyArn needs encryption kms');

    const stateRoot = stateRootOf(dataPrefix);
    const expiries = stateExpiries({
      runRecords: (props.stateFilesExpiration ?? Duration.days(RUN_RECORD_DAYS)).toDays(),
      receipts: (props.receiptsExpiration ?? Duration.days(DEFAULTS.receiptDays)).toDays(),
    });
    const expiryRules = expiries.map(({ id, folder, days }) => ({
      id,
      prefix: stateFolder(stateRoot, folder),
      expiration: Duration.days(days),
    }));

    if (!create) {
      if (!props.bucketName) throw new Error('DataBucket: bucketName is required to import a bucket');
      if (encryption === 'kms' && !props.kmsKeyArn)
        throw new Error('DataBucket: an imported SSE-KMS bucket needs its kmsKeyArn');
      this.bucket = s3.Bucket.fromBucketName(this, 'Bucket', props.bucketName);
      this.encryptionKey = props.kmsKeyArn ? kms.Key.fromKeyArn(this, 'Key', props.kmsKeyArn) : undefined;
      this.accessLogsBucket = undefined;
      Annotations.of(this).addInfo(
        `Imported bucket ${props.bucketName}: set its lifecycle yourself (abort incomplete multipart uploads; expire ${expiryRules.map((r) => `${r.prefix} after ${r.expiration.toDays()} days`).join(', ')}; never expire the rest of ${stateRoot}).`,
      );
      return;
    }

    const removalPolicy = props.removalPolicy ?? RemovalPolicy.RETAIN;
    const destroy = removalPolicy === RemovalPolicy.DESTROY;
    if (encryption === 'kms') {
      this.encryptionKey = props.kmsKeyArn
        ? kms.Key.fromKeyArn(this, 'Key', props.kmsKeyArn)
        : new kms.Key(this, 'Key', {
            description: 'parquet-compactor data bucket (SSE-KMS)',
            enableKeyRotation: true,
            // A deleted key makes every object under it unreadable: it goes only with the bucket.
            removalPolicy,
          });
    } else {
      this.encryptionKey = undefined;
    }

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
      ...(this.encryptionKey
        ? {
            encryption: s3.BucketEncryption.KMS,
            encryptionKey: this.encryptionKey,
            // Fewer KMS requests: S3 derives object keys from a bucket-level key for a while
            // (https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucket-key.html).
            bucketKeyEnabled: true,
          }
        : { encryption: s3.BucketEncryption.S3_MANAGED }),
      objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
      serverAccessLogsBucket: this.accessLogsBucket,
      serverAccessLogsPrefix: 'data-bucket/',
      lifecycleRules: [
        {
          id: 'abort-incomplete-multipart-uploads',
          abortIncompleteMultipartUploadAfter: props.abortIncompleteMultipartUploadAfter ?? Duration.days(2),
        },
        ...expiryRules,
      ],
      removalPolicy,
      autoDeleteObjects: destroy,
    });
  }
}
