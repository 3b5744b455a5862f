/**
 * Preload (`node --import ./bench/rss-at-exit.ts ...`): when the process exits, writes its peak
 * resident set (VmHWM, bench/peak-rss.ts) in bytes and its CPU time (user + system, all threads,
 * ms) as JSON to the file named by BENCH_RSS_FILE. Lets a
 * bench read the peak RSS of a process it does not own the code of (the `compactor` CLI) without
 * getrusage's overstatement for children.
 */

import { writeFileSync } from 'node:fs';
import { peakRssBytes } from './peak-rss.ts';

const file = process.env.BENCH_RSS_FILE;
if (file) {
  process.on('exit', () => {
    const cpu = process.cpuUsage();
    writeFileSync(
      file,
      JSON.stringify({ peakRssBytes: peakRssBytes(), cpuMs: (cpu.user + cpu.system) / 1000 }),
    );
  });
}
