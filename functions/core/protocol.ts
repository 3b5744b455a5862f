/**
 * The job protocol: compact (claim + stage) -> publish -> verify -> delete inputs -> clear.
 *
 * Each step is a separate, idempotent function (steps/<step>.ts): Step Functions retries and
 * redrives call it again with the same input, and an earlier invocation may still be running.
 * Every manifest change is a conditional write on the ETag the step read (manifest-cas.ts), so a
 * step acting on a stale view fails with ManifestConflictError instead of doing damage. Steps
 * never destroy anything they cannot prove is theirs; unexpected states are left to recovery,
 * which takes a job over only once its owner is gone.
 *
 * This module is the protocol's public face for the Lambdas, the CLI, the bench and tests; the
 * core's own modules (recovery, retention, repair) import the pieces they share from where they
 * live.
 */

export {
  type CompactDeps,
  isCompactionJob,
  type Job,
  type JobEvent,
  type JobRef,
  META_JOB_ID,
  META_ROWS,
  type StepDeps,
  type StepResult,
  type StepStatus,
} from './job.ts';
export { clearManifestStep } from './steps/clear-manifest.ts';
export { compactStep } from './steps/compact.ts';
export { downloadConcurrency, inputPaths } from './steps/compact-inputs.ts';
export { deleteInputsStep } from './steps/delete-inputs.ts';
export { publishStep } from './steps/publish.ts';
export { verifyStep } from './steps/verify.ts';
