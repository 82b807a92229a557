/**
 * Verdict-managed labels (DESIGN §17 "No loops"): the labels Verdict may write on GitHub issues,
 * named by the actions config's label rule. They are left out of a GitHub item's stored `labels`
 * field (mapping.ts `githubIssueFields`), so a label Verdict adds or removes never changes the
 * item's state: it makes no answer stale and owes no job.
 */

/** Which labels Verdict may write: those starting with `prefix`, and the names in `allow`. */
export interface LabelRule {
  /** @defaultValue 'verdict:' */
  prefix: string;
  /** @defaultValue [] */
  allow: readonly string[];
}

/** DESIGN §17's default: the `verdict:` prefix, no allowlist. */
export const DEFAULT_LABEL_RULE: Readonly<LabelRule> = Object.freeze({
  prefix: 'verdict:',
  allow: Object.freeze([]) as readonly string[],
});

/**
 * True for a label Verdict manages (the prefix, or the allowlist). GitHub compares label names
 * case-insensitively, so this does too.
 */
export function isManagedLabel(rule: LabelRule, name: string): boolean {
  const n = name.toLowerCase();
  return (
    (rule.prefix !== '' && n.startsWith(rule.prefix.toLowerCase())) || rule.allow.some((a) => a.toLowerCase() === n)
  );
}
