/**
 * The `compactor --help` text: the local commands' usage, then the deployed-state-machine commands'
 * (commands/sfn-options.ts) and doctor's (commands/doctor-options.ts); the option lines come from
 * options.ts, with their defaults (option-reference.ts, which loads the settings schema: the CLI
 * imports this file only for --help). `compactor <command> --help`: that command's lines and options.
 */

import { DOCTOR_USAGE } from './commands/doctor/doctor-options.ts';
import { SFN_USAGE } from './commands/sfn/sfn-options.ts';
import { optionDefault } from './option-reference.ts';
import {
  type CommandName,
  commandsTaking,
  OPTIONS,
  type OptionName,
  optionLines,
  optionsOf,
} from './options.ts';

/** `compactor --help`. */
export const USAGE = `compactor: crash-safe compaction of time-partitioned Parquet files

Usage: compactor <command> [options]

Commands:
  demo [--dir DIR]            generate an Arc-layout lake of small files, compact it hourly then
                              daily, and show that row counts are equal
  run --tier TIER             one cycle: the synthesized state machine (recover, plan, compact every
                              eligible partition or expire every expired day, summary) run locally;
                              TIER is hourly, daily, monthly (with --monthly) or retention
  plan --tier TIER            dry run: what a cycle would compact (or expire) and why the rest is skipped
  recover                     resolve manifests left by crashed or stopped runs
  status                      live manifests, quarantined inputs, failing partitions and each
                              tier's backlog
  receipts [--partition P]    what each committed job did (inputs and their versions, outputs, rows,
                              column ranges), from its receipt; --since T: jobs started since T
  verify                      row counts per partition: plain glob vs the visible view
  audit                       any lake, ours or not, per table and day: files, rows, and every
                              defect (duplicates by content, half-compacted hours, orphans,
                              outputs changed since their receipt, restored inputs, stale
                              quarantine records), each named with its fix; exit 1 if any
  visible [--format F]        the files a consistent reader should read, or a statement that reads
                              exactly them: F is duckdb (--sql), clickhouse, polars, spark or athena
                              (athena writes SymlinkTextInputFormat manifests under the state root's
                              views/athena/ and prints a CREATE EXTERNAL TABLE per table)
  repair [--dry-run]          find raw files whose rows an output next to them already holds (what a
                              non-atomic compactor leaves), report the duplicated rows, and remove
                              them through the protocol (checked by content, never by name)
  release --partition P       re-admit quarantined inputs (of P, or --all) once their cause is fixed:
                              the next run checks them anew; records whose objects are gone are
                              pruned; --dry-run lists them and changes nothing
  retention [--dry-run]       delete whole files older than their table's retention (--retention),
                              through the protocol; --dry-run prints per day the files, bytes and
                              cutoff and changes nothing

Options (compactor <command> --help lists the command's own):
${optionLines(Object.keys(OPTIONS) as OptionName[], optionDefault, scopeNote)}

${SFN_USAGE}

After cdk deploy:
${DOCTOR_USAGE}

Exit codes: 0 ok, 1 a partition failed or a problem was found, 2 usage or runtime error.`;

/** In the whole list, an option few commands take says which (`--time-column`: run only). */
function scopeNote(name: OptionName): string | undefined {
  if (name === 'help') return undefined;
  const commands = commandsTaking(name);
  if (commands.length === 1) return `${commands[0]} only`;
  return commands.length <= 3 ? `only ${commands.join(', ')}` : undefined;
}

/** `compactor <command> --help`: the command's lines of the usage text, then its options. */
export function commandUsage(command: CommandName): string {
  const lines = USAGE.split('\n');
  const start = lines.findIndex((line) => new RegExp(`^ {2}${command}\\b`).test(line));
  // Its description continues on the lines indented under it.
  let end = start + 1;
  while (end < lines.length && /^ {4,}\S/.test(lines[end] ?? '')) end++;
  return [
    `Usage: compactor ${command} [options]`,
    '',
    ...(start >= 0 ? lines.slice(start, end) : []),
    '',
    'Options:',
    optionLines(optionsOf(command), optionDefault, undefined, command),
  ].join('\n');
}
