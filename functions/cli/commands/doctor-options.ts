/**
 * The usage text of `compactor doctor` (doctor.ts), apart from the command so the CLI's usage
 * does not load the AWS SDKs (the options are in ../options.ts).
 */

export const DOCTOR_USAGE = `  doctor --stack NAME         after cdk deploy: probe the bucket, compact a canary table of its own
                              with an execution scoped to it, check its rows exactly and that no
                              state is left, remove it, and check each schedule started an execution
                              within its last two periods; prints what to fix. Also --state-machine
                              ARN --store s3://bucket/prefix, or --store FOLDER (the synthesized
                              definition run locally); --timeout SECONDS to wait (900)`;
