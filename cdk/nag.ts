/**
 * Acknowledging cdk-nag (v3) findings, each with its reason.
 *
 * cdk-nag 3 runs as a CDK policy-validation plugin and honours `Validations.of(x).acknowledge()`
 * on the resource or any ancestor, one exact finding id at a time (`AwsSolutions-IAM5[Resource::...]`).
 * IAM5 finding ids embed logical ids (`<DataBucketE3889A50.Arn>/_compaction/manifests/*`), so
 * `acknowledgeWildcards` matches them by pattern instead: an aspect that computes each resource's
 * IAM5 findings with cdk-nag's own rule and acknowledges only those the pattern matches.
 */

import { AspectPriority, Aspects, CfnResource, type IAspect, Validations } from 'aws-cdk-lib';
import { rules } from 'cdk-nag';
import type { IConstruct } from 'constructs';

export function acknowledge(scope: IConstruct, id: string, reason: string): void {
  Validations.of(scope).acknowledge({ id, reason });
}

class AcknowledgeWildcards implements IAspect {
  readonly #pattern: RegExp;
  readonly #reason: string;

  constructor(pattern: RegExp, reason: string) {
    this.#pattern = pattern;
    this.#reason = reason;
  }

  visit(node: IConstruct): void {
    if (!CfnResource.isCfnResource(node)) return;
    const findings = rules.iam.IAMNoWildcardPermissions(node);
    if (!Array.isArray(findings)) return;
    for (const finding of findings) {
      if (this.#pattern.test(finding)) {
        Validations.of(node).acknowledge({ id: `AwsSolutions-IAM5[${finding}]`, reason: this.#reason });
      }
    }
  }
}

/**
 * Acknowledges the AwsSolutions-IAM5 (wildcard) findings under `scope` whose finding id
 * (`Resource::...` or `Action::...`) matches `pattern`; any other wildcard still fails the check.
 */
export function acknowledgeWildcards(scope: IConstruct, pattern: RegExp, reason: string): void {
  if (pattern.global || pattern.sticky) throw new Error('acknowledgeWildcards: use a pattern without g or y');
  // Last, once every statement is in place (read-only with respect to the templates).
  Aspects.of(scope).add(new AcknowledgeWildcards(pattern, reason), { priority: AspectPriority.READONLY });
}

/**
 * IAM5 findings of S3 object ARNs under `keyPrefix` with one trailing wildcard:
 * `Resource::<Bucket.Arn>/<keyPrefix>...*` or, for an imported bucket,
 * `Resource::arn:<AWS::Partition>:s3:::<name>/<keyPrefix>...*`. A wildcard elsewhere does not match.
 */
export function s3ObjectPrefixFinding(keyPrefix: string): RegExp {
  const escaped = keyPrefix.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  return new RegExp(`^Resource::(<[^>]+\\.Arn>|arn:<AWS::Partition>:s3:::[^/]+)\\/${escaped}[^*]*\\*$`);
}
