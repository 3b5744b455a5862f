import { describe, expect, it } from 'vitest';
import { mergeFooterMetadata } from '../../functions/core/footer-metadata.ts';

const input = (key: string, metadata: Record<string, string | null>) => ({ key, metadata });

describe('mergeFooterMetadata', () => {
  it('keeps a key every input holds with the same value; drops one that differs or that an input lacks', () => {
    expect(
      mergeFooterMetadata([
        input('a', { same: '1', differs: 'x', partial: 'p' }),
        input('b', { same: '1', differs: 'y' }),
      ]),
    ).toEqual({ kept: { same: '1' }, dropped: ['differs', 'partial'] });
  });

  it('makes arc:tags the sorted union of the inputs that have it, trimming names and skipping empty ones', () => {
    expect(
      mergeFooterMetadata([
        input('a', { 'arc:tags': 'region,host' }),
        input('b', {}),
        input('c', { 'arc:tags': 'dc, host,,' }),
      ]),
    ).toEqual({ kept: { 'arc:tags': 'dc,host,region' }, dropped: [] });
  });

  it('drops ARROW:schema even when every input holds the same one, and a key without a text value', () => {
    expect(
      mergeFooterMetadata([
        input('a', { 'ARROW:schema': 's', blob: null, 'arc:tags': null }),
        input('b', { 'ARROW:schema': 's', blob: null, 'arc:tags': 'host' }),
      ]),
    ).toEqual({ kept: {}, dropped: ['ARROW:schema', 'arc:tags', 'blob'] });
  });

  it('keeps nothing and drops nothing for inputs without metadata', () => {
    expect(mergeFooterMetadata([input('a', {}), input('b', {})])).toEqual({ kept: {}, dropped: [] });
  });
});
