import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { describe, expect, it } from 'vitest';
import { renderComment } from '../../src/actions/actions.js';
import { InvalidActionsConfig, isManagedLabel, parseActionsConfig, stricterMode } from '../../src/actions/config.js';
import { productionSets } from '../../src/decision/production-sets.js';
import { Registry } from '../../src/decision/registry.js';

/** DESIGN §17: the actions section is validated against the registry, naming the member and the rule. */

const registry = new Registry(productionSets());
const parse = (yaml: string) => parseActionsConfig(parseYaml(yaml), registry);

describe('actions config', () => {
  it("the guide's example is valid: labels, gate, modes, groups", () => {
    const guide = readFileSync('docs/guide.md', 'utf8');
    const block = /```yaml\n(actions:[\s\S]*?)```/.exec(guide)![1];
    const cfg = parseActionsConfig((parseYaml(block) as { actions: unknown }).actions, registry);
    expect(cfg.modes).toEqual({ attention: 'apply', effort: 'propose' });
    expect(cfg.keys.map((k) => `${k.set}/${k.key}`)).toEqual([
      'attention/blocked',
      'attention/needs_human_decision',
      'effort/effort',
    ]);
    expect(cfg.keys[0]).toMatchObject({
      kind: 'noul',
      labels: { true: 'verdict:blocked' },
      comment: true,
      gate: { minPrecision: 0.9, minLabels: 30 },
    });
    expect(cfg.keys[2].group).toEqual([
      'verdict:effort-l',
      'verdict:effort-s',
      'verdict:effort-xl',
      'verdict:effort-xs',
    ]);
  });

  it.each([
    ['sets: { nope: { keys: {} } }', 'actions.sets.nope: no question set "nope" is registered'],
    ['sets: { attention: { keys: { blocked: { label: "blocked" } } } }', 'label "blocked" is outside actions.labels'],
    ['sets: { attention: { keys: { blocked: { labels: { true: "verdict:x" } } } } }', 'a noul key takes one label'],
    ['sets: { attention: { keys: { nope: { label: "verdict:x" } } } }', 'set "attention" asks no key "nope"'],
    ['sets: { effort: { keys: { effort: { labels: { huge: "verdict:x" } } } } }', 'huge is not a level of the key'],
    ['sets: { conventions_comments: { keys: {} } }', 'the set asks per comment'],
    [
      'sets: { attention: { keys: { blocked: { label: "verdict:x" }, waiting_on_external: { label: "VERDICT:X" } } } }',
      'already belongs to attention/blocked',
    ],
    ['labels: { prefix: "" }\nsets: {}', 'give a prefix or an allowlist'],
    ['sets: { attention: { mode: always, keys: {} } }', 'actions.sets.attention.mode'],
    ['gate: { minPrecision: 2 }\nsets: {}', 'actions.gate.minPrecision'],
  ])('refuses %s', (yaml, message) => {
    expect(() => parse(yaml)).toThrow(InvalidActionsConfig);
    expect(() => parse(yaml)).toThrow(message);
  });

  it('managed labels: the prefix and the allowlist, compared as GitHub compares names (case-insensitively)', () => {
    const rule = { prefix: 'verdict:', allow: ['needs-triage'] };
    expect(isManagedLabel(rule, 'Verdict:Blocked')).toBe(true);
    expect(isManagedLabel(rule, 'NEEDS-TRIAGE')).toBe(true);
    expect(isManagedLabel(rule, 'bug')).toBe(false);
    expect(stricterMode('apply', 'propose')).toBe('propose');
    expect(stricterMode('off', 'apply')).toBe('off');
  });

  it('the comment fills every placeholder, each occurrence, and takes `$` in a value as text', () => {
    const cfg = parse(`sets: { attention: { keys: { blocked: { label: "verdict:blocked" } } } }
comment: "{set}/{key} {decision} {decision} {unknown} {link}"
link: "https://v.example.com/$&/{workspace}/{ref}?again={ref}"`);
    expect(
      renderComment(cfg, {
        set: 'attention',
        key: 'blocked',
        ref: '#7',
        workspace: 'github',
        decision: 'yes (p=0.91)',
      }),
    ).toBe('attention/blocked yes (p=0.91) yes (p=0.91) {unknown} https://v.example.com/$&/github/%237?again=%237');
  });
});
