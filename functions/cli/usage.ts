/**
 * The `compactor --help` text: the local commands' usage, then the deployed-state-machine commands'
 * (commands/sfn-options.ts) and doctor's (commands/doctor-options.ts), which live beside their options.
 */

import { DOCTOR_USAGE } from './commands/doctor-options.ts';
import { SFN_USAGE } from './commands/sfn-options.ts';

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
  status                      live and quarantined manifests
  verify                      row counts per partition: plain glob vs the visible view
  visible [--format F]        the files a consistent reader should read, or a statement that reads
                              exactly them: F is duckdb (--sql), clickhouse, polars, spark or athena
                              (athena writes SymlinkTextInputFormat manifests under the state root's
                              views/athena/ and prints a CREATE EXTERNAL TABLE per table)
  repair [--dry-run]          find raw files whose rows an output next to them already holds (what a
                              non-atomic compactor leaves), report the duplicated rows, and remove
                              them through the protocol (checked by content, never by name)
  retention [--dry-run]       delete whole files older than their table's retention (--retention),
                              through the protocol; --dry-run prints per day the files, bytes and
                              cutoff and changes nothing

Options:
  --store <folder | s3://bucket/prefix>   the lake (required except for demo)
  --endpoint URL              S3-compatible endpoint (path-style), with an s3:// store
  --region REGION             AWS region (default $AWS_REGION or us-east-1)
  --layout arc|hive|firehose|TEMPLATE  partition layout (default arc), e.g. '{table}/dt={YYYY}-{MM}-{DD}/hour={HH}/'
  --partition-segments a,b    the template segments your readers map to partition columns (default the
                              layout's; '' for glob readers only): no tier writes above the finest one
  --data-suffix SUFFIX        suffix of raw input names (default the layout's; '' = any name, read as
                              Parquet by its magic and footer)
  --now ISO-TIME              act as if at this time (plans against it; leases still run in real time)
  --tier TIER                 hourly, daily, monthly or retention (run, plan; a compaction tier also
                              scopes --min-files/--min-age)
  --monthly                   turn the opt-in monthly tier on (cdk.json: tiers.monthly.enabled);
                              then the daily tier hands a month's daily files to it
  --min-files N               files a folder needs before it is compacted (hourly 10, daily 2, monthly 2)
  --min-age SECONDS           how long after its period ends a folder becomes eligible (3600 / 10800 / 86400)
  --quiet SECONDS             skip folders holding a file written less than this ago (300)
  --concurrency N             partitions compacted at once (2): the state machine's Map MaxConcurrency
  --context JSON              run with these settings of the deployed stack over cdk.json's
                              "compactor" context, e.g. '{"map":{"toleratedFailurePercentage":20}}'
                              or '{"dedup":{"mydb/cpu/":{"mode":"exact"}}}' (the table settings dedup,
                              naiveTimestampsUtc and timeUnits reach the steps this way)
  --target-size SIZE          split outputs at about this size (512MiB)
  --row-group-size N          output row group size in rows (122880)
  --max-job-bytes SIZE        input bytes one job may take (2GiB)
  --max-job-files N           input files one job may take (5000)
  --sort-keys a,b             sort keys after the time column
  --time-column NAME          time column (time)
  --retention RULES           days to keep per table path, most specific wins; * for every other
                              table, e.g. 'mydb/cpu/=30,mydb/=90,*=365' (default: none, retention off)
  --retention-buffer HOURS    a file goes only once its hour/day ended this long after its days (24)
  --memory-limit SIZE         DuckDB memory limit (e.g. 1GB; spills beyond it)
  --threads N                 DuckDB threads
  --work-dir DIR              local scratch folder (default: system temp)
  --unsafe-single-writer-store
                              skip the store probe (run, recover, repair, retention refuse a store
                              that ignores conditional writes, copies or deletes); only for a store
                              nothing else writes to or compacts; warned on every run
  --json                      machine-readable output
  -h, --help                  this text

${SFN_USAGE}

After cdk deploy:
${DOCTOR_USAGE}

Exit codes: 0 ok, 1 a partition failed or a problem was found, 2 usage or runtime error.`;
