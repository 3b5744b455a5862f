/**
 * The planner benches' synthetic stores list objects they never hold: everything but listing
 * finds nothing or refuses, in one place.
 */

import { NotFoundError } from '../functions/core/errors.ts';
import type { ListOptions, ObjectStore, ObjectSummary } from '../functions/core/object-store.ts';

export abstract class ReadOnlyListingStore implements ObjectStore {
  abstract readonly location: string;

  abstract list(prefix: string, options?: ListOptions): AsyncIterable<ObjectSummary>;

  async head(): Promise<undefined> {
    return undefined;
  }

  async getBytes(key: string): Promise<never> {
    throw new NotFoundError(key);
  }

  async getToFile(key: string): Promise<never> {
    throw new NotFoundError(key);
  }

  async put(): Promise<never> {
    throw new Error('the synthetic store is read-only: the bench only plans');
  }

  async copy(): Promise<never> {
    throw new Error('the synthetic store is read-only: the bench only plans');
  }

  async deleteMany(): Promise<never> {
    throw new Error('the synthetic store is read-only: the bench only plans');
  }

  async listIncompleteUploads(): Promise<[]> {
    return [];
  }

  async abortIncompleteUpload(): Promise<void> {}
}
