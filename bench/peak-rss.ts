/**
 * Peak resident set of this process. On Linux this is VmHWM from /proc/self/status: getrusage's
 * maxrss (process.resourceUsage().maxRSS) of a child started by Node also counts the parent's
 * resident set at the fork, so it overstates a child's own peak by the parent's size.
 */

import { readFileSync } from 'node:fs';

export function peakRssBytes(): number {
  try {
    const match = /^VmHWM:\s+(\d+)\s+kB$/m.exec(readFileSync('/proc/self/status', 'utf8'));
    if (match?.[1]) return Number(match[1]) * 1024;
  } catch {
    // Not Linux: fall back to getrusage.
  }
  return process.resourceUsage().maxRSS * 1024;
}
