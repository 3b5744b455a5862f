/**
 * Preload (`node --import ./bench/rss-at-exit.ts ...`): when the process exits, writes its peak
 * resident set (VmHWM, bench/peak-rss.ts) in bytes to the file named by BENCH_RSS_FILE. Lets a
 * bench read the peak RSS of a process it does not own the code of (the `compactor` CLI) without
 * getrusage's overstatement for children.
 */

import { writeFileSync } from 'node:fs';
import { peakRssBytes } from './peak-rss.ts';

const file = process.env.BENCH_RSS_FILE;
if (file) {
  process.on('exit', () => {
    writeFileSync(file, String(peakRssBytes()));
  });
}
