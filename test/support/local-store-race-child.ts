/**
 * One contender in the cross-process race tests of the local store.
 * argv: root keyPrefix keyCount body mode(create|cas) [etag...one per key]. Prints "ready", waits
 * for a line on stdin so all contenders start together, then tries one conditional put on each
 * of the keys `${keyPrefix}${i}` at once (many keys make the processes' commits really overlap),
 * and prints the outcomes as one JSON line.
 */
import { LocalFolderStore } from '../../functions/adapters/local-store/local-store.ts';

const [root, keyPrefix, keyCount, body, mode, ...etags] = process.argv.slice(2);
if (
  root === undefined ||
  keyPrefix === undefined ||
  keyCount === undefined ||
  body === undefined ||
  (mode !== 'create' && mode !== 'cas')
) {
  throw new Error('usage: local-store-race-child.ts root keyPrefix keyCount body create|cas [etag...]');
}
const store = new LocalFolderStore(root);

process.stdout.write('ready\n');
await new Promise((resolve) => process.stdin.once('data', resolve));
process.stdin.destroy();

type Outcome = { ok: true; etag: string } | { ok: false; error: string; message: string };
const outcomes = await Promise.all(
  Array.from({ length: Number(keyCount) }, async (_, i): Promise<Outcome> => {
    try {
      const result = await store.put(
        `${keyPrefix}${i}`,
        Buffer.from(body),
        mode === 'create' ? { ifNoneMatch: '*' } : { ifMatch: etags[i] ?? '' },
      );
      return { ok: true, etag: result.etag };
    } catch (error) {
      // Every failure is reported; the test asserts the losers failed with PreconditionFailedError.
      const e = error instanceof Error ? error : new Error(String(error));
      return { ok: false, error: e.name, message: e.message };
    }
  }),
);
process.stdout.write(`${JSON.stringify(outcomes)}\n`);
