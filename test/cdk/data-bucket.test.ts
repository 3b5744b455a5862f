import { App, Duration, Stack } from 'aws-cdk-lib';
import { Annotations, Match } from 'aws-cdk-lib/assertions';
import { describe, expect, it } from 'vitest';
import { DataBucket } from '../../cdk/constructs/data-bucket.ts';
import { RUN_RECORD_DAYS } from '../../functions/core/state-root.ts';

describe('DataBucket, imported', () => {
  it('tells the operator every rule the stack would have set, with its prefix and days', () => {
    const stack = new Stack(new App(), 'S');
    new DataBucket(stack, 'Data', {
      create: false,
      bucketName: 'lake',
      dataPrefix: 'raw/',
      receiptsExpiration: Duration.days(30),
    });
    const [info] = Annotations.fromStack(stack).findInfo('*', Match.stringLikeRegexp('Imported bucket lake'));
    const text = String(info?.entry.data);
    expect(text).toContain(
      `expire raw/_compaction/plans/ after ${RUN_RECORD_DAYS} days, raw/_compaction/results/ after ${RUN_RECORD_DAYS} days, raw/_compaction/receipts/ after 30 days;`,
    );
    expect(text).toContain('abort incomplete multipart uploads');
    expect(text).toContain('never expire the rest of raw/_compaction/');
  });
});
