/**
 * An in-process S3-protocol server (fauxqs) on a random localhost port, for adapter tests.
 * fauxqs does not honour conditional writes; see test/adapters/s3-store.fauxqs.test.ts.
 */

import type { S3Client } from '@aws-sdk/client-s3';
import { startFauxqs } from 'fauxqs';
import { createS3Client } from '../../functions/adapters/s3-store/s3-store.ts';

export interface FauxqsS3 {
  readonly endpoint: string;
  readonly bucket: string;
  readonly client: S3Client;
  stop(): Promise<void>;
}

export async function startFauxqsS3(bucket = 'test-bucket'): Promise<FauxqsS3> {
  const server = await startFauxqs({ port: 0, host: '127.0.0.1', logger: false });
  server.createBucket(bucket);
  const endpoint = server.address;
  const client = createS3Client({
    endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
  });
  return {
    endpoint,
    bucket,
    client,
    async stop() {
      client.destroy();
      await server.stop();
    },
  };
}
