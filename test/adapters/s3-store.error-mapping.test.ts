/**
 * mapS3Error's idea of "transient" set against the SDK's own retry classification
 * (@smithy/core/retry, the code the S3 client's standard retry mode runs): a status the SDK
 * gives up on at once, such as 501 NotImplemented, must fail the step instead of being retried
 * by Step Functions five more times. Errors are built as the SDK builds them (S3ServiceException
 * with $metadata and $fault).
 */

import { S3ServiceException } from '@aws-sdk/client-s3';
import { isThrottlingError, isTransientError } from '@smithy/core/retry';
import type { SdkError } from '@smithy/types';
import { describe, expect, it } from 'vitest';
import { mapS3Error } from '../../functions/adapters/s3-store/s3-store.ts';
import { TransientStoreError } from '../../functions/core/errors.ts';

/** The SDK's retry deciders take its SdkError view of the same exception object. */
function serviceError(name: string, status: number): S3ServiceException & SdkError {
  return new S3ServiceException({
    name,
    $fault: status >= 500 ? 'server' : 'client',
    $metadata: { httpStatusCode: status },
    message: `${name} (constructed as the SDK does)`,
  }) as S3ServiceException & SdkError;
}

describe('S3Store error mapping against the SDK retry classification', () => {
  it('501 NotImplemented is permanent (S3 ErrorResponses: "functionality that is not implemented")', () => {
    const error = serviceError('NotImplemented', 501);
    expect(isTransientError(error)).toBe(false);
    expect(mapS3Error(error, 'k')).toBe(error);
  });

  it('every 4xx/5xx status with an unknown code is transient exactly when the SDK retries it', () => {
    for (let status = 400; status <= 599; status++) {
      const error = serviceError('SomeUnlistedCode', status);
      const sdkRetries = isTransientError(error) || isThrottlingError(error);
      const mapped = mapS3Error(error, 'k');
      expect(mapped instanceof TransientStoreError, `status ${status}`).toBe(sdkRetries);
    }
  });
});
